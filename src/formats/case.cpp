#include "formats/case.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "base/text.h"
#include "formats/error_message.h"
#include "formats/json_line.h"
#include "formats/junit.h"

namespace spark {

using nlohmann::json;

const SourceFile* Case::file(std::string_view p) const {
  for (const auto& f : files)
    if (f.path == p) return &f;
  return nullptr;
}

namespace {

bool read_digits(std::string_view s, size_t& i, size_t count, int& out) {
  if (i + count > s.size()) return false;
  int v = 0;
  for (size_t k = 0; k < count; ++k) {
    const char c = s[i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  i += count;
  return true;
}

bool expect(std::string_view s, size_t& i, char c) {
  if (i < s.size() && s[i] == c) {
    ++i;
    return true;
  }
  return false;
}

}  // namespace

std::optional<LineRef> parse_line_ref(std::string_view text) {
  const size_t colon = text.rfind(':');
  const std::string number(colon == std::string_view::npos ? text : text.substr(colon + 1));
  char* end = nullptr;
  const long line = std::strtol(number.c_str(), &end, 10);
  if (number.empty() || *end != '\0' || line < 1 || line > std::numeric_limits<int>::max()) return std::nullopt;
  return LineRef{colon == std::string_view::npos ? "" : std::string(text.substr(0, colon)), static_cast<int>(line)};
}

Result<int64_t> parse_iso8601(std::string_view s) {
  size_t i = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  const auto bad = [&] { return fail("failure_time \"" + clip(s, 60) + "\" is not an ISO-8601 time"); };
  if (!read_digits(s, i, 4, year) || !expect(s, i, '-') || !read_digits(s, i, 2, month) || !expect(s, i, '-') ||
      !read_digits(s, i, 2, day))
    return bad();
  if (!(expect(s, i, 'T') || expect(s, i, 't') || expect(s, i, ' '))) return bad();
  if (!read_digits(s, i, 2, hour) || !expect(s, i, ':') || !read_digits(s, i, 2, minute) || !expect(s, i, ':') ||
      !read_digits(s, i, 2, second))
    return bad();
  if (expect(s, i, '.') || expect(s, i, ',')) {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return bad();
  }
  int offset_seconds = 0;
  if (expect(s, i, 'Z') || expect(s, i, 'z')) {
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    const int sign = s[i] == '+' ? 1 : -1;
    ++i;
    int oh = 0, om = 0;
    if (!read_digits(s, i, 2, oh)) return bad();
    expect(s, i, ':');
    if (!read_digits(s, i, 2, om) || oh > 23 || om > 59) return bad();
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return fail("failure_time \"" + clip(s, 60) + "\" has no time zone (use Z for UTC)");
  }
  if (i != s.size()) return bad();
  const std::chrono::year_month_day ymd{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 60) return bad();
  const auto days = std::chrono::sys_days{ymd}.time_since_epoch().count();
  return static_cast<int64_t>(days) * 86400 + int64_t{hour} * 3600 + int64_t{minute} * 60 + second - offset_seconds;
}

int64_t now_epoch() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string format_iso8601(int64_t epoch) {
  const auto days = std::chrono::floor<std::chrono::days>(std::chrono::sys_seconds{std::chrono::seconds{epoch}});
  const std::chrono::year_month_day ymd{days};
  const int64_t rest = epoch - static_cast<int64_t>(days.time_since_epoch().count()) * 86400;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), static_cast<int>(rest / 3600),
                static_cast<int>(rest / 60 % 60), static_cast<int>(rest % 60));
  return buf;
}

namespace {

const std::set<std::string, std::less<>> kKnownKeys = {
    "id",    "project",          "test_id",       "language",     "failure_time", "error_message",
    "files", "faulty_lines",     "faulty_commit", "fixed_commit", "source",       "meta",
    "tests", "last_pass_commit", "break_commit",  "change"};

Result<std::string> required_string(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end()) return fail(std::string("missing required key \"") + key + "\"");
  if (!it->is_string()) return fail(std::string("\"") + key + "\" must be a string, not " + it->type_name());
  return it->get<std::string>();
}

Result<std::optional<std::string>> optional_string(const json& r, const char* key) {
  auto it = r.find(key);
  if (it == r.end() || it->is_null()) return std::optional<std::string>{};
  if (!it->is_string()) return fail(std::string("\"") + key + "\" must be a string or null, not " + it->type_name());
  return std::optional<std::string>{it->get<std::string>()};
}

// Why `path` cannot name a file of a case ("" when it can). A case's files are named by their path inside the
// repository, and that path reaches SARIF's artifact uri, the annotations' file= and the HTML reports: a ".." part
// or an absolute path would point them out of the repository, and a control character (a NUL, a line break) would
// cut or split them.
std::string unusable_path(std::string_view path) {
  const auto control = [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F; };
  if (std::any_of(path.begin(), path.end(), control))
    return "holds a control character (a NUL, a line break): a path is one line of text";
  const bool drive = path.size() >= 2 && std::isalpha(static_cast<unsigned char>(path[0])) && path[1] == ':';
  if (path.starts_with('/') || path.starts_with('\\') || drive)
    return "is an absolute path: a case names its files by their path inside the repository (tests/test_x.py)";
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find_first_of("/\\", start), path.size());
    if (path.substr(start, end - start) == "..")
      return "has a \"..\" part: a case names its files by their path inside the repository (tests/test_x.py)";
    start = end + 1;
  }
  return "";
}

// A `{"path", "line"}` entry of a case (a faulty line, a changed line) as its file and 1-based line, checked: an
// object, a path of `files`, a line in range. `lines_of` splits each file once.
using SplitFiles = std::map<const SourceFile*, std::vector<std::string_view>>;
Result<std::pair<const SourceFile*, int>> line_of_case(const json& entry, const std::string& where, const Case& c,
                                                       SplitFiles& lines_of) {
  if (!entry.is_object()) return fail(where + " must be an object");
  auto path = entry.find("path");
  auto line = entry.find("line");
  if (path == entry.end() || !path->is_string()) return fail(where + ".path must be a string");
  if (line == entry.end() || !line->is_number_integer()) return fail(where + ".line must be an integer");
  const SourceFile* f = c.file(path->get_ref<const std::string&>());
  if (!f) return fail(where + ": path \"" + path->get<std::string>() + "\" is not in files");
  auto [at, split] = lines_of.try_emplace(f);
  if (split) at->second = split_lines(f->content);
  const size_t count = at->second.size();
  // An unsigned above 2^63 - 1 would wrap to a negative long long: it is out of range as written.
  const bool too_big = line->is_number_unsigned() && line->get<uint64_t>() > static_cast<uint64_t>(count);
  const long long n = too_big ? 0 : line->get<long long>();
  if (too_big || n < 1 || n > static_cast<long long>(count))
    return fail(where + ": line " + json_text(*line) + " is out of range (" + f->path + " has " +
                std::to_string(count) + " lines)");
  return std::pair{f, static_cast<int>(n)};
}

// `last_pass_commit`, `break_commit` and `change` as a ChangeSince, checked against the case's files; nullopt when no
// last pass is given.
Result<std::optional<ChangeSince>> change_from_json(const json& r, const Case& c) {
  auto last_pass = optional_string(r, "last_pass_commit");
  TRY(last_pass);
  auto breaking = optional_string(r, "break_commit");
  TRY(breaking);
  const auto change = r.find("change");
  const bool has_change = change != r.end() && !change->is_null();
  if (!*last_pass) {
    if (has_change) return fail("\"change\" needs \"last_pass_commit\" (the commit it is measured from)");
    if (*breaking) return fail("\"break_commit\" needs \"last_pass_commit\" (the pass before the break)");
    return std::optional<ChangeSince>{};
  }
  if ((*last_pass)->empty()) return fail("\"last_pass_commit\" is empty");
  ChangeSince out;
  out.last_pass = **last_pass;
  out.break_commit = breaking->value_or("");
  if (!has_change) return std::optional<ChangeSince>{std::move(out)};
  if (!change->is_object()) return fail(std::string("\"change\" must be an object, not ") + change->type_name());
  const auto commit_of = [](const json& o, const std::string& where) -> Result<std::string> {
    auto it = o.find("commit");
    if (it == o.end() || it->is_null()) return std::string();
    if (!it->is_string()) return fail(where + ".commit must be a string");
    return it->get<std::string>();
  };
  if (auto lines = change->find("lines"); lines != change->end()) {
    if (!lines->is_array()) return fail("\"change.lines\" must be an array");
    SplitFiles lines_of;
    for (size_t i = 0; i < lines->size(); ++i) {
      const json& l = (*lines)[i];
      const std::string where = "change.lines[" + std::to_string(i) + "]";
      auto at = line_of_case(l, where, c, lines_of);
      TRY(at);
      auto commit = commit_of(l, where);
      TRY(commit);
      out.lines.push_back({{at->first->path, at->second}, std::move(*commit)});
    }
  }
  if (auto product = change->find("product"); product != change->end()) {
    if (!product->is_array()) return fail("\"change.product\" must be an array");
    if (product->size() > kMaxProductChanges)
      return fail("\"change.product\" lists " + std::to_string(product->size()) + " names and literals; at most " +
                  std::to_string(kMaxProductChanges));
    for (size_t i = 0; i < product->size(); ++i) {
      const json& p = (*product)[i];
      const std::string where = "change.product[" + std::to_string(i) + "]";
      if (!p.is_object()) return fail(where + " must be an object");
      ChangeSince::Product item;
      auto name = p.find("name");
      auto literal = p.find("literal");
      if ((name == p.end()) == (literal == p.end())) return fail(where + " must have one of \"name\" and \"literal\"");
      const auto& token = name != p.end() ? *name : *literal;
      if (!token.is_string() || token.get_ref<const std::string&>().empty())
        return fail(where + (name != p.end() ? ".name" : ".literal") + " must be a non-empty string");
      if (token.get_ref<const std::string&>().size() > 256) return fail(where + ": longer than 256 bytes");
      item.token = token.get<std::string>();
      if (auto bad = find_invalid_utf8(item.token))
        return fail(where + ": invalid UTF-8 at byte " + std::to_string(*bad));
      item.literal = literal != p.end();
      if (auto path = p.find("path"); path != p.end() && !path->is_null()) {
        if (!path->is_string()) return fail(where + ".path must be a string");
        item.path = path->get<std::string>();
      }
      auto commit = commit_of(p, where);
      TRY(commit);
      item.commit = std::move(*commit);
      out.product.push_back(std::move(item));
    }
  }
  return std::optional<ChangeSince>{std::move(out)};
}

}  // namespace

Result<Case> case_from_json(json r) {
  if (!r.is_object()) return fail(std::string("a case must be a JSON object, not ") + r.type_name());
  Case c;
  for (auto [field, key] : {std::pair{&c.id, "id"},
                            {&c.project, "project"},
                            {&c.test_id, "test_id"},
                            {&c.language, "language"},
                            {&c.failure_time, "failure_time"},
                            {&c.error_message, "error_message"}}) {
    auto v = required_string(r, key);
    TRY(v);
    *field = std::move(*v);
  }
  if (c.id.empty()) return fail("\"id\" is empty");
  cap_error_message(c.error_message);
  if (c.test_id.size() > kTestIdLimit) c.test_id = bounded_test_id(c.test_id);
  auto epoch = parse_iso8601(c.failure_time);
  TRY(epoch);
  c.failure_epoch = *epoch;
  for (auto [field, key] :
       {std::pair{&c.faulty_commit, "faulty_commit"}, {&c.fixed_commit, "fixed_commit"}, {&c.source, "source"}}) {
    auto v = optional_string(r, key);
    TRY(v);
    *field = std::move(*v);
  }
  if (auto it = r.find("meta"); it != r.end() && !it->is_object())
    return fail(std::string("\"meta\" must be an object, not ") + it->type_name());
  if (auto it = r.find("tests"); it != r.end()) {
    if (!it->is_array()) return fail(std::string("\"tests\" must be an array of test ids, not ") + it->type_name());
    for (size_t i = 0; i < it->size(); ++i)
      if (!(*it)[i].is_string() || (*it)[i].get_ref<const std::string&>().empty())
        return fail("tests[" + std::to_string(i) + "] must be a non-empty string (a test id)");
  }

  auto files = r.find("files");
  if (files == r.end()) return fail("missing required key \"files\"");
  if (!files->is_array() || files->empty()) return fail("\"files\" must be a non-empty array");
  for (size_t i = 0; i < files->size(); ++i) {
    json& f = (*files)[i];  // its content is moved out: `files` leaves the record below
    const std::string where = "files[" + std::to_string(i) + "]";
    if (!f.is_object()) return fail(where + " must be an object");
    auto path = f.find("path");
    auto content = f.find("content");
    if (path == f.end() || !path->is_string() || path->get_ref<const std::string&>().empty())
      return fail(where + ".path must be a non-empty string");
    if (content == f.end() || !content->is_string()) return fail(where + ".content must be a string");
    SourceFile sf{path->get<std::string>(), std::move(content->get_ref<std::string&>())};
    end_lone_carriage_returns(sf.content);
    if (auto why = unusable_path(sf.path); !why.empty())
      return fail(where + ".path \"" + terminal_line(sf.path) + "\" " + why);
    if (c.file(sf.path)) return fail(where + ": path \"" + sf.path + "\" is listed twice");
    if (auto why = test_file_too_large(sf.content); !why.empty()) return fail(where + " (" + sf.path + "): " + why);
    if (auto bad = find_invalid_utf8(sf.content))
      return fail(where + " (" + sf.path + "): invalid UTF-8 at byte " + std::to_string(*bad));
    c.files.push_back(std::move(sf));
  }
  if (auto it = r.find("faulty_lines"); it != r.end() && !it->is_null()) {
    if (!it->is_array()) return fail("\"faulty_lines\" must be an array");
    SplitFiles lines_of;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& fl = (*it)[i];
      const std::string where = "faulty_lines[" + std::to_string(i) + "]";
      auto at = line_of_case(fl, where, c, lines_of);
      TRY(at);
      const auto [f, n] = *at;
      LineRef ref{f->path, 0};
      if (is_blank(lines_of[f][static_cast<size_t>(n - 1)]))
        return fail(where + ": line " + std::to_string(n) + " of " + ref.path + " is blank");
      ref.line = n;
      if (std::find(c.faulty_lines.begin(), c.faulty_lines.end(), ref) != c.faulty_lines.end())
        return fail(where + ": line " + std::to_string(n) + " of " + ref.path + " is listed twice");
      if (auto fix = fl.find("fix"); fix != fl.end() && !fix->is_null()) {
        if (!fix->is_array()) return fail(where + ".fix must be an array of strings (the fix's lines)");
        std::vector<std::string> lines_of_fix;
        for (size_t k = 0; k < fix->size(); ++k) {
          if (!(*fix)[k].is_string())
            return fail(where + ".fix[" + std::to_string(k) + "] must be a string (one line of the fix)");
          std::string text = (*fix)[k].get<std::string>();
          if (auto bad = find_invalid_utf8(text))
            return fail(where + ".fix[" + std::to_string(k) + "]: invalid UTF-8 at byte " + std::to_string(*bad));
          if (text.find('\n') != std::string::npos)
            return fail(where + ".fix[" + std::to_string(k) + "] holds a line break: one line per string");
          lines_of_fix.push_back(std::move(text));
        }
        c.fixes[ref] = std::move(lines_of_fix);
      }
      c.faulty_lines.push_back(std::move(ref));
    }
  }
  auto change = change_from_json(r, c);
  TRY(change);
  c.change = std::move(*change);
  // Keep the record for a lossless export; unknown keys go under meta, as the format says.
  r.erase("files");
  r.erase("error_message");
  std::vector<std::string> unknown;
  for (auto& [key, value] : r.items())
    if (!kKnownKeys.contains(key)) unknown.push_back(key);
  for (const auto& key : unknown) {
    json& meta = r["meta"];
    if (meta.is_null()) meta = json::object();
    if (meta.contains(key)) return fail("unknown key \"" + key + "\" clashes with meta." + key);
    meta[key] = std::move(r[key]);
    r.erase(key);
  }
  c.record = std::move(r);
  return c;
}

void put_change(json& record, const ChangeSince& change) {
  record["last_pass_commit"] = change.last_pass;
  if (!change.break_commit.empty()) record["break_commit"] = change.break_commit;
  if (change.lines.empty() && change.product.empty()) return;
  json lines = json::array();
  for (const auto& l : change.lines) {
    json o = {{"path", l.at.path}, {"line", l.at.line}};
    if (!l.commit.empty()) o["commit"] = l.commit;
    lines.push_back(std::move(o));
  }
  json product = json::array();
  for (const auto& p : change.product) {
    json o = {{p.literal ? "literal" : "name", p.token}};
    if (!p.path.empty()) o["path"] = p.path;
    if (!p.commit.empty()) o["commit"] = p.commit;
    product.push_back(std::move(o));
  }
  record["change"] = {{"lines", std::move(lines)}, {"product", std::move(product)}};
}

json case_to_json(const Case& c) {
  json out = c.record;
  out["id"] = c.id;
  out["error_message"] = c.error_message;
  json files = json::array();
  for (const auto& f : c.files) files.push_back({{"path", f.path}, {"content", f.content}});
  out["files"] = std::move(files);
  return out;
}

std::string content_key(const Case& c) {
  uint64_t h = fnv1a64(c.error_message);
  for (const auto& f : c.files) {
    h = fnv1a64(f.path, h ^ 0x9e3779b97f4a7c15ULL);
    h = fnv1a64(f.content, h ^ 0x85ebca6b0b3e5d2bULL);
  }
  return hex64(h);
}

std::string fault_key(const Case& c) {
  // A labelled case's fix commit is not part of it: one faulty version fixed on two lines of history (a merge and the
  // side-branch commit it brought in, a cherry-pick) is one fault.
  uint64_t h = fnv1a64(c.faulty_lines.empty() ? c.fixed_commit.value_or("") : "");
  if (c.faulty_lines.empty()) {  // unlabelled: nothing but the test and its code tell it apart
    h = fnv1a64(c.test_id, h ^ 0x9e3779b97f4a7c15ULL);
    for (const auto& f : c.files) {
      h = fnv1a64(f.path, h ^ 0x9e3779b97f4a7c15ULL);
      h = fnv1a64(f.content, h ^ 0x85ebca6b0b3e5d2bULL);
    }
    return hex64(h);
  }
  std::vector<LineRef> lines = c.faulty_lines;
  std::sort(lines.begin(), lines.end(), [](const LineRef& a, const LineRef& b) {
    return std::tie(a.path, a.line) < std::tie(b.path, b.line);
  });
  std::set<std::string_view> paths;
  for (const auto& l : lines) {
    h = fnv1a64(l.path, h ^ 0x9e3779b97f4a7c15ULL);
    h = fnv1a64(std::to_string(l.line), h ^ 0x85ebca6b0b3e5d2bULL);
    paths.insert(l.path);
  }
  for (const auto p : paths)
    if (const SourceFile* f = c.file(p)) h = fnv1a64(f->content, h ^ 0x85ebca6b0b3e5d2bULL);
  return hex64(h);
}

Status for_each_case_jsonl(const std::filesystem::path& path, const std::function<Status(Case&&, size_t)>& take) {
  JsonLineParser parser;
  std::set<std::string, std::less<>> ids;
  return for_each_line(path, kMaxCaseLineBytes, [&](std::string_view line, size_t line_no) -> Status {
    if (is_blank(line)) return {};
    auto where = [&] { return path.string() + ":" + std::to_string(line_no) + ": "; };
    auto record = parser.parse(line, true);
    if (!record) return fail(where() + record.error().message);
    auto c = case_from_json(std::move(*record));
    if (!c) return fail(where() + c.error().message);
    if (!ids.insert(c->id).second) return fail(where() + "duplicate id \"" + c->id + "\"");
    return take(std::move(*c), line_no);
  });
}

Result<CasesFile> read_cases_jsonl(const std::filesystem::path& path) {
  CasesFile out;
  TRY(for_each_case_jsonl(path, [&](Case&& c, size_t line) -> Status {
    out.cases.push_back(std::move(c));
    out.lines.push_back(line);
    return {};
  }));
  return out;
}

std::string test_file_too_large(std::string_view content) {
  if (content.size() > kMaxTestFileBytes)
    return std::to_string(content.size()) + " bytes; spark reads test files of up to " +
           std::to_string(kMaxTestFileBytes) + " bytes and " + std::to_string(kMaxTestFileLines) + " lines";
  size_t lines = !content.empty() && content.back() != '\n';
  const char* const end = content.data() + content.size();
  for (const char* p = content.data(); p < end; ++p) {
    p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (p == nullptr) break;
    ++lines;
  }
  if (lines > kMaxTestFileLines)
    return std::to_string(lines) + " lines; spark reads test files of up to " + std::to_string(kMaxTestFileBytes) +
           " bytes and " + std::to_string(kMaxTestFileLines) + " lines";
  return {};
}

}  // namespace spark
