// The PostgreSQL engine of Database (database.h): a shared knowledge base on a server, for many CI runners at once.
//
// The URL is libpq's (postgresql://user[:password]@host[:port]/dbname?sslmode=…); the password may instead come from
// PGPASSFILE / ~/.pgpass or PGPASSWORD, as libpq reads them. The password is never part of name() or of a message.
// Writers serialize on one transaction-scoped advisory lock (begin_write), so a step that reads and then writes the
// whole mining state (the 3-sigma rule) cannot lose another runner's update; readers never wait.
// Thread safety: none; one PostgresDb per thread.
#pragma once

#include <memory>
#include <string>

#include "formats/redact.h"  // is_postgres_url, redact_postgres_url
#include "store/database.h"

struct pg_conn;

namespace spark {

// True when KnowledgeBase::open's connection failure may pass by itself: the server did not answer (refused, timed
// out, unreachable) or is starting or shutting down, as libpq's PQpingParams judges; false for a server that answered
// (a wrong password, an unknown database).
bool is_transient_connect_error(std::string_view message);

// A connection failure's message with the note is_transient_connect_error reads: "the server did not answer" when
// libpq's ping found no server, "not accepting connections now" when the ping was rejected or when the failure itself
// says the server is starting, shutting down or recovering (a ping made a moment later may find it up).
std::string note_connect_failure(std::string message, bool no_answer, bool rejected);

class PostgresDb final : public Database {
 public:
  // Connects. A server that cannot be reached fails with libpq's message, which names host and port; after
  // `connect_timeout_s` (unless the URL or PGCONNECT_TIMEOUT sets one).
  static Result<std::unique_ptr<PostgresDb>> connect(const std::string& url, int connect_timeout_s = 10);
  ~PostgresDb() override;

  Engine engine() const override { return Engine::postgresql; }
  Result<Statement> prepare(std::string_view sql) override;
  Status exec(const std::string& sql) override;
  const std::string& name() const override { return name_; }
  bool connection_lost() const override { return lost_; }
  bool in_transaction() override;
  Status begin_write() override;

  // Used by the statements: an error naming the store, and noting a lost connection.
  Error error(std::string_view what, const void* result);
  pg_conn* handle() { return conn_; }

 private:
  PostgresDb(pg_conn* conn, std::string name) : conn_(conn), name_(std::move(name)) {}
  pg_conn* conn_;
  std::string name_;
  bool lost_ = false;
};

}  // namespace spark
