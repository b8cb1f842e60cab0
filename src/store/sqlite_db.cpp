#include "store/sqlite_db.h"

#include <unistd.h>

#include <cerrno>
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

namespace {

// The URI of a file for sqlite3_open_v2 with SQLITE_OPEN_URI, with `query` ("immutable=1").
std::string file_uri(const std::filesystem::path& path, const std::string& query) {
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
  return uri + "?" + query;
}

// Whether a failure is the disk's: full, or over the user's quota.
bool disk_full(sqlite3* db) {
  const int code = sqlite3_extended_errcode(db);
  const int os = sqlite3_system_errno(db);
  return (code & 0xff) == SQLITE_FULL || os == ENOSPC || os == EDQUOT;
}

// Whether the first read of a read-write connection failed because it could not write: its -wal and -shm files (a
// folder this process may not write, a full disk, a file-size limit), not because the file is not a database.
bool could_not_write(sqlite3* db) {
  switch (sqlite3_extended_errcode(db) & 0xff) {
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::filesystem::path& path, bool create, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  if (rc != SQLITE_OK) return std::unexpected(db->error("cannot open"));
  // A file this process may not write (a store shared read-only, a CI cache restored as another user) is read only.
  if (sqlite3_db_readonly(raw, "main") == 1) return open_read_only(path, "this process may not write it");
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  TRY(db->exec("PRAGMA foreign_keys=ON"));
  // journal_mode is the first statement that reads the file: a corrupt or foreign file fails here. So does a WAL
  // database whose -wal and -shm files cannot be made (a folder this process may not write, a full disk): it is then
  // read only, as below, and a command that writes says why.
  Status first = [&]() -> Status {
    auto st = db->prepare("PRAGMA journal_mode=WAL");
    TRY(st);
    TRY(st->step());
    return {};
  }();
  if (!first) {
    if (!could_not_write(raw)) return std::unexpected(first.error());
    const std::string folder = path.parent_path().empty() ? "." : path.parent_path().string();
    const std::string why =
        disk_full(raw) ? "no space left on device"
        : ::access(folder.c_str(), W_OK | X_OK) != 0
            ? "this process may not write its folder " + folder + " (SQLite's -wal and -shm files go there)"
            : sqlite3_errmsg(raw);
    db.reset();
    auto ro = open_read_only(path, why);
    // Neither way: the first error says what is wrong.
    if (!ro) return std::unexpected(first.error());
    return ro;
  }
  // FULL: a commit returns once its WAL frames are on the disk, so a power cut loses no command that said it stored
  // something (NORMAL syncs the WAL only at checkpoints; docs/KNOWLEDGE_BASE.md, "Durability", has the cost).
  TRY(db->exec("PRAGMA synchronous=FULL"));
  return db;
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::open_read_only(const std::filesystem::path& path, std::string why) {
  // A WAL database needs its -shm file written even to be read, unless it is opened as immutable (a snapshot, read
  // without locks: SQLite's wal.html, "Read-Only Databases"). With no committed transaction waiting in a -wal file,
  // the database file is the whole store, and it is opened so. A -wal file that holds transactions is read through
  // the -wal and -shm files as they are (SQLite 3.22 reads a -shm it may not write into memory of its own).
  std::error_code ec;
  const auto wal_size = std::filesystem::file_size(path.string() + "-wal", ec);
  const bool wal_holds_transactions = !ec && wal_size > 0;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file_uri(path, wal_holds_transactions ? "mode=ro" : "immutable=1").c_str(), &raw,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, path));
  if (rc != SQLITE_OK) return std::unexpected(db->error("cannot open read-only"));
  sqlite3_extended_result_codes(raw, 1);
  db->read_only_ = true;
  db->read_only_why_ = std::move(why);
  auto st = db->prepare("PRAGMA schema_version");  // reads the header: a corrupt or foreign file fails here
  TRY(st);
  TRY(st->step());
  return db;
}

Status SqliteDb::begin_write() {
  if (read_only_) {
    if (read_only_why_ == "no space left on device")
      return fail("no space left on device: " + path_.string() + " (the knowledge base could be read, not written)");
    return fail(path_.string() + ": the knowledge base can be read, not written: " + read_only_why_);
  }
  return exec("BEGIN IMMEDIATE");
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

Error SqliteDb::error(std::string_view what) const {
  const char* msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
  return Error{failure(std::string(what) + ": " + msg)};
}

std::string SqliteDb::failure(const std::string& what) const {
  // SQLite says "database or disk is full" or "disk I/O error": the full disk is named as such.
  if (db_ && disk_full(db_)) return "no space left on device: " + path_.string() + " (" + what + ")";
  return path_.string() + ": " + what;
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
    return fail(failure(msg));
  }
  return {};
}

}  // namespace spark
