// Outcome JSONL (spark mine --outcomes): an error names the file and line; an outcome read has a hex commit and a
// test id.
#include "fuzz_util.h"
#include "miner/miner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto path = fuzz::scratch(text, ".outcomes.jsonl");
  auto read = read_outcomes_jsonl(path);
  if (!read) {
    SPARK_FUZZ_CHECK(read.error().message.starts_with(path.string() + ":"), "an error names the file");
    return 0;
  }
  for (const auto& o : *read) {
    SPARK_FUZZ_CHECK(!o.commit.empty() && !o.test_id.empty(), "commit and test id are set");
    for (char c : o.commit) SPARK_FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(c)), "the commit is hex");
  }
  return 0;
}
