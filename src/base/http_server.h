// A small HTTP server: spark's side of the HTTP server plugin (base/http_plugin_abi.h says why a plugin).
//
//   auto server = HttpServer::bind("127.0.0.1", 0, [&](const HttpRequest& r) { return HttpReply{...}; });
//   if (!server) ...;                     // the plugin missing or too old, the port in use: the message says which
//   std::cout << (*server)->port();
//   (*server)->serve();                   // blocks until stop() (from another thread or a signal-waiting thread)
//
// The handler runs on the plugin's worker threads, several at once: it serialises what needs it. An exception it
// throws becomes a 500 reply naming it. The plugin is found next to the spark binary (a build folder) or in
// ../lib/spark beside it (an install: /usr/bin/spark, /usr/lib/spark/spark-http.so).
#pragma once

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
  static Result<std::unique_ptr<HttpServer>> bind(const std::string& host, int port, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Serves until stop(); an error when serving failed.
  Status serve();
  // From any thread (not from a signal handler).
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

}  // namespace spark
