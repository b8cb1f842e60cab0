// What a repository's own .spark.toml (a stranger's pull request) may make spark do, tried as an attacker with only
// a pull request would: a CI job holding an API key and a trusted LLM server, a fork's configuration file pointing
// elsewhere. Nothing may leave for the attacker's address, nothing may be written outside the repository, no command
// may run; the file's owner can trust it (`spark trust`), and a changed file is untrusted again (docs/SECURITY.md).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_server.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::run_spark;
using testing::sample_case;
using testing::TempDir;
using testing::write_file;

const std::string kTest =
    "def add(a, b):\n    return a + b\n\n\ndef test_add():\n    expected = 5\n    assert add(2, 2) == expected\n";
const std::string kError = "tests/test_x.py:7: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5\n";

// Sets an environment variable for one test's life (each test runs in a process of its own).
struct Env {
  std::string name;
  Env(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~Env() { ::unsetenv(name.c_str()); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
};

// A git work tree with a knowledge base of labelled cases, a failing test, and the user's own configuration folder
// (trust records and config.toml) outside it.
struct Project {
  TempDir home;
  TempDir dir;
  Env xdg{"XDG_CONFIG_HOME", (home / "config").string()};
  Project() {
    testing::git(dir, "init -q");
    std::string jsonl;
    for (int i = 0; i < 4; ++i) {
      json c = sample_case("c" + std::to_string(i), kTest, 6, kError);
      c["test_id"] = "tests/test_x.py::test_add";
      jsonl += c.dump() + "\n";
    }
    write_file(dir / "cases.jsonl", jsonl);
    EXPECT_EQ(run_spark({"import", "cases.jsonl"}, dir.path()).exit_code, 0);
    write_file(dir / "tests" / "test_x.py", kTest);
    write_file(dir / "failure.txt", kError);
  }
  testing::RunResult localize(const std::vector<std::string>& more = {}) const {
    std::vector<std::string> args = {"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format",
                                     "json", "--model", "m"};
    args.insert(args.end(), more.begin(), more.end());
    return run_spark(args, dir.path());
  }
};

std::string answer() {
  return testing::ChatServer::completion(R"J({"faulty_lines": [{"line": 6, "code": "expected = 5"}]})J");
}

TEST(trust, a_pull_requests_spark_toml_sends_no_key_and_no_code_to_its_address) {
  Project p;
  testing::ChatServer attacker([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(answer(), "application/json");
  });
  testing::ChatServer trusted([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(answer(), "application/json");
  });
  const std::string outside = (p.home / "written-outside").string();
  write_file(p.dir / ".spark.toml", "kb = \"" + outside + "\"\n[llm]\nbase_url = \"" + attacker.url() +
                                        "\"\ndeadline = 0\n[redact]\nenabled = false\n[mine]\nsigma = 50\n"
                                        "[record]\ntest_command = \"touch pwned {junit}\"\n[localize]\nk = 2\n");
  Env key("OPENAI_API_KEY", "sk-ci-secret-0123456789");
  // No LLM configured by the job: the file's URL is not used, the built-in ranker answers.
  auto alone = p.localize();
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(attacker.calls(), 0u);
  EXPECT_FALSE(std::filesystem::exists(outside));
  // One warning line names every refused setting and how to trust the file.
  const auto first = alone.err.find("spark: warning: not used: ");
  ASSERT_NE(first, std::string::npos) << alone.err;
  EXPECT_EQ(alone.err.find("spark: warning: not used: ", first + 1), std::string::npos) << alone.err;
  for (const char* name : {"kb (", "llm.base_url (", "llm.deadline (", "redact.enabled (", "mine.sigma (",
                           "record.test_command ("})
    EXPECT_NE(alone.err.find(name), std::string::npos) << name << "\n" << alone.err;
  EXPECT_NE(alone.err.find("spark trust"), std::string::npos) << alone.err;
  EXPECT_EQ(json::parse(alone.out)["ranked"].size(), 2u);  // localize.k is the repository's to set

  // The job's own server, from the environment: the key goes there, and only there.
  Env url("SPARK_LLM_BASE_URL", trusted.url());
  auto r = p.localize();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(attacker.calls(), 0u);
  ASSERT_EQ(trusted.calls(), 1u);
  EXPECT_EQ(trusted.authorizations()[0], "Bearer sk-ci-secret-0123456789");
  EXPECT_EQ(json::parse(r.out)["ranked"][0]["source"], "llm");

  // `spark config` says where each value came from and why each refused one was refused; it is valid TOML.
  auto config = run_spark({"config"}, p.dir.path());
  ASSERT_EQ(config.exit_code, 0) << config.err;
  EXPECT_NE(config.out.find("# llm.base_url = \"" + attacker.url() + "\"    # from " +
                            (p.dir / ".spark.toml").string() + ":3: it chooses where"),
            std::string::npos)
      << config.out;
  EXPECT_NE(config.out.find("mine.sigma = 50    # from"), std::string::npos) << config.out;
  EXPECT_NE(config.out.find("a repository may lower it, not raise it above 3"), std::string::npos) << config.out;
  EXPECT_NE(config.out.find("base_url = \"" + trusted.url() + "\"    # from env SPARK_LLM_BASE_URL"),
            std::string::npos)
      << config.out;
  EXPECT_EQ(config.out.find("sk-ci-secret"), std::string::npos);
  write_file(p.home / "again.toml", config.out);
  auto reread = run_spark({"--config", (p.home / "again.toml").string(), "config"}, p.dir.path());
  EXPECT_EQ(reread.exit_code, 0) << reread.err << "\n" << config.out;
}

TEST(trust, a_limit_may_be_lowered_and_a_safety_switch_turned_on_by_the_repository_not_the_reverse) {
  Project p;
  write_file(p.dir / ".spark.toml",
             "[llm]\ndeadline = 30\nretries = 9\n[mine]\nsigma = 2\ntest_only_fixes = true\n[redact]\nenabled = true\n");
  auto r = run_spark({"config"}, p.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("deadline = 30    # from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sigma = 2    # from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test_only_fixes = true    # from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# llm.retries = 9    # from"), std::string::npos) << r.out;  // above the default 4
  EXPECT_NE(r.err.find("not used: llm.retries ("), std::string::npos) << r.err;
  // A store inside the repository is the repository's to name; one through a link out of it is not.
  write_file(p.dir / ".spark.toml", "kb = \"ci/store\"\n");
  auto inside = run_spark({"config"}, p.dir.path());
  EXPECT_NE(inside.out.find("kb = \"" + (p.dir / "ci" / "store").string() + "\""), std::string::npos) << inside.out;
  std::filesystem::create_directory_symlink(p.home.path(), p.dir / "out");
  write_file(p.dir / ".spark.toml", "kb = \"out/store\"\n[llm]\ntemplate = \"../../../etc/passwd\"\n");
  auto link = run_spark({"config"}, p.dir.path());
  EXPECT_NE(link.err.find("not used: kb ("), std::string::npos) << link.err;
  EXPECT_NE(link.err.find("llm.template ("), std::string::npos) << link.err;
  write_file(p.dir / ".spark.toml", "kb = \"postgresql://ci@their-host/spark\"\n");
  EXPECT_NE(run_spark({"config"}, p.dir.path()).err.find("not used: kb ("), std::string::npos);
}

TEST(trust, a_trusted_file_is_used_whole_until_it_changes) {
  Project p;
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(answer(), "application/json");
  });
  const std::string file = "[llm]\nbase_url = \"" + server.url() + "\"\napi_key = \"sk-file-key\"\n";
  write_file(p.dir / ".spark.toml", file);
  auto before = p.localize();
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(server.calls(), 0u);
  auto trust = run_spark({"trust"}, p.dir.path());
  ASSERT_EQ(trust.exit_code, 0) << trust.err;
  EXPECT_NE(trust.err.find("llm.base_url = " + server.url()), std::string::npos) << trust.err;
  EXPECT_EQ(trust.err.find("sk-file-key"), std::string::npos) << trust.err;
  // Recorded outside the repository.
  EXPECT_TRUE(std::filesystem::is_directory(p.home / "config" / "spark" / "trusted"));
  auto after = p.localize();
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.err.find("warning: not used"), std::string::npos) << after.err;
  ASSERT_EQ(server.calls(), 1u);
  EXPECT_EQ(server.authorizations()[0], "Bearer sk-file-key");
  // One byte more (another branch, a pull request's edit): untrusted again.
  write_file(p.dir / ".spark.toml", file + "\n");
  auto changed = p.localize();
  EXPECT_NE(changed.err.find("not used: llm.base_url ("), std::string::npos) << changed.err;
  EXPECT_EQ(server.calls(), 1u);
  auto list = run_spark({"trust", "--list"}, p.dir.path());
  EXPECT_NE(list.out.find("changed since"), std::string::npos) << list.out;
  ASSERT_EQ(run_spark({"trust"}, p.dir.path()).exit_code, 0);
  EXPECT_EQ(p.localize().err.find("not used"), std::string::npos);
  ASSERT_EQ(run_spark({"trust", "--remove"}, p.dir.path()).exit_code, 0);
  EXPECT_NE(p.localize().err.find("not used: llm.base_url ("), std::string::npos);
}

TEST(trust, a_key_goes_only_to_the_url_set_beside_it) {
  Project p;
  testing::ChatServer server([](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(answer(), "application/json");
  });
  // The user's own file names the server; the key is in the environment, for another server.
  write_file(p.home / "config" / "spark" / "config.toml", "[llm]\nbase_url = \"" + server.url() + "\"\n");
  Env key("OPENAI_API_KEY", "sk-for-openai-only");
  auto r = p.localize();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.calls(), 1u);
  EXPECT_EQ(server.authorizations()[0], "");
  EXPECT_NE(r.err.find("not used: llm.api_key (env OPENAI_API_KEY)"), std::string::npos) << r.err;
  // Beside it in the same file, it is sent.
  write_file(p.home / "config" / "spark" / "config.toml",
             "[llm]\nbase_url = \"" + server.url() + "\"\napi_key = \"sk-user-file\"\n");
  ::unsetenv("OPENAI_API_KEY");
  auto same = p.localize();
  ASSERT_EQ(server.calls(), 2u);
  EXPECT_EQ(server.authorizations()[1], "Bearer sk-user-file");
  EXPECT_EQ(same.err.find("not used"), std::string::npos) << same.err;
}

TEST(trust, a_repository_test_command_does_not_run_from_the_post_commit_hook) {
  Project p;
  write_file(p.dir / ".gitignore", ".spark/\n");
  write_file(p.dir / ".spark.toml", "[record]\ntest_command = \"touch " + (p.home / "ran").string() + " {junit}\"\n");
  testing::git(p.dir, "add -A");
  testing::git(p.dir, "commit -q -m one");
  auto hook = run_spark({"hooks", "post-commit"}, p.dir.path());
  EXPECT_FALSE(std::filesystem::exists(p.home / "ran")) << hook.err;
  EXPECT_NE(hook.err.find("not used: record.test_command ("), std::string::npos) << hook.err;
}

// The ways spark runs in CI and from pytest, each with the job's key in its environment and a fork's .spark.toml
// naming an address of its own: the CI step as action.yml and the GitLab component run it, and the pytest plugin.
struct ForkCheckout {
  TempDir home;
  TempDir dir;
  Env xdg{"XDG_CONFIG_HOME", (home / "config").string()};
  Env key{"OPENAI_API_KEY", "sk-ci-secret-0123456789"};
  testing::ChatServer attacker{[](const httplib::Request&, httplib::Response& res, int) {
    res.set_content(answer(), "application/json");
  }};
  ForkCheckout() {
    testing::git(dir, "init -q");
    write_file(dir / ".gitignore", ".spark/\n__pycache__/\n*.xml\nsummary.md\noutputs\n");
    write_file(dir / "tests" / "test_x.py", kTest);
    write_file(dir / ".spark.toml", "[llm]\nbase_url = \"" + attacker.url() + "\"\nmodel = \"m\"\n[redact]\n"
                                    "enabled = false\n");
    testing::git(dir, "add -A");
    testing::git(dir, "commit -q -m fork");
  }
};

TEST(trust, the_ci_step_as_the_action_runs_it_sends_nothing_to_a_forks_address) {
  ForkCheckout fork;
  auto tests = testing::run_pytest({"--junitxml=report.xml"}, fork.dir.path());
  ASSERT_EQ(tests.exit_code, 1) << tests.out;
  auto step = testing::run_program(
      "/usr/bin/env",
      {"SPARK=" SPARK_BINARY, "SPARK_REPORT=report.xml", "SPARK_FORMAT=text",
       "GITHUB_STEP_SUMMARY=" + (fork.dir / "summary.md").string(), "GITHUB_OUTPUT=" + (fork.dir / "outputs").string(),
       "/bin/sh", std::string(SPARK_SOURCE_DIR) + "/hooks/ci-step.sh"},
      fork.dir.path());
  ASSERT_EQ(step.exit_code, 0) << step.err;
  EXPECT_NE(testing::slurp(fork.dir / "outputs").find("failures=1"), std::string::npos) << step.out << step.err;
  EXPECT_EQ(fork.attacker.calls(), 0u);
  EXPECT_NE(step.err.find("not used: llm.base_url ("), std::string::npos) << step.err;
}

TEST(trust, the_pytest_plugin_sends_nothing_to_a_forks_address) {
  ForkCheckout fork;
  auto session = testing::run_program(
      "/usr/bin/env",
      {"PYTHONPATH=" + std::string(SPARK_SOURCE_DIR) + "/integrations/pytest", "SPARK=" SPARK_BINARY, "/usr/bin/python3",
       "-B", "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_spark", "--spark"},
      fork.dir.path());
  EXPECT_EQ(session.exit_code, 1) << session.out;
  EXPECT_NE(session.out.find("spark"), std::string::npos) << session.out;
  EXPECT_EQ(fork.attacker.calls(), 0u) << session.out << session.err;
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
