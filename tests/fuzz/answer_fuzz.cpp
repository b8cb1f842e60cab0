// The LLM's answer: whatever the model says, the ids returned are distinct, in 1..max_id and name code.
#include <set>

#include "fuzz_util.h"
#include "localizer/answer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  if (size < 1) return 0;
  const int max_id = 1 + data[0] % 200;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto is_element = [](int id) { return id % 7 != 0; };  // every seventh line blank
  const auto id_of_code = [max_id](std::string_view code) -> std::optional<int> {
    if (code.size() < 2) return std::nullopt;
    const int id = 1 + static_cast<int>(static_cast<unsigned char>(code[0]) + code.size()) % max_id;
    return id;
  };
  const ParsedAnswer a = parse_answer(text, max_id, is_element, id_of_code);
  std::set<int> seen;
  for (int id : a.ids) {
    SPARK_FUZZ_CHECK(id >= 1 && id <= max_id, "in range");
    SPARK_FUZZ_CHECK(is_element(id), "names code");
    SPARK_FUZZ_CHECK(seen.insert(id).second, "distinct");
  }
  SPARK_FUZZ_CHECK(a.format == "json" || a.format == "text" || a.format == "none", "a known format");
  SPARK_FUZZ_CHECK(a.format != "none" || a.ids.empty(), "no ids without a format");
  return 0;
}
