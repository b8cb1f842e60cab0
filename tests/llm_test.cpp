// The LLM client and stage against a scripted in-process OpenAI-compatible server: the protocol, every fault the
// issue names, the fallback, redaction and the answer's use.
#include <gtest/gtest.h>

#include <chrono>

#include "chat_server.h"
#include "code/structure_cache.h"
#include "code/tokens.h"
#include "llm/llm_client.h"
#include "localizer/llm_stage.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::ChatServer;

LlmOptions fast_options(const std::string& url) {
  LlmOptions o;
  o.base_url = url;
  o.model = "test-model";
  o.retry.initial_delay_s = 0.01;
  o.retry.max_delay_s = 0.05;
  o.retry.max_retries = 2;
  o.http.connect_timeout_ms = 2000;
  o.http.timeout_ms = 5000;
  return o;
}

ChatRequest request(const std::string& prompt) { return {prompt, nullptr}; }

// A small failing test: line 3 sets the wrong value, line 6 is where it fails.
Case query_case() {
  Case q;
  q.id = "q1";
  q.project = "demo";
  q.test_id = "tests/test_shapes.py::test_area";
  q.language = "python";
  q.failure_time = "2026-01-01T00:00:00Z";
  q.files.push_back({"tests/test_shapes.py",
                     "from shapes import area\n\ndef test_area():\n    shape = 'square'\n    w, h = 2, 3\n"
                     "    result = area(shape, w, h)\n    assert result == 6\n"});
  q.error_message = "tests/test_shapes.py:7: in test_area\n    assert result == 6\nE   assert 4 == 6\n";
  return q;
}

TEST(llm_client, speaks_the_chat_completions_protocol) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 4", "stop", true, 321, 7), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  o.api_key = "sk-test-key";
  o.seed = 42;
  o.max_tokens = 64;
  LlmClient client(o);
  auto a = client.complete(request("Find the fault."));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->content, "line 4");
  EXPECT_EQ(a->prompt_tokens, 321u);
  EXPECT_EQ(a->completion_tokens, 7u);
  EXPECT_TRUE(a->usage_reported);
  EXPECT_EQ(a->attempts, 1);
  const auto body = nlohmann::json::parse(server.bodies().at(0));
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "Find the fault.");
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["seed"], 42);
  EXPECT_FALSE(body.contains("response_format"));
  EXPECT_EQ(server.authorizations().at(0), "Bearer sk-test-key");
}

TEST(llm_client, usage_missing_is_estimated) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 4", "stop", false), "application/json");
  });
  auto a = LlmClient(fast_options(server.url())).complete(request("one two three four"));
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->usage_reported);
  EXPECT_EQ(a->prompt_tokens, estimate_tokens("one two three four"));
}

TEST(llm_client, connection_refused_is_retried_then_an_error) {
  int port;
  {
    ChatServer gone([](const httplib::Request&, httplib::Response&, int) {});
    port = gone.port();
  }
  auto a = LlmClient(fast_options("http://127.0.0.1:" + std::to_string(port) + "/v1")).complete(request("x"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("after 3 attempts"), std::string::npos) << a.error().message;
}

TEST(llm_client, a_host_name_that_does_not_resolve_is_not_retried) {
  auto a = LlmClient(fast_options("http://no-such-host.invalid/v1")).complete(request("x"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("no-such-host.invalid"), std::string::npos);
  EXPECT_EQ(a.error().message.find("attempts"), std::string::npos) << a.error().message;
}

TEST(llm_client, a_timeout_is_retried_and_then_reported) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    res.set_content(ChatServer::completion("line 1"), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  o.http.timeout_ms = 150;
  o.retry.max_retries = 1;
  auto a = LlmClient(o).complete(request("x"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("imed out"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("after 2 attempts"), std::string::npos) << a.error().message;
}

TEST(llm_client, honours_retry_after_on_429) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int call) {
    if (call == 0) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content(R"({"error": {"message": "rate limited"}})", "application/json");
      return;
    }
    res.set_content(ChatServer::completion("line 2"), "application/json");
  });
  auto a = LlmClient(fast_options(server.url())).complete(request("x"));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->attempts, 2);
  EXPECT_GE(a->seconds, 0.95);  // waited as told, not the 10 ms backoff
  ASSERT_FALSE(a->notes.empty());
  EXPECT_NE(a->notes[0].find("Retry-After 1"), std::string::npos);
}

TEST(llm_client, a_500_then_success_and_a_400_without_retry) {
  ChatServer flaky([](const httplib::Request&, httplib::Response& res, int call) {
    if (call == 0) {
      res.status = 500;
      res.set_content("internal error", "text/plain");
      return;
    }
    res.set_content(ChatServer::completion("line 2"), "application/json");
  });
  auto a = LlmClient(fast_options(flaky.url())).complete(request("x"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->attempts, 2);

  ChatServer bad([](const httplib::Request&, httplib::Response& res, int) {
    res.status = 400;
    res.set_content(R"({"error": {"message": "model not found"}})", "application/json");
  });
  auto b = LlmClient(fast_options(bad.url())).complete(request("x"));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("HTTP 400"), std::string::npos);
  EXPECT_NE(b.error().message.find("model not found"), std::string::npos);
  EXPECT_EQ(bad.calls(), 1u);
}

TEST(llm_client, html_pages_truncated_json_and_empty_choices_are_clear_errors) {
  ChatServer html([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content("<html><body>502 Bad Gateway</body></html>", "text/html");
  });
  auto a = LlmClient(fast_options(html.url())).complete(request("x"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("an HTML page"), std::string::npos) << a.error().message;

  ChatServer truncated([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 2").substr(0, 60), "application/json");
  });
  auto b = LlmClient(fast_options(truncated.url())).complete(request("x"));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("not valid JSON"), std::string::npos) << b.error().message;

  ChatServer empty([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(R"({"id": "x", "object": "chat.completion", "choices": []})", "application/json");
  });
  auto c = LlmClient(fast_options(empty.url())).complete(request("x"));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("no choices"), std::string::npos);
}

TEST(llm_client, a_5_mb_answer_is_cut_off_with_an_error) {
  ChatServer huge([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion(std::string(5u << 20, 'x')), "application/json");
  });
  auto a = LlmClient(fast_options(huge.url())).complete(request("x"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("response larger than"), std::string::npos) << a.error().message;
  EXPECT_EQ(huge.calls(), 1u);  // asking again would give the same
}

TEST(llm_client, structured_output_falls_back_to_plain_text_when_rejected) {
  ChatServer server([](const httplib::Request& req, httplib::Response& res, int) {
    if (nlohmann::json::parse(req.body).contains("response_format")) {
      res.status = 400;
      res.set_content(R"({"error": {"message": "response_format is not supported"}})", "application/json");
      return;
    }
    res.set_content(ChatServer::completion("line 3"), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  o.structured = true;
  LlmClient client(o);
  const nlohmann::json schema = {{"type", "object"}};
  auto a = client.complete({"x", schema});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(a->structured);
  EXPECT_EQ(server.calls(), 2u);
  auto b = client.complete({"y", schema});  // not offered again
  ASSERT_TRUE(b);
  EXPECT_EQ(server.calls(), 3u);
  EXPECT_FALSE(nlohmann::json::parse(server.bodies()[2]).contains("response_format"));

  ChatServer accepting([](const httplib::Request& req, httplib::Response& res, int) {
    const auto body = nlohmann::json::parse(req.body);
    EXPECT_EQ(body["response_format"]["type"], "json_schema");
    res.set_content(ChatServer::completion(R"({"faulty_lines": [{"line": 3, "code": "x"}]})"), "application/json");
  });
  o.base_url = accepting.url();
  auto c = LlmClient(o).complete({"x", schema});
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->structured);
}

// The three forms servers refuse a prompt for length in: llama.cpp's error type with its numbers, OpenAI's code, vLLM's
// words. Any other 400 is not one.
TEST(llm_client, refusals_for_length_are_read_in_each_servers_form) {
  auto llama = context_overflow(
      400,
      R"({"error":{"code":400,"message":"request (48883 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":48883,"n_ctx":8192}})");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->context_tokens, 8192u);
  EXPECT_EQ(llama->prompt_tokens, 48883u);
  auto openai = context_overflow(
      400,
      R"({"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})");
  ASSERT_TRUE(openai);
  EXPECT_EQ(openai->context_tokens, 8192u);
  EXPECT_EQ(openai->prompt_tokens, 9000u);
  auto vllm = context_overflow(
      400,
      R"({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5112 tokens (4600 in the messages, 512 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","code":400})");
  ASSERT_TRUE(vllm);
  EXPECT_EQ(vllm->context_tokens, 4096u);
  EXPECT_EQ(vllm->prompt_tokens, 4600u);
  // vLLM, prompt and max_tokens together too long: the input tokens, not the 512 of max_tokens in brackets.
  auto vllm_max = context_overflow(
      400,
      R"({"object":"error","message":"'max_tokens' or 'max_completion_tokens' is too large: 512. This model's maximum context length is 4096 tokens and your request has 3700 input tokens (512 > 4096 - 3700).","type":"BadRequestError","code":400})");
  ASSERT_TRUE(vllm_max);
  EXPECT_EQ(vllm_max->context_tokens, 4096u);
  EXPECT_EQ(vllm_max->prompt_tokens, 3700u);
  EXPECT_FALSE(context_overflow(400, R"({"error": {"message": "response_format is not supported"}})"));
  EXPECT_FALSE(context_overflow(500, R"({"error":{"type":"exceed_context_size_error","n_ctx":1}})"));
  EXPECT_FALSE(context_overflow(400, "<html>Bad Request</html>"));
}

// A refusal for length comes back as an answer with `overflow` (the stage cuts and asks again), and is not taken for
// a rejection of response_format: structured answers stay on.
TEST(llm_client, a_refusal_for_length_is_not_a_rejection_of_structured_output) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int call) {
    if (call == 0) {
      res.status = 400;
      res.set_content(
          R"({"error":{"code":400,"message":"too long","type":"exceed_context_size_error","n_prompt_tokens":900,"n_ctx":512}})",
          "application/json");
      return;
    }
    res.set_content(ChatServer::completion(R"({"faulty_lines": [{"line": 3, "code": "x"}]})"), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  o.structured = true;
  LlmClient client(o);
  const nlohmann::json schema = {{"type", "object"}};
  auto a = client.complete({"x", schema});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(a->overflow);
  EXPECT_EQ(a->overflow->context_tokens, 512u);
  EXPECT_EQ(server.calls(), 1u);  // not asked again without response_format
  auto b = client.complete({"y", schema});
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->structured);
  EXPECT_TRUE(nlohmann::json::parse(server.bodies()[1]).contains("response_format"));
}

TEST(tokens, the_ratio_follows_the_models_tokenizer_family) {
  EXPECT_GT(tokens_per_estimate("gpt2-medium"), 1.5);
  EXPECT_GT(tokens_per_estimate("meta-llama/Llama-2-13b-chat-hf"), tokens_per_estimate("Qwen/Qwen2.5-72B-Instruct"));
  EXPECT_GT(tokens_per_estimate("Qwen/Qwen2.5-72B-Instruct"), tokens_per_estimate("gpt-4o-mini"));
  EXPECT_EQ(tokens_per_estimate("meta-llama/Llama-3.1-8B-Instruct"), 1.0);
  EXPECT_EQ(tokens_per_estimate("o3-mini"), tokens_per_estimate("gpt-4o-mini"));
  EXPECT_NE(tokens_per_estimate("foo3-mini"), tokens_per_estimate("gpt-4o-mini"));  // "o3" only at the start
  // A name of no known family: the largest ratio measured, so its prompts are cut a little too much, not refused.
  EXPECT_GE(tokens_per_estimate("my-local-model"), tokens_per_estimate("gpt2"));
}

TEST(llm_client, many_prompts_come_back_in_input_order) {
  ChatServer server([](const httplib::Request& req, httplib::Response& res, int) {
    const std::string prompt = ChatServer::prompt_of(req.body);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (prompt.size() % 3)));
    res.set_content(ChatServer::completion("answer to " + prompt), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  o.concurrency = 6;
  std::vector<ChatRequest> requests;
  for (int i = 0; i < 30; ++i) requests.push_back(request("prompt " + std::to_string(i)));
  size_t last_done = 0;
  auto results = LlmClient(o).complete_all(requests, [&](size_t done, size_t total) {
    EXPECT_EQ(total, 30u);
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
  });
  ASSERT_EQ(results.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(results[static_cast<size_t>(i)]);
    EXPECT_EQ(results[static_cast<size_t>(i)]->content, "answer to prompt " + std::to_string(i));
  }
  EXPECT_EQ(last_done, 30u);
}

// --- the stage: prompt → model → ranking ----------------------------------------------------------------------

struct StageRun {
  std::vector<Result<Localization>> results;
};

StageRun run_stage(const std::string& url, std::vector<Case> queries, size_t k = 3, LlmStageOptions stage = {},
                   std::function<void(LlmOptions&)> tweak = {}) {
  LlmOptions o = fast_options(url);
  if (tweak) tweak(o);
  LlmClient client(o);
  Localizer localizer(nullptr, nullptr);
  StructureCache cache;
  if (!stage.redactor) stage.redactor = std::make_shared<const Redactor>(*Redactor::make());
  LlmStage s(localizer, cache, &client, stage);
  LocalizeOptions options;
  options.k = k;
  return {s.run(queries, options)};
}

TEST(llm_stage, the_models_ranking_is_used_and_reported) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion(R"J({"faulty_lines": [{"line": 4, "code": "shape = 'square'"},
        {"line": 7, "code": "assert result == 6"}, {"line": 6, "code": "result = area(shape, w, h)"}]})J"),
                    "application/json");
  });
  auto run = run_stage(server.url(), {query_case()});
  ASSERT_TRUE(run.results[0]);
  const Localization& loc = *run.results[0];
  ASSERT_EQ(loc.ranked.size(), 3u);
  EXPECT_EQ(loc.ranked[0].line, 4);
  EXPECT_EQ(loc.ranked[1].line, 7);
  EXPECT_EQ(loc.ranked[2].line, 6);
  for (const auto& e : loc.ranked) EXPECT_EQ(e.source, "llm");
  ASSERT_TRUE(loc.llm);
  EXPECT_TRUE(loc.llm->used);
  EXPECT_EQ(loc.llm->from_llm, 3u);
  EXPECT_EQ(loc.llm->answer_format, "json");
  EXPECT_NE(loc.ranker.find("llm test-model"), std::string::npos);
  const std::string prompt = ChatServer::prompt_of(server.bodies()[0]);
  EXPECT_NE(prompt.find("4:     shape = 'square'"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("\n2: "), std::string::npos);  // blank line 2 hidden
  EXPECT_NE(prompt.find("range 1 to 7"), std::string::npos);
  EXPECT_NE(prompt.find("exactly 3"), std::string::npos);
}

TEST(llm_stage, hybrid_mode_marks_the_builtin_rankers_top_lines_in_the_prompt) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion(R"J({"faulty_lines": [{"line": 5, "code": "w, h = 2, 3"},
        {"line": 7, "code": "assert result == 6"}, {"line": 6, "code": "result = area(shape, w, h)"}]})J"),
                    "application/json");
  });
  LlmStageOptions stage;
  stage.mode = Mode::hybrid;
  stage.keep_prompt = true;
  auto run = run_stage(server.url(), {query_case()}, 3, stage);
  ASSERT_TRUE(run.results[0]);
  const Localization& loc = *run.results[0];
  ASSERT_TRUE(loc.llm && loc.llm->used);
  const std::string prompt = ChatServer::prompt_of(server.bodies()[0]);
  // The built-in ranking of the same failure (no knowledge base): its top 3 lines carry the marker with their ranks.
  Localizer plain(nullptr, nullptr);
  LocalizeOptions o;
  o.k = 3;
  auto builtin = plain.localize(query_case(), o);
  ASSERT_TRUE(builtin);
  for (size_t i = 0; i < builtin->ranked.size(); ++i) {
    const auto& e = builtin->ranked[i];
    const std::string marked = std::to_string(e.line) + ": ";
    const size_t at = prompt.find("\n" + marked);
    ASSERT_NE(at, std::string::npos) << prompt;
    const std::string line = prompt.substr(at + 1, prompt.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(ranker_marker(i + 1)), std::string::npos) << line;
  }
  size_t markers = 0;
  for (size_t at = prompt.find(kRankerMarkerPrefix); at != std::string::npos;
       at = prompt.find(kRankerMarkerPrefix, at + 1))
    ++markers;
  EXPECT_EQ(markers, 3u + 1u);  // three lines, and the instruction that explains the marker
}

TEST(llm_stage, an_answer_with_only_out_of_range_ids_is_filled_from_the_builtin_ranker) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 40\nline 41\nline 99"), "application/json");
  });
  auto run = run_stage(server.url(), {query_case()});
  ASSERT_TRUE(run.results[0]);
  const Localization& loc = *run.results[0];
  ASSERT_EQ(loc.ranked.size(), 3u);
  for (const auto& e : loc.ranked) EXPECT_EQ(e.source, "filled");
  EXPECT_FALSE(loc.llm->used);
  EXPECT_EQ(loc.llm->out_of_range, 3u);
  EXPECT_EQ(loc.llm->filled, 3u);
  EXPECT_EQ(loc.llm->raw_answer, "line 40\nline 41\nline 99");
}

TEST(llm_stage, a_short_answer_is_topped_up_and_an_answer_cut_at_max_tokens_still_counts) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion(
                        R"({"faulty_lines": [{"line": 4, "code": "shape = 'square'"}, {"line": 6, "co)", "length"),
                    "application/json");
  });
  auto run = run_stage(server.url(), {query_case()});
  ASSERT_TRUE(run.results[0]);
  const Localization& loc = *run.results[0];
  ASSERT_EQ(loc.ranked.size(), 3u);
  EXPECT_EQ(loc.ranked[0].line, 4);
  EXPECT_EQ(loc.ranked[0].source, "llm");
  EXPECT_EQ(loc.ranked[1].line, 6);
  EXPECT_EQ(loc.ranked[2].source, "filled");
  bool said = false;
  for (const auto& n : loc.notes) said = said || n.find("cut off at max_tokens") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(llm_stage, an_unreachable_server_falls_back_to_the_builtin_ranker_with_a_warning) {
  int port;
  {
    ChatServer gone([](const httplib::Request&, httplib::Response&, int) {});
    port = gone.port();
  }
  auto run = run_stage("http://127.0.0.1:" + std::to_string(port) + "/v1", {query_case()});
  ASSERT_TRUE(run.results[0]);
  const Localization& loc = *run.results[0];
  EXPECT_EQ(loc.ranked.size(), 3u);
  EXPECT_FALSE(loc.llm->used);
  EXPECT_NE(loc.llm->error.find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(loc.ranked[0].source, "builtin");
  bool warned = false;
  for (const auto& n : loc.notes) warned = warned || n.find("built-in ranker") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(llm_stage, planted_secrets_never_reach_the_server_and_line_numbers_hold) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 9"), "application/json");
  });
  Case q = query_case();
  q.files[0].content =
      "import os\n"
      "API_KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123'\n"
      "KEY = '''-----BEGIN OPENSSH PRIVATE KEY-----\n"
      "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
      "-----END OPENSSH PRIVATE KEY-----'''\n"
      "DB = 'postgresql://svc:Pa55w0rd!@db.internal/app'\n"
      "def test_area():\n"
      "    password = \"correct-horse-battery\"\n"
      "    assert login('AKIAIOSFODNN7EXAMPLE', password)\n";
  q.test_id = "tests/test_shapes.py::test_area";
  q.error_message =
      "tests/test_shapes.py:9: in test_area\n    assert login('AKIAIOSFODNN7EXAMPLE', password)\n"
      "E   requests.exceptions.HTTPError: 401 for Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345\n";
  auto run = run_stage(server.url(), {q});
  ASSERT_TRUE(run.results[0]);
  const std::string body = server.bodies().at(0);
  for (const char* secret : {"sk-proj-abcdefghij", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "Pa55w0rd!",
                             "correct-horse-battery", "AKIAIOSFODNN7EXAMPLE", "ghp_0123456789abcdefghij"})
    EXPECT_EQ(body.find(secret), std::string::npos) << secret;
  const std::string prompt = ChatServer::prompt_of(body);
  EXPECT_NE(prompt.find("9:     assert login('[REDACTED:aws-access-key]', password)"), std::string::npos) << prompt;
  size_t total = 0;
  for (const auto& [rule, n] : run.results[0]->llm->redactions) total += n;
  EXPECT_GE(total, 7u);
  EXPECT_EQ(run.results[0]->ranked[0].line, 9);  // the answer maps to the file's own line numbers
}

TEST(llm_stage, a_test_longer_than_the_context_is_cut_around_the_failure) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 1004"), "application/json");
  });
  Case q = query_case();
  std::string content = "import pytest\n";
  for (int i = 2; i <= 1000; ++i)
    content += "def helper_" + std::to_string(i) + "(): return compute(" + std::to_string(i) + ", 'padding text')\n";
  content += "def test_area():\n    shape = 'square'\n    result = area(shape, 2, 3)\n    assert result == 6\n";
  q.files[0].content = content;
  q.error_message = "tests/test_shapes.py:1004: in test_area\n    assert result == 6\nE   assert 4 == 6\n";
  auto run = run_stage(server.url(), {q}, 3, {}, [](LlmOptions& o) {
    o.context_tokens = 2000;
    o.max_tokens = 200;
  });
  ASSERT_TRUE(run.results[0]) << run.results[0].error().message;
  const std::string prompt = ChatServer::prompt_of(server.bodies().at(0));
  EXPECT_LE(estimate_tokens(prompt) + 200, 2000u);
  EXPECT_NE(prompt.find("1004:     assert result == 6"), std::string::npos);
  EXPECT_NE(prompt.find("1002:     shape = 'square'"), std::string::npos);
  EXPECT_NE(prompt.find("lines shown"), std::string::npos);
  EXPECT_TRUE(run.results[0]->llm->truncated);
  EXPECT_EQ(run.results[0]->ranked[0].line, 1004);
}

// A test longer than the server takes, as a llama.cpp server answers: it counts twice the estimate's tokens and
// refuses what does not fit its 1,500 with HTTP 400 and its numbers. Without the probe, the refusal is read, the
// prompt cut to those numbers and asked once more; with it, the server's window and count are used first and
// nothing is refused.
Case long_query() {
  Case q = query_case();
  std::string content = "import pytest\n";
  for (int i = 2; i <= 400; ++i)
    content += "def helper_" + std::to_string(i) + "(): return compute(" + std::to_string(i) + ", 'padding')\n";
  content += "def test_area():\n    shape = 'square'\n    result = area(shape, 2, 3)\n    assert result == 6\n";
  q.files[0].content = content;
  q.error_message = "tests/test_shapes.py:404: in test_area\n    assert result == 6\nE   assert 4 == 6\n";
  return q;
}

size_t served_tokens(const std::string& text) { return 2 * estimate_tokens(text) + 20; }

void llama_routes(httplib::Server& s) {
  s.Get("/props", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"default_generation_settings": {"n_ctx": 1500}, "total_slots": 1})", "application/json");
  });
  s.Post("/tokenize", [](const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body);
    res.set_content(nlohmann::json({{"tokens", std::vector<int>(served_tokens(body["content"]), 7)}}).dump(),
                    "application/json");
  });
}

ChatServer::Handler refusing_past(size_t window) {
  return [window](const httplib::Request& req, httplib::Response& res, int) {
    const size_t n = served_tokens(ChatServer::prompt_of(req.body));
    if (n + 200 > window) {
      res.status = 400;
      res.set_content(nlohmann::json({{"error",
                                       {{"code", 400},
                                        {"message", "exceeds the available context size"},
                                        {"type", "exceed_context_size_error"},
                                        {"n_prompt_tokens", n},
                                        {"n_ctx", window}}}})
                          .dump(),
                      "application/json");
      return;
    }
    res.set_content(ChatServer::completion(R"({"faulty_lines": [{"line": 404, "code": "x"}]})"), "application/json");
  };
}

TEST(llm_stage, a_prompt_refused_as_too_long_is_cut_to_the_servers_numbers_and_asked_once_more) {
  ChatServer server(refusing_past(1500), 8, llama_routes);
  auto run = run_stage(server.url(), {long_query()}, 3, {}, [](LlmOptions& o) {
    o.context_tokens = 8000;
    o.max_tokens = 200;
    o.structured = true;
    o.probe = false;
  });
  ASSERT_TRUE(run.results[0]) << run.results[0].error().message;
  const LlmReport& r = *run.results[0]->llm;
  EXPECT_TRUE(r.used) << r.error;
  EXPECT_TRUE(r.structured);
  EXPECT_EQ(server.calls(), 2u);
  EXPECT_EQ(r.context_tokens, 1500u);
  EXPECT_EQ(r.context_source, "the server's refusal of a longer prompt");
  EXPECT_EQ(run.results[0]->ranked[0].line, 404);
  bool said = false;
  for (const auto& n : run.results[0]->notes)
    said = said || n.find("refused the prompt as too long") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(llm_stage, the_servers_own_window_and_token_count_are_used_before_sending) {
  ChatServer server(refusing_past(1500), 8, llama_routes);
  auto run = run_stage(server.url(), {long_query(), long_query()}, 3, {}, [](LlmOptions& o) {
    o.context_tokens = 8000;
    o.max_tokens = 200;
  });
  for (const auto& res : run.results) {
    ASSERT_TRUE(res) << res.error().message;
    const LlmReport& r = *res->llm;
    EXPECT_TRUE(r.used) << r.error;
    EXPECT_TRUE(r.counted);
    EXPECT_TRUE(r.truncated);
    EXPECT_EQ(r.context_tokens, 1500u);
    EXPECT_NE(r.context_source.find("/props"), std::string::npos);
    EXPECT_GE(r.token_scale, 1.9);  // learnt from the count: the server makes twice the estimate
  }
  EXPECT_EQ(server.calls(), 2u);  // one request a failure, none refused
}

TEST(llm_stage, a_context_too_small_for_the_template_is_an_error_not_a_doomed_request) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 1"), "application/json");
  });
  auto run = run_stage(server.url(), {query_case()}, 3, {}, [](LlmOptions& o) {
    o.context_tokens = 300;
    o.max_tokens = 200;
  });
  ASSERT_FALSE(run.results[0]);
  EXPECT_NE(run.results[0].error().message.find("context window"), std::string::npos);
  EXPECT_EQ(server.calls(), 0u);
}

TEST(llm_stage, unit_levels_map_the_models_lines_to_units) {
  ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(ChatServer::completion("line 4\nline 5\nline 1"), "application/json");
  });
  LlmOptions o = fast_options(server.url());
  LlmClient client(o);
  Localizer localizer(nullptr, nullptr);
  StructureCache cache;
  LlmStage s(localizer, cache, &client, {});
  LocalizeOptions options;
  options.k = 2;
  options.level = Level::function;
  auto r = s.run({query_case()}, options);
  ASSERT_TRUE(r[0]);
  ASSERT_EQ(r[0]->ranked.size(), 2u);
  EXPECT_EQ(r[0]->ranked[0].line, 3);  // lines 4 and 5 are both in test_area (3-7)
  EXPECT_EQ(r[0]->ranked[0].end_line, 7);
  EXPECT_EQ(r[0]->ranked[0].source, "llm");
  EXPECT_EQ(r[0]->ranked[1].line, 1);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
