// The knowledge base's SQL connection over two engines: SQLite (an embedded file, the default) and PostgreSQL (a
// shared server for many CI runners, postgres_db.h). The store's code (knowledge_base.cpp, miner/mining_store.cpp)
// is written once in the SQL both engines accept: `?` placeholders, `INSERT … ON CONFLICT`, `RETURNING`, CAST.
// Schema definitions and migrations are per engine.
//
// Ownership: a Database owns its connection; a Statement borrows its Database and must not outlive it.
// Thread safety: none; one Database per thread.
// Failures: every call that talks to the engine returns an Error whose message names the store (file path, or URL
// without its password) and carries the engine's own message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "base/result.h"

namespace spark {

enum class Engine { sqlite, postgresql };

// One engine's prepared statement (see Statement).
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  // `copy` false: the engine may keep a view of `v` until the statement is stepped, reset and bound again.
  virtual void bind_text(int i, std::string_view v, bool copy) = 0;
  virtual void bind_int(int i, int64_t v) = 0;
  virtual void bind_null(int i) = 0;
  virtual Result<bool> step() = 0;
  virtual void reset() = 0;
  virtual int64_t int64(int col) const = 0;
  virtual std::string text(int col) const = 0;
  virtual bool is_null(int col) const = 0;
  virtual int64_t changes() const = 0;
};

// A prepared statement. Move-only. Bind indexes are 1-based; bindings are kept until reset().
class Statement {
 public:
  explicit Statement(std::unique_ptr<StatementImpl> impl) : impl_(std::move(impl)) {}

  Statement& bind(int i, int64_t v) {
    impl_->bind_int(i, v);
    return *this;
  }
  Statement& bind(int i, std::string_view v) {
    impl_->bind_text(i, v, true);
    return *this;
  }
  // Binds text without copying it: `v` must stay alive and unchanged until the statement is stepped, reset and bound
  // again (for large values bound once per step, such as file contents).
  Statement& bind_static(int i, std::string_view v) {
    impl_->bind_text(i, v, false);
    return *this;
  }
  Statement& bind_null(int i) {
    impl_->bind_null(i);
    return *this;
  }
  // Steps once: true when a row is ready, false when done. Errors name the store.
  Result<bool> step() { return impl_->step(); }
  // Steps through every row, calling `row()` at each (the columns above read it). Stops at the first error: a step's,
  // or the one `row` returns when it returns a Status. Leaves the statement done, not reset.
  template <class F>
  Status each_row(F&& row) {
    for (;;) {
      auto more = step();
      if (!more) return std::unexpected(more.error());
      if (!*more) return {};
      if constexpr (std::is_same_v<std::invoke_result_t<F&>, Status>) {
        if (auto s = row(); !s) return s;
      } else {
        row();
      }
    }
  }
  Status run();  // steps to completion, then resets
  void reset() { impl_->reset(); }

  int64_t int64(int col) const { return impl_->int64(col); }
  std::string text(int col) const { return impl_->text(col); }
  bool is_null(int col) const { return impl_->is_null(col); }
  // Rows the last INSERT/UPDATE/DELETE run by this statement changed (valid after run()).
  int64_t changes() const { return impl_->changes(); }

 private:
  std::unique_ptr<StatementImpl> impl_;
};

class Database {
 public:
  virtual ~Database() = default;
  virtual Engine engine() const = 0;
  virtual Result<Statement> prepare(std::string_view sql) = 0;
  // Runs one or more statements with no parameters and no results.
  virtual Status exec(const std::string& sql) = 0;
  // The store's name in messages: a file path, or a URL without its password.
  virtual const std::string& name() const = 0;
  // True when the store can only be read (an SQLite file this process may not write).
  virtual bool read_only() const { return false; }
  // True when the last failure lost the connection (a server restarted or unreachable): the whole step may be
  // retried on a new connection.
  virtual bool connection_lost() const { return false; }

  // Transactions (see Transaction). begin_write takes the store's single write lock up front, waiting for another
  // writer: SQLite's BEGIN IMMEDIATE, PostgreSQL's BEGIN and a transaction-scoped advisory lock.
  virtual bool in_transaction() = 0;
  virtual Status begin_write() = 0;

 protected:
  Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
};

// A write transaction. Inside an open transaction it is a savepoint instead, so a step that is atomic on its own (an
// import) can also be one part of a larger atomic change (recording outcomes and the cases they label). Rolls back
// on destruction unless committed.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);
  Transaction(Transaction&& o) noexcept : db_(std::exchange(o.db_, nullptr)), savepoint_(std::move(o.savepoint_)) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  Status commit();

 private:
  Transaction(Database* db, std::string savepoint) : db_(db), savepoint_(std::move(savepoint)) {}
  Database* db_;
  std::string savepoint_;  // empty: the outermost transaction
};

}  // namespace spark
