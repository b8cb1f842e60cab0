// spark-http.so: cpp-httplib behind the C interface of base/http_plugin_abi.h (why a plugin: that header).
//
// Reading is the plugin's own, answering is cpp-httplib's. Debian's cpp-httplib 0.11 reads a request on one of its
// worker threads, with a timeout per read and no limit on the number of header lines or on a chunked body: one
// client sending header lines holds a worker and all the memory it sends, eight slow ones hold every worker, and its
// stop waits for them. So one thread here polls every connection and reads each request whole, within the limits
// (SparkHttpLimits: the head's bytes and lines, the body's bytes, one deadline for the whole request, a number of
// connections beyond which the one idle longest is closed). A request read whole goes to a worker, where cpp-httplib
// parses it from memory (request line, headers, query, urlencoded form), calls the one handler, and writes the reply
// into memory (Server::process_request over a Stream of strings). The poll thread sends the reply, with its own
// deadline, and closes the connection. No worker ever waits on a client, and a stop ends the poll thread at once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/http_plugin_abi.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Address {
  std::string ip;
  int port = 0;
};

Address address_of(const sockaddr_storage& a) {
  char ip[INET6_ADDRSTRLEN] = {};
  Address out;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, ip, sizeof ip);
    out.port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, ip, sizeof ip);
    out.port = ntohs(v6.sin6_port);
  }
  out.ip = ip;
  return out;
}

// One request read whole, for cpp-httplib to answer: it reads `request` and writes its reply into `reply`.
class MemoryStream final : public httplib::Stream {
 public:
  MemoryStream(const std::string& request, std::string& reply, const Address& remote, const Address& local)
      : request_(request), reply_(reply), remote_(remote), local_(local) {}
  using httplib::Stream::write;
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - position_);
    std::memcpy(ptr, request_.data() + position_, n);
    position_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    reply_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_.ip;
    port = remote_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local_.ip;
    port = local_.port;
  }
  // No socket: cpp-httplib never touches the connection.
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  const std::string& request_;
  size_t position_ = 0;
  std::string& reply_;
  const Address& remote_;
  const Address& local_;
};

// A reply the poll thread makes itself, to a request it refuses before cpp-httplib sees it.
std::string refusal(int status, const char* reason, const std::string& why) {
  const std::string body = "spark: " + why + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

bool same_name(const char* begin, const char* end, const char* lower_name) {
  const size_t n = std::strlen(lower_name);
  if (static_cast<size_t>(end - begin) != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(begin[i])) != lower_name[i]) return false;
  return true;
}

struct Connection {
  enum class State {
    reading,    // the request, up to its limits and deadline
    answering,  // on a worker
    sending,    // the reply, up to its deadline
    closing,    // sent and shut for writing; what the client still sends is read and dropped, until it closes
    closed,     // to be closed
  };
  int fd = -1;
  State state = State::reading;
  Address remote, local;
  std::string in;      // the request so far
  size_t scanned = 0;  // bytes of `in` searched for the head's end
  size_t lines = 0;    // line ends among them
  size_t length = 0;   // the whole request's bytes, once its head is read (0 before)
  std::string out;     // the reply
  size_t sent = 0;
  Clock::time_point deadline, last_active;

  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

struct SparkHttpReply {
  httplib::Response* response;
};

struct SparkHttpServer : httplib::Server {
  SparkHttpHandler handler = nullptr;
  void* context = nullptr;
  SparkHttpLimits limits{};
  std::atomic<bool> stopping{false};
  int wake[2] = {-1, -1};  // a pipe: a stop or an answer wakes the poll thread
  std::mutex answered_mutex;
  std::vector<std::pair<uint64_t, std::string>> answered;  // (connection, reply), from the workers

  SparkHttpServer() {
    if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) wake[0] = wake[1] = -1;
  }
  SparkHttpServer(const SparkHttpServer&) = delete;
  SparkHttpServer& operator=(const SparkHttpServer&) = delete;
  ~SparkHttpServer() override {
    for (int fd : wake)
      if (fd >= 0) ::close(fd);
    if (svr_sock_ != INVALID_SOCKET) ::close(svr_sock_);
  }

  void wake_up() {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake[1], &c, 1);  // full: a wake-up is pending anyway
  }

  bool serve();

 private:
  using Connections = std::map<uint64_t, std::unique_ptr<Connection>>;

  void answer(httplib::ThreadPool& pool, uint64_t id, Connection& c);
  void take_answers(Connections& connections);
  void read_request(httplib::ThreadPool& pool, uint64_t id, Connection& c);
  bool read_head(Connection& c);
  void refuse(Connection& c, int status, const char* reason, const std::string& why);
  void send_reply(Connection& c);
  void drop_input(Connection& c);
  void accept_connections(Connections& connections, uint64_t& next_id);
  void expire(Connections& connections);
  int poll_timeout(const Connections& connections) const;
};

namespace {

void set_status(SparkHttpReply* reply, int status) { reply->response->status = status; }

void add_header(SparkHttpReply* reply, const char* name, const char* value) {
  reply->response->headers.emplace(name, value);
}

void set_body(SparkHttpReply* reply, const char* data, size_t size, const char* content_type) {
  reply->response->set_content(data, size, content_type);
}

const SparkHttpReplyApi kReplyApi = {set_status, add_header, set_body};

void dispatch(SparkHttpServer* s, const httplib::Request& req, httplib::Response& res) {
  std::vector<const char*> params, headers;
  for (const auto& [name, value] : req.params) {
    params.push_back(name.c_str());
    params.push_back(value.c_str());
  }
  for (const auto& [name, value] : req.headers) {
    headers.push_back(name.c_str());
    headers.push_back(value.c_str());
  }
  const SparkHttpRequest request = {req.method.c_str(), req.path.c_str(),   params.data(),          params.size() / 2,
                                    headers.data(),     headers.size() / 2, req.remote_addr.c_str()};
  SparkHttpReply reply{&res};
  s->handler(s->context, &request, &reply, &kReplyApi);
}

constexpr size_t kReadChunk = size_t{16} * 1024;
// How long a refusal, and the closing of a connection whose reply is sent, may take.
constexpr auto kLinger = std::chrono::seconds(1);
// Connections accepted per round of the poll loop, so that a flood of connections cannot starve the reading.
constexpr int kAcceptsPerRound = 16;

}  // namespace

// The request's head read whole: its lines counted, its body's length known. False when it is refused (the reply
// set) or not read whole yet.
bool SparkHttpServer::read_head(Connection& c) {
  const size_t from = c.scanned < 2 ? 0 : c.scanned - 2;
  const size_t end = c.in.find("\n\r\n", from);
  const size_t head = end == std::string::npos ? c.in.size() : end + 3;
  c.lines += static_cast<size_t>(
      std::count(c.in.begin() + static_cast<ptrdiff_t>(c.scanned), c.in.begin() + static_cast<ptrdiff_t>(head), '\n'));
  c.scanned = head;
  // The request line and the blank line that ends the head are not headers.
  if (c.lines > limits.header_lines + 2) {
    refuse(c, 431, "Request Header Fields Too Large", "more than " + std::to_string(limits.header_lines) + " headers");
    return false;
  }
  if (end == std::string::npos) {
    if (c.in.size() >= limits.head_bytes)
      refuse(c, 431, "Request Header Fields Too Large",
             "a request line and headers of more than " + std::to_string(limits.head_bytes) + " bytes");
    return false;
  }
  // The body's length, as cpp-httplib will read it: headers are the lines that end in CRLF, their names compared
  // without case. Anything it might read differently is refused.
  std::optional<size_t> body;
  const char* line = c.in.data() + c.in.find('\n') + 1;
  const char* const stop = c.in.data() + head - 2;
  while (line < stop) {
    const char* eol = static_cast<const char*>(std::memchr(line, '\n', static_cast<size_t>(stop - line)));
    const char* colon = static_cast<const char*>(std::memchr(line, ':', static_cast<size_t>(eol - line)));
    if (colon && eol[-1] == '\r') {
      if (same_name(line, colon, "transfer-encoding")) {
        refuse(c, 411, "Length Required", "a body is sent with a Content-Length, not a Transfer-Encoding");
        return false;
      }
      if (same_name(line, colon, "content-length")) {
        const char* v = colon + 1;
        const char* v_end = eol - 1;
        while (v < v_end && (*v == ' ' || *v == '\t')) ++v;
        while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t')) --v_end;
        const bool digits =
            v < v_end && v_end - v <= 18 && std::all_of(v, v_end, [](char ch) { return ch >= '0' && ch <= '9'; });
        if (body || !digits) {
          refuse(c, 400, "Bad Request", "one Content-Length of digits");
          return false;
        }
        body = std::stoull(std::string(v, v_end));
      }
    }
    line = eol + 1;
  }
  if (body.value_or(0) > limits.body_bytes) {
    refuse(c, 413, "Payload Too Large", "a body of more than " + std::to_string(limits.body_bytes) + " bytes");
    return false;
  }
  c.length = head + body.value_or(0);
  return true;
}

void SparkHttpServer::refuse(Connection& c, int status, const char* reason, const std::string& why) {
  c.out = refusal(status, reason, why);
  c.sent = 0;
  c.state = Connection::State::sending;
  c.deadline = Clock::now() + kLinger;
  std::string().swap(c.in);
  send_reply(c);
}

void SparkHttpServer::read_request(httplib::ThreadPool& pool, uint64_t id, Connection& c) {
  char buffer[kReadChunk];
  while (c.state == Connection::State::reading) {
    // Never more than the limits allow: the head's bytes until its end is read, then the request's.
    const size_t cap = c.length ? c.length : limits.head_bytes;
    const ssize_t n = ::recv(c.fd, buffer, std::min(sizeof buffer, cap - c.in.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // closed (or failed) before the request was whole
      c.state = Connection::State::closed;
      return;
    }
    c.in.append(buffer, static_cast<size_t>(n));
    c.last_active = Clock::now();
    if (!c.length && !read_head(c)) continue;  // refused (no longer reading), or more head to come
    if (c.in.size() >= c.length) {
      c.in.resize(c.length);  // what a client sends after its request is not read
      answer(pool, id, c);
    }
  }
}

void SparkHttpServer::answer(httplib::ThreadPool& pool, uint64_t id, Connection& c) {
  c.state = Connection::State::answering;
  pool.enqueue([this, id, &c] {
    // The connection is not closed while it is answered (the poll thread never closes one in this state, and joins
    // the workers before it closes the rest).
    std::string reply;
    if (!stopping) {
      try {
        MemoryStream stream(c.in, reply, c.remote, c.local);
        bool closed = true;
        process_request(stream, true, closed, nullptr);
      } catch (...) {
        reply.clear();  // closed without a reply
      }
    }
    {
      const std::lock_guard<std::mutex> lock(answered_mutex);
      answered.emplace_back(id, std::move(reply));
    }
    wake_up();
  });
}

void SparkHttpServer::take_answers(Connections& connections) {
  std::vector<std::pair<uint64_t, std::string>> replies;
  {
    const std::lock_guard<std::mutex> lock(answered_mutex);
    replies.swap(answered);
  }
  for (auto& [id, reply] : replies) {
    const auto found = connections.find(id);
    if (found == connections.end()) continue;
    Connection& c = *found->second;
    std::string().swap(c.in);
    c.out = std::move(reply);
    c.sent = 0;
    c.state = Connection::State::sending;
    c.deadline = Clock::now() + std::chrono::milliseconds(limits.reply_ms);
    send_reply(c);
  }
}

void SparkHttpServer::send_reply(Connection& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) break;
    c.sent += static_cast<size_t>(n);
    c.last_active = Clock::now();
  }
  // Sent (or the client gone): shut for writing, then read until the client closes, so that what it still sends
  // does not turn the close into a reset that could lose the reply.
  ::shutdown(c.fd, SHUT_WR);
  std::string().swap(c.out);
  c.state = Connection::State::closing;
  c.deadline = std::min(c.deadline, Clock::now() + kLinger);
  drop_input(c);
}

void SparkHttpServer::drop_input(Connection& c) {
  char buffer[kReadChunk];
  for (int i = 0; i < 16; ++i) {  // a round's share; the deadline ends the rest
    const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // closed by the client
      c.state = Connection::State::closed;
      return;
    }
  }
}

void SparkHttpServer::accept_connections(Connections& connections, uint64_t& next_id) {
  for (int i = 0; i < kAcceptsPerRound; ++i) {
    if (connections.size() >= limits.connections) {
      // Full: the connection idle longest is closed, unless every one is being answered.
      auto idlest = connections.end();
      for (auto it = connections.begin(); it != connections.end(); ++it)
        if (it->second->state != Connection::State::answering &&
            (idlest == connections.end() || it->second->last_active < idlest->second->last_active))
          idlest = it;
      if (idlest == connections.end()) return;
      connections.erase(idlest);
    }
    sockaddr_storage remote{};
    socklen_t size = sizeof remote;
    const int fd = ::accept4(svr_sock_, reinterpret_cast<sockaddr*>(&remote), &size, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // none waiting, or a failure of one connection: the loop goes on
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->remote = address_of(remote);
    sockaddr_storage local{};
    size = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0) c->local = address_of(local);
    c->last_active = Clock::now();
    c->deadline = c->last_active + std::chrono::milliseconds(limits.request_ms);
    connections.emplace(next_id++, std::move(c));
  }
}

// Past its deadline, a connection still reading is refused (408), any other closed; the closed ones are closed.
void SparkHttpServer::expire(Connections& connections) {
  const auto now = Clock::now();
  for (auto it = connections.begin(); it != connections.end();) {
    Connection& c = *it->second;
    if (c.state != Connection::State::answering && c.state != Connection::State::closed && now >= c.deadline) {
      if (c.state == Connection::State::reading)
        refuse(c, 408, "Request Timeout",
               "a request not read whole within " + std::to_string(limits.request_ms) + " ms");
      else
        c.state = Connection::State::closed;
    }
    it = c.state == Connection::State::closed ? connections.erase(it) : std::next(it);
  }
}

int SparkHttpServer::poll_timeout(const Connections& connections) const {
  std::optional<Clock::time_point> first;
  for (const auto& [id, c] : connections)
    if (c->state != Connection::State::answering && (!first || c->deadline < *first)) first = c->deadline;
  if (!first) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*first - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60'000));
}

bool SparkHttpServer::serve() {
  const int listener = svr_sock_;
  if (listener == INVALID_SOCKET || wake[0] < 0) return false;
  ::fcntl(listener, F_SETFL, ::fcntl(listener, F_GETFL) | O_NONBLOCK);
  ::listen(listener, static_cast<int>(std::min<size_t>(limits.connections, SOMAXCONN)));
  httplib::ThreadPool pool(std::max<size_t>(limits.workers, 1));
  Connections connections;
  uint64_t next_id = 0;
  std::vector<pollfd> polled;
  std::vector<uint64_t> ids;
  while (!stopping) {
    take_answers(connections);
    expire(connections);
    // Full, with every connection being answered: new ones wait in the listen queue.
    const bool room = connections.size() < limits.connections ||
                      std::any_of(connections.begin(), connections.end(), [](const auto& entry) {
                        return entry.second->state != Connection::State::answering;
                      });
    polled.assign({pollfd{wake[0], POLLIN, 0}, pollfd{listener, static_cast<short>(room ? POLLIN : 0), 0}});
    ids.assign({0, 0});
    for (const auto& [id, c] : connections) {
      if (c->state == Connection::State::answering) continue;
      polled.push_back({c->fd, static_cast<short>(c->state == Connection::State::sending ? POLLOUT : POLLIN), 0});
      ids.push_back(id);
    }
    if (::poll(polled.data(), polled.size(), poll_timeout(connections)) < 0 && errno != EINTR) break;
    if (stopping) break;
    if (polled[0].revents) {
      char drained[64];
      while (::read(wake[0], drained, sizeof drained) > 0) {
      }
    }
    for (size_t i = 2; i < polled.size(); ++i) {
      if (!polled[i].revents) continue;
      Connection& c = *connections.at(ids[i]);
      switch (c.state) {
        case Connection::State::reading:
          read_request(pool, ids[i], c);
          break;
        case Connection::State::sending:
          send_reply(c);
          break;
        case Connection::State::closing:
          drop_input(c);
          break;
        case Connection::State::answering:
        case Connection::State::closed:
          break;
      }
    }
    if (polled[1].revents) accept_connections(connections, next_id);
  }
  // Answers under way finish on their own (none waits on a client; those not begun are skipped), then every
  // connection is closed unanswered.
  stopping = true;
  pool.shutdown();
  connections.clear();
  ::close(svr_sock_);
  svr_sock_ = INVALID_SOCKET;
  return true;
}

extern "C" {

int spark_http_abi_version(void) { return SPARK_HTTP_ABI_VERSION; }

SparkHttpServer* spark_http_create(SparkHttpHandler handler, void* context, const SparkHttpLimits* limits) {
  auto* s = new SparkHttpServer;
  s->handler = handler;
  s->context = context;
  s->limits = *limits;
  s->set_payload_max_length(limits->body_bytes);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second server (of the same user) binds
  // the same port and the kernel shares the connections between the two, instead of the second being refused.
  s->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const auto handle = [s](const httplib::Request& req, httplib::Response& res) { dispatch(s, req, res); };
  s->Get(".*", handle);
  s->Post(".*", handle);
  s->Put(".*", handle);
  s->Patch(".*", handle);
  s->Delete(".*", handle);
  s->Options(".*", handle);
  return s;
}

int spark_http_bind(SparkHttpServer* server, const char* host, int port, char* error, size_t error_size) {
  errno = 0;
  const int bound = port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    const int why = errno;
    std::snprintf(error, error_size, "cannot listen on %s:%d: %s", host, port,
                  why ? std::strerror(why) : "the address cannot be bound");
    return -1;
  }
  return bound;
}

int spark_http_listen(SparkHttpServer* server) { return server->serve() ? 0 : -1; }

void spark_http_stop(SparkHttpServer* server) {
  server->stopping = true;
  server->wake_up();
}

void spark_http_destroy(SparkHttpServer* server) { delete server; }

}  // extern "C"
