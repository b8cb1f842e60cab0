// Case JSONL (spark import): read either fails with a message naming the file and a line, or every case it returns is
// valid and survives a round trip through the interchange format unchanged.
#include <set>

#include "formats/case.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto path = fuzz::scratch(text, ".jsonl");
  auto read = read_cases_jsonl(path);
  if (!read) {
    SPARK_FUZZ_CHECK(read.error().message.starts_with(path.string() + ":"), "an error names the file");
    return 0;
  }
  std::set<std::string> ids;
  SPARK_FUZZ_CHECK(read->cases.size() == read->lines.size(), "a line per case");
  for (size_t i = 0; i < read->cases.size(); ++i) {
    const Case& c = read->cases[i];
    SPARK_FUZZ_CHECK(ids.insert(c.id).second, "ids are unique");
    SPARK_FUZZ_CHECK(read->lines[i] >= 1 && read->lines[i] <= fuzz::count_lines(text), "the line is in the file");
    for (const auto& fl : c.faulty_lines) {
      const SourceFile* f = c.file(fl.path);
      SPARK_FUZZ_CHECK(f != nullptr, "a faulty line's file is in files");
      SPARK_FUZZ_CHECK(fl.line >= 1 && static_cast<size_t>(fl.line) <= fuzz::count_lines(f->content), "a faulty line is in its file");
    }
    const auto once = case_to_json(c);
    auto again = case_from_json(once);
    SPARK_FUZZ_CHECK(again.has_value(), "a read case is valid when written back");
    SPARK_FUZZ_CHECK(case_to_json(*again) == once, "the round trip is lossless");
  }
  return 0;
}
