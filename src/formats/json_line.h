// One line of JSON Lines as a JSON value, parsed at SIMD speed: simdjson (Debian's libsimdjson, opened when a process
// first parses a line, like libcurl: base/shared_library.h) validates UTF-8 and nesting and builds its tape; the
// value is then copied into nlohmann::json, which the rest of spark reads. nlohmann's own lexer reads a byte at a time
// and was ~40 % of a `spark import`.
//
// The answer is the one the slow path gives, byte for byte: a line simdjson refuses for any reason is read again by
// the checks spark always made (invalid UTF-8 at byte N, nesting past kMaxJsonDepth) and by nlohmann's parser, whose
// message is the one the user sees and whose value is taken when it accepts what simdjson did not (a number beyond 64
// bits, which nlohmann keeps as a double). Objects keep the last of duplicate keys, as nlohmann does; a non-negative
// integer is an unsigned number, as nlohmann makes it. Without the library (not installed), every line takes the slow
// path: the same answers, slower.
//
// Contract: a parser is for one thread (it reuses its buffers from line to line); make one per thread.
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace spark {

class JsonLineParser {
 public:
  JsonLineParser();
  ~JsonLineParser();
  JsonLineParser(const JsonLineParser&) = delete;
  JsonLineParser& operator=(const JsonLineParser&) = delete;

  // The value on `line`, or why it is none: "invalid UTF-8 at byte N", "JSON nested deeper than 256 levels (at byte
  // N)" or "not valid JSON (nlohmann's message)" (callers add "file:line: "). `padded`: kLinePadding readable bytes
  // follow the line (base/files.h: for_each_line's lines), so it is parsed in place instead of copied first.
  Result<nlohmann::json> parse(std::string_view line, bool padded = false);

  // Whether the fast path is in use: simdjson was loaded (for tests and benchmarks).
  static bool fast();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The slow path alone: what JsonLineParser answers, without simdjson (what the fast path must agree with).
Result<nlohmann::json> parse_json_line_slowly(std::string_view line);

}  // namespace spark
