// The C interface between spark and its HTTP server plugin (spark-http.so), which `spark audit serve` opens.
//
// Why a plugin: Debian's cpp-httplib is a compiled library (libcpp-httplib.so: its header only declares) linked to
// the shared libstdc++, OpenSSL, zlib and brotli, while `spark` links libstdc++ statically and loads only glibc at
// start (CMakeLists.txt, SPARK_STATIC_LIBS). Linking cpp-httplib into spark would put two C++ runtimes behind one
// C++ interface and load eleven libraries into every `spark localize`. The plugin links cpp-httplib and the shared
// runtime; spark opens it with dlopen only to serve, and the two sides exchange nothing but C types: no C++ object,
// allocation or exception crosses this interface. The plugin is a transport: every request goes to one handler of
// spark's, which decides everything (routing, access, pages, writes). How much the transport holds and for how long
// is spark's too (SparkHttpLimits).
//
// Built from src/base/http_plugin/spark_http.cpp; spark opens it through base/http_server.h.
#pragma once

#include <stddef.h>  // NOLINT(modernize-deprecated-headers): a C interface

#ifdef __cplusplus
extern "C" {
#endif

// Raised when this interface changes: spark refuses a plugin of another version.
#define SPARK_HTTP_ABI_VERSION 2

// What the server holds at most, whatever its clients send or withhold (base/http_server.h, HttpLimits, documents
// each and its default). A request over a limit is answered with an error status and its connection closed.
typedef struct SparkHttpLimits {
  size_t connections;   // open at once; one more closes the one that has been idle longest
  size_t head_bytes;    // the request line and its headers, with their line ends
  size_t header_lines;  // headers in one request
  size_t body_bytes;    // one request's body (Content-Length; a Transfer-Encoding is refused)
  unsigned request_ms;  // from a connection's accept to its whole request read
  unsigned reply_ms;    // from the reply made to the reply sent
  size_t workers;       // threads that answer requests read whole
} SparkHttpLimits;

// One request. Pairs are (name, value) in order: params are the query's, then an urlencoded form body's.
typedef struct SparkHttpRequest {
  const char* method;  // "GET", "POST", ...
  const char* path;    // without the query
  const char* const* params;
  size_t param_count;  // pairs
  const char* const* headers;
  size_t header_count;  // pairs, names as the client sent them
  const char* remote_addr;
} SparkHttpRequest;

// The reply under construction (the plugin's); the handler fills it through these functions, which copy.
typedef struct SparkHttpReply SparkHttpReply;
typedef struct SparkHttpReplyApi {
  void (*set_status)(SparkHttpReply* reply, int status);
  void (*add_header)(SparkHttpReply* reply, const char* name, const char* value);
  void (*set_body)(SparkHttpReply* reply, const char* data, size_t size, const char* content_type);
} SparkHttpReplyApi;

// Called on the plugin's worker threads, concurrently: the handler serialises what needs it. It must not throw.
typedef void (*SparkHttpHandler)(void* context, const SparkHttpRequest* request, SparkHttpReply* reply,
                                 const SparkHttpReplyApi* api);

typedef struct SparkHttpServer SparkHttpServer;

int spark_http_abi_version(void);
// `limits` is copied.
SparkHttpServer* spark_http_create(SparkHttpHandler handler, void* context, const SparkHttpLimits* limits);
// Binds `host`:`port` (0: a free port). Returns the port bound, or -1 with `error` (NUL-terminated) saying why.
int spark_http_bind(SparkHttpServer* server, const char* host, int port, char* error, size_t error_size);
// Serves until spark_http_stop; 0 after a stop, -1 when serving failed.
int spark_http_listen(SparkHttpServer* server);
// From any thread (not from a signal handler): spark_http_listen returns once the requests being answered are
// answered (their replies are not sent), without waiting for any client.
void spark_http_stop(SparkHttpServer* server);
void spark_http_destroy(SparkHttpServer* server);

#ifdef __cplusplus
}
#endif
