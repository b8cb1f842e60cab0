// The labelling diff: the faulty lines of two versions are distinct, ascending, non-blank lines of the faulty
// version; a version against itself labels nothing; a pure addition labels nothing.
#include <fuzzer/FuzzedDataProvider.h>

#include "base/text.h"
#include "fuzz_util.h"
#include "miner/git_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  FuzzedDataProvider in(data, size);
  const std::string faulty = in.ConsumeRandomLengthString(4096);
  const std::string fixed = in.ConsumeRemainingBytesAsString();
  auto lines = removed_or_modified_lines(faulty, fixed, "tests/test_x.py");
  if (!lines) return 0;
  const auto faulty_lines = split_lines(faulty);
  int last = 0;
  for (int l : *lines) {
    SPARK_FUZZ_CHECK(l > last, "ascending and distinct");
    SPARK_FUZZ_CHECK(l >= 1 && static_cast<size_t>(l) <= faulty_lines.size(), "a line of the faulty version");
    SPARK_FUZZ_CHECK(!is_blank(faulty_lines[static_cast<size_t>(l - 1)]), "not blank");
    last = l;
  }
  auto same = removed_or_modified_lines(faulty, faulty, "tests/test_x.py");
  SPARK_FUZZ_CHECK(same && same->empty(), "a version against itself labels nothing");
  if (!faulty.empty() && faulty.back() == '\n') {
    auto added = removed_or_modified_lines(faulty, faulty + fixed + "\n", "tests/test_x.py");
    SPARK_FUZZ_CHECK(added && added->empty(), "an addition at the end labels nothing");
  }
  return 0;
}
