#include "store/sqlite_db.h"

#include <cstdio>

namespace spark {

namespace {

class SqliteStatement final : public StatementImpl {
 public:
  SqliteStatement(SqliteDb& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void bind_int(int i, int64_t v) override { sqlite3_bind_int64(stmt_, i, v); }
  void bind_text(int i, std::string_view v, bool copy) override {
    sqlite3_bind_text64(stmt_, i, v.data(), v.size(), copy ? SQLITE_TRANSIENT : SQLITE_STATIC, SQLITE_UTF8);
  }
  void bind_null(int i) override { sqlite3_bind_null(stmt_, i); }
  Result<bool> step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) {
      changes_ = sqlite3_changes64(db_->handle());
      return false;
    }
    Error e = db_->error("query failed");
    sqlite3_reset(stmt_);
    return std::unexpected(e);
  }
  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int64_t int64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  bool is_null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t changes() const override { return changes_; }

 private:
  SqliteDb* db_;
  sqlite3_stmt* stmt_;
  int64_t changes_ = 0;
};

}  // namespace

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
    const int ro =
        sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
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

Result<Statement> SqliteDb::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK)
    return std::unexpected(error("cannot prepare \"" + std::string(sql.substr(0, 60)) + "\""));
  return Statement(std::make_unique<SqliteStatement>(*this, stmt));
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

}  // namespace spark
