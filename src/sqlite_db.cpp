#include "sqlite_db.h"

#include <cstdio>

namespace spark {

SqliteStmt& SqliteStmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
SqliteStmt& SqliteStmt::bind(int i, std::string_view v) {
  sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}
SqliteStmt& SqliteStmt::bind_static(int i, std::string_view v) {
  sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8);
  return *this;
}
SqliteStmt& SqliteStmt::bind_blob(int i, const void* data, size_t size) {
  sqlite3_bind_blob64(stmt_, i, data, size, SQLITE_TRANSIENT);
  return *this;
}
SqliteStmt& SqliteStmt::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

Result<bool> SqliteStmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error e = db_->error("query failed");
  sqlite3_reset(stmt_);
  return std::unexpected(e);
}

Status SqliteStmt::run() {
  for (;;) {
    auto r = step();
    if (!r) return std::unexpected(r.error());
    if (!*r) break;
  }
  reset();
  return {};
}

void SqliteStmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string SqliteStmt::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
}

std::string_view SqliteStmt::blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
           : std::string_view();
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::filesystem::path& path, bool create, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  if (rc != SQLITE_OK) return std::unexpected(db->error("cannot open"));
  if (sqlite3_db_readonly(raw, "main") == 1) {
    // A file this process may not write (a store shared read-only, a CI cache restored as another user). A WAL
    // database needs its -shm file written even to be read, so it is opened as immutable: a snapshot, read without
    // locks. Writes fail with "attempt to write a readonly database", naming the file.
    db.reset();
    std::string uri = "file:";
    for (const unsigned char c : path.string()) {
      if (c == '?' || c == '#' || c == '%' || c < 0x20) {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        uri += hex;
      } else {
        uri += static_cast<char>(c);
      }
    }
    uri += "?immutable=1";
    raw = nullptr;
    const int ro = sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    db.reset(new SqliteDb(raw, path));
    if (ro != SQLITE_OK) return std::unexpected(db->error("cannot open read-only"));
    sqlite3_extended_result_codes(raw, 1);
    db->read_only_ = true;
    auto st = db->prepare("PRAGMA schema_version");  // reads the header: a corrupt or foreign file fails here
    if (!st) return std::unexpected(st.error());
    if (auto r = st->step(); !r) return std::unexpected(r.error());
    return db;
  }
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  if (auto s = db->exec("PRAGMA foreign_keys=ON"); !s) return std::unexpected(s.error());
  // journal_mode is the first statement that reads the file: a corrupt or foreign file fails here.
  auto st = db->prepare("PRAGMA journal_mode=WAL");
  if (!st) return std::unexpected(st.error());
  if (auto r = st->step(); !r) return std::unexpected(r.error());
  if (auto s = db->exec("PRAGMA synchronous=NORMAL"); !s) return std::unexpected(s.error());
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

Error SqliteDb::error(std::string_view what) const {
  const char* msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
  return Error{path_.string() + ": " + std::string(what) + ": " + msg};
}

Result<SqliteStmt> SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK)
    return std::unexpected(error("cannot prepare \"" + std::string(sql.substr(0, 60)) + "\""));
  return SqliteStmt(*this, stmt);
}

Status SqliteDb::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return fail(path_.string() + ": " + msg);
  }
  return {};
}

Result<SqliteTransaction> SqliteTransaction::begin(SqliteDb& db) {
  if (sqlite3_get_autocommit(db.handle()) == 0) {
    static int counter = 0;
    std::string name = "spark_sp" + std::to_string(++counter);
    if (auto s = db.exec("SAVEPOINT " + name); !s) return std::unexpected(s.error());
    return SqliteTransaction(&db, std::move(name));
  }
  if (auto s = db.exec("BEGIN IMMEDIATE"); !s) return std::unexpected(s.error());
  return SqliteTransaction(&db, "");
}

SqliteTransaction::~SqliteTransaction() {
  if (!db_) return;
  if (savepoint_.empty()) (void)db_->exec("ROLLBACK");
  else (void)db_->exec("ROLLBACK TO " + savepoint_ + "; RELEASE " + savepoint_);
}

Status SqliteTransaction::commit() {
  SqliteDb* db = std::exchange(db_, nullptr);
  if (!savepoint_.empty()) return db->exec("RELEASE " + savepoint_);
  if (auto s = db->exec("COMMIT"); !s) {
    (void)db->exec("ROLLBACK");
    return s;
  }
  return {};
}

}  // namespace spark
