// The planted-secret suite (issue 13, part 5): one secret of every built-in redaction rule and one of a user rule,
// planted in test code, error messages and `meta`, run through every place text leaves the machine: the LLM's prompts,
// the embeddings server's requests, SARIF, GitHub annotations, the evaluation's and the audit's HTML reports, and
// `spark export --redact`. Each channel runs twice with the real binary: with redaction off it must show planted
// secrets (so the check can see a leak), and with redaction on (the default) none. SARIF is the exception: it holds
// locations, ranks and reasons, no code or message text, so it shows none either way (and the test says so).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_server.h"
#include "local_server.h"
#include "formats/redact.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

// The secrets, by the rule that must catch each (each string is the part that must never be seen).
const std::vector<std::pair<std::string, std::string>>& planted() {
  static const std::vector<std::pair<std::string, std::string>> p = {
      {"private-key", "MIIEowIBAAKCAQEAsparkPlantedKeyBody0001"},
      {"aws-access-key", "AKIAQSPARKPLANTED001"},
      {"github-token", "ghp_sparkPlanted0123456789abcdefghijABCD"},
      {"gitlab-token", "glpat-sparkPlanted0123456789"},
      {"slack-token", "xoxb-4242424242-sparkPlantedSlack"},
      {"google-api-key", "AIzaSparkPlanted0123456789abcdefghijklm"},
      {"openai-key", "sk-proj-sparkPlantedOpenAi0123456789"},
      {"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzcGFya3BsYW50ZWQifQ.c3BhcmtwbGFudGVkc2lnbmF0dXJl"},
      {"bearer-token", "sparkPlantedBearer0123456789"},
      {"basic-auth-header", "c3BhcmtQbGFudGVkOmJhc2ljMDE="},
      {"connection-string-password", "sparkPlantedPgPass01"},
      {"secret-assignment-quoted", "sparkPlantedQuoted01"},
      {"secret-assignment", "sparkPlantedUnquoted01"},
      {"employee-id", "EMP-904217"},
  };
  return p;
}

// A test file with every secret on lines of the failing test, the last lines the faulty ones.
std::string test_file(int variant) {
  const auto& s = planted();
  const std::string v = std::to_string(variant);
  // How each secret after the private key is written: the text before it and after it on its line.
  static const std::vector<std::pair<std::string, std::string>> around = {
      {"aws = \"", "\""},    {"gh = \"", "\""},     {"gl = \"", "\""},  {"slack = \"", "\""},
      {"google = \"", "\""}, {"openai = \"", "\""}, {"jwt = \"", "\""}, {"headers = {\"X\": \"Bearer ", "\"}"},
      {"raw = \"Authorization: Basic ", "\""},      {"url = \"postgresql://app:", "@db.internal/app\""},
      {"password = \"", "\""}, {"env = \"DB_PASSWORD=", "\""},         {"badge = \"", "\""}};
  std::string out = "import pytest\n\nKEY = '''-----BEGIN RSA PRIVATE KEY-----\n" + s[0].second +
                    "\n-----END RSA PRIVATE KEY-----'''\n\n\ndef test_login_" + v + "(client):\n";
  for (size_t i = 0; i < around.size(); ++i) out += "    " + around[i].first + s[i + 1].second + around[i].second + "\n";
  return out + "    assert client.login(url, password) == " + v + "\n";
}

// The error message: secrets a traceback shows (locals, a connection string, a header).
std::string error_message(int variant) {
  const auto& s = planted();
  return "tests/test_login.py:22: in test_login_" + std::to_string(variant) +
         "\n    assert client.login(url, password) == " + std::to_string(variant) +
         "\nE   AssertionError: login refused for postgresql://app:" + s[10].second +
         "@db.internal/app\nE     Authorization: Basic " + s[9].second + "\nE     token " + s[8].second +
         "\nE     employee " + s[13].second + "\n";
}

json secret_case(const std::string& id, int variant) {
  json c = testing::sample_case(id, test_file(variant), 22, error_message(variant));
  c["test_id"] = "tests/test_login.py::test_login_" + std::to_string(variant);
  c["files"][0]["path"] = "tests/test_login.py";
  c["faulty_lines"] = json::array({{{"path", "tests/test_login.py"}, {"line", 21}},
                                   {{"path", "tests/test_login.py"}, {"line", 22}}});
  c["meta"] = {{"note", "fixed by rotating " + planted()[2].second}, {"nested", {{"key", planted()[1].second}}}};
  return c;
}

// Which planted secrets `text` shows.
std::set<std::string> shown(const std::string& text) {
  std::set<std::string> out;
  for (const auto& [rule, secret] : planted())
    if (text.find(secret) != std::string::npos) out.insert(rule);
  return out;
}

const char* kUserRules = "[redact]\npatterns = [{ name = \"employee-id\", pattern = \"EMP-[0-9]{6}\" }]\n";

// One channel's figures: planted secrets seen with redaction off, and with it on.
struct Channel {
  explicit Channel(std::string n, bool code = true) : name(std::move(n)), carries_code(code) {}
  std::string name;
  bool carries_code;  // false: the format holds no code or message text at all (then "off" must be empty too)
  std::set<std::string> off, on;
};
void report(const Channel& c) {
  std::printf("[secrets] %-28s seen without redaction: %2zu of %zu, leaked with redaction: %zu\n", c.name.c_str(),
              c.off.size(), planted().size(), c.on.size());
  if (c.carries_code) {
    EXPECT_FALSE(c.off.empty()) << c.name << ": without redaction the channel shows no planted secret, so it cannot see a leak";
  } else {
    EXPECT_TRUE(c.off.empty()) << c.name << " was thought to carry no code text";
  }
  EXPECT_TRUE(c.on.empty()) << c.name << " leaked: " << [&] {
    std::string s;
    for (const auto& r : c.on) s += r + " ";
    return s;
  }();
}

TEST(secrets, every_planted_secret_is_caught_by_its_rule) {
  auto r = Redactor::make({{"employee-id", "EMP-[0-9]{6}"}});
  ASSERT_TRUE(r);
  for (int v : {1, 2}) {
    for (std::string text : {test_file(v), error_message(v)}) {
      std::map<std::string, size_t> counts;
      r->redact(text, counts);
      EXPECT_TRUE(shown(text).empty()) << text;
    }
  }
  std::string all = test_file(1) + error_message(1);
  std::map<std::string, size_t> counts;
  r->redact(all, counts);
  for (const auto& [rule, secret] : planted()) EXPECT_GT(counts[rule], 0u) << rule;
}

// A workspace: a knowledge base of labelled cases that hold the secrets, and a failing test that holds them too.
struct Workspace {
  TempDir dir;
  Workspace() {
    std::string corpus;
    for (int v = 1; v <= 6; ++v) corpus += secret_case("case-" + std::to_string(v), v).dump() + "\n";
    write_file(dir / "corpus.jsonl", corpus);
    write_file(dir / "tests" / "test_login.py", test_file(7));
    write_file(dir / "failure.txt", error_message(7));
    write_file(dir / "on.toml", kUserRules);
    write_file(dir / "off.toml", std::string(kUserRules) + "enabled = false\n");
  }
};

TEST(secrets, none_reaches_the_llm_or_the_embeddings_server_sarif_annotations_or_export) {
  Workspace w;
  std::mutex mu;
  std::vector<std::string> embed_bodies;
  testing::LocalServer embedder([&](httplib::Server& s) {
    s.Post("/v1/embeddings", [&](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        embed_bodies.push_back(req.body);
      }
      const auto body = json::parse(req.body);
      json data = json::array();
      size_t i = 0;
      for (const auto& input : body.at("input")) {
        const std::string t = input.get<std::string>();
        data.push_back({{"object", "embedding"}, {"index", i++},
                        {"embedding", {1.0 + static_cast<double>(t.size() % 7), 1.0, static_cast<double>(t.size() % 5), 0.5}}});
      }
      res.set_content(json({{"object", "list"}, {"data", data}, {"model", body.at("model")}}).dump(), "application/json");
    });
  });
  testing::ChatServer llm([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(testing::ChatServer::completion(R"({"faulty_lines": [{"line": 21}, {"line": 22}]})"), "application/json");
  });
  const auto all_bodies = [&] {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& b : embed_bodies) s += json::parse(b).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    embed_bodies.clear();
    return s;
  };
  // JSON escapes nothing in these secrets, so a body's text is searched as it is.
  const auto llm_bodies = [&](size_t from) {
    std::string s;
    const auto b = llm.bodies();
    for (size_t i = from; i < b.size(); ++i) s += testing::ChatServer::prompt_of(b[i]) + "\n";
    return s;
  };
  const std::vector<std::string> embed_flags = {"--embedder", "openai"};
  const auto env_run = [&](const std::string& config, std::vector<std::string> args) {
    std::vector<std::string> full = {"--config", config};
    full.insert(full.end(), args.begin(), args.end());
    return run_spark(full, w.dir.path());
  };
  ::setenv("SPARK_EMBED_BASE_URL", embedder.url().c_str(), 1);
  ::setenv("SPARK_EMBED_MODEL", "bge-m3", 1);

  Channel prompts{"LLM prompts"}, embeddings{"embedding requests"}, sarif{"SARIF", false}, github{"GitHub annotations"},
      exported{"export --redact"};
  ASSERT_EQ(env_run("on.toml", {"import", "corpus.jsonl"}).exit_code, 0);
  for (const bool on : {false, true}) {
    const std::string config = on ? "on.toml" : "off.toml";
    auto idx = env_run(config, {"index", "--rebuild", "--embedder", "openai"});
    ASSERT_EQ(idx.exit_code, 0) << idx.err;
    const size_t before = llm.calls();
    auto loc = env_run(config, {"localize", "--test", "tests/test_login.py", "--test-id", "tests/test_login.py::test_login_7", "--error", "failure.txt", "-k",
                                "30", "--llm-url", llm.url(), "--model", "m", "--format", "json"});
    ASSERT_EQ(loc.exit_code, 0) << loc.err;
    ASSERT_GT(llm.calls(), before) << loc.err;
    (on ? prompts.on : prompts.off) = shown(llm_bodies(before));
    (on ? embeddings.on : embeddings.off) = shown(all_bodies());
    auto sa = env_run(config, {"localize", "--test", "tests/test_login.py", "--test-id", "tests/test_login.py::test_login_7", "--error", "failure.txt", "-k",
                               "30", "--format", "sarif"});
    ASSERT_EQ(sa.exit_code, 0) << sa.err;
    ASSERT_NE(sa.out.find("\"results\""), std::string::npos);
    (on ? sarif.on : sarif.off) = shown(sa.out);
    auto gh = env_run(config, {"localize", "--test", "tests/test_login.py", "--test-id", "tests/test_login.py::test_login_7", "--error", "failure.txt", "-k",
                               "30", "--format", "github"});
    ASSERT_EQ(gh.exit_code, 0) << gh.err;
    (on ? github.on : github.off) = shown(gh.out);
    all_bodies();
    if (on) {
      EXPECT_NE(sa.err.find("secret(s) from the SARIF report"), std::string::npos) << sa.err;
    }
    // export: lossless by default, redacted when asked, with the user's rules, whatever redact.enabled says.
    auto ex = env_run("off.toml", on ? std::vector<std::string>{"export", "--redact"} : std::vector<std::string>{"export"});
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    (on ? exported.on : exported.off) = shown(ex.out);
    if (on) {
      EXPECT_NE(ex.err.find("redacted "), std::string::npos) << ex.err;
      // Lines are kept: every exported case still parses, with its faulty lines on lines that exist.
      size_t n = 0;
      for (size_t at = 0, end; (end = ex.out.find('\n', at)) != std::string::npos; at = end + 1, ++n) {
        const auto c = json::parse(ex.out.substr(at, end - at));
        const std::string content = c["files"][0]["content"];
        const std::string original = test_file(1);
        EXPECT_EQ(std::count(content.begin(), content.end(), '\n'), std::count(original.begin(), original.end(), '\n'));
        EXPECT_NE(c["meta"]["note"].get<std::string>().find("[REDACTED:github-token]"), std::string::npos);
      }
      EXPECT_EQ(n, 6u);
    }
  }
  ::unsetenv("SPARK_EMBED_BASE_URL");
  ::unsetenv("SPARK_EMBED_MODEL");
  for (const auto* c : {&prompts, &embeddings, &sarif, &github, &exported}) report(*c);
}

TEST(secrets, none_reaches_the_evaluation_report) {
  Workspace w;
  Channel html{"eval HTML report"};
  for (const bool on : {false, true}) {
    auto r = run_spark({"--config", on ? "on.toml" : "off.toml", "eval", "corpus.jsonl", "--mode", "builtin", "-k", "10",
                        "--html", "report.html"},
                       w.dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    (on ? html.on : html.off) = shown(testing::slurp(w.dir / "report.html"));
  }
  report(html);
}

TEST(secrets, none_reaches_the_audit_report) {
  // A repository whose test held the secrets and whose fix changed its last lines; outcomes with a secret message.
  TempDir dir;
  testing::git(dir, "init");
  write_file(dir / "tests" / "test_login.py", test_file(1));
  testing::git(dir, "add -A");
  testing::git(dir, "commit -m base");
  const std::string failing = testing::head_sha(dir);
  std::string fixed = test_file(1);
  fixed.replace(fixed.find("== 1\n"), 5, "== 200\n");
  write_file(dir / "tests" / "test_login.py", fixed);
  testing::git(dir, "commit -am fix", "2026-01-02T00:00:00Z");
  const json fail = {{"commit", failing}, {"test_id", "tests/test_login.py::test_login_1"}, {"outcome", "failed"},
                     {"message", error_message(1)}};
  const json pass = {{"commit", testing::head_sha(dir)}, {"test_id", "tests/test_login.py::test_login_1"}, {"outcome", "passed"}};
  write_file(dir / "outcomes.jsonl", fail.dump() + "\n" + pass.dump() + "\n");
  write_file(dir / "on.toml", kUserRules);
  write_file(dir / "off.toml", std::string(kUserRules) + "enabled = false\n");
  // Inside the work tree, a file turns redaction off only once its owner trusted it (docs/SECURITY.md).
  ASSERT_EQ(run_spark({"trust", "off.toml"}, dir.path()).exit_code, 0);
  auto mine = run_spark({"--config", "on.toml", "mine", "--outcomes", "outcomes.jsonl"}, dir.path());
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  Channel html{"audit HTML report"};
  for (const bool on : {false, true}) {
    auto r = run_spark({"--config", on ? "on.toml" : "off.toml", "audit", "--all", "--html", "audit.html"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    (on ? html.on : html.off) = shown(testing::slurp(dir / "audit.html"));
  }
  report(html);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
