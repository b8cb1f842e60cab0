#include "formats/config.h"
#include "formats/defaults.h"

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "base/files.h"
#include "base/text.h"
#include "formats/trust.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

namespace spark {

namespace fs = std::filesystem;

const std::vector<ConfigKey>& config_keys() {
  using T = ConfigType;
  using defaults::shortest;
  // clang-format off: one row per setting, as docs/SETTINGS.md shows them
  static const std::vector<ConfigKey> keys = {
      {"kb", T::string, ".spark", {"SPARK_KB"}, false,
       "knowledge base: a folder (SQLite) or postgresql://user@host/db (a shared server); left at its default, the "
       "nearest .spark holding one, else .spark at the git top or beside .spark.toml"},
      {"local_dir", T::string, ".spark", {"SPARK_LOCAL_DIR"}, false,
       "with a server knowledge base: this runner's vector index, spool and LLM answer cache; left at its default, "
       ".spark at the git top or beside .spark.toml"},
      {"llm.base_url", T::string, "", {"SPARK_LLM_BASE_URL"}, false,
       "OpenAI-compatible base URL, e.g. http://localhost:8000/v1; setting it turns the LLM on"},
      {"llm.model", T::string, "", {"SPARK_LLM_MODEL"}, false, "model name the server knows"},
      {"llm.api_key", T::string, "", {"SPARK_LLM_API_KEY", "OPENAI_API_KEY"}, true, "API key, sent as a Bearer token"},
      {"llm.mode", T::string, "default", {}, false,
       "builtin | baseline | default | random | annotation-free | directive | naive-rag | hybrid"},
      {"llm.template", T::string, "", {}, false, "a prompt template file replacing the mode's built-in one"},
      {"llm.prompt_scope", T::string, "file", {}, false,
       "file: the whole test file(s), as the paper; test: only the failing test's reach"},
      {"llm.temperature", T::number, shortest(defaults::kTemperature), {}, false, "sampling temperature"},
      {"llm.max_tokens", T::integer, std::to_string(defaults::kAnswerTokens), {}, false, "answer length limit"},
      {"llm.seed", T::integer, "", {}, false, "sampling seed sent to the server, and random mode's draw"},
      {"llm.structured", T::boolean, "true", {}, false,
       "ask for a JSON answer via response_format json_schema (line ids an enum of the lines shown); a server that "
       "refuses it is asked in free text from then on"},
      {"llm.probe", T::boolean, "true", {}, false,
       "ask the server its context and token counts once a run (llama.cpp GET /props, POST /tokenize; vLLM "
       "GET /v1/models)"},
      {"llm.concurrency", T::integer, std::to_string(defaults::kConcurrency), {}, false, "requests in flight"},
      {"llm.context_tokens", T::integer, std::to_string(defaults::kContextTokens), {}, false,
       "the model's context window, prompt and answer"},
      {"llm.connect_timeout", T::number, shortest(defaults::kConnectTimeout), {}, false, "seconds to connect"},
      {"llm.timeout", T::number, shortest(defaults::kRequestTimeout), {}, false, "seconds for one request"},
      {"llm.retries", T::integer, std::to_string(defaults::kRetries), {}, false, "retries on timeouts, 429 and 5xx"},
      {"llm.retry_delay", T::number, shortest(defaults::kRetryDelay), {}, false,
       "first backoff in seconds, doubling with jitter"},
      {"llm.deadline", T::number, shortest(defaults::kDeadline), {}, false,
       "seconds for all LLM requests of one localize or record run, retries included, then the built-in ranking; "
       "0: none; not used by eval"},
      {"llm.require", T::boolean, "false", {}, false, "fail instead of falling back to the built-in ranker"},
      {"embedder.kind", T::string, "", {}, false,
       "builtin | openai; unset: as the index was built (builtin for a new one)"},
      {"embedder.base_url", T::string, "", {"SPARK_EMBED_BASE_URL"}, false, "OpenAI-compatible embeddings base URL"},
      {"embedder.model", T::string, defaults::kEmbedModel, {"SPARK_EMBED_MODEL"}, false, "embedding model"},
      {"embedder.api_key", T::string, "", {"SPARK_EMBED_API_KEY", "OPENAI_API_KEY"}, true, "embeddings API key"},
      {"localize.k", T::integer, std::to_string(defaults::kTopK), {}, false, "how many elements to return"},
      {"localize.level", T::string, "line", {}, false, "line | statement | block | function"},
      {"localize.policy", T::string, "all", {}, false,
       "all | all-preceding | closest-by-time | closest-time-preceding"},
      {"localize.epsilon", T::number, defaults::text(defaults::kEpsilon), {}, false,
       "annotation threshold, normalized Levenshtein"},
      {"localize.r", T::integer, std::to_string(defaults::kRetrieved), {}, false, "similar cases to retrieve"},
      {"localize.similarity_floor", T::number, defaults::text(defaults::kSimilarityFloor), {}, false,
       "ignore retrieved cases below this cosine"},
      {"redact.enabled", T::boolean, "true", {}, false, "redact secrets before text leaves the machine"},
      {"project", T::string, "", {"SPARK_PROJECT"}, false,
       "the mined cases' project; unset: the origin remote's URL normalised, else the root commit"},
      {"mine.sigma", T::number, shortest(defaults::kSigma), {}, false,
       "outlier rule: quarantine above mean + sigma * sd faulty lines"},
      {"mine.test_only_fixes", T::boolean, "false", {}, false, "label only fixes that changed nothing but test code"},
      {"mine.test_code", T::string,
       "test_*.py,*_test.py,conftest.py,*Test.java,*Tests.java,*IT.java,Test*.java,*.test.*,*.spec.*,test/**,tests/**,"
       "__tests__/**,src/test/**", {}, false,
       "test code, as comma-separated globs: NAME globs match the file name, DIR/** every file under a folder DIR at "
       "any depth, other globs the path from the repository's top (docs/MINER.md)"},
      {"record.test_command", T::string, "", {"SPARK_TEST_COMMAND"}, false,
       "re-runs tests for the post-commit hook: {tests} = test ids, {junit} = the report to write"},
      {"record.timeout", T::number, shortest(defaults::kHookTimeout), {}, false,
       "seconds the post-commit hook's test run may take"},
      // Read from the environment alone, where they are used (environment_setting).
      {"SPARK_THREADS", T::integer, "", {"SPARK_THREADS"}, false,
       "worker threads of `spark index` and of an index's catch-up (unset or 0: the machine's cores; at most 16)",
       true},
      {"SPARK_HUGE_PAGES", T::integer, "1", {"SPARK_HUGE_PAGES"}, false,
       "0: `spark localize` leaves its heap on 4 KiB pages (else on transparent huge pages where the kernel offers "
       "them: src/base/huge_pages.h)", true},
      {"SPARK_KB_RETRY_SECONDS", T::number, shortest(defaults::kKbRetrySeconds), {"SPARK_KB_RETRY_SECONDS"}, false,
       "seconds `spark record` keeps trying a server knowledge base it cannot reach before it spools the report", true},
      {"SPARK_DEBUG_TIMES", T::string, "", {"SPARK_DEBUG_TIMES"}, false,
       "set (to anything): `spark index` prints the times of its embedding pass on standard error", true},
  };
  // clang-format on
  return keys;
}

namespace {

const ConfigKey* find_key(std::string_view key) {
  for (const auto& k : config_keys())
    if (k.key == key) return &k;
  return nullptr;
}

// A setting's value from the environment: the first of its variables that is set and not empty, with its name.
std::optional<std::pair<std::string, std::string>> from_environment(const ConfigKey& k) {
  for (const auto& var : k.env)
    if (const char* v = std::getenv(var.c_str()); v && *v) return std::pair<std::string, std::string>{v, var};
  return std::nullopt;
}

Status check_type(const ConfigKey& k, const std::string& text, const std::string& source) {
  if (text.empty()) return {};
  // A secret goes into an HTTP header (Authorization: Bearer ...): a line break in it would end that header and start
  // others of its own choosing. Refused, and the value is not printed.
  if (k.secret && text.find_first_of("\r\n") != std::string::npos)
    return fail(source + ": " + k.key +
                " holds a line break (CR or LF): a key is one line; remove the line break (a trailing newline from "
                "the file or secret store it was read from?)");
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  switch (k.type) {
    case ConfigType::integer:
      std::strtoll(s, &end, 10);
      if (errno || !end || *end) return fail(source + ": " + k.key + " must be an integer, not \"" + text + "\"");
      break;
    case ConfigType::number:
      std::strtod(s, &end);
      if (errno || !end || *end) return fail(source + ": " + k.key + " must be a number, not \"" + text + "\"");
      break;
    case ConfigType::boolean:
      if (text != "true" && text != "false")
        return fail(source + ": " + k.key + " must be true or false, not \"" + text + "\"");
      break;
    case ConfigType::string:
      break;
  }
  return {};
}

std::string where(const fs::path& file, const toml::node& n) {
  return file.string() + ":" + std::to_string(n.source().begin.line);
}

// The text of a TOML value for key `k`, or an error naming the file and line.
Result<std::string> text_of(const ConfigKey& k, const toml::node& n, const fs::path& file) {
  const std::string at = where(file, n);
  switch (k.type) {
    case ConfigType::string:
      if (auto v = n.value<std::string>()) return *v;
      return fail(at + ": " + k.key + " must be a string");
    case ConfigType::integer:
      if (n.is_integer()) return std::to_string(*n.value<int64_t>());
      return fail(at + ": " + k.key + " must be an integer");
    case ConfigType::number:
      if (n.is_integer()) return std::to_string(*n.value<int64_t>());
      if (n.is_floating_point()) {
        std::ostringstream o;
        o << *n.value<double>();
        return o.str();
      }
      return fail(at + ": " + k.key + " must be a number");
    case ConfigType::boolean:
      if (n.is_boolean()) return std::string(*n.value<bool>() ? "true" : "false");
      return fail(at + ": " + k.key + " must be true or false");
  }
  return fail(at + ": " + k.key + ": unsupported type");
}

}  // namespace

std::optional<fs::path> Config::discover(const fs::path& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(start, ec);
  if (ec) return std::nullopt;
  for (;;) {
    if (fs::is_regular_file(dir / ".spark.toml", ec)) return dir / ".spark.toml";
    if (fs::exists(dir / ".git", ec) || !dir.has_parent_path() || dir.parent_path() == dir) return std::nullopt;
    dir = dir.parent_path();
  }
}

SparkFolders find_spark_folders(const fs::path& start) {
  std::error_code ec;
  const fs::path from = fs::absolute(start, ec).lexically_normal();
  std::optional<fs::path> found;
  for (fs::path dir = from;; dir = dir.parent_path()) {
    if (!found && fs::is_regular_file(dir / ".spark" / "kb.sqlite", ec)) found = dir / ".spark";
    const bool toml = fs::is_regular_file(dir / ".spark.toml", ec);
    if (toml || fs::exists(dir / ".git", ec)) {
      const std::string top =
          toml ? "the folder of " + (dir / ".spark.toml").string() : "the git work tree's top " + dir.string();
      if (found)
        return {*found, dir / ".spark",
                "default: the nearest .spark holding a knowledge base, up to " + top + " (as git finds .git)"};
      return {dir / ".spark", dir / ".spark", "default: " + top + " (no knowledge base there yet)"};
    }
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
  }
  // Not in a project: the working directory's own .spark, as when spark had no search.
  return {from / ".spark", from / ".spark", "default: the working directory (no .spark.toml or git work tree above)"};
}

void Config::place_folders(const fs::path& cwd) {
  std::optional<SparkFolders> folders;
  for (const char* key : {"kb", "local_dir"}) {
    Value& v = values_[key];
    if (is_postgres_url(v.text)) continue;
    if (v.source == "default") {
      if (!folders) folders = find_spark_folders(cwd);
      // A SQLite store is the nearest found; a server store's local folder is the project's. The working
      // directory's own is named as before, ".spark"; one elsewhere by its absolute path.
      std::error_code ec;
      const fs::path here = fs::absolute(cwd, ec).lexically_normal() / ".spark";
      const auto named = [&](const fs::path& p) { return p == here ? std::string(".spark") : p.string(); };
      if (std::string(key) == "kb")
        v = {named(folders->kb), folders->how};
      else
        v = {named(folders->top), "default: the project top's .spark"};
      continue;
    }
    relative_to_file(v);
  }
  relative_to_file(values_["llm.template"]);
}

// A relative path in a file is the file's folder's, whatever the working directory.
void Config::relative_to_file(Value& v) {
  const fs::path given = v.text;
  const std::string place = v.source.substr(0, v.source.rfind(':'));
  if (v.text.empty() || given.is_absolute() || v.source.starts_with("default") || v.source.starts_with("env ") ||
      v.source.starts_with("flag ") || place.empty())
    return;
  std::error_code ec;
  v.text = (fs::absolute(place, ec).parent_path() / given).lexically_normal().string();
}

namespace {

// TOML allows characters beyond ASCII only in strings and comments. toml++ 3.3.0 (Debian 12's) reaches
// __builtin_unreachable (undefined behaviour) when it tests such a character for whitespace where a key or a value
// may start (tests/fuzz/regressions/config; its unicode_autogenerated.h). So the text is checked first: a byte above
// 0x7F outside strings and comments, or right after a multi-line string's line-ending backslash (where toml++ skips
// whitespace), is refused with its line. A UTF-8 byte order mark at the start is allowed.
Status check_ascii_outside_strings(std::string_view t, const std::string& name) {
  size_t i = t.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  int line = 1;
  const auto refuse = [&](const char* where) {
    return fail(name + ":" + std::to_string(line) + ": a character beyond ASCII " + where +
                " (TOML allows them only in strings and comments)");
  };
  enum class In { code, comment, basic, literal, ml_basic, ml_literal } in = In::code;
  // A quote opens a string only where TOML lets one start (a key, a value, an array's or inline table's element):
  // in `x = 2"..."` it does not, and toml++ 3.3 reaches an unreachable point on a non-ASCII character there.
  char before = '\n';  // the last character of code before this one, blanks aside
  for (; i < t.size(); ++i) {
    const char ch = t[i];
    if (ch == '\n') {
      ++line;
      if (in == In::comment || in == In::basic || in == In::literal) in = In::code;
      before = '\n';
      continue;
    }
    switch (in) {
      case In::code: {
        if (static_cast<unsigned char>(ch) > 0x7F) return refuse("outside a string or comment");
        const bool opens = std::string_view("\n=[,{.").find(before) != std::string_view::npos;
        if (ch == '#') in = In::comment;
        else if (ch == '"' && opens) in = t.substr(i, 3) == "\"\"\"" ? (i += 2, In::ml_basic) : In::basic;
        else if (ch == '\'' && opens) in = t.substr(i, 3) == "'''" ? (i += 2, In::ml_literal) : In::literal;
        if (ch != ' ' && ch != '\t' && ch != '\r') before = ch;
        break;
      }
      case In::comment: break;
      case In::basic:
        if (ch == '\\') ++i;
        else if (ch == '"') in = In::code;
        break;
      case In::literal:
        if (ch == '\'') in = In::code;
        break;
      case In::ml_basic:
        if (ch == '\\') {
          size_t j = i + 1;
          while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r')) ++j;
          if (j < t.size() && t[j] == '\n') {  // a line-ending backslash: toml++ skips the whitespace after it
            while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r' || t[j] == '\n')) line += t[j++] == '\n';
            if (j < t.size() && static_cast<unsigned char>(t[j]) > 0x7F)
              return refuse("right after a line-ending backslash");
            i = j - 1;
          } else {
            ++i;
          }
        } else if (t.substr(i, 3) == "\"\"\"") {
          i += 2;
          in = In::code;
        }
        break;
      case In::ml_literal:
        if (t.substr(i, 3) == "'''") {
          i += 2;
          in = In::code;
        }
        break;
    }
  }
  return {};
}

}  // namespace

RepoRule repository_may(std::string_view key) {
  using M = RepoMay;
  static const std::map<std::string, RepoRule, std::less<>> rules = {
      {"kb", {M::inside, "a store outside the repository, or a server, is not the repository's to choose"}},
      {"local_dir", {M::inside, "a folder outside the repository is not the repository's to write"}},
      {"llm.base_url", {M::refuse, "it chooses where the test code and the API key are sent"}},
      {"llm.api_key", {M::refuse, "a credential"}},
      {"llm.template", {M::inside, "a template outside the repository would send another file's text"}},
      {"llm.max_tokens", {M::lower, "a limit of cost"}},
      {"llm.concurrency", {M::lower, "a limit of load on the server"}},
      {"llm.context_tokens", {M::lower, "a limit of what is sent and its cost"}},
      {"llm.connect_timeout", {M::lower, "a limit of time"}},
      {"llm.timeout", {M::lower, "a limit of time"}},
      {"llm.retries", {M::lower, "a limit of time and cost"}},
      {"llm.retry_delay", {M::lower, "a limit of time"}},
      {"llm.deadline", {M::lower, "a limit of time", /*zero_is_none=*/true}},
      {"embedder.base_url", {M::refuse, "it chooses where the test code and the API key are sent"}},
      {"embedder.api_key", {M::refuse, "a credential"}},
      {"redact.enabled", {M::enable, "it keeps secrets in the test code from leaving the machine"}},
      {"mine.sigma", {M::lower, "raising it releases quarantined fixes into the store"}},
      {"mine.test_only_fixes", {M::enable, "turning it off labels fixes that changed product code too"}},
      {"record.test_command", {M::refuse, "it runs a command"}},
      {"record.timeout", {M::lower, "a limit of time"}},
  };
  auto it = rules.find(key);
  return it == rules.end() ? RepoRule{} : it->second;
}

namespace {

// A limit's value for comparing: 0 is none (the highest) where the rule says so.
double limit_value(const std::string& text, bool zero_is_none) {
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), nullptr);
  return zero_is_none && v == 0 ? std::numeric_limits<double>::infinity() : v;
}

// Why an untrusted file's `text` for `key` is refused ("" when it is taken), given the value it would replace.
std::string refusal(const ConfigKey& k, const std::string& text, const Config::Value& current, const fs::path& file) {
  const RepoRule rule = repository_may(k.key);
  switch (rule.may) {
    case RepoMay::set: return "";
    case RepoMay::refuse: return rule.why;
    case RepoMay::lower:
      if (limit_value(text, rule.zero_is_none) <= limit_value(current.text, rule.zero_is_none)) return "";
      return std::string("a repository may lower it, not raise it above ") +
             (current.text.empty() || (rule.zero_is_none && current.text == "0") ? "none" : current.text) + ": " +
             rule.why;
    case RepoMay::enable:
      return text == "true" ? "" : std::string("a repository may turn it on, not off: ") + rule.why;
    case RepoMay::inside:
      if (is_postgres_url(text)) return rule.why;
      if (text.empty() || path_inside(repository_top(file), fs::absolute(file).parent_path(), text)) return "";
      return rule.why;
  }
  return rule.why;
}

}  // namespace

Status Config::apply_file(const File& f) {
  const fs::path& file = f.path;
  file_ = file;
  const size_t first = refused_.size();
  toml::table table;
  auto contents = read_file(file);
  TRY(contents);
  TRY(check_ascii_outside_strings(*contents, file.string()));
  try {
    table = toml::parse(*contents, file.string());
  } catch (const toml::parse_error& e) {
    return fail(file.string() + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  // A known key's value from the file, with its file:line as the source; refused when the file is not trusted and
  // the key is not the repository's to set so.
  const auto take = [&](const std::string& key, const toml::node& node) -> Status {
    const ConfigKey* k = find_key(key);
    if (!k) return fail(where(file, node) + ": unknown setting " + key);
    if (k->env_only)
      return fail(where(file, node) + ": " + key + " is read from the environment alone, not from a file");
    auto text = text_of(*k, node, file);
    TRY(text);
    if (auto s = check_type(*k, *text, where(file, node)); !s) return s;
    if (!f.trusted)
      if (std::string why = refusal(*k, *text, values_[key], file); !why.empty()) {
        refused_.push_back({key, k->secret ? "" : *text, where(file, node), why, node.source().begin.line,
                            k->type == ConfigType::string});
        untrusted_file_ = file;
        return {};
      }
    values_[key] = {*text, where(file, node)};
    return {};
  };
  Status status;
  table.for_each([&](const toml::key& name, const toml::node& node) {
    if (!status) return;
    const std::string top(name.str());
    if (const toml::table* section = node.as_table()) {
      section->for_each([&](const toml::key& sub, const toml::node& value) {
        if (!status) return;
        const std::string key = top + "." + std::string(sub.str());
        if (key == "redact.patterns") {  // more redaction, from any file
          const toml::array* arr = value.as_array();
          if (!arr) {
            status = fail(where(file, value) + ": redact.patterns must be an array of patterns");
            return;
          }
          for (const auto& item : *arr) {
            if (auto s = item.value<std::string>()) {
              rules_.push_back({"", *s});
            } else if (const toml::table* t = item.as_table(); t && (*t)["pattern"].is_string()) {
              rules_.push_back({(*t)["name"].value_or(std::string()), *(*t)["pattern"].value<std::string>()});
            } else {
              status = fail(where(file, item) + ": a redact.patterns entry is a string or {name, pattern}");
              return;
            }
          }
          return;
        }
        status = take(key, value);
      });
      return;
    }
    status = take(top, node);
  });
  // In the file's order (toml++ keeps a table's keys sorted).
  std::stable_sort(refused_.begin() + static_cast<std::ptrdiff_t>(first), refused_.end(),
                   [](const Refused& a, const Refused& b) { return a.line < b.line; });
  return status;
}

Result<Config> Config::load(const std::optional<fs::path>& file) {
  return file ? load(std::vector<File>{{*file, true}}) : load(std::vector<File>{});
}

Result<Config> Config::load(const std::vector<File>& files) {
  Config c;
  for (const auto& k : config_keys()) c.values_[k.key] = {k.default_value, "default"};
  for (const auto& f : files) TRY(c.apply_file(f));
  for (const auto& k : config_keys())
    if (auto env = from_environment(k)) {
      const auto& [text, var] = *env;
      TRY(check_type(k, text, "env " + var));
      c.values_[k.key] = {text, "env " + var};
    }
  return c;
}

namespace {

// Where a value was set, as one place: "the command line and the environment" for flags and variables, else the
// file (a source "PATH:LINE" without its line); "" for a default.
std::string place_of(const std::string& source) {
  if (source.starts_with("env ") || source.starts_with("flag ")) return "the command line and the environment";
  if (source.starts_with("default")) return "";
  return source.substr(0, source.rfind(':'));
}

}  // namespace

void Config::bind_keys() {
  for (const auto& [key, url] : {std::pair<std::string, std::string>{"llm.api_key", "llm.base_url"},
                                 {"embedder.api_key", "embedder.base_url"}}) {
    Value& k = values_[key];
    const Value& u = get(url);
    if (k.text.empty() || u.text.empty()) continue;
    const std::string from = place_of(k.source), to = place_of(u.source);
    if (from == to) continue;
    refused_.push_back({key, "", k.source,
                        "a key is sent only to the URL set beside it, and " + url + " comes from " + u.source +
                            ": set both in one place"});
    k = {"", "withheld"};
  }
}

std::string Config::trust_warning() const {
  if (refused_.empty()) return "";
  std::string names;
  for (const auto& r : refused_) names += (names.empty() ? "" : ", ") + r.key + " (" + r.source + ")";
  std::string line = "spark: warning: not used: " + names;
  if (untrusted_file_)
    line += ". " + untrusted_file_->string() +
            " is the repository's own and not trusted: it may not choose where data or keys go, run commands, "
            "write outside the repository or weaken a safety rule; if you wrote it, `spark trust` it (`spark "
            "config` says why each was refused; docs/SECURITY.md)";
  else
    line += " (`spark config` says why; docs/SECURITY.md)";
  return line;
}

Status Config::set(const std::string& key, const std::string& text, const std::string& source) {
  const ConfigKey* k = find_key(key);
  if (!k || k->env_only) return fail("unknown setting " + key);
  if (auto s = check_type(*k, text, source); !s) return s;
  values_[key] = {text, source};
  return {};
}

const Config::Value& Config::get(const std::string& key) const {
  static const Value empty{"", "unknown"};
  auto it = values_.find(key);
  return it == values_.end() ? empty : it->second;
}

long long Config::integer(const std::string& key) const {
  const std::string& t = get(key).text;
  return t.empty() ? 0 : std::strtoll(t.c_str(), nullptr, 10);
}
double Config::number(const std::string& key) const {
  const std::string& t = get(key).text;
  return t.empty() ? 0 : std::strtod(t.c_str(), nullptr);
}
bool Config::boolean(const std::string& key) const { return get(key).text == "true"; }

std::string Config::describe() const {
  std::ostringstream out;
  out << "# effective configuration (" << (file_ ? "file " + file_->string() : std::string("no configuration file"))
      << "); later sources win: default < /etc/spark/config.toml < the user's config.toml < the project's file < "
         "env < flag\n";
  // Settings outside a table first: after a [table] header they would be read as the table's.
  for (const auto& k : config_keys())
    if (!k.env_only && k.key.find('.') == std::string::npos) out << described(k, k.key);
  std::string section;
  for (const auto& k : config_keys()) {
    const auto dot = k.key.find('.');
    if (k.env_only || dot == std::string::npos) continue;
    const std::string sec = k.key.substr(0, dot);
    if (sec != section) {
      out << "\n[" << sec << "]\n";
      section = sec;
    }
    out << described(k, k.key.substr(dot + 1));
    if (k.key == "redact.enabled" && !rules_.empty()) {
      out << "patterns = [  # extra redaction rules\n";
      for (const auto& r : rules_) out << "  " << json_text(r.pattern) << ",\n";
      out << "]\n";
    }
  }
  if (!refused_.empty()) {
    out << "\n# not used (docs/SECURITY.md)\n";
    for (const auto& r : refused_)
      out << "# " << r.key << " = "
          << (r.text.empty() ? std::string("(hidden)") : r.quoted ? json_text(r.text) : r.text)
          << "    # from " << r.source << ": " << r.why << "\n";
  }
  out << "\n# read from the environment alone, where they are used (not from a file or a flag)\n";
  for (const auto& k : config_keys())
    if (k.env_only) out << described(k, k.key);
  return out.str();
}

// A line of describe(), valid TOML: a value set is `name = value    # from SOURCE`; a secret set, a setting not set and
// an environment-only one are comments.
std::string Config::described(const ConfigKey& k, const std::string& name) const {
  const Value& v = get(k.key);
  const std::string from = v.text.empty() ? "" : "    # from " + v.source;
  if (k.env_only) return "# " + name + " = " + (v.text.empty() ? "(not set)" : v.text) + from + "\n";
  if (k.secret) return "# " + name + " = " + (v.text.empty() ? "(not set)" : "(set, hidden)") + from + "\n";
  if (v.text.empty()) return "# " + name + " = (not set)\n";
  std::string shown;
  if (k.key == "kb" && is_postgres_url(v.text) && redact_postgres_url(v.text) != v.text)
    shown = json_text(redact_postgres_url(v.text)) + "    # password: set (hidden)";
  else if (k.type == ConfigType::string)
    shown = json_text(v.text);
  else
    shown = v.text;
  return name + " = " + shown + from + "\n";
}

std::string environment_setting(std::string_view name) {
  const ConfigKey* k = find_key(name);
  if (!k || !k->env_only) return "";
  if (auto env = from_environment(*k)) return env->first;
  return k->default_value;
}

namespace {

// The parenthesis after a setting's help: its default and its environment variables, "" when it has neither.
std::string default_and_env(const ConfigKey& k) {
  std::string env;
  for (const auto& var : k.env) env += (env.empty() ? "env " : " or ") + var;
  std::string out = k.default_value.empty() ? "" : "default " + k.default_value;
  if (!env.empty()) out += (out.empty() ? "" : "; ") + env;
  return out.empty() ? "" : " (" + out + ")";
}

const char* type_name(ConfigType type) {
  switch (type) {
    case ConfigType::string: return "string";
    case ConfigType::integer: return "integer";
    case ConfigType::number: return "number";
    case ConfigType::boolean: return "boolean";
  }
  return "";
}

// Text for a Markdown table's cell: a `|` would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string code_cell(const std::string& text) { return text.empty() ? "" : "`" + cell(text) + "`"; }

// What an untrusted repository file may do with a setting, for the table (docs/SECURITY.md).
std::string repository_may_text(const std::string& key) {
  switch (repository_may(key).may) {
    case RepoMay::set: return "may set";
    case RepoMay::refuse: return "may not set";
    case RepoMay::lower: return "may lower";
    case RepoMay::enable: return "may turn on";
    case RepoMay::inside: return "a path inside it";
  }
  return "";
}

}  // namespace

std::string option_help(const std::string& key, const std::string& prose) {
  const ConfigKey* k = find_key(key);
  if (!k) return prose;
  return (prose.empty() ? k->help : prose) + default_and_env(*k);
}

std::string settings_markdown() {
  std::ostringstream out;
  out << "| Key | Type | Default | Environment | An untrusted repository file | Meaning |\n"
         "|---|---|---|---|---|---|\n";
  for (const auto& k : config_keys()) {
    if (k.env_only) continue;
    std::string env;
    for (const auto& var : k.env) env += (env.empty() ? "" : ", ") + code_cell(var);
    out << "| " << code_cell(k.key) << " | " << type_name(k.type) << " | " << code_cell(k.default_value) << " | "
        << env << " | " << repository_may_text(k.key) << " | " << cell(k.help) << (k.secret ? " (never printed)" : "")
        << " |\n";
  }
  out << "\nRead from the environment alone, where they are used (a file or a flag cannot set them):\n\n"
      << "| Variable | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const auto& k : config_keys())
    if (k.env_only)
      out << "| " << code_cell(k.key) << " | " << type_name(k.type) << " | " << code_cell(k.default_value) << " | "
          << cell(k.help) << " |\n";
  return out.str();
}

}  // namespace spark
