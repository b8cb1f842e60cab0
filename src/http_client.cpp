#include "http_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

namespace spark {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
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

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

Result<HttpResponse> http_post_json(const std::string& url, const std::string& body,
                                    const std::vector<std::string>& headers, const HttpOptions& options) {
  global_init();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return fail("POST " + url + ": cannot initialise libcurl");
  std::unique_ptr<curl_slist, SlistDeleter> list;
  curl_slist* raw = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const auto& h : headers) raw = curl_slist_append(raw, h.c_str());
  list.reset(raw);
  HttpResponse response;
  Sink sink{&response.body, options.max_response_bytes};
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, options.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  const CURLcode rc = curl_easy_perform(c);
  if (sink.overflow)
    return fail("POST " + url + ": response larger than " + std::to_string(options.max_response_bytes) + " bytes");
  if (rc != CURLE_OK)
    return fail("POST " + url + ": " + (errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc))));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  const char* ct = nullptr;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
  if (ct) response.content_type = ct;
  return response;
}

}  // namespace spark
