// Thin RAII over SQLite: a connection and prepared statements. Errors carry the database path and SQLite's message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "result.h"

namespace spark {

class SqliteDb;

// A prepared statement. Move-only; finalized on destruction. Bind indexes are 1-based.
class SqliteStmt {
 public:
  SqliteStmt(SqliteDb& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  SqliteStmt(SqliteStmt&& other) noexcept : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  ~SqliteStmt() { sqlite3_finalize(stmt_); }

  SqliteStmt& bind(int i, int64_t v);
  SqliteStmt& bind(int i, std::string_view v);
  // Binds text without copying it: `v` must stay alive and unchanged until the statement is stepped, reset and bound
  // again (for large values bound once per step, such as file contents).
  SqliteStmt& bind_static(int i, std::string_view v);
  SqliteStmt& bind_blob(int i, const void* data, size_t size);
  SqliteStmt& bind_null(int i);
  // Steps once: true when a row is ready, false when done. Errors name the database.
  Result<bool> step();
  Status run();  // steps to completion, then resets
  void reset();

  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const;
  std::string_view blob(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  SqliteDb* db_;
  sqlite3_stmt* stmt_;
};

class SqliteDb {
 public:
  // Opens (or creates, with `create`) a database file; WAL mode and a busy timeout so that a second writer waits.
  static Result<std::unique_ptr<SqliteDb>> open(const std::filesystem::path& path, bool create, int busy_timeout_ms);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  Result<SqliteStmt> prepare(std::string_view sql);
  Status exec(const std::string& sql);
  Error error(std::string_view what) const;  // "PATH: what: sqlite message"
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() { return db_; }
  // True when the file could not be opened for writing: it was opened as an immutable snapshot (reads only).
  bool read_only() const { return read_only_; }

 private:
  SqliteDb(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::filesystem::path path_;
  bool read_only_ = false;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock up front, waiting up to the busy timeout).
// Inside an open transaction it is a savepoint instead, so a step that is atomic on its own (an import) can also be
// one part of a larger atomic change (recording outcomes and the cases they label). Rolls back on destruction
// unless committed.
class SqliteTransaction {
 public:
  static Result<SqliteTransaction> begin(SqliteDb& db);
  SqliteTransaction(SqliteTransaction&& o) noexcept
      : db_(std::exchange(o.db_, nullptr)), savepoint_(std::move(o.savepoint_)) {}
  SqliteTransaction(const SqliteTransaction&) = delete;
  ~SqliteTransaction();
  Status commit();

 private:
  SqliteTransaction(SqliteDb* db, std::string savepoint) : db_(db), savepoint_(std::move(savepoint)) {}
  SqliteDb* db_;
  std::string savepoint_;  // empty: the outermost transaction
};

}  // namespace spark
