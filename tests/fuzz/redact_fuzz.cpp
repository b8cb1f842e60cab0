// Redaction: the line count is kept (line numbers shown to a model stay the file's), a redacted text has nothing left
// to redact, and the counts add up.
#include "fuzz_util.h"
#include "formats/redact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  static const Redactor redactor = *Redactor::make();
  std::string text(reinterpret_cast<const char*>(data), size);
  const size_t lines = fuzz::count_lines(text);
  std::map<std::string, size_t> counts;
  const size_t n = redactor.redact(text, counts);
  SPARK_FUZZ_CHECK(fuzz::count_lines(text) == lines, "the line count is kept");
  size_t sum = 0;
  for (const auto& [rule, c] : counts) sum += c;
  SPARK_FUZZ_CHECK(sum == n, "the counts add up");
  std::map<std::string, size_t> again;
  const std::string once = text;
  redactor.redact(text, again);
  SPARK_FUZZ_CHECK(text == once, "a redacted text has nothing left to redact");
  return 0;
}
