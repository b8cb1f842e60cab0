// Reports and messages larger than memory should hold (issue 40, item 8): a JUnit report is read as a stream, and every
// message that enters spark (JUnit, outcome files, --error, imported cases) is kept to kErrorMessageReadLimit bytes,
// its head and its tail, the cut noted. The memory curve against a report's size is bench/junit_memory.sh's.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/case.h"
#include "formats/error_message.h"
#include "formats/junit.h"
#include "miner/miner.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::run_spark;
using testing::TempDir;
using testing::write_file;

const char* kTestFile = "def test_diff():\n    assert 'a' == 'b'\n";

// pytest's long form of a failure whose assertion diff is `diff_bytes` long: the test's frame first, the exception
// ("E   AssertionError"), the diff, and the location last.
// Written to `out` a line at a time.
void write_long_form(std::ostream& out, size_t diff_bytes) {
  const std::string head = "    def test_diff():\n>       assert 'a' == 'b'\nE       AssertionError: assert 'a' == 'b'\n";
  const std::string line = "E         - " + std::string(100, 'x') + "\n";
  out << head;
  for (size_t n = head.size(); n < diff_bytes; n += line.size()) out << line;
  out << "\ntests/test_a.py:2: AssertionError\n";
}
std::string long_form(size_t diff_bytes) {
  std::ostringstream out;
  write_long_form(out, diff_bytes);
  return std::move(out).str();
}

void expect_capped_long_form(const std::string& capped, size_t original) {
  EXPECT_LE(capped.size(), kErrorMessageReadLimit);
  EXPECT_TRUE(capped.starts_with("    def test_diff():\n>       assert 'a' == 'b'\nE       AssertionError: assert 'a'"))
      << capped.substr(0, 200);
  EXPECT_TRUE(capped.ends_with("\ntests/test_a.py:2: AssertionError\n"));
  const size_t cut = bytes_cut(capped);
  ASSERT_GT(cut, 0u) << "no line notes the cut";
  const std::string line = "[... " + std::to_string(cut) + " bytes cut ...]\n";
  EXPECT_NE(capped.find("\n" + line), std::string::npos);
  EXPECT_EQ(capped.size() - line.size() + cut, original) << "the note counts the bytes cut";
  // What the ranker reads of it: the test's frame and the exception.
  const auto frames = parse_traceback(failure_text(capped));
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.front().path, "tests/test_a.py");
  EXPECT_EQ(frames.front().line, 2);
  EXPECT_EQ(frames.front().function, "test_diff");
}

TEST(bounded_error_message, keeps_the_tests_frame_and_the_exception_cut_at_line_ends_and_notes_the_cut) {
  const std::string small = long_form(1000);
  EXPECT_EQ(bounded_error_message(small), small);
  EXPECT_EQ(bytes_cut(small), 0u);
  std::string same = small;
  EXPECT_EQ(cap_error_message(same), 0u);
  EXPECT_EQ(same, small);
  const std::string big = long_form(10u << 20);
  const std::string capped = bounded_error_message(big);
  expect_capped_long_form(capped, big.size());
  // Cut at line ends: every line but the note is a whole line of the message.
  const size_t note = capped.find("\n[... ");
  const std::string before = capped.substr(0, note + 1), after = capped.substr(capped.find('\n', note + 1) + 1);
  EXPECT_TRUE(big.starts_with(before));
  EXPECT_TRUE(big.ends_with(after));
  EXPECT_EQ(big[big.size() - after.size() - 1], '\n');
  std::string in_place = big;
  EXPECT_EQ(cap_error_message(in_place), big.size() - capped.size());
  EXPECT_EQ(in_place, capped);
}

TEST(bounded_error_message, a_message_without_line_ends_is_cut_between_characters) {
  std::string m;
  while (m.size() < 3u << 20) m += "é→𝄞";  // 2-, 3- and 4-byte characters, no newline
  const std::string capped = bounded_error_message(m);
  EXPECT_LE(capped.size(), kErrorMessageReadLimit);
  EXPECT_FALSE(find_invalid_utf8(capped)) << "a character was split";
  EXPECT_GT(bytes_cut(capped), 0u);
}

TEST(ErrorMessageCap, pieces_give_what_the_whole_gives) {
  std::string unicode;
  while (unicode.size() < 2u << 20) unicode += "é→𝄞 ";
  for (const std::string& whole : {std::string(), long_form(100), long_form(kErrorMessageReadLimit - 40),
                                   long_form(kErrorMessageReadLimit + 10), long_form(5u << 20), unicode}) {
    for (const size_t piece : {size_t{1} << 10, size_t{65536}, size_t{700001}}) {
      if (piece == 1024 && whole.size() > (1u << 20)) continue;  // enough pieces at the other sizes
      ErrorMessageCap cap;
      for (size_t at = 0; at < whole.size(); at += piece) cap.append(std::string_view(whole).substr(at, piece));
      EXPECT_EQ(cap.size(), whole.size());
      EXPECT_EQ(cap.take(), bounded_error_message(whole)) << whole.size() << " in pieces of " << piece;
      EXPECT_EQ(cap.size(), 0u);
    }
  }
}

TEST(read_junit, each_message_of_a_report_of_huge_messages_is_capped_with_its_frames) {
  TempDir dir;
  write_file(dir / "tests" / "test_a.py", kTestFile);
  const std::string message = long_form(6u << 20);
  std::string xml = "<?xml version=\"1.0\"?>\n<testsuite name=\"pytest\">\n";
  for (int i = 0; i < 3; ++i) {
    std::string escaped = message;
    for (size_t at = 0; (at = escaped.find('>', at)) != std::string::npos; at += 4) escaped.replace(at, 1, "&gt;");
    xml += "<testcase classname=\"tests.test_a\" name=\"test_diff_" + std::to_string(i) +
           "\">\n<failure message=\"AssertionError\">" + escaped + "</failure></testcase>\n";
  }
  xml += "<testcase classname=\"tests.test_a\" name=\"test_ok\"/>\n</testsuite>\n";
  write_file(dir / "r.xml", xml);
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 4u);
  size_t line = 3;
  for (int i = 0; i < 3; ++i) {
    const TestOutcome& o = r->outcomes[static_cast<size_t>(i)];
    EXPECT_EQ(o.test_id, "tests/test_a.py::test_diff_" + std::to_string(i));
    EXPECT_EQ(o.report_line, line);
    line += static_cast<size_t>(std::count(message.begin(), message.end(), '\n')) + 2;
    expect_capped_long_form(o.message, message.size());
  }
  EXPECT_EQ(r->outcomes[3].outcome, Outcome::passed);
  EXPECT_EQ(r->outcomes[3].report_line, line);
}

TEST(read_outcomes_jsonl, a_huge_message_is_capped) {
  TempDir dir;
  const std::string message = long_form(3u << 20);
  write_file(dir / "o.jsonl", nlohmann::json({{"commit", "abc1234"}, {"test_id", "tests/test_a.py::test_diff"},
                                              {"outcome", "failed"}, {"message", message}})
                                      .dump() +
                                  "\n");
  auto r = read_outcomes_jsonl(dir / "o.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  expect_capped_long_form((*r)[0].message, message.size());
}

TEST(read_cases_jsonl, a_huge_error_message_is_capped) {
  TempDir dir;
  const std::string message = long_form(3u << 20);
  write_file(dir / "c.jsonl", testing::sample_case("c1", kTestFile, 2, message).dump() + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->cases.size(), 1u);
  expect_capped_long_form(r->cases[0].error_message, message.size());
}

// A repository with tests/test_a.py and a JUnit report of `failures` failures of `message_bytes` each: `spark record`'s
// run on it. The report is written a line at a time: a child started by posix_spawn starts with its parent's peak
// resident set in its ru_maxrss, so this process never holds a large message.
testing::RunResult record_report(const TempDir& dir, int failures, size_t message_bytes) {
  write_file(dir / "tests" / "test_a.py", kTestFile);
  testing::git(dir, "init -q .");
  testing::git(dir, "add .");
  testing::git(dir, "commit -qm init");
  {
    std::ofstream xml(dir / "r.xml");
    xml << "<?xml version=\"1.0\"?>\n<testsuite name=\"pytest\">\n";
    for (int i = 0; i < failures; ++i) {
      xml << "<testcase classname=\"tests.test_a\" name=\"test_diff_" << i
          << "\"><failure message=\"AssertionError\"><![CDATA[";
      write_long_form(xml, message_bytes);
      xml << "]]></failure></testcase>\n";
    }
    xml << "</testsuite>\n";
  }
  return run_spark({"record", "--junit", "r.xml", "--no-localize"}, dir.path());
}

TEST(spark_record, a_report_of_huge_messages_takes_memory_and_store_room_of_their_caps_not_their_size) {
  TempDir small_dir, big_dir;
  auto small = record_report(small_dir, 4, 10000);
  ASSERT_EQ(small.exit_code, 0) << small.err;
  auto big = record_report(big_dir, 4, 12u << 20);  // a 48 MB report
  ASSERT_EQ(big.exit_code, 0) << big.err;
  const auto store = [](const TempDir& d) {
    uintmax_t bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(d / ".spark"))
      if (e.is_regular_file() && e.path().filename().string().starts_with("kb.sqlite")) bytes += e.file_size();
    return bytes;
  };
  // Each message is kept twice (as an outcome and as a failure): at most 8 MiB for four, not 96 MB.
  EXPECT_LT(store(big_dir), 12u << 20) << "the store grew by the messages' size";
#if !defined(SPARK_ASAN)  // a sanitizer's allocator keeps freed memory in quarantine
  EXPECT_LT(big.peak_rss_kib - small.peak_rss_kib, 24 * 1024)
      << "peak RSS " << big.peak_rss_kib << " KiB for the 48 MB report, " << small.peak_rss_kib << " for a small one";
#endif
  auto shown = run_spark({"failures", "show", "tests/test_a.py::test_diff_2", "--format", "json"}, big_dir.path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto j = nlohmann::json::parse(shown.out);
  expect_capped_long_form(j.at("failures").at(0).at("message").get<std::string>(), long_form(12u << 20).size());
}

TEST(spark_localize, a_huge_error_file_is_capped_and_said_and_its_failure_still_ranked) {
  TempDir dir;
  write_file(dir / "cases.jsonl",
             testing::sample_case("c1", kTestFile, 2, "tests/test_a.py:2: in test_diff\nE   AssertionError").dump() +
                 "\n");
  ASSERT_EQ(run_spark({"import", "cases.jsonl"}, dir.path()).exit_code, 0);
  write_file(dir / "tests" / "test_a.py", kTestFile);
  const std::string message = long_form(10u << 20);
  write_file(dir / "big.txt", message);
  auto r = run_spark({"localize", "--test", "tests/test_a.py", "--error", "big.txt", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const nlohmann::json& answer = j.is_array() ? j.at(0) : j;
  EXPECT_NE(answer.at("notes").dump().find("the error message is 10.0 MB: the ranker read its first 256 KB and its "
                                           "last 768 KB"),
            std::string::npos)
      << answer.at("notes").dump();
  ASSERT_FALSE(answer.at("ranked").empty()) << r.out.substr(0, 2000);
  EXPECT_EQ(answer.at("ranked").at(0).at("line"), 2) << r.out.substr(0, 2000);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
