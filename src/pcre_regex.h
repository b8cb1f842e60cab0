// RAII over PCRE2 (8-bit, UTF mode, JIT when available). Thread safety: a Regex may be shared; each call makes its
// own match data.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace spark {

class Regex {
 public:
  // Compiles `pattern`; the error names the pattern and the offset.
  static Result<Regex> compile(std::string_view pattern, bool multiline = false, bool caseless = false);
  // For patterns fixed in the source: aborts the build-time mistake loudly (never on user input).
  static Regex must(std::string_view pattern, bool multiline = false, bool caseless = false);

  // Calls fn(groups) for every match; groups[0] is the whole match. Groups that did not take part are empty.
  void for_each_match(std::string_view subject, const std::function<void(const std::vector<std::string_view>&)>& fn) const;
  // Replaces every match with `replacement` (literal text).
  std::string replace_all(std::string_view subject, std::string_view replacement) const;
  // The number of the named group `name`, or -1.
  int group_number(std::string_view name) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace spark
