// spark-http.so: cpp-httplib behind the C interface of base/http_plugin_abi.h (why a plugin: that header).
//
// Every method a browser or client may send reaches the one handler; cpp-httplib reads the request, parses the query
// and an urlencoded form body, and writes the reply. Bodies are limited to 1 MiB (a form of checkboxes and a reason).
#include <httplib.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/http_plugin_abi.h"

struct SparkHttpReply {
  httplib::Response* response;
};

struct SparkHttpServer {
  httplib::Server server;
  SparkHttpHandler handler = nullptr;
  void* context = nullptr;
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

}  // namespace

extern "C" {

int spark_http_abi_version(void) { return SPARK_HTTP_ABI_VERSION; }

SparkHttpServer* spark_http_create(SparkHttpHandler handler, void* context) {
  auto* s = new SparkHttpServer;
  s->handler = handler;
  s->context = context;
  s->server.set_payload_max_length(size_t{1} << 20);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second server (of the same user) binds
  // the same port and the kernel shares the connections between the two, instead of the second being refused.
  s->server.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const auto handle = [s](const httplib::Request& req, httplib::Response& res) { dispatch(s, req, res); };
  s->server.Get(".*", handle);
  s->server.Post(".*", handle);
  s->server.Put(".*", handle);
  s->server.Patch(".*", handle);
  s->server.Delete(".*", handle);
  s->server.Options(".*", handle);
  return s;
}

int spark_http_bind(SparkHttpServer* server, const char* host, int port, char* error, size_t error_size) {
  errno = 0;
  const int bound =
      port == 0 ? server->server.bind_to_any_port(host) : (server->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    const int why = errno;
    std::snprintf(error, error_size, "cannot listen on %s:%d: %s", host, port,
                  why ? std::strerror(why) : "the address cannot be bound");
    return -1;
  }
  return bound;
}

int spark_http_listen(SparkHttpServer* server) { return server->server.listen_after_bind() ? 0 : -1; }

void spark_http_stop(SparkHttpServer* server) { server->server.stop(); }

void spark_http_destroy(SparkHttpServer* server) { delete server; }

}  // extern "C"
