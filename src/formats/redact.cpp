#include "formats/redact.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/case.h"

namespace spark {

const std::vector<RedactionRule>& builtin_redaction_rules() {
  // Values after `=`/`:` that are code rather than secrets are left alone: calls, attribute and item access,
  // None/True/False/null. Quoted values are always taken.
  static const std::vector<RedactionRule> rules = {
      {"private-key",
       R"(-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?<secret>[\s\S]*?)-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"},
      {"aws-access-key", R"(\b(?<secret>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16})\b)"},
      {"github-token", R"(\b(?<secret>gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}))"},
      {"gitlab-token", R"(\b(?<secret>gl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_\-]{20,}))"},
      {"slack-token", R"(\b(?<secret>xox[abposr]-[A-Za-z0-9\-]{10,}))"},
      {"google-api-key", R"(\b(?<secret>AIza[0-9A-Za-z_\-]{35}))"},
      {"openai-key", R"(\b(?<secret>sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}))"},
      {"jwt", R"(\b(?<secret>eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}))"},
      {"bearer-token", R"((?i)\b(?:bearer|token)\s+(?<secret>[A-Za-z0-9\-._~+/]{16,}=*))"},
      {"basic-auth-header", R"((?i)\bauthorization\s*[:=]\s*["']?basic\s+(?<secret>[A-Za-z0-9+/]{8,}=*))"},
      {"connection-string-password", R"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'"]+:(?<secret>[^\s@/'"]+)@)"},
      {"secret-assignment-quoted",
       R"((?i)\b[A-Za-z0-9_\-]*(?:password|passwd|pwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credentials?)[A-Za-z0-9_\-]*["']?\s*(?:=|:|==)\s*[rbuf]?(?<q>["'])(?<secret>[^"'\n]{3,})\k<q>)"},
      // Unquoted: `=`, or `:` ending the line (YAML, env dumps). Names, calls, attribute and item access, keywords
      // and type names are code, not secrets.
      {"secret-assignment",
       R"((?im)\b[A-Za-z0-9_\-]*(?:password|passwd|pwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key)[A-Za-z0-9_\-]*(?:\s*=(?!=)\s*|:[ \t]*(?=[^\s]+[ \t]*$))(?!(?:None|True|False|null|nil|self|cls|return|pass|str|int|bytes|bool|float|dict|list|tuple|set|object|Any|Optional)\b)(?<secret>[^\s"'`,;()\[\]{}<>.:=]{3,})(?![\w]*[(\[.]))"},
  };
  return rules;
}

bool documentation_host(std::string_view host) {
  std::string h = ascii_lower(host);
  while (!h.empty() && h.back() == '.') h.pop_back();
  const auto is_or_under = [&](std::string_view name) {
    return h == name || (h.size() > name.size() && h.ends_with(name) && h[h.size() - name.size() - 1] == '.');
  };
  // RFC 2606 and 6761: example.com/.net/.org and the top-level names reserved for documentation, tests and loopback.
  for (std::string_view name : {"example.com", "example.net", "example.org", "example", "test", "invalid", "localhost"})
    if (is_or_under(name)) return true;
  return h.starts_with("127.") || h == "[::1]" || h == "::1" || h == "0.0.0.0";
}

namespace {

// The host a secret is given for: after the `@` that ends the match (scheme://user:password@host), else the secret
// itself when it reads as a host or URL ("localhost", "http://localhost:8000"). Empty when neither.
std::string_view host_of(std::string_view text, std::string_view match, std::string_view secret) {
  std::string_view rest;
  if (match.ends_with('@'))
    rest = text.substr(static_cast<size_t>(match.data() - text.data()) + match.size());
  else if (const size_t scheme = secret.find("://"); scheme != std::string_view::npos)
    rest = secret.substr(scheme + 3);
  else
    rest = secret;
  if (const size_t at = rest.find('@'); at != std::string_view::npos && at < rest.find('/')) rest = rest.substr(at + 1);
  if (rest.starts_with('[')) return rest.substr(0, rest.find(']') + 1);
  return rest.substr(0, rest.find_first_of(":/?#'\" \t\r\n"));
}

}  // namespace

Result<Redactor> Redactor::make(const std::vector<RedactionRule>& extra) {
  Redactor r;
  size_t n = 0;
  for (const auto& rule : builtin_redaction_rules()) r.rules_.push_back({rule.name, Regex::must(rule.pattern), true});
  for (const auto& rule : extra) {
    ++n;
    auto re = Regex::compile(rule.pattern);
    if (!re)
      return fail("redaction rule " + (rule.name.empty() ? "#" + std::to_string(n) : rule.name) + ": " +
                  re.error().message);
    r.rules_.push_back({rule.name.empty() ? "custom-" + std::to_string(n) : rule.name, std::move(*re), false});
  }
  return r;
}

size_t Redactor::redact(std::string& text, std::map<std::string, size_t>& counts) const {
  // Rules run in turn, so one rule's label can complete another rule's match over what is left: tests/fuzz found
  // "s://r:secret://u@." where secret-assignment took "//u" and left "secret" of the connection string's password
  // showing until a second pass. Passes repeat until one replaces nothing (labels are never matched again).
  size_t total = 0;
  for (int pass = 0; pass < 8; ++pass) {
    const size_t n = redact_once(text, counts);
    total += n;
    if (n == 0) break;
  }
  return total;
}

size_t Redactor::redact_once(std::string& text, std::map<std::string, size_t>& counts) const {
  size_t total = 0;
  for (const auto& rule : rules_) {
    const int g = rule.regex.group_number("secret");
    // Spans to replace, as offsets (matches never overlap within one rule).
    std::vector<std::pair<size_t, size_t>> spans;
    rule.regex.for_each_match(text, [&](const std::vector<std::string_view>& groups) {
      const std::string_view s =
          g > 0 && static_cast<size_t>(g) < groups.size() && !groups[static_cast<size_t>(g)].empty()
              ? groups[static_cast<size_t>(g)]
              : groups[0];
      if (s.empty() || s.starts_with("[REDACTED")) return;
      // Credentials of documentation hosts are examples, not secrets: a built-in rule leaves them (a user's rule
      // does not).
      if (rule.builtin && documentation_host(host_of(text, groups[0], s))) return;
      spans.emplace_back(static_cast<size_t>(s.data() - text.data()), s.size());
    });
    if (spans.empty()) continue;
    const std::string label = "[REDACTED:" + rule.name + "]";
    std::string out;
    out.reserve(text.size());
    size_t copied = 0;
    for (const auto& [at, len] : spans) {
      out.append(text, copied, at - copied);
      // Keep the line breaks inside the secret: one label per line it spanned.
      const std::string_view secret(text.data() + at, len);
      size_t line_start = 0;
      bool first = true;
      for (size_t i = 0; i <= secret.size(); ++i) {
        if (i == secret.size() || secret[i] == '\n') {
          const std::string_view piece = secret.substr(line_start, i - line_start);
          if (first || !piece.empty()) out += label;
          first = false;
          if (i < secret.size()) out += '\n';
          line_start = i + 1;
        }
      }
      copied = at + len;
    }
    out.append(text, copied, std::string::npos);
    text = std::move(out);
    counts[rule.name] += spans.size();
    total += spans.size();
  }
  return total;
}

size_t redact_json_strings(nlohmann::json& value, const Redactor& redactor, std::map<std::string, size_t>& counts) {
  // Iterative: a stored `meta` may be nested up to the reader's depth limit.
  size_t n = 0;
  std::vector<nlohmann::json*> todo{&value};
  while (!todo.empty()) {
    nlohmann::json* v = todo.back();
    todo.pop_back();
    if (v->is_string()) {
      n += redactor.redact(v->get_ref<std::string&>(), counts);
    } else if (v->is_structured()) {
      for (auto& child : *v) todo.push_back(&child);
    }
  }
  return n;
}

size_t redact_case(Case& c, const Redactor& redactor, std::map<std::string, size_t>& counts) {
  size_t n = redactor.redact(c.error_message, counts);
  for (auto& f : c.files) n += redactor.redact(f.content, counts);
  if (c.record.is_object())
    if (auto meta = c.record.find("meta"); meta != c.record.end()) n += redact_json_strings(*meta, redactor, counts);
  return n;
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

namespace {

// The URL's authority (user information, host, port): from the scheme's "//" to the first '/' or '?'.
std::string_view postgres_authority(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  const std::string_view rest = url.substr(scheme + 3);
  return rest.substr(0, rest.find_first_of("/?"));
}

}  // namespace

Status check_postgres_url(std::string_view url) {
  const std::string_view authority = postgres_authority(url);
  if (std::count(authority.begin(), authority.end(), '@') > 1)
    return fail("knowledge base " + redact_postgres_url(url) +
                ": the URL's user name or password holds an '@': write it %40 (postgresql://user:p%40ss@host/db), "
                "or give the password in PGPASSWORD or ~/.pgpass");
  return {};
}

std::string mask_postgres_password(std::string message, std::string_view url) {
  // The password as written: after the user information's first ':', up to the last '@' of the text before the
  // query (so a password holding '/' or '@' is taken whole).
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return message;
  const std::string_view rest = url.substr(scheme + 3);
  const std::string_view before_query = rest.substr(0, rest.find('?'));
  const size_t at = before_query.rfind('@');
  if (at == std::string_view::npos) return message;
  const std::string_view userinfo = before_query.substr(0, at);
  const size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) return message;
  const std::string_view password = userinfo.substr(colon + 1);
  std::vector<std::string_view> pieces = {password};
  for (size_t start = 0; start <= password.size();) {
    const size_t end = std::min(password.find_first_of("@:/", start), password.size());
    if (end - start >= 3) pieces.push_back(password.substr(start, end - start));
    start = end + 1;
  }
  constexpr std::string_view kMask = "[REDACTED]";
  for (const std::string_view piece : pieces)
    for (size_t i = 0; !piece.empty() && (i = message.find(piece, i)) != std::string::npos; i += kMask.size())
      message.replace(i, piece.size(), kMask);
  return message;
}

std::string redact_postgres_url(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, scheme + 3));
  std::string_view rest = url.substr(scheme + 3);
  const size_t slash = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, slash);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    out += userinfo.substr(0, userinfo.find(':'));
    out += authority.substr(at);
  } else {
    out += authority;
  }
  if (slash == std::string_view::npos) return out;
  rest = rest.substr(slash);
  const size_t q = rest.find('?');
  out += rest.substr(0, q);
  if (q == std::string_view::npos) return out;
  // Query parameters, without password=….
  std::string query;
  std::string_view params = rest.substr(q + 1);
  while (!params.empty()) {
    const size_t amp = params.find('&');
    const std::string_view p = params.substr(0, amp);
    if (!p.starts_with("password=")) query += (query.empty() ? "" : "&") + std::string(p);
    if (amp == std::string_view::npos) break;
    params = params.substr(amp + 1);
  }
  if (!query.empty()) out += "?" + query;
  return out;
}

}  // namespace spark
