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
  // Opens (or creates, with `create`) a database file. A file this process may not write is opened as an immutable
  // snapshot (read_only()).
  static Result<std::unique_ptr<SqliteDb>> open(const std::filesystem::path& path, bool create, int busy_timeout_ms);
  ~SqliteDb() override;

  Engine engine() const override { return Engine::sqlite; }
  Result<Statement> prepare(std::string_view sql) override;
  Status exec(const std::string& sql) override;
  const std::string& name() const override { return name_; }
  bool read_only() const override { return read_only_; }
  bool in_transaction() override { return sqlite3_get_autocommit(db_) == 0; }
  Status begin_write() override { return exec("BEGIN IMMEDIATE"); }

  Error error(std::string_view what) const;  // "PATH: what: sqlite message"
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  SqliteDb(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)), name_(path_.string()) {}
  sqlite3* db_;
  std::filesystem::path path_;
  std::string name_;
  bool read_only_ = false;
};

}  // namespace spark
