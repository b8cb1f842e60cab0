// HTTP over libcurl: the seam between spark and any OpenAI-compatible server. Errors name the endpoint.
// Contract: each request uses its own libcurl handle, so calls may run on many threads at once; failures (after
// the retries below) come back as values naming the endpoint; nothing throws.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace spark {

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
  std::string retry_after;  // the Retry-After header, when sent
};

struct HttpOptions {
  long connect_timeout_ms = 10000;
  long timeout_ms = 120000;               // the whole request (a non-streaming answer arrives at once)
  size_t max_response_bytes = 64u << 20;  // a larger answer is cut off with an error
};

// When and how long to wait before trying again. Retried: transport failures that may pass (timeout, refused or
// reset connection, empty reply), HTTP 408, 429 and 5xx. Not retried: other 4xx, a host name that does not
// resolve, a malformed URL, an over-long answer.
struct RetryPolicy {
  int max_retries = 4;           // attempts = 1 + max_retries
  double initial_delay_s = 1.0;  // doubles per attempt, with jitter: a wait is drawn from [d/2, d]
  double max_delay_s = 30.0;
  double max_retry_after_s = 120.0;  // a longer Retry-After ends the request (the last response stands)
  // No attempt starts, and no attempt runs, past this moment (all of one run's requests share it; the epoch = none).
  // Each attempt's timeout is cut to the time left; a wait that would end past it ends the request with an error.
  std::chrono::steady_clock::time_point deadline{};
  // A response that names a lasting fault though its status says "try again" (llama.cpp answers an input longer
  // than its batch with HTTP 500): returned at once. Unset: the status alone decides.
  std::function<bool(const HttpResponse&)> lasting;
};

inline RetryPolicy retry_policy(int max_retries, double initial_delay_s) {
  RetryPolicy p;
  p.max_retries = max_retries;
  p.initial_delay_s = initial_delay_s;
  return p;
}

struct HttpOutcome {
  HttpResponse response;  // the last attempt's (status may still be 429/5xx when retries ran out)
  int attempts = 0;
  double seconds = 0;              // wall time over all attempts and waits
  std::vector<std::string> notes;  // "HTTP 503, retried after 1.2 s", …
};

// POSTs with retries per `retry`. A transport failure on the last attempt (or one not worth retrying) is an error
// that says how many attempts were made.
Result<HttpOutcome> http_post_json_retrying(const std::string& url, const std::string& body,
                                            const std::vector<std::string>& headers, const HttpOptions& options,
                                            const RetryPolicy& retry);

// One GET, no retries (a server's own description of itself: llama.cpp's /props, /v1/models). A transport failure
// is an error naming the URL; any HTTP status is a response.
Result<HttpResponse> http_get(const std::string& url, const std::vector<std::string>& headers,
                              const HttpOptions& options);

// Seconds to wait from a Retry-After value (delta-seconds or an HTTP date); negative when absent or unreadable.
double parse_retry_after(const std::string& value);

}  // namespace spark
