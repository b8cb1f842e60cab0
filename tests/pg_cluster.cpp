#include "pg_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

extern char** environ;

namespace spark::testing {

namespace fs = std::filesystem;

namespace {

// The newest PostgreSQL server binaries: /usr/lib/postgresql/<major>/bin.
fs::path server_bin() {
  std::error_code ec;
  fs::path best;
  int best_major = 0;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const int major = std::atoi(e.path().filename().c_str());
    if (major > best_major && fs::exists(e.path() / "bin" / "initdb", ec) && fs::exists(e.path() / "bin" / "pg_ctl", ec)) {
      best_major = major;
      best = e.path() / "bin";
    }
  }
  return best;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// Runs argv (no shell); its stdout+stderr into `output`. True on exit 0.
bool run(const std::vector<std::string>& args, std::string* output) {
  char path[] = "/tmp/spark-pg-out-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  posix_spawn_file_actions_addchdir_np(&actions, "/");  // the owner may not read the caller's folder
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 1;
  if (rc == 0) waitpid(pid, &status, 0);
  ::close(fd);
  if (output) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    *output = ss.str();
  }
  ::unlink(path);
  return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string& reason() {
  static std::string r;
  return r;
}

}  // namespace

bool PgCluster::run_as_owner(const std::vector<std::string>& argv, std::string* output) {
  if (::geteuid() != 0) return run(argv, output);
  std::vector<std::string> as = {"/usr/sbin/runuser", "-u", "nobody", "--"};
  as.insert(as.end(), argv.begin(), argv.end());
  return run(as, output);
}

// Servers left behind by test processes that died without cleaning up (an abort under ASan, a kill): each cluster
// folder names its owner's pid; a folder whose owner is gone is stopped and removed.
void PgCluster::sweep_orphans() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    if (!e.path().filename().string().starts_with("spark-pg-")) continue;
    std::ifstream in(e.path() / "owner.pid");
    long pid = 0;
    if (!(in >> pid) || pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    PgCluster orphan;
    orphan.bin_ = bin_;
    orphan.root_ = e.path();
    orphan.running_ = true;  // the destructor stops it (immediately: nothing there is wanted) and removes the folder
    orphan.stop_mode_ = "immediate";
  }
}

std::unique_ptr<PgCluster> PgCluster::start_new(std::string& why) {
  std::unique_ptr<PgCluster> c(new PgCluster());
  c->bin_ = server_bin();
  if (c->bin_.empty()) {
    why = "no PostgreSQL server binaries under /usr/lib/postgresql (scripts/setup.sh --tests installs postgresql-15)";
    return nullptr;
  }
  c->sweep_orphans();
  std::random_device rd;
  c->root_ = fs::temp_directory_path() / ("spark-pg-" + std::to_string(rd()));
  std::error_code ec;
  fs::create_directories(c->root_, ec);
  if (ec) {
    why = c->root_.string() + ": " + ec.message();
    return nullptr;
  }
  std::ofstream(c->root_ / "owner.pid") << ::getpid() << "\n";
  if (::geteuid() == 0) {
    const passwd* nobody = ::getpwnam("nobody");
    if (!nobody || ::chown(c->root_.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
      why = "cannot hand " + c->root_.string() + " to the user nobody (PostgreSQL does not run as root)";
      return nullptr;
    }
  }
  std::string out;
  if (!c->run_as_owner({(c->bin_ / "initdb").string(), "-D", (c->root_ / "data").string(), "-U", "spark", "-A", "trust",
                        "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"},
                       &out)) {
    why = "initdb failed: " + out;
    return nullptr;
  }
  for (int attempt = 0; attempt < 5 && !c->running_; ++attempt) {
    c->port_ = free_port();
    if (c->port_ != 0 && c->start()) return c;
  }
  why = "pg_ctl start failed; its log: " + (c->root_ / "log").string();
  return nullptr;
}

PgCluster* PgCluster::shared() {
  static std::unique_ptr<PgCluster> cluster;
  static bool tried = false;
  if (!tried) {
    tried = true;
    cluster = start_new(reason());
  }
  return cluster.get();
}

const std::string& PgCluster::unavailable_reason() { return reason(); }

PgCluster::~PgCluster() {
  stop();
  std::error_code ec;
  fs::remove_all(root_, ec);
}

bool PgCluster::start() {
  if (running_) return true;
  // fsync off: a test server loses nothing a test needs when the machine crashes.
  const std::string options = "-p " + std::to_string(port_) + " -k " + root_.string() +
                              " -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200";
  running_ = run_as_owner({(bin_ / "pg_ctl").string(), "-D", (root_ / "data").string(), "-o", options, "-l",
                           (root_ / "log").string(), "-w", "-t", "60", "start"});
  return running_;
}

bool PgCluster::stop() {
  if (!running_) return true;
  running_ = !run_as_owner({(bin_ / "pg_ctl").string(), "-D", (root_ / "data").string(), "-m", stop_mode_, "-w", "stop"});
  return !running_;
}

std::string PgCluster::url(const std::string& database) const {
  return "postgresql://spark@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

std::string PgCluster::psql(const std::string& database, const std::string& sql, bool* ok) {
  std::string out;
  const bool done = run_as_owner({(bin_ / "psql").string(), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h",
                                  root_.string(), "-p", std::to_string(port_), "-U", "spark", "-d", database, "-c", sql},
                                 &out);
  if (ok) *ok = done;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return done ? out : std::string();
}

std::string PgCluster::new_database() {
  const std::string name = "kb" + std::to_string(++databases_);
  psql("postgres", "CREATE DATABASE " + name);
  return url(name);
}

bool PgCluster::require_password(const std::string& password) {
  bool ok = false;
  psql("postgres", "ALTER USER spark PASSWORD '" + password + "'", &ok);
  if (!ok) return false;
  {
    std::ofstream hba(root_ / "data" / "pg_hba.conf", std::ios::trunc);
    hba << "local all all trust\nhost all all 127.0.0.1/32 md5\n";
  }
  psql("postgres", "SELECT pg_reload_conf()", &ok);
  return ok;
}

}  // namespace spark::testing
