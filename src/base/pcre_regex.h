// RAII over PCRE2 (8-bit, UTF mode, JIT-compiled at the first match when available). Thread safety: a Regex may be shared; each call makes its
// own match data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spark {

class Regex {
 public:
  // Per match attempt (PCRE2's match and depth limits): a pathological pattern/subject pair fails that attempt, and
  // the scan goes on from the next line, instead of backtracking for minutes. Invalid UTF-8 in a subject is matched as
  // if each invalid byte were '?'.
  static constexpr uint32_t kMatchLimit = 1'000'000;
  static constexpr uint32_t kDepthLimit = 10'000;

  // Compiles `pattern`; the error names the pattern and the offset.
  static Result<Regex> compile(std::string_view pattern, bool multiline = false, bool caseless = false);
  // For patterns fixed in the source: aborts the build-time mistake loudly (never on user input).
  static Regex must(std::string_view pattern, bool multiline = false, bool caseless = false);

  // Calls fn(groups) for every match; groups[0] is the whole match. Groups that did not take part are empty.
  void for_each_match(std::string_view subject,
                      const std::function<void(const std::vector<std::string_view>&)>& fn) const;
  // Replaces every match with `replacement` (literal text).
  std::string replace_all(std::string_view subject, std::string_view replacement) const;
  // The number of the named group `name`, or -1.
  int group_number(std::string_view name) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace spark
