// HTTP over libcurl: the seam between spark and any OpenAI-compatible server. Errors name the endpoint.
#pragma once

#include <string>
#include <vector>

#include "result.h"

namespace spark {

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
};

struct HttpOptions {
  long connect_timeout_ms = 10000;
  long timeout_ms = 120000;
  size_t max_response_bytes = 64u << 20;  // a larger answer is cut off with an error
};

// POSTs a JSON body. Transport failures (refused, DNS, timeout) are errors naming the URL; any HTTP status is a
// response (callers decide). Never logs headers: they may carry an API key.
Result<HttpResponse> http_post_json(const std::string& url, const std::string& body,
                                    const std::vector<std::string>& headers, const HttpOptions& options);

}  // namespace spark
