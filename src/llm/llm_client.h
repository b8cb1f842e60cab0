// A client for OpenAI-compatible chat completions (vLLM, Ollama's /v1, llama.cpp server, hosted APIs).
//
// POST {base_url}/chat/completions with one user message. Retries and backoff per RetryPolicy (http_client.h).
// With `structured`, the request carries response_format = {"type": "json_schema", …}; a server that rejects it
// (HTTP 400/404/415/422/501, other than for the prompt's length) is asked again without it, and the client stops
// sending it for the rest of the run. A prompt the server refuses as longer than its context is not an error but an
// answer with `overflow` set, so that the caller can cut the prompt and ask once more.
// With `probe`, the server is asked once what it is (facts()): its context per request and whether it counts tokens
// (llama.cpp's GET /props and POST /tokenize; vLLM's max_model_len in GET /v1/models).
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
  bool probe = true;  // ask the server its context and token counts (facts(), count_tokens())
  size_t concurrency = defaults::kConcurrency;
  size_t context_tokens = defaults::kContextTokens;  // the server's context window (prompt + answer)
  HttpOptions http{static_cast<long>(defaults::kConnectTimeout * 1000),
                   static_cast<long>(defaults::kRequestTimeout * 1000), 4u << 20};
  // retry.deadline: the run's deadline for all its requests (spark localize and record set it)
  RetryPolicy retry = retry_policy(defaults::kRetries, defaults::kRetryDelay);
  // Called from the thread waiting for answers when none has come for `waiting_interval_s` (and again each time as
  // long as none comes): seconds since the requests began, answers so far, requests in all.
  std::function<void(double, size_t, size_t)> waiting;
  double waiting_interval_s = 10;
};

// A prompt the server refused as longer than its context (HTTP 400 from llama.cpp, vLLM or OpenAI).
struct ContextOverflow {
  size_t context_tokens = 0;  // the server's context for this request (0: not said)
  size_t prompt_tokens = 0;   // the prompt as the server counted it (0: not said)
  std::string message;        // the server's words, cut short
};

// Reads a refusal for length from an error answer; nullopt for any other answer.
std::optional<ContextOverflow> context_overflow(long status, const std::string& body);

// What a server says of itself (LlmClient::facts()).
struct ServerFacts {
  size_t context_tokens = 0;   // its context per request; 0: not said
  std::string context_source;  // where that was read, for the notes
  bool counts_tokens = false;  // POST /tokenize counts a text's tokens with the model's own tokenizer (llama.cpp)
};

struct ChatAnswer {
  std::string content;
  std::string finish_reason;  // "stop", "length" (cut at max_tokens), …
  size_t prompt_tokens = 0, completion_tokens = 0;
  bool usage_reported = false;  // false: the counts are estimate_tokens() of prompt and answer
  double seconds = 0;           // wall time, all attempts and waits included
  int attempts = 0;
  bool structured = false;                  // response_format was sent and accepted
  bool cached = false;                      // from the answer cache (seconds, attempts: the original request's)
  std::vector<std::string> notes;           // retries, structured-output fallback, a cut-off answer
  std::optional<ContextOverflow> overflow;  // set: the server refused the prompt as too long (content is empty)
};

struct ChatRequest {
  std::string prompt;
  // The answer's JSON schema, used when structured output is on; may be null. Ordered: a server's grammar writes the
  // keys in the order they are sent.
  nlohmann::ordered_json schema;
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

  // The server's own account of itself, asked once (the first call probes, with options().probe; later calls and
  // other threads get the same facts). Nothing is asked without `probe`; a server that answers none of the
  // questions has empty facts.
  const ServerFacts& facts();
  // The prompt's tokens as the server counts them, the chat template's wrapping included (an allowance of
  // kChatTemplateTokens); nullopt when the server cannot count (facts().counts_tokens) or the count failed.
  std::optional<size_t> count_tokens(const std::string& prompt);
  static constexpr size_t kChatTemplateTokens = 64;

  // Runs every request with up to options().concurrency in flight. `progress(done, total)` is called after each
  // (from worker threads, one at a time).
  std::vector<Result<ChatAnswer>> complete_all(const std::vector<ChatRequest>& requests,
                                               const std::function<void(size_t, size_t)>& progress = {});

 private:
  nlohmann::ordered_json body(const ChatRequest& request, bool structured) const;
  Result<ChatAnswer> request(const ChatRequest& request);
  LlmOptions options_;
  std::string server_root() const;  // base_url without a trailing /v1: where llama.cpp's /props and /tokenize are
  std::atomic<bool> structured_rejected_{false};
  std::once_flag probed_;
  ServerFacts facts_;
  AnswerCache* cache_ = nullptr;
};

}  // namespace spark
