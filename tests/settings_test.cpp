// The table of settings (formats/config.h): the one home of every setting's default, environment variable and help.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "base/text.h"
#include "formats/config.h"
#include "llm/llm_client.h"
#include "localizer/llm_stage.h"
#include "localizer/localizer.h"
#include "localizer/prompt.h"
#include "miner/mining_store.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using testing::run_spark;
using testing::TempDir;

const ConfigKey& row(const std::string& key) {
  for (const auto& k : config_keys())
    if (k.key == key) return k;
  throw std::runtime_error("no setting " + key);
}

// The SPARK_* names inside the string literals of one line of C++ (comments and character literals skipped).
std::set<std::string> spark_names_in_strings(std::string_view line) {
  std::set<std::string> names;
  bool in_string = false;
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        const std::string_view text = line.substr(start, i - start);
        for (size_t at = text.find("SPARK_"); at != std::string_view::npos; at = text.find("SPARK_", at + 1)) {
          size_t end = at + 6;
          while (end < text.size() && (std::isupper(static_cast<unsigned char>(text[end])) ||
                                       std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_'))
            ++end;
          if (end > at + 6) names.emplace(text.substr(at, end - at));
        }
      }
    } else if (c == '"') {
      in_string = true;
      start = i + 1;
    } else if (c == '\'') {  // a character literal: '"' is no string
      for (++i; i < line.size() && line[i] != '\''; ++i)
        if (line[i] == '\\') ++i;
    } else if (c == '/' && i + 1 < line.size() && line[i + 1] == '/') {
      break;
    }
  }
  return names;
}

TEST(spark_names_in_strings, reads_string_literals_only) {
  EXPECT_EQ(spark_names_in_strings(R"(f("SPARK_A", x); // SPARK_B)"), std::set<std::string>{"SPARK_A"});
  EXPECT_EQ(spark_names_in_strings(R"(c == '"' ? "set SPARK_X2 and SPARK_Y" : "\"SPARK_Z\"")"),
            (std::set<std::string>{"SPARK_X2", "SPARK_Y", "SPARK_Z"}));
  EXPECT_TRUE(spark_names_in_strings("#define SPARK_LIBRARY_FIELD(f) f").empty());
}

// Every SPARK_* variable the product's sources name in a string (what getenv reads, what messages tell the user to
// set) is a row of the table, and `spark config` shows where its value came from when it is set; nothing but the
// table reads one with getenv.
TEST(config_keys, name_every_spark_variable_the_sources_read_and_spark_config_shows_each) {
  std::set<std::string> names;
  size_t files = 0;
  for (const char* dir : {"src", "localizer", "miner", "cli"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(SPARK_SOURCE_DIR) / dir)) {
      const auto ext = e.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      ++files;
      const std::string text = testing::slurp(e.path());
      const auto lines = split_lines(text);
      for (size_t i = 0; i < lines.size(); ++i) {
        names.merge(spark_names_in_strings(lines[i]));
        if (lines[i].find("getenv(") != std::string_view::npos && lines[i].find("SPARK_") != std::string_view::npos &&
            e.path().filename() != "config.cpp")
          ADD_FAILURE() << e.path().string() << ":" << i + 1 << ": a SPARK_* variable read behind the table's back "
                        << "(read it through Config or environment_setting): " << lines[i];
      }
    }
  EXPECT_GT(files, 50u);
  for (const char* read : {"SPARK_THREADS", "SPARK_HUGE_PAGES", "SPARK_DEBUG_TIMES", "SPARK_KB_RETRY_SECONDS",
                           "SPARK_LLM_MODEL", "SPARK_KB"})
    EXPECT_TRUE(names.contains(read)) << read;
  TempDir dir;
  // Written by spark into the environment of the commands it runs, to find what they leave behind (base/process.h);
  // never a setting.
  names.erase("SPARK_RUN_MARK");
  for (const auto& name : names) {
    const ConfigKey* key = nullptr;
    for (const auto& k : config_keys())
      for (const auto& var : k.env)
        if (var == name && !key) key = &k;
    if (!key) {
      ADD_FAILURE() << name << " is named by the sources but is no setting's variable in config_keys()";
      continue;
    }
    const char* value = key->type == ConfigType::boolean ? "true" : key->type == ConfigType::string ? "x" : "2";
    ::setenv(name.c_str(), value, 1);
    auto r = run_spark({"config"}, dir.path());
    ::unsetenv(name.c_str());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("    # from env " + name + "\n"), std::string::npos) << name << ":\n" << r.out;
  }
}

TEST(spark_config, shows_the_environment_only_settings_with_their_values_and_sources) {
  TempDir dir;
  ::setenv("SPARK_THREADS", "3", 1);
  auto r = run_spark({"config"}, dir.path());
  ::unsetenv("SPARK_THREADS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n# read from the environment alone, where they are used (not from a file or a flag)\n"
                       "# SPARK_THREADS = 3    # from env SPARK_THREADS\n"
                       "# SPARK_HUGE_PAGES = 1    # from default\n"
                       "# SPARK_KB_RETRY_SECONDS = 20    # from default\n"
                       "# SPARK_DEBUG_TIMES = (not set)\n"),
            std::string::npos)
      << r.out;
  // A wrong type is refused as any setting's, naming the variable.
  ::setenv("SPARK_KB_RETRY_SECONDS", "soon", 1);
  auto bad = run_spark({"config"}, dir.path());
  ::unsetenv("SPARK_KB_RETRY_SECONDS");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("env SPARK_KB_RETRY_SECONDS: SPARK_KB_RETRY_SECONDS must be a number, not \"soon\""),
            std::string::npos)
      << bad.err;
}

TEST(config, refuses_an_environment_only_setting_in_the_file) {
  TempDir dir;
  testing::write_file(dir / "s.toml", "SPARK_THREADS = 4\n");
  auto c = Config::load(dir / "s.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("s.toml:1: SPARK_THREADS is read from the environment alone, not from a file"),
            std::string::npos)
      << c.error().message;
  Config defaults = *Config::load(std::nullopt);
  EXPECT_FALSE(defaults.set("SPARK_THREADS", "4", "flag --threads"));
}

TEST(environment_setting, reads_the_variable_else_the_tables_default) {
  ::unsetenv("SPARK_KB_RETRY_SECONDS");
  EXPECT_EQ(environment_setting("SPARK_KB_RETRY_SECONDS"), "20");
  ::setenv("SPARK_KB_RETRY_SECONDS", "7", 1);
  EXPECT_EQ(environment_setting("SPARK_KB_RETRY_SECONDS"), "7");
  ::setenv("SPARK_KB_RETRY_SECONDS", "", 1);  // empty: as if unset
  EXPECT_EQ(environment_setting("SPARK_KB_RETRY_SECONDS"), "20");
  ::unsetenv("SPARK_KB_RETRY_SECONDS");
  EXPECT_EQ(environment_setting("SPARK_THREADS"), "");
  // Only the environment-only rows: a file's setting is read through Config.
  ::setenv("SPARK_LLM_MODEL", "m", 1);
  EXPECT_EQ(environment_setting("SPARK_LLM_MODEL"), "");
  EXPECT_EQ(environment_setting("llm.model"), "");
  ::unsetenv("SPARK_LLM_MODEL");
}

TEST(option_help, is_the_tables_help_default_and_variables) {
  EXPECT_EQ(option_help("llm.concurrency"), "requests in flight (default 4)");
  EXPECT_EQ(option_help("llm.model"), "model name the server knows (env SPARK_LLM_MODEL)");
  EXPECT_EQ(option_help("embedder.model"), "embedding model (default bge-m3; env SPARK_EMBED_MODEL)");
  EXPECT_EQ(option_help("mine.sigma", "the outlier rule shown"), "the outlier rule shown (default 3)");
  EXPECT_EQ(option_help("llm.api_key", "API key"), "API key (env SPARK_LLM_API_KEY or OPENAI_API_KEY)");
  EXPECT_EQ(option_help("localize.epsilon"), "annotation threshold, normalized Levenshtein (default 0.05)");
  EXPECT_NE(option_help("llm.mode").find("| hybrid (default default)"), std::string::npos);
  // The command line's help is made from it.
  auto help = run_spark({"localize", "--help"}, fs::current_path());
  for (const char* key : {"localize.k", "llm.max_tokens", "llm.concurrency", "llm.deadline"})
    EXPECT_NE(help.out.find(option_help(key)), std::string::npos) << key << ":\n" << help.out;
}

// The option structs start from the table's defaults (formats/defaults.h holds each once).
TEST(config_keys, defaults_are_the_option_structs_defaults) {
  const auto integer = [](const std::string& key) { return std::stoll(row(key).default_value); };
  const auto number = [](const std::string& key) { return std::stod(row(key).default_value); };
  EXPECT_EQ(LocalizeOptions{}.k, static_cast<size_t>(integer("localize.k")));
  EXPECT_EQ(LocalizeOptions{}.r, static_cast<size_t>(integer("localize.r")));
  EXPECT_EQ(PromptOptions{}.k, static_cast<size_t>(integer("localize.k")));
  EXPECT_DOUBLE_EQ(LocalizeOptions{}.epsilon, number("localize.epsilon"));
  EXPECT_DOUBLE_EQ(LocalizeOptions{}.similarity_floor, number("localize.similarity_floor"));
  const LlmOptions llm;
  EXPECT_EQ(llm.max_tokens, integer("llm.max_tokens"));
  EXPECT_EQ(TokenBudget{}.answer, static_cast<size_t>(integer("llm.max_tokens")));
  EXPECT_EQ(TokenBudget{}.context, static_cast<size_t>(integer("llm.context_tokens")));
  EXPECT_EQ(llm.context_tokens, static_cast<size_t>(integer("llm.context_tokens")));
  EXPECT_EQ(llm.concurrency, static_cast<size_t>(integer("llm.concurrency")));
  EXPECT_DOUBLE_EQ(llm.temperature, number("llm.temperature"));
  EXPECT_EQ(llm.http.connect_timeout_ms, static_cast<long>(number("llm.connect_timeout") * 1000));
  EXPECT_EQ(llm.http.timeout_ms, static_cast<long>(number("llm.timeout") * 1000));
  EXPECT_EQ(llm.retry.max_retries, integer("llm.retries"));
  EXPECT_DOUBLE_EQ(llm.retry.initial_delay_s, number("llm.retry_delay"));
  EXPECT_DOUBLE_EQ(SyncOptions{}.sigma, number("mine.sigma"));
  EXPECT_DOUBLE_EQ(OutlierRule{}.sigma, number("mine.sigma"));
}

// docs/SETTINGS.md's table is what `spark config --markdown` prints: after a change to the table, paste its output
// between the markers.
TEST(spark_config, markdown_is_the_table_docs_settings_holds) {
  TempDir dir;
  auto r = run_spark({"config", "--markdown"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, settings_markdown());
  const std::string doc = testing::slurp(fs::path(SPARK_SOURCE_DIR) / "docs" / "SETTINGS.md");
  const std::string begin = "<!-- begin: made by `spark config --markdown` -->\n";
  const std::string end = "<!-- end: made by `spark config --markdown` -->\n";
  const size_t from = doc.find(begin), to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(doc.substr(from + begin.size(), to - from - begin.size()), r.out)
      << "docs/SETTINGS.md differs from `spark config --markdown`: paste its output between the markers";
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
