// JUnit XML (spark record/localize --junit): any bytes give a report or an error naming the file and line. A test file
// is only ever taken from the repository's side (the exists check); each outcome names a test and a line of the
// report.
#include "fuzz_util.h"
#include "formats/error_message.h"
#include "formats/junit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto path = fuzz::scratch(text, ".xml");
  // The repository: paths under tests/ exist, nothing else (an escape is never looked up as existing).
  const TestFiles files{[](const std::string& p) {
                          SPARK_FUZZ_CHECK(!p.empty(), "no empty path is looked up");
                          return p.starts_with("tests/") && p.find("..") == std::string::npos;
                        },
                        "the repository"};
  auto r = read_junit(path, files);
  if (!r) {
    SPARK_FUZZ_CHECK(r.error().message.starts_with(path.string() + ":"), "an error names the file");
    return 0;
  }
  // Lines as XML counts them (and expat's line numbers): "\r\n", a lone "\r" and "\n" each end one.
  size_t lines = 1;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++lines;
  for (const auto& o : r->outcomes) {
    SPARK_FUZZ_CHECK(!o.test_id.empty(), "a test id");
    SPARK_FUZZ_CHECK(o.report_line >= 1 && o.report_line <= lines, "the report line is in the report");
    SPARK_FUZZ_CHECK(o.message.size() <= kErrorMessageReadLimit, "a message is bounded");
    SPARK_FUZZ_CHECK(o.file.empty() || (o.file.starts_with("tests/") && o.file.find("..") == std::string::npos),
                     "a test file only from the repository");
  }
  return 0;
}
