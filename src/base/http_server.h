// A small HTTP server: spark's side of the HTTP server plugin (base/http_plugin_abi.h says why a plugin).
//
//   auto server = HttpServer::bind("127.0.0.1", 0, [&](const HttpRequest& r) { return HttpReply{...}; });
//   if (!server) ...;                     // the plugin missing or too old, the port in use: the message says which
//   std::cout << (*server)->port();
//   (*server)->serve();                   // blocks until stop() (from another thread or a signal-waiting thread)
//
// The handler runs on the plugin's worker threads, several at once: it serialises what needs it. An exception it
// throws becomes a 500 reply naming it. The handler sees a request only once it is read whole, within HttpLimits;
// each reply closes its connection. The plugin is found next to the spark binary (a build folder) or in
// ../lib/spark beside it (an install: /usr/bin/spark, /usr/lib/spark/spark-http.so).
#pragma once

#include <signal.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace spark {

struct HttpRequest {
  std::string method, path, remote_addr;
  std::vector<std::pair<std::string, std::string>> params;   // the query's, then an urlencoded form body's
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  // The first value of `name`, or "".
  std::string param(const std::string& name) const;
  std::vector<std::string> params_named(const std::string& name) const;
  std::string header(const std::string& lower_name) const;
};

// What one server holds at most and for how long, whatever its clients send or withhold. Reading is one thread
// polling every connection, so a slow client holds a connection, never a worker; past a limit the request is answered
// with the status named here and its connection closed. The defaults are docs/AUDIT_SERVE.md's, "Limits".
struct HttpLimits {
  // Open at once. One more closes the one idle longest (the one whose last byte came or went earliest), unless it
  // is being answered.
  size_t connections = 64;
  // The request line and headers (431 past either). Browsers send about 1 KB in about 15 lines; cpp-httplib refuses
  // a single line over 8 KB itself.
  size_t head_bytes = size_t{32} * 1024;
  size_t header_lines = 100;
  // A body, announced by its Content-Length (413 past it, before it is read). A Transfer-Encoding (chunked) is
  // refused (411): browsers send forms with a length. cpp-httplib refuses an urlencoded form over 8 KB itself.
  size_t body_bytes = size_t{64} * 1024;
  // From a connection's accept to its whole request read, however it trickles in (408 past it).
  unsigned request_ms = 10'000;
  // From a reply made to its last byte sent to a client that does not read it (the connection closed past it).
  unsigned reply_ms = 10'000;
  // Threads answering requests read whole (they never wait on a client).
  size_t workers = 4;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class HttpServer {
 public:
  using Handler = std::function<HttpReply(const HttpRequest&)>;

  // Opens the plugin and binds host:port (0: a free one).
  static Result<std::unique_ptr<HttpServer>> bind(const std::string& host, int port, Handler handler,
                                                  const HttpLimits& limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Serves until stop(); an error when serving failed.
  Status serve();
  // From any thread (not from a signal handler). serve() returns once the requests being answered are answered,
  // whatever the clients do; their replies and every other connection are dropped.
  void stop();

  // Where the plugin is looked for, in order.
  static std::vector<std::string> plugin_paths();

  // The plugin's callback calls this.
  const Handler& handler() const { return handler_; }

  struct Plugin;

 private:
  HttpServer(const Plugin* plugin, Handler handler) : plugin_(plugin), handler_(std::move(handler)) {}

  const Plugin* plugin_;
  Handler handler_;
  void* server_ = nullptr;
  int port_ = 0;
};

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, and so in the threads it starts afterwards: call it before
// HttpServer::bind, whose threads must not take them. serve_until_stop_signal then waits for them.
sigset_t block_stop_signals();

// Serves until one of `signals` (block_stop_signals) arrives, then stops as stop() does; an error when serving failed.
Status serve_until_stop_signal(HttpServer& server, const sigset_t& signals);

}  // namespace spark
