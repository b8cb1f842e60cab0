#define PCRE2_CODE_UNIT_WIDTH 8
#include "base/pcre_regex.h"

#include <pcre2.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "base/text.h"

namespace spark {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  // JIT-compiled at the first match, not at compile(): a process compiles more patterns than it runs (the redaction
  // rules of a localize that sends nothing anywhere), and a JIT compile costs more than an interpreted one.
  std::once_flag jit;
  const pcre2_code* ready() {
    std::call_once(jit, [this] { pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); });  // else the interpreter
    return code;
  }
  ~Impl() { pcre2_code_free(code); }
};

namespace {
struct MatchData {
  pcre2_match_data* md;
  pcre2_match_context* mc;
  explicit MatchData(const pcre2_code* code)
      : md(pcre2_match_data_create_from_pattern(code, nullptr)), mc(pcre2_match_context_create(nullptr)) {
    pcre2_set_match_limit(mc, Regex::kMatchLimit);
    pcre2_set_depth_limit(mc, Regex::kDepthLimit);
  }
  ~MatchData() {
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// The subject as PCRE2 may read it: in UTF mode, with the UTF check off (it is linear but runs again at every start
// offset), an invalid sequence is undefined behaviour (the JIT crashed on one: tests/fuzz). Invalid bytes become '?'
// in a copy of the same length, so offsets into the copy are offsets into the subject.
std::string_view valid_subject(std::string_view subject, std::string& copy) {
  auto bad = find_invalid_utf8(subject);
  if (!bad) return subject;
  copy.assign(subject);
  while (bad) {
    copy[*bad] = '?';
    const size_t from = *bad + 1;
    auto next = find_invalid_utf8(std::string_view(copy).substr(from));
    bad = next ? std::optional<size_t>(from + *next) : std::nullopt;
  }
  return copy;
}

// The next start after an empty match at `at`: one character on, not into the middle of one.
size_t next_start(std::string_view subject, size_t at) {
  ++at;
  while (at < subject.size() && (static_cast<unsigned char>(subject[at]) & 0xC0) == 0x80) ++at;
  return at;
}

// After a match that hit a resource limit at `start`: go on from the next line (the limit is per match attempt, so
// one pathological spot costs at most kMatchLimit steps and does not end the scan of the rest).
size_t after_limit(std::string_view subject, size_t start) {
  const size_t nl = subject.find('\n', start);
  return nl == std::string_view::npos ? subject.size() + 1 : nl + 1;
}

bool hit_limit(int rc) {
  return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
         rc == PCRE2_ERROR_JIT_STACKLIMIT;
}
}  // namespace

Result<Regex> Regex::compile(std::string_view pattern, bool multiline, bool caseless) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | (multiline ? PCRE2_MULTILINE : 0) | (caseless ? PCRE2_CASELESS : 0);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return fail("regular expression \"" + std::string(pattern) + "\" at offset " + std::to_string(offset) + ": " +
                reinterpret_cast<char*>(buf));
  }
  Regex r;
  r.impl_ = std::make_shared<Impl>();
  r.impl_->code = code;
  return r;
}

Regex Regex::must(std::string_view pattern, bool multiline, bool caseless) {
  auto r = compile(pattern, multiline, caseless);
  if (!r) {
    std::fprintf(stderr, "spark: internal error: %s\n", r.error().message.c_str());
    std::abort();
  }
  return std::move(*r);
}

void Regex::for_each_match(std::string_view original,
                           const std::function<void(const std::vector<std::string_view>&)>& fn) const {
  const pcre2_code* code = impl_->ready();
  MatchData md(code);
  std::string copy;
  const std::string_view valid = valid_subject(original, copy);
  const std::string_view subject = original;  // groups view the caller's text (same offsets)
  PCRE2_SIZE start = 0;
  std::vector<std::string_view> groups;
  while (start <= subject.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(valid.data()), valid.size(), start,
                               PCRE2_NO_UTF_CHECK, md.md, md.mc);
    if (hit_limit(rc)) {
      start = after_limit(valid, start);
      continue;
    }
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.md);
    groups.clear();
    for (size_t g = 0; g < static_cast<size_t>(rc); ++g) {
      if (ov[2 * g] == PCRE2_UNSET)
        groups.emplace_back();
      else
        groups.push_back(subject.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]));
    }
    fn(groups);
    start = ov[1] > ov[0] ? ov[1] : next_start(valid, ov[1]);
  }
}

std::string Regex::replace_all(std::string_view subject, std::string_view replacement) const {
  const pcre2_code* code = impl_->ready();
  MatchData md(code);
  std::string copy;
  const std::string_view valid = valid_subject(subject, copy);
  std::string out;
  out.reserve(subject.size());
  PCRE2_SIZE start = 0, copied = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(valid.data()), valid.size(), start,
                               PCRE2_NO_UTF_CHECK, md.md, md.mc);
    if (hit_limit(rc)) {
      start = after_limit(valid, start);
      continue;
    }
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.md);
    out.append(subject.substr(copied, ov[0] - copied));
    out.append(replacement);
    copied = ov[1];
    start = ov[1] > ov[0] ? ov[1] : next_start(valid, ov[1]);
  }
  out.append(subject.substr(std::min<size_t>(copied, subject.size())));
  return out;
}

int Regex::group_number(std::string_view name) const {
  const std::string n(name);
  const int rc = pcre2_substring_number_from_name(impl_->code, reinterpret_cast<PCRE2_SPTR>(n.c_str()));
  return rc < 0 ? -1 : rc;
}

}  // namespace spark
