// The SQLite engine of Database (database.h): an embedded file, WAL mode, a busy timeout so that a second writer
// waits. Errors carry the file's path and SQLite's message.
// Contract: one SqliteDb per thread (as every Database); it owns its connection and closes it when destroyed.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>

#include "store/database.h"

namespace spark {

class SqliteDb final : public Database {
 public:
  // Opens (or creates, with `create`) a database file. A file this process may not write, or one whose -wal and -shm
  // files it cannot make (a folder it may not write, a full disk), is opened read-only (read_only()): commands that
  // only read work, and a write fails saying why. A full disk is named so in every error ("no space left on device:
  // PATH"), where SQLite says "database or disk is full" or "disk I/O error".
  static Result<std::unique_ptr<SqliteDb>> open(const std::filesystem::path& path, bool create, int busy_timeout_ms);
  ~SqliteDb() override;

  Engine engine() const override { return Engine::sqlite; }
  Result<Statement> prepare(std::string_view sql) override;
  Status exec(const std::string& sql) override;
  const std::string& name() const override { return name_; }
  bool read_only() const override { return read_only_; }
  bool in_transaction() override { return sqlite3_get_autocommit(db_) == 0; }
  Status begin_write() override;  // on a read-only store: an error saying why it is read-only

  Error error(std::string_view what) const;  // "PATH: what: sqlite message" ("no space left on device: PATH (…)")
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  SqliteDb(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)), name_(path_.string()) {}
  static Result<std::unique_ptr<SqliteDb>> open_read_only(const std::filesystem::path& path, std::string why);
  std::string failure(const std::string& what) const;  // "PATH: what", or the full disk named
  sqlite3* db_;
  std::filesystem::path path_;
  std::string name_;
  bool read_only_ = false;
  std::string read_only_why_;  // why it was opened read-only
};

}  // namespace spark
