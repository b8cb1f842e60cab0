#include "llm/llm_client.h"

#include <algorithm>
#include <chrono>

#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/text.h"
#include "code/tokens.h"

namespace spark {

LlmClient::LlmClient(LlmOptions options) : options_(std::move(options)) {
  while (options_.base_url.ends_with('/')) options_.base_url.pop_back();
  if (options_.base_url.ends_with("/chat/completions"))
    options_.base_url.resize(options_.base_url.size() - std::string_view("/chat/completions").size());
  if (options_.concurrency == 0) options_.concurrency = 1;
}

std::string LlmClient::endpoint() const { return options_.base_url + "/chat/completions"; }

std::string LlmClient::server_root() const {
  std::string root = options_.base_url;
  if (root.ends_with("/v1")) root.resize(root.size() - 3);
  return root;
}

namespace {

std::vector<std::string> auth_headers(const LlmOptions& o) {
  if (o.api_key.empty()) return {};
  return {"Authorization: Bearer " + o.api_key};
}

size_t positive(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_unsigned()) return 0;
  return j[key].get<size_t>();
}

// The number after `before` in `text` (0 when absent).
size_t number_after(std::string_view text, std::string_view before) {
  const size_t at = text.find(before);
  if (at == std::string_view::npos) return 0;
  size_t n = 0, i = at + before.size();
  bool any = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && n < (size_t{1} << 40); ++i, any = true)
    n = n * 10 + static_cast<size_t>(text[i] - '0');
  return any ? n : 0;
}

}  // namespace

std::optional<ContextOverflow> context_overflow(long status, const std::string& body) {
  if (status != 400 && status != 413) return std::nullopt;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  const nlohmann::json& e = j.contains("error") && j["error"].is_object() ? j["error"] : j;
  const std::string message = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
  const std::string type = e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
  const std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
  ContextOverflow o;
  o.message = clip(message, 300);
  if (type == "exceed_context_size_error") {  // llama.cpp: the numbers are fields of the error
    o.context_tokens = positive(e, "n_ctx");
    o.prompt_tokens = positive(e, "n_prompt_tokens");
    return o;
  }
  // OpenAI ("context_length_exceeded") and vLLM: "This model's maximum context length is 8192 tokens. However, your
  // messages resulted in 9000 tokens" / "… you requested 9512 tokens (9000 in the messages, 512 in the completion)"
  // / "… and your request has 9000 input tokens".
  if (code != "context_length_exceeded" && message.find("maximum context length") == std::string::npos)
    return std::nullopt;
  o.context_tokens = number_after(message, "maximum context length is ");
  for (std::string_view form : {"resulted in ", "has ", "requested "}) {
    o.prompt_tokens = number_after(message, form);
    if (o.prompt_tokens) break;
  }
  // "… you requested 5112 tokens (4600 in the messages, 512 in the completion)": the messages' share.
  if (const size_t at = message.find(" in the messages"); at != std::string::npos) {
    const size_t open = message.rfind('(', at);
    if (open != std::string::npos) o.prompt_tokens = number_after(std::string_view(message).substr(open), "(");
  }
  return o;
}

const ServerFacts& LlmClient::facts() {
  std::call_once(probed_, [this] {
    if (!options_.probe) return;
    HttpOptions h = options_.http;
    h.timeout_ms = std::min<long>(h.timeout_ms, 10000);
    if (options_.retry.deadline != std::chrono::steady_clock::time_point{}) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(options_.retry.deadline -
                                                                              std::chrono::steady_clock::now());
      h.timeout_ms = std::min<long>(h.timeout_ms, std::max<long>(1, static_cast<long>(left.count())));
    }
    h.connect_timeout_ms = std::min(h.connect_timeout_ms, h.timeout_ms);
    h.max_response_bytes = 1u << 20;
    const auto headers = auth_headers(options_);
    const std::string props = server_root() + "/props";
    auto got = http_get(props, headers, h);
    if (!got) return;  // not reachable: the requests will say so
    if (got->status == 200) {
      auto j = nlohmann::json::parse(got->body, nullptr, false);
      if (j.is_object() && j.contains("default_generation_settings") && j["default_generation_settings"].is_object()) {
        facts_.counts_tokens = true;
        facts_.context_tokens = positive(j["default_generation_settings"], "n_ctx");
        if (facts_.context_tokens) facts_.context_source = "GET " + props;
        return;
      }
    }
    const std::string models = options_.base_url + "/models";
    got = http_get(models, headers, h);
    if (!got || got->status != 200) return;
    auto j = nlohmann::json::parse(got->body, nullptr, false);
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) return;
    for (const auto& m : j["data"]) {
      if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
      if (m["id"].get<std::string>() != options_.model && j["data"].size() > 1) continue;
      if (const size_t n = positive(m, "max_model_len"); n) {
        facts_.context_tokens = n;
        facts_.context_source = "GET " + models + " (max_model_len)";
      }
      break;
    }
  });
  return facts_;
}

std::optional<size_t> LlmClient::count_tokens(const std::string& prompt) {
  if (!facts().counts_tokens) return std::nullopt;
  RetryPolicy once = options_.retry;
  once.max_retries = 0;
  const nlohmann::json body = {{"content", prompt}, {"add_special", false}};
  auto got = http_post_json_retrying(server_root() + "/tokenize", json_text(body), auth_headers(options_),
                                     options_.http, once);
  if (!got || got->response.status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(got->response.body, nullptr, false);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) return std::nullopt;
  return j["tokens"].size() + kChatTemplateTokens;
}

nlohmann::ordered_json LlmClient::body(const ChatRequest& request, bool structured) const {
  nlohmann::ordered_json b = {{"model", options_.model},
                              {"messages", nlohmann::json::array({{{"role", "user"}, {"content", request.prompt}}})},
                              {"temperature", options_.temperature},
                              {"max_tokens", options_.max_tokens},
                              {"stream", false}};
  if (options_.seed) b["seed"] = *options_.seed;
  if (structured)
    b["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "faulty_elements"}, {"strict", true}, {"schema", request.schema}}}};
  return b;
}

std::string LlmClient::cache_key(const ChatRequest& request) const {
  std::string params = options_.model + "\x1f" + std::to_string(options_.temperature) + "\x1f" +
                       std::to_string(options_.max_tokens) + "\x1f" +
                       (options_.seed ? std::to_string(*options_.seed) : "-") + "\x1f" +
                       (options_.structured ? ordered_json_text(request.schema) : "plain");
  // Two independent 64-bit hashes of parameters and prompt: a 128-bit key.
  const uint64_t a = fnv1a64(request.prompt, fnv1a64(params));
  const uint64_t b = fnv1a64(params, fnv1a64(request.prompt, 0x9e3779b97f4a7c15ULL));
  return hex64(a) + hex64(b) + "-" + std::to_string(request.prompt.size());
}

Result<ChatAnswer> LlmClient::complete(const ChatRequest& req) {
  if (!cache_) return request(req);
  const std::string key = cache_key(req);
  if (auto hit = cache_->get(key)) {
    auto j = nlohmann::json::parse(*hit, nullptr, false);
    if (!j.is_discarded() && j.is_object()) {
      ChatAnswer a;
      a.content = j.value("content", "");
      a.finish_reason = j.value("finish_reason", "");
      a.prompt_tokens = j.value("prompt_tokens", size_t{0});
      a.completion_tokens = j.value("completion_tokens", size_t{0});
      a.usage_reported = j.value("usage_reported", false);
      a.seconds = j.value("seconds", 0.0);
      a.attempts = j.value("attempts", 1);
      a.structured = j.value("structured", false);
      a.cached = true;
      return a;
    }
  }
  auto a = request(req);
  if (a && !a->overflow) {
    const nlohmann::json j = {{"content", a->content},
                              {"finish_reason", a->finish_reason},
                              {"prompt_tokens", a->prompt_tokens},
                              {"completion_tokens", a->completion_tokens},
                              {"usage_reported", a->usage_reported},
                              {"seconds", a->seconds},
                              {"attempts", a->attempts},
                              {"structured", a->structured}};
    if (auto s = cache_->put(key, options_.model, json_text(j)); !s)
      a->notes.push_back("answer not cached: " + s.error().message);
  }
  return a;
}

Result<ChatAnswer> LlmClient::request(const ChatRequest& request) {
  const std::string url = endpoint();
  const std::vector<std::string> headers = auth_headers(options_);
  ChatAnswer answer;
  bool structured = options_.structured && !request.schema.is_null() && !structured_rejected_.load();
  HttpOutcome outcome;
  for (;;) {
    auto got = http_post_json_retrying(url, ordered_json_text(body(request, structured)), headers, options_.http,
                                       options_.retry);
    TRY(got);
    outcome = std::move(*got);
    answer.attempts += outcome.attempts;
    answer.seconds += outcome.seconds;
    for (auto& n : outcome.notes) answer.notes.push_back(std::move(n));
    const long st = outcome.response.status;
    // Too long a prompt is said with a 400 too: not a rejection of response_format, and the caller's to cut.
    if (auto overflow = context_overflow(st, outcome.response.body)) {
      answer.overflow = std::move(overflow);
      answer.structured = structured;
      return answer;
    }
    if (structured && (st == 400 || st == 404 || st == 415 || st == 422 || st == 501)) {
      structured_rejected_ = true;
      structured = false;
      answer.notes.push_back("the server rejected response_format (HTTP " + std::to_string(st) + ": " +
                             clip(outcome.response.body, 160) + "); asking again for plain text");
      continue;
    }
    break;
  }
  const HttpResponse& resp = outcome.response;
  const std::string where = "POST " + url + ": ";
  const std::string tries = answer.attempts > 1 ? " (after " + std::to_string(answer.attempts) + " attempts)" : "";
  if (resp.status != 200) {
    const std::string last = answer.notes.empty() ? "" : " [" + answer.notes.back() + "]";
    return fail(where + "HTTP " + std::to_string(resp.status) + tries + last + ": " + clip(resp.body, 300));
  }
  if (json_too_deep(resp.body))
    return fail(where + "the answer nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels" + tries);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(resp.body);
  } catch (const nlohmann::json::exception& e) {
    const std::string what = resp.content_type.find("html") != std::string::npos
                                 ? "an HTML page, not JSON"
                                 : "not valid JSON (" + std::string(e.what()) + ")";
    return fail(where + "the answer is " + what + ": " + clip(resp.body, 160));
  }
  if (!j.is_object()) return fail(where + "the answer is not a JSON object: " + clip(resp.body, 160));
  if (j.contains("error") && !j["error"].is_null())
    return fail(where + "the server reported an error: " + clip(json_text(j["error"]), 300));
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
    return fail(where + "the answer has no choices: " + clip(resp.body, 160));
  const auto& choice = j["choices"][0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object())
    return fail(where + "choices[0] has no message: " + clip(json_text(choice), 160));
  const auto& message = choice["message"];
  if (message.contains("content") && message["content"].is_string())
    answer.content = message["content"].get<std::string>();
  else if (message.contains("refusal") && message["refusal"].is_string())
    return fail(where + "the model refused: " + clip(message["refusal"].get<std::string>(), 200));
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
    answer.finish_reason = choice["finish_reason"].get<std::string>();
  if (answer.finish_reason == "length")
    answer.notes.push_back("the answer was cut off at max_tokens (" + std::to_string(options_.max_tokens) + ")");
  answer.structured = structured;
  const auto& usage = j.contains("usage") && j["usage"].is_object() ? j["usage"] : nlohmann::json();
  if (usage.is_object() && usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_unsigned() &&
      usage.contains("completion_tokens") && usage["completion_tokens"].is_number_unsigned()) {
    answer.prompt_tokens = usage["prompt_tokens"].get<size_t>();
    answer.completion_tokens = usage["completion_tokens"].get<size_t>();
    answer.usage_reported = true;
  } else {
    answer.prompt_tokens = estimate_tokens(request.prompt);
    answer.completion_tokens = estimate_tokens(answer.content);
  }
  // A server that ignores max_tokens is worth knowing of (cost, time): said, not silently passed. The estimate is
  // rough (about 4 characters a token), so only an answer clearly over the limit is named when usage is not reported.
  const size_t limit = static_cast<size_t>(std::max(1, options_.max_tokens));
  if (answer.usage_reported ? answer.completion_tokens > limit : answer.completion_tokens > 2 * limit)
    answer.notes.push_back("the answer has " + std::string(answer.usage_reported ? "" : "about ") +
                           std::to_string(answer.completion_tokens) + " tokens against max_tokens " +
                           std::to_string(limit) + ": the server did not keep to the limit");
  return answer;
}

RequestPool::RequestPool(LlmClient& client, size_t expected, std::function<void(size_t, size_t)> progress)
    : client_(client),
      progress_(std::move(progress)),
      expected_(expected),
      workers_(static_cast<unsigned>(std::max<size_t>(1, std::min(expected, client.options().concurrency)))) {}

void RequestPool::submit(size_t index, ChatRequest request) {
  {
    std::lock_guard lock(mu_);
    if (results_.size() <= index) results_.resize(index + 1, fail("not asked"));
    ++submitted_;
  }
  workers_.submit([this, index, request = std::move(request)](unsigned) {
    auto r = client_.complete(request);
    std::lock_guard lock(mu_);
    results_[index] = std::move(r);
    ++done_;
    if (progress_) progress_(done_, std::max(expected_, submitted_));
    answered_.notify_all();
  });
}

std::vector<Result<ChatAnswer>> RequestPool::finish() {
  {
    std::unique_lock lock(mu_);
    // While answers are awaited, say so now and then: a slow or silent server must not look like a hung spark.
    const auto& o = client_.options();
    if (o.waiting && o.waiting_interval_s > 0) {
      const auto interval = std::chrono::duration<double>(o.waiting_interval_s);
      size_t seen = done_;
      while (done_ < submitted_) {
        if (answered_.wait_for(lock, interval, [&] { return done_ != seen || done_ >= submitted_; })) {
          seen = done_;
          continue;
        }
        const double waited = seconds_since(started_);
        o.waiting(waited, done_, std::max(expected_, submitted_));
      }
    }
  }
  workers_.wait();
  std::lock_guard lock(mu_);
  return std::move(results_);
}

std::vector<Result<ChatAnswer>> LlmClient::complete_all(const std::vector<ChatRequest>& requests,
                                                        const std::function<void(size_t, size_t)>& progress) {
  RequestPool pool(*this, requests.size(), progress);
  for (size_t i = 0; i < requests.size(); ++i) pool.submit(i, requests[i]);
  auto results = pool.finish();
  results.resize(requests.size(), fail("not asked"));
  return results;
}

}  // namespace spark
