// A client for OpenAI-compatible chat completions (vLLM, Ollama's /v1, llama.cpp server, hosted APIs).
//
// POST {base_url}/chat/completions with one user message. Retries and backoff per RetryPolicy (http_client.h).
// With `structured`, the request carries response_format = {"type": "json_schema", …}; a server that rejects it
// (HTTP 400/404/415/422/501) is asked again without it, and the client stops sending it for the rest of the run.
// Many prompts run with a bounded pool of workers; results come back in input order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/http_client.h"
#include "base/result.h"
#include "base/work_pool.h"
#include "formats/defaults.h"
#include "llm/answer_cache.h"

namespace spark {

struct LlmOptions {
  std::string base_url;  // e.g. http://localhost:8000/v1 (a trailing /chat/completions is accepted too)
  std::string model;
  std::string api_key;  // sent as a Bearer token; never logged, never stored
  double temperature = defaults::kTemperature;
  int max_tokens = defaults::kAnswerTokens;
  std::optional<int64_t> seed;
  bool structured = false;
  size_t concurrency = defaults::kConcurrency;
  size_t context_tokens = defaults::kContextTokens;  // the server's context window (prompt + answer)
  HttpOptions http{static_cast<long>(defaults::kConnectTimeout * 1000),
                   static_cast<long>(defaults::kRequestTimeout * 1000), 4u << 20};
  // retry.deadline: the run's deadline for all its requests (spark localize and record set it)
  RetryPolicy retry{defaults::kRetries, defaults::kRetryDelay};
  // Called from the thread waiting for answers when none has come for `waiting_interval_s` (and again each time as
  // long as none comes): seconds since the requests began, answers so far, requests in all.
  std::function<void(double, size_t, size_t)> waiting;
  double waiting_interval_s = 10;
};

struct ChatAnswer {
  std::string content;
  std::string finish_reason;  // "stop", "length" (cut at max_tokens), …
  size_t prompt_tokens = 0, completion_tokens = 0;
  bool usage_reported = false;  // false: the counts are estimate_tokens() of prompt and answer
  double seconds = 0;           // wall time, all attempts and waits included
  int attempts = 0;
  bool structured = false;         // response_format was sent and accepted
  bool cached = false;             // from the answer cache (seconds, attempts: the original request's)
  std::vector<std::string> notes;  // retries, structured-output fallback, a cut-off answer
};

struct ChatRequest {
  std::string prompt;
  nlohmann::json schema;  // the answer's JSON schema, used when structured output is on; may be null
};

class LlmClient;

// Requests sent while more are being prepared: up to the client's concurrency in flight (on a WorkerPool), each answer
// stored under the index it was submitted with. finish() waits for all and returns them in index order.
class RequestPool {
 public:
  // `expected`: how many requests will come (for the worker count and the progress total).
  RequestPool(LlmClient& client, size_t expected, std::function<void(size_t, size_t)> progress = {});
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;
  void submit(size_t index, ChatRequest request);
  // Answers for indexes never submitted are errors.
  std::vector<Result<ChatAnswer>> finish();

 private:
  LlmClient& client_;
  std::function<void(size_t, size_t)> progress_;
  std::mutex mu_;
  std::vector<Result<ChatAnswer>> results_;
  std::condition_variable answered_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  size_t expected_ = 0, submitted_ = 0, done_ = 0;
  WorkerPool workers_;  // last: its destructor runs what is queued while the state above still exists
};

class LlmClient {
 public:
  explicit LlmClient(LlmOptions options);
  // Answers are looked up in and stored to `cache` (not owned); null = no cache.
  void set_cache(AnswerCache* cache) { cache_ = cache; }
  // The cache key of a request: model, sampling parameters, structured schema and prompt.
  std::string cache_key(const ChatRequest& request) const;
  const LlmOptions& options() const { return options_; }
  std::string endpoint() const;

  Result<ChatAnswer> complete(const ChatRequest& request);

  // Runs every request with up to options().concurrency in flight. `progress(done, total)` is called after each
  // (from worker threads, one at a time).
  std::vector<Result<ChatAnswer>> complete_all(const std::vector<ChatRequest>& requests,
                                               const std::function<void(size_t, size_t)>& progress = {});

 private:
  nlohmann::json body(const ChatRequest& request, bool structured) const;
  Result<ChatAnswer> request(const ChatRequest& request);
  LlmOptions options_;
  std::atomic<bool> structured_rejected_{false};
  AnswerCache* cache_ = nullptr;
};

}  // namespace spark
