// Secret redaction: nothing that looks like a credential leaves the machine (LLM prompts, embedding requests, SARIF,
// GitHub annotations, HTML reports, and `spark export --redact`).
//
// Each rule is a PCRE2 pattern; the text its `secret` group (or the whole match) covers is replaced by
// "[REDACTED:<rule>]". Line structure is kept: a multi-line secret (a private key block) keeps its line breaks, so
// line numbers shown to a model stay the file's own. Users add rules in the configuration ([redact] patterns).
// Contract: a Redactor is immutable once made (its const members may be called from many threads); make fails with a
// Result naming the rule whose pattern does not compile.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/pcre_regex.h"
#include "base/result.h"

namespace spark {

struct RedactionRule {
  std::string name;
  std::string pattern;  // PCRE2; a named group (?<secret>…) limits the replacement to that part
};

// The built-in rules (docs/LLM.md lists them).
const std::vector<RedactionRule>& builtin_redaction_rules();

class Redactor {
 public:
  // Compiles the built-in rules plus `extra` (user rules, named "custom-N" when unnamed). A bad user pattern is an
  // error naming it.
  static Result<Redactor> make(const std::vector<RedactionRule>& extra = {});

  // Redacts `text` in place; adds per-rule counts to `counts`. Returns how many secrets were replaced.
  size_t redact(std::string& text, std::map<std::string, size_t>& counts) const;

 private:
  size_t redact_once(std::string& text, std::map<std::string, size_t>& counts) const;
  struct Compiled {
    std::string name;
    Regex regex;
    bool builtin = false;  // built-in rules leave documentation hosts' credentials alone
  };
  std::vector<Compiled> rules_;
};

// True for the hosts of documentation and tests, never of a real service: example.com, example.net, example.org
// (RFC 2606), the reserved top-level names .example, .test, .invalid and .localhost (RFC 6761), localhost, and the
// loopback and unspecified addresses; any of their subdomains too. The built-in rules redact no credential given for
// one ("postgresql://app:pw@localhost/app", "token = 'localhost'"); a user's rule still does.
bool documentation_host(std::string_view host);

struct Case;

// Redacts every string in `value` (object keys are kept). Returns how many secrets were replaced.
size_t redact_json_strings(nlohmann::json& value, const Redactor& redactor, std::map<std::string, size_t>& counts);

// Redacts a case's text: its error message, its files' contents (line count kept, so faulty lines still point at
// their lines) and every string under `meta`. Ids, paths, test ids, times and commits are left as they are.
size_t redact_case(Case& c, const Redactor& redactor, std::map<std::string, size_t>& counts);

// Copies of `items` for a page others read (an HTML report), each redacted by `redact_one(item, redactor, counts)`,
// which returns how many secrets it replaced; "redacted N secret(s) from <where>" joins `notes` when any was.
template <class T, class F>
std::vector<T> redacted_copies(const std::vector<T>& items, const Redactor& redactor, F&& redact_one,
                               std::string_view where, std::vector<std::string>& notes) {
  std::vector<T> out = items;
  std::map<std::string, size_t> counts;
  size_t n = 0;
  for (auto& item : out) n += redact_one(item, redactor, counts);
  if (n) notes.push_back("redacted " + std::to_string(n) + " secret(s) from " + std::string(where));
  return out;
}

// True for the URLs PostgresDb (store/postgres_db.h) takes: postgresql://… or postgres://….
bool is_postgres_url(std::string_view location);
// The URL without its password (user:secret@ → user@, password=… dropped from the query), for messages and
// `spark config`.
std::string redact_postgres_url(std::string_view url);
// An error when libpq would read `url`'s password wrongly and then print part of it: libpq takes the user
// information up to the first '@', so a second '@' in the authority (an '@' in the password left unencoded) makes
// the rest of the password the host name, which libpq's message names. The message says to write it %40.
Status check_postgres_url(std::string_view url);
// `message` (libpq's) with the URL's password, and each piece of it between '@', ':' and '/' of 3 characters or
// more, replaced by [REDACTED]: what libpq may quote of a password it read as a host, port or database name.
std::string mask_postgres_password(std::string message, std::string_view url);

}  // namespace spark
