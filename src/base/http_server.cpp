#include "base/http_server.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <thread>

#include "base/http_plugin_abi.h"
#include "base/shared_library.h"
#include "base/text.h"

namespace spark {

#define SPARK_HTTP_FUNCTIONS(X) \
  X(spark_http_abi_version)     \
  X(spark_http_create) X(spark_http_bind) X(spark_http_listen) X(spark_http_stop) X(spark_http_destroy)

struct HttpServer::Plugin {
  SPARK_HTTP_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

namespace {

Result<HttpServer::Plugin> load_plugin() {
  std::string tried;
  for (const auto& path : HttpServer::plugin_paths()) {
    if (!std::filesystem::exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    auto loaded = load_library_table<HttpServer::Plugin>(
        path, "spark's HTTP server, built with cpp-httplib",
        [](SharedLibrary& lib, HttpServer::Plugin& table) { SPARK_HTTP_FUNCTIONS(SPARK_LIBRARY_BIND) });
    TRY(loaded);
    if (const int v = loaded->spark_http_abi_version(); v != SPARK_HTTP_ABI_VERSION)
      return fail(path + " is of another spark (interface " + std::to_string(v) + ", this spark's " +
                  std::to_string(SPARK_HTTP_ABI_VERSION) + "): install the two together");
    return loaded;
  }
  return fail("spark's HTTP server plugin (spark-http.so) is not installed: looked for " + tried +
              " (build the spark-http target, or install the spark package)");
}

// Loaded once (never closed: its code serves until the process exits).
const Result<HttpServer::Plugin>& plugin() {
  static const Result<HttpServer::Plugin> loaded = load_plugin();
  return loaded;
}

void handle(void* context, const SparkHttpRequest* request, SparkHttpReply* reply, const SparkHttpReplyApi* api) {
  const auto* self = static_cast<const HttpServer*>(context);
  HttpReply response;
  try {
    HttpRequest r;
    r.method = request->method;
    r.path = request->path;
    r.remote_addr = request->remote_addr ? request->remote_addr : "";
    for (size_t i = 0; i < request->param_count; ++i)
      r.params.emplace_back(request->params[2 * i], request->params[2 * i + 1]);
    for (size_t i = 0; i < request->header_count; ++i)
      r.headers.emplace_back(ascii_lower(request->headers[2 * i]), request->headers[2 * i + 1]);
    response = self->handler()(r);
  } catch (const std::exception& e) {
    response = HttpReply{500, "text/plain; charset=utf-8", std::string("spark: ") + e.what() + "\n", {}};
  } catch (...) {
    response = HttpReply{500, "text/plain; charset=utf-8", "spark: an unknown error\n", {}};
  }
  api->set_status(reply, response.status);
  for (const auto& [name, value] : response.headers) api->add_header(reply, name.c_str(), value.c_str());
  api->set_body(reply, response.body.data(), response.body.size(), response.content_type.c_str());
}

}  // namespace

std::string HttpRequest::param(const std::string& name) const {
  for (const auto& [n, v] : params)
    if (n == name) return v;
  return "";
}

std::vector<std::string> HttpRequest::params_named(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : params)
    if (n == name) out.push_back(v);
  return out;
}

std::string HttpRequest::header(const std::string& lower_name) const {
  for (const auto& [n, v] : headers)
    if (n == lower_name) return v;
  return "";
}

std::vector<std::string> HttpServer::plugin_paths() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {"spark-http.so"};
  const auto dir = self.parent_path();
  return {(dir / "spark-http.so").string(), (dir.parent_path() / "lib" / "spark" / "spark-http.so").string()};
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(const std::string& host, int port, Handler handler,
                                                     const HttpLimits& limits) {
  const auto& loaded = plugin();
  TRY(loaded);
  const Plugin* p = &*loaded;
  std::unique_ptr<HttpServer> server(new HttpServer(p, std::move(handler)));
  const SparkHttpLimits plugin_limits{limits.connections, limits.head_bytes, limits.header_lines, limits.body_bytes,
                                      limits.request_ms,  limits.reply_ms,   limits.workers};
  auto* s = p->spark_http_create(&handle, server.get(), &plugin_limits);
  server->server_ = s;
  char error[512] = {};
  server->port_ = p->spark_http_bind(s, host.c_str(), port, error, sizeof error);
  if (server->port_ < 0) return fail(error);
  return server;
}

HttpServer::~HttpServer() {
  if (server_) plugin_->spark_http_destroy(static_cast<SparkHttpServer*>(server_));
}

Status HttpServer::serve() {
  if (plugin_->spark_http_listen(static_cast<SparkHttpServer*>(server_)) != 0)
    return fail("the HTTP server on port " + std::to_string(port_) + " stopped with an error");
  return {};
}

void HttpServer::stop() { plugin_->spark_http_stop(static_cast<SparkHttpServer*>(server_)); }

sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

Status serve_until_stop_signal(HttpServer& server, const sigset_t& signals) {
  std::atomic<bool> served_out{false};
  std::thread waiter([&] {
    while (!served_out) {
      const timespec tick{0, 200'000'000};
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        server.stop();
        return;
      }
    }
  });
  const Status served = server.serve();
  served_out = true;
  waiter.join();
  return served;
}

}  // namespace spark
