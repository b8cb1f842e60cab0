#include "base/http_client.h"

// Its calls go through the table below (the library is opened when first needed): no type-checking macros.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "base/clock.h"
#include "base/shared_library.h"
#include "base/text.h"

namespace spark {
namespace {

// libcurl, opened the first time a request is made (base/shared_library.h).
// clang-format off
#define SPARK_LIBCURL_FUNCTIONS(X)                                                                               \
  X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt) X(curl_easy_perform)           \
  X(curl_easy_getinfo) X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all) X(curl_getdate)
// clang-format on

struct Curl {
  SPARK_LIBCURL_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

// The table, loaded and curl_global_init'ed once (C++ runs a function-local static's initialiser once, whichever
// thread comes first); an error when libcurl is missing or too old.
const Result<Curl>& libcurl() {
  static const Result<Curl> loaded = []() -> Result<Curl> {
    auto api =
        load_library_table<Curl>(SPARK_LIBCURL_SONAME, "libcurl, for HTTP to an LLM or an embeddings server",
                                 [](SharedLibrary& lib, Curl& table) { SPARK_LIBCURL_FUNCTIONS(SPARK_LIBRARY_BIND) });
    if (api) api->curl_global_init(CURL_GLOBAL_DEFAULT);
    return api;
  }();
  return loaded;
}

struct CurlDeleter {
  const Curl* api;
  void operator()(CURL* c) const { api->curl_easy_cleanup(c); }
};
struct SlistDeleter {
  const Curl* api;
  void operator()(curl_slist* l) const { api->curl_slist_free_all(l); }
};

struct Sink {
  std::string* body;
  size_t limit;
  bool overflow = false;
};

size_t write_cb(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  if (sink->body->size() + n > sink->limit) {
    sink->overflow = true;
    return 0;  // aborts the transfer
  }
  sink->body->append(data, n);
  return n;
}

size_t header_cb(char* data, size_t size, size_t nmemb, void* user) {
  const size_t n = size * nmemb;
  std::string_view line(data, n);
  constexpr std::string_view name = "retry-after:";
  if (line.size() > name.size()) {
    bool match = true;
    for (size_t i = 0; i < name.size() && match; ++i)
      match = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
    if (match) *static_cast<std::string*>(user) = std::string(trim(line.substr(name.size())));
  }
  return n;
}

struct Attempt {
  std::optional<HttpResponse> response;
  std::string error;
  bool transient = false;
};

// One request: a POST of `body`, or a GET when `get`.
Attempt request_once(const std::string& url, const std::string& body, const std::vector<std::string>& headers,
                     const HttpOptions& options, bool get = false) {
  Attempt a;
  const std::string method = get ? "GET " : "POST ";
  const auto& loaded = libcurl();
  if (!loaded) {
    a.error = method + url + ": " + loaded.error().message;
    return a;
  }
  const Curl& api = *loaded;
  std::unique_ptr<CURL, CurlDeleter> curl(api.curl_easy_init(), CurlDeleter{&api});
  if (!curl) {
    a.error = method + url + ": cannot initialise libcurl";
    return a;
  }
  std::unique_ptr<curl_slist, SlistDeleter> list(nullptr, SlistDeleter{&api});
  curl_slist* raw = api.curl_slist_append(nullptr, "Content-Type: application/json");
  for (const auto& h : headers) raw = api.curl_slist_append(raw, h.c_str());
  list.reset(raw);
  HttpResponse response;
  Sink sink{&response.body, options.max_response_bytes};
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  api.curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  if (get) {
    api.curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    api.curl_easy_setopt(c, CURLOPT_POST, 1L);
    api.curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    api.curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  api.curl_easy_setopt(c, CURLOPT_HTTPHEADER, list.get());
  api.curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
  api.curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  api.curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
  api.curl_easy_setopt(c, CURLOPT_HEADERDATA, &response.retry_after);
  api.curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, options.connect_timeout_ms);
  api.curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  api.curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  api.curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  api.curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  const CURLcode rc = api.curl_easy_perform(c);
  if (sink.overflow) {
    a.error = method + url + ": response larger than " + std::to_string(options.max_response_bytes) + " bytes";
    return a;
  }
  if (rc != CURLE_OK) {
    a.error = method + url + ": " + (errbuf[0] ? std::string(errbuf) : std::string(api.curl_easy_strerror(rc)));
    switch (rc) {
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_COULDNT_CONNECT:
      case CURLE_GOT_NOTHING:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_PARTIAL_FILE:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        a.transient = true;
        break;
      default:
        break;  // DNS failure, bad URL, TLS problems: trying again will not help
    }
    return a;
  }
  api.curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  const char* ct = nullptr;
  api.curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
  if (ct) response.content_type = ct;
  a.response = std::move(response);
  return a;
}

// A header holding a line break (or NUL) would end it and start others (an API key read with its newline): never
// sent. The header's value is not named: it is usually a secret.
Status check_headers(const std::string& what, const std::vector<std::string>& headers) {
  for (const auto& h : headers)
    if (h.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      return fail(what + ": " + (h.find(':') == std::string::npos ? "a" : "the " + h.substr(0, h.find(':'))) +
                  " header holds a line break or NUL: not sent");
  return {};
}

bool retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

}  // namespace

double parse_retry_after(const std::string& value) {
  if (value.empty()) return -1;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end && *end == '\0' && v >= 0) return v;
  const auto& loaded = libcurl();
  if (!loaded) return -1;  // only a date needs libcurl; without it the header is ignored, as an unreadable one is
  const time_t when = loaded->curl_getdate(value.c_str(), nullptr);
  if (when < 0) return -1;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

Result<HttpOutcome> http_post_json_retrying(const std::string& url, const std::string& body,
                                            const std::vector<std::string>& headers, const HttpOptions& options,
                                            const RetryPolicy& retry) {
  TRY(check_headers("POST " + url, headers));
  thread_local std::mt19937_64 rng(std::random_device{}());
  const auto t0 = std::chrono::steady_clock::now();
  HttpOutcome out;
  const bool has_deadline = retry.deadline != std::chrono::steady_clock::time_point{};
  const auto left_s = [&] {
    return std::chrono::duration<double>(retry.deadline - std::chrono::steady_clock::now()).count();
  };
  const auto attempts_text = [&] {
    return out.attempts > 0
               ? " (after " + std::to_string(out.attempts) + " attempt" + (out.attempts > 1 ? "s" : "") + ")"
               : "";
  };
  for (int attempt = 0;; ++attempt) {
    HttpOptions this_try = options;
    if (has_deadline) {
      const double left = left_s();
      if (left <= 0.001) return fail("POST " + url + ": the run's LLM deadline has passed" + attempts_text());
      this_try.timeout_ms = std::min<long>(options.timeout_ms, std::max<long>(1, static_cast<long>(left * 1000)));
      this_try.connect_timeout_ms = std::min(options.connect_timeout_ms, this_try.timeout_ms);
    }
    Attempt a = request_once(url, body, headers, this_try);
    ++out.attempts;
    const bool last = attempt >= retry.max_retries;
    std::string why;
    double wait = -1;
    if (a.response) {
      if (!retryable_status(a.response->status) || last || (retry.lasting && retry.lasting(*a.response))) {
        out.response = std::move(*a.response);
        break;
      }
      why = "HTTP " + std::to_string(a.response->status);
      const double ra =
          a.response->status == 429 || a.response->status == 503 ? parse_retry_after(a.response->retry_after) : -1;
      if (ra >= 0) {
        why += " (Retry-After " + a.response->retry_after + ")";
        // A server that asks for longer than anyone would wait is not coming back within this run.
        if (ra > retry.max_retry_after_s) {
          out.response = std::move(*a.response);
          out.notes.push_back(why + ": longer than " + seconds_text(retry.max_retry_after_s) + ", not retried");
          break;
        }
        wait = ra;
      }
    } else {
      if (!a.transient || last) {
        out.seconds = seconds_since(t0);
        return fail(a.error + (out.attempts > 1 ? " (after " + std::to_string(out.attempts) + " attempts)" : ""));
      }
      why = a.error;
    }
    if (wait < 0) {
      const double d = std::min(retry.max_delay_s, retry.initial_delay_s * std::pow(2.0, attempt));
      wait = std::uniform_real_distribution<double>(d / 2, d)(rng);
    }
    if (has_deadline && wait >= left_s()) {
      out.seconds = seconds_since(t0);
      return fail((a.response ? "POST " + url + ": " : std::string()) + why + attempts_text() +
                  ": no time left before the run's LLM deadline to try again");
    }
    out.notes.push_back(why + ": retrying in " + seconds_text(wait));
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  out.seconds = seconds_since(t0);
  return out;
}

Result<HttpResponse> http_get(const std::string& url, const std::vector<std::string>& headers,
                              const HttpOptions& options) {
  TRY(check_headers("GET " + url, headers));
  Attempt a = request_once(url, {}, headers, options, true);
  if (!a.response) return fail(a.error);
  return std::move(*a.response);
}

}  // namespace spark
