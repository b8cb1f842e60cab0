// Error messages and tracebacks: frames have a path and a positive line; normalisation is idempotent; the bounded
// message never exceeds the read limit.
#include "formats/error_message.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& f : parse_traceback(text)) {
    SPARK_FUZZ_CHECK(!f.path.empty(), "a frame has a path");
    SPARK_FUZZ_CHECK(f.line >= 1, "a frame's line is positive");
    SPARK_FUZZ_CHECK(text.find(f.path) != std::string_view::npos, "a frame's path is from the message");
  }
  const std::string once = normalize_error_message(text);
  SPARK_FUZZ_CHECK(normalize_error_message(once) == once, "normalisation is idempotent");
  SPARK_FUZZ_CHECK(bounded_error_message(text).size() <= std::max(text.size(), kErrorMessageReadLimit), "bounded");
  return 0;
}
