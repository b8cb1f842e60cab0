// `spark audit serve` against hostile local clients (base/http_server.h, HttpLimits; docs/AUDIT_SERVE.md, "Limits"):
// the real binary, real sockets to 127.0.0.1, every loop bounded in count and time.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

extern char** environ;

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::run_spark;
using testing::TempDir;

// A socket to 127.0.0.1:port, its reads and writes given up after `timeout`.
class Client {
 public:
  explicit Client(int port, milliseconds timeout = milliseconds(5000))
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                     static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  // All of `data`, or false.
  bool send(const std::string& data) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // What the server sends until it closes, or until the timeout.
  std::string reply() {
    std::string out;
    char buffer[65536];
    for (int i = 0; i < 10'000; ++i) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }
  // Whether something (a reply, or the close) is waiting within `wait`.
  bool answered_within(milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) == 1;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// `spark audit serve` on an empty knowledge base, its address read from its stdout; killed if a test leaves it.
class Served {
 public:
  Served() {
    auto init = run_spark({"--kb", (dir_ / "kb").string(), "kb", "init"}, dir_.path());
    EXPECT_EQ(init.exit_code, 0) << init.err;
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, (dir_ / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const std::string kb = (dir_ / "kb").string();
    std::vector<std::string> args = {SPARK_BINARY, "--kb", kb, "audit", "serve"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, SPARK_BINARY, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    // The address: one line, within 10 s.
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    for (int i = 0; i < 200 && line.find('\n') == std::string::npos && ::poll(&p, 1, 10'000) == 1; ++i) {
      char c[256];
      const ssize_t n = ::read(out[0], c, sizeof c);
      if (n <= 0) break;
      line.append(c, static_cast<size_t>(n));
    }
    ::close(out[0]);
    // http://127.0.0.1:PORT/TOKEN/
    const size_t colon = line.find(':', 5);
    const size_t slash = line.find('/', colon);
    EXPECT_NE(slash, std::string::npos) << line;
    if (slash == std::string::npos) return;
    port_ = std::stoi(line.substr(colon + 1, slash - colon - 1));
    path_ = line.substr(slash, line.find('\n') - slash);
  }
  ~Served() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;

  int port() const { return port_; }
  // A GET of the quarantine page, as a browser sends it.
  std::string page_request() const {
    return "GET " + path_ + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
           "\r\nUser-Agent: test\r\nAccept: text/html\r\n\r\n";
  }
  // The server's peak resident set so far, in KiB (VmHWM).
  long peak_kib() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
    return -1;
  }
  // SIGTERM, then its exit status and how long it took, waited for 5 s at most (then killed: -1).
  std::pair<int, milliseconds> terminate() {
    const auto start = Clock::now();
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return {WIFEXITED(status) ? WEXITSTATUS(status) : -2,
                std::chrono::duration_cast<milliseconds>(Clock::now() - start)};
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return {-1, std::chrono::duration_cast<milliseconds>(Clock::now() - start)};
  }
  std::string err() const { return testing::slurp(dir_ / "stderr.txt"); }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string path_;
};

std::string status_line(const std::string& reply) { return reply.substr(0, reply.find('\r')); }

// Sends `total` bytes made by `piece` (repeated) after `head`, 64 KiB at a time, until the server stops taking them.
void flood(Client& client, const std::string& head, const std::string& piece, size_t total) {
  if (!client.send(head)) return;
  std::string block;
  while (block.size() < 65536) block += piece;
  for (size_t sent = 0; sent < total; sent += block.size())
    if (!client.send(block)) return;
}

TEST(audit_limits, the_token_holder_is_served_through_the_server_as_a_browser_asks) {
  Served served;
  Client browser(served.port());
  ASSERT_TRUE(browser.connected());
  // The request in three pieces, as a slow network delivers it.
  const std::string request = served.page_request();
  for (const auto& piece : {request.substr(0, 7), request.substr(7, 30), request.substr(37)}) {
    ASSERT_TRUE(browser.send(piece));
    std::this_thread::sleep_for(milliseconds(50));
  }
  const auto reply = browser.reply();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Quarantine"), std::string::npos) << reply;
}

TEST(audit_limits, endless_header_lines_are_refused_and_the_memory_stays_bounded) {
  Served served;
  const long before = served.peak_kib();
  {
    Client client(served.port());
    ASSERT_TRUE(client.connected());
    flood(client, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Filler: " + std::string(88, 'a') + "\r\n", 48u << 20);
    EXPECT_EQ(status_line(client.reply()), "HTTP/1.1 431 Request Header Fields Too Large");
  }
  {
    Client client(served.port());  // few lines, each long
    flood(client, "GET / HTTP/1.1\r\n", "X-Filler: " + std::string(4000, 'a') + "\r\n", 4u << 20);
    EXPECT_EQ(status_line(client.reply()), "HTTP/1.1 431 Request Header Fields Too Large");
  }
  // Before, 48 MB of header lines took the server's memory up by more than 100 MB.
  EXPECT_LT(served.peak_kib() - before, 16 * 1024) << "KiB, before: " << before;
  Client browser(served.port());
  ASSERT_TRUE(browser.send(served.page_request()));
  EXPECT_EQ(status_line(browser.reply()), "HTTP/1.1 200 OK");
}

TEST(audit_limits, bodies_are_refused_before_they_are_read) {
  Served served;
  const long before = served.peak_kib();
  const std::string post = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n";
  {
    Client client(served.port());
    ASSERT_TRUE(client.connected());
    flood(client, post + "Transfer-Encoding: chunked\r\n\r\n", "10000\r\n" + std::string(65536, 'a') + "\r\n",
          64u << 20);
    EXPECT_EQ(status_line(client.reply()), "HTTP/1.1 411 Length Required");
  }
  {
    Client client(served.port());
    flood(client, post + "Content-Length: 67108864\r\n\r\n", std::string(4096, 'a'), 64u << 20);
    EXPECT_EQ(status_line(client.reply()), "HTTP/1.1 413 Payload Too Large");
  }
  {
    Client client(served.port());
    ASSERT_TRUE(client.send(post + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab"));
    EXPECT_EQ(status_line(client.reply()), "HTTP/1.1 400 Bad Request");
  }
  // Before, the chunked 64 MB were read whole (memory up by more than 64 MB), then refused.
  EXPECT_LT(served.peak_kib() - before, 16 * 1024) << "KiB, before: " << before;
}

// Clients that open a request and send one header line every `every`, from a thread, until stopped (or 20 s).
class Drippers {
 public:
  Drippers(int port, int count, milliseconds every) {
    for (int i = 0; i < count; ++i) {
      clients_.push_back(std::make_unique<Client>(port));
      clients_.back()->send("GET / HTTP/1.1\r\n");
    }
    thread_ = std::thread([this, every] {
      for (int round = 0; !stop_ && round < 20'000 / static_cast<int>(every.count()); ++round) {
        for (auto& c : clients_) c->send("X-Drip: " + std::to_string(round) + "\r\n");
        for (int slept = 0; !stop_ && slept < every.count(); slept += 10) std::this_thread::sleep_for(milliseconds(10));
      }
    });
  }
  ~Drippers() {
    stop_ = true;
    thread_.join();
  }
  Drippers(const Drippers&) = delete;
  Drippers& operator=(const Drippers&) = delete;
  Client& first() { return *clients_.front(); }

 private:
  std::vector<std::unique_ptr<Client>> clients_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(audit_limits, slow_and_idle_clients_do_not_keep_the_token_holder_waiting) {
  Served served;
  // More slow clients than cpp-httplib had workers (8, or one fewer than the cores), and 200 idle connections.
  Drippers slow(served.port(), 40, milliseconds(500));
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<Client>(served.port()));
  std::this_thread::sleep_for(milliseconds(200));
  const auto start = Clock::now();
  Client browser(served.port());
  ASSERT_TRUE(browser.send(served.page_request()));
  // Before, no answer came while the slow clients dripped.
  ASSERT_TRUE(browser.answered_within(milliseconds(3000)));
  EXPECT_EQ(status_line(browser.reply()), "HTTP/1.1 200 OK");
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(audit_limits, a_request_trickling_in_is_cut_at_its_deadline) {
  Served served;
  const auto start = Clock::now();
  Drippers slow(served.port(), 1, milliseconds(500));
  // The whole request within 10 s, however it trickles in (before, each line reset a per-read timeout).
  ASSERT_TRUE(slow.first().answered_within(milliseconds(14'000)));
  EXPECT_EQ(status_line(slow.first().reply()), "HTTP/1.1 408 Request Timeout");
  EXPECT_GE(Clock::now() - start, milliseconds(9'000));
}

TEST(audit_limits, sigterm_stops_the_server_within_a_second_whatever_the_clients_do) {
  Served served;
  Drippers slow(served.port(), 10, milliseconds(300));
  Client half_a_body(served.port());
  ASSERT_TRUE(half_a_body.send("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc"));
  Client silent(served.port());
  std::this_thread::sleep_for(milliseconds(500));
  const auto [status, took] = served.terminate();
  EXPECT_EQ(status, 0) << served.err();  // before: still serving 5 s later
  EXPECT_LT(took, milliseconds(1000));
  EXPECT_NE(served.err().find("stopped"), std::string::npos) << served.err();
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
