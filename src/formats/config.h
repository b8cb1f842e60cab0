// spark's configuration: defaults < the TOML file (.spark.toml, or --config) < environment < command-line flags.
//
// Every setting is one row of one table (config_keys): its key, type, default, environment variables and help.
// `spark config` shows the effective value of each row and where it came from, the command-line help of an option
// that sets one is made from its row (option_help), and docs/SETTINGS.md holds the table as `spark config
// --markdown` prints it. A default a struct needs as a value is a constant of formats/defaults.h, which the row names.
// Every setting has one dotted key ("llm.model"); the file spells it as a table entry ([llm] model = "…"). A few rows
// are read from the environment alone (`env_only`: SPARK_THREADS, ...): process knobs the code reads where it uses
// them, through environment_setting. Values are kept as text with where they came from. Secrets (API keys) are never
// printed, only whether they are set and from where.
// Contract: a loaded Config is an immutable value (const use from many threads is safe); a bad file or value fails
// load with a Result naming the file, line and key; a secret's value never appears in a message.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "formats/redact.h"

namespace spark {

enum class ConfigType { string, integer, number, boolean };

struct ConfigKey {
  std::string key;  // "llm.model"
  ConfigType type;
  std::string default_value;     // "" = unset
  std::vector<std::string> env;  // environment variables, first set wins
  bool secret = false;
  std::string help;
  // Read from the environment alone, where it is used (environment_setting): its key is its variable's name; a file
  // or a flag cannot set it.
  bool env_only = false;
};

// The table of settings, in the order `spark config` shows them.
const std::vector<ConfigKey>& config_keys();

// An environment-only setting's value (`name`: its variable, "SPARK_THREADS"): the variable's when set and not empty,
// else the table's default; "" for a name the table does not have as environment-only. spark's own Config::load has
// already refused a value of the wrong type.
std::string environment_setting(std::string_view name);

// The command-line help of an option that sets `key`: `prose` (the table's help when empty), then the table's default
// and environment variables, "requests in flight (default 4)", "model name the server knows (env SPARK_LLM_MODEL)".
std::string option_help(const std::string& key, const std::string& prose = "");

// What a repository's own file may do with a setting before its owner trusts it (docs/SECURITY.md).
enum class RepoMay {
  set,     // anything: how spark ranks and shows, never where data goes
  refuse,  // nothing: where data is sent, credentials, commands
  lower,   // only lower it: a limit of time, cost or what is released from quarantine
  enable,  // only turn it on: a safety switch
  inside,  // only a path inside the repository
};
struct RepoRule {
  RepoMay may = RepoMay::set;
  const char* why = "";  // the reason, for the warning and `spark config`
  bool zero_is_none = false;  // lower: 0 means no limit, the highest value
};
RepoRule repository_may(std::string_view key);

// The table as Markdown (docs/SETTINGS.md's generated section): the file's settings, then the environment-only ones.
std::string settings_markdown();

// The `.spark` folders seen from `start` (the working directory), found as git finds `.git`. Walking up from `start`,
// the nearest `.spark` that holds a knowledge base (kb.sqlite) is the one used (a `.spark` without kb.sqlite is not
// spark's and is passed by); the walk ends at the project's top: the nearest folder that holds `.spark.toml` or is a
// git work tree's top (has `.git`). Outside a git work tree and without a `.spark.toml` only `start` is looked at.
struct SparkFolders {
  std::filesystem::path kb;   // the knowledge base's folder: the nearest one found, else `top`
  std::filesystem::path top;  // the project top's .spark (start/.spark without a top): where a new store is made
  std::string how;            // how `kb` was chosen, for `spark config` and `spark kb status` ("default: …")
};
SparkFolders find_spark_folders(const std::filesystem::path& start);

class Config {
 public:
  struct Value {
    std::string text;
    std::string source;  // "default", "/path/.spark.toml:12", "env SPARK_LLM_MODEL", "flag --model"
  };

  // A configuration file, and whether each of its settings is believed. An untrusted one (a repository's own file its
  // owner has not trusted: formats/trust.h) may set only what repository_may() allows; the rest is refused.
  struct File {
    std::filesystem::path path;
    bool trusted = true;
  };
  // A setting an untrusted file gave that was not taken (its text "" for a secret), or a key withheld from a URL set
  // elsewhere (bind_keys), and why.
  struct Refused {
    std::string key, text, source, why;
    int64_t line = 0;     // the line in its file
    bool quoted = false;  // a string: shown quoted
  };

  // Defaults, then each file in order (lowest first: the system's, the user's, the project's), then the environment.
  // A file that does not parse, an unknown key or a value of the wrong type is an error naming the file and line.
  static Result<Config> load(const std::vector<File>& files);
  // Defaults, then `file` (trusted) when given, then the environment.
  static Result<Config> load(const std::optional<std::filesystem::path>& file);
  // The file to use: `explicit_path` when given (it must exist), else .spark.toml in the working directory or the
  // nearest enclosing directory that has one, stopping at a git work tree's top.
  static std::optional<std::filesystem::path> discover(const std::filesystem::path& start);
  // Places `kb` and `local_dir` (a postgresql:// URL stays as it is): one left at its default is found from `cwd` as
  // find_spark_folders says (its source then says how; named ".spark" when it is cwd's own, else by its absolute
  // path); a relative path from the configuration file is taken from the file's folder. One from the environment or
  // a flag stays as given (the working directory's).
  void place_folders(const std::filesystem::path& cwd);

  // A flag the user gave: overrides everything. The text must parse as the key's type.
  Status set(const std::string& key, const std::string& text, const std::string& source);

  const Value& get(const std::string& key) const;
  std::string str(const std::string& key) const { return get(key).text; }
  bool is_set(const std::string& key) const { return !get(key).text.empty(); }
  long long integer(const std::string& key) const;
  double number(const std::string& key) const;
  bool boolean(const std::string& key) const;

  // After the flags: an API key is sent only to the URL set beside it, by the same source (the command line and the
  // environment count as one; each file is its own). A key whose URL came from elsewhere is withheld (refused()).
  void bind_keys();
  const std::vector<Refused>& refused() const { return refused_; }
  // One line naming what was refused and how to trust the file, "" when nothing was.
  std::string trust_warning() const;

  const std::vector<RedactionRule>& redaction_rules() const { return rules_; }
  const std::optional<std::filesystem::path>& file() const { return file_; }

  // The effective configuration as TOML-like lines with sources; secrets masked.
  std::string describe() const;

 private:
  std::string described(const ConfigKey& k, const std::string& name) const;  // one line of describe()
  std::map<std::string, Value> values_;
  Status apply_file(const File& file);
  static void relative_to_file(Value& v);
  std::vector<RedactionRule> rules_;
  std::optional<std::filesystem::path> file_;
  std::vector<Refused> refused_;
  std::optional<std::filesystem::path> untrusted_file_;  // the file whose settings were refused, if any
};

}  // namespace spark
