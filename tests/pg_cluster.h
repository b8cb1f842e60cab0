// A PostgreSQL server of the test's own: a cluster made with initdb in a temporary folder and run with pg_ctl (Debian's
// postgresql-15, installed by `scripts/setup.sh --tests`), on 127.0.0.1 and a free port, as a non-root user (nobody
// when the process runs as root: PostgreSQL refuses to run as root). No mock: spark talks to the real server.
// Used by the tests and by bench/kb_writers. Not thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace spark::testing {

class PgCluster {
 public:
  // The process's cluster, started on first use; nullptr when it cannot start (why: unavailable_reason()).
  static PgCluster* shared();
  static const std::string& unavailable_reason();
  // Starts a new cluster (the caller owns it); nullptr and `why` when it cannot.
  static std::unique_ptr<PgCluster> start_new(std::string& why);
  ~PgCluster();  // stops the server and removes its folder

  // A new, empty database on this server and its URL (postgresql://spark@127.0.0.1:PORT/NAME).
  std::string new_database();
  int port() const { return port_; }
  std::string url(const std::string& database) const;

  // Stops and starts the server (the data stays): for the restart and server-down tests.
  bool stop();
  bool start();
  // Sets the password of the user spark and turns password authentication on (md5 over TCP).
  bool require_password(const std::string& password);
  // Runs one SQL statement with psql as the superuser; its output (tuples only, unaligned), or "" and `ok` false.
  std::string psql(const std::string& database, const std::string& sql, bool* ok = nullptr);

 private:
  PgCluster() = default;
  bool run_as_owner(const std::vector<std::string>& argv, std::string* output = nullptr);
  void sweep_orphans();
  std::filesystem::path bin_, root_;
  int port_ = 0;
  int databases_ = 0;
  bool running_ = false;
  std::string stop_mode_ = "fast";
};

}  // namespace spark::testing
