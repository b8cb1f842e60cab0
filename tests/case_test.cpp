#include "formats/case.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using nlohmann::json;
using testing::sample_case;
using testing::TempDir;
using testing::write_file;

namespace {
const std::string kCode = "def test_a():\n    x = 1\n\n    assert x == 2\n";

std::string error_of(const std::string& jsonl) {
  TempDir dir;
  write_file(dir / "c.jsonl", jsonl);
  auto r = read_cases_jsonl(dir / "c.jsonl");
  EXPECT_FALSE(r.has_value());
  if (r) return "";
  // Strip the folder: messages start with the path.
  const std::string& m = r.error().message;
  return m.substr(m.find("c.jsonl"));
}
}  // namespace

TEST(parse_iso8601, accepts_utc_offsets_and_fractions) {
  EXPECT_EQ(*parse_iso8601("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_iso8601("2026-08-13T23:46:43Z"), 1786664803);
  EXPECT_EQ(*parse_iso8601("2026-08-13T23:46:43.123Z"), 1786664803);
  EXPECT_EQ(*parse_iso8601("2026-08-14T01:46:43+02:00"), 1786664803);
  EXPECT_FALSE(parse_iso8601("2026-02-30T00:00:00Z"));
  EXPECT_FALSE(parse_iso8601("yesterday"));
  EXPECT_FALSE(parse_iso8601("2026-08-13T23:46:43"));  // no zone
  EXPECT_EQ(format_iso8601(1786664803), "2026-08-13T23:46:43Z");
}

TEST(read_cases_jsonl, reads_valid_cases) {
  TempDir dir;
  write_file(dir / "c.jsonl", sample_case("a", kCode, 4).dump() + "\n\n" + sample_case("b", kCode, 2).dump() + "\n");
  auto r = read_cases_jsonl(dir / "c.jsonl");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->cases.size(), 2u);
  EXPECT_EQ(r->cases[0].faulty_lines[0].line, 4);
  EXPECT_EQ(r->cases[1].failure_epoch, 1767225600);
  EXPECT_EQ(r->lines, (std::vector<size_t>{1, 3}));  // blank line 2 skipped
}

TEST(read_cases_jsonl, names_file_line_and_reason_for_each_rule) {
  const std::string good = sample_case("a", kCode, 4).dump() + "\n";
  auto with = [&](auto mutate) {
    json c = sample_case("b", kCode, 4);
    mutate(c);
    return good + c.dump() + "\n";
  };
  EXPECT_TRUE(error_of(good + "{\"id\": \"trunc").starts_with("c.jsonl:2: not valid JSON ("));
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["line"] = 3; })),
            "c.jsonl:2: faulty_lines[0]: line 3 of tests/test_x.py is blank");
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["line"] = 9; })),
            "c.jsonl:2: faulty_lines[0]: line 9 is out of range (tests/test_x.py has 4 lines)");
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["path"] = "other.py"; })),
            "c.jsonl:2: faulty_lines[0]: path \"other.py\" is not in files");
  EXPECT_EQ(error_of(with([](json& c) { c["id"] = "a"; })), "c.jsonl:2: duplicate id \"a\"");
  EXPECT_EQ(error_of(with([](json& c) { c["failure_time"] = "soon"; })),
            "c.jsonl:2: failure_time \"soon\" is not an ISO-8601 time");
  EXPECT_EQ(error_of(with([](json& c) { c["test_id"] = 5; })), "c.jsonl:2: \"test_id\" must be a string, not number");
  EXPECT_EQ(error_of(with([](json& c) { c.erase("files"); })), "c.jsonl:2: missing required key \"files\"");
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["line"] = "4"; })),
            "c.jsonl:2: faulty_lines[0].line must be an integer");
  EXPECT_EQ(error_of(good + "{\"id\": \"caf\xff\"}\n"), "c.jsonl:2: invalid UTF-8 at byte 11");
  // A faulty line's optional fix: its replacement lines, one string each.
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["fix"] = "x"; })),
            "c.jsonl:2: faulty_lines[0].fix must be an array of strings (the fix's lines)");
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["fix"] = {1}; })),
            "c.jsonl:2: faulty_lines[0].fix[0] must be a string (one line of the fix)");
  EXPECT_EQ(error_of(with([](json& c) { c["faulty_lines"][0]["fix"] = {"a\nb"}; })),
            "c.jsonl:2: faulty_lines[0].fix[0] holds a line break: one line per string");
}

TEST(case_from_json, a_faulty_lines_fix_is_read_and_round_trips_and_old_cases_have_none) {
  json in = sample_case("a", kCode, 4);
  auto old = case_from_json(in);
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_TRUE(old->fixes.empty());
  in["faulty_lines"][0]["fix"] = {"    assert x == 1", "    assert y"};
  auto c = case_from_json(in);
  ASSERT_TRUE(c) << c.error().message;
  const LineRef line{in["faulty_lines"][0]["path"].get<std::string>(), 4};
  ASSERT_TRUE(c->fixes.count(line));
  EXPECT_EQ(c->fixes.at(line), (std::vector<std::string>{"    assert x == 1", "    assert y"}));
  EXPECT_EQ(case_to_json(*c), in);
  in["faulty_lines"][0]["fix"] = json::array();  // a deletion: no line replaces it
  auto deleted = case_from_json(in);
  ASSERT_TRUE(deleted);
  EXPECT_TRUE(deleted->fixes.at(line).empty());
}

TEST(case_to_json, round_trips_records_including_nulls_and_unknown_keys) {
  json in = sample_case("a", kCode, 4);
  in["faulty_commit"] = nullptr;
  in["fixed_commit"] = "abc";
  in["meta"] = {{"operator", "x"}};
  in["extra_key"] = {1, 2};
  auto c = case_from_json(in);
  ASSERT_TRUE(c) << c.error().message;
  json out = case_to_json(*c);
  json expected = in;
  expected.erase("extra_key");
  expected["meta"]["extra_key"] = {1, 2};  // unknown keys are kept under meta, as the format says
  EXPECT_EQ(out, expected);
  EXPECT_FALSE(out.contains("source") && out["source"].is_null());
}

TEST(write_file_atomic, replaces_the_whole_file) {
  TempDir dir;
  write_file(dir / "f", "old content that is longer");
  ASSERT_TRUE(write_file_atomic(dir / "f", "new"));
  EXPECT_EQ(testing::slurp(dir / "f"), "new");
}

// `spark eval -o /dev/null` once put a regular file in /dev/null's place (run as root): a path that is not a regular
// file is written to, never replaced. A FIFO stands in for the device here, so a failure harms nothing outside the
// test's folder.
TEST(write_file_atomic, writes_into_a_fifo_or_device_and_keeps_it_one) {
  TempDir dir;
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The read end is open first (without waiting for a writer), so the write cannot block; what it wrote sits in the
  // pipe's buffer when it returns.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  const auto written = write_file_atomic(fifo, "through the pipe\n");
  std::string got(64, '\0');
  const ssize_t n = ::read(reader, got.data(), got.size());
  ::close(reader);
  got.resize(n > 0 ? static_cast<size_t>(n) : 0);
  ASSERT_TRUE(written) << written.error().message;
  EXPECT_EQ(got, "through the pipe\n");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(std::filesystem::exists(dir / ("pipe.tmp." + std::to_string(::getpid()))));
}

TEST(write_file_atomic, keeps_a_link_to_a_regular_file_and_refuses_a_folder) {
  TempDir dir;
  write_file(dir / "target", "old");
  std::filesystem::create_symlink("target", dir / "link");
  ASSERT_TRUE(write_file_atomic(dir / "link", "new"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link"));
  EXPECT_EQ(testing::slurp(dir / "target"), "new");
  std::filesystem::create_directory(dir / "folder");
  const auto refused = write_file_atomic(dir / "folder", "x");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("folder: is a folder"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(dir / "folder"));
}

TEST(path_within, a_path_inside_is_made_relative_and_one_leading_outside_is_empty) {
  TempDir outer;
  const auto top = std::filesystem::canonical(outer.path());
  write_file(top / "ws" / "tests" / "t.py", "x");
  write_file(top / "secret.txt", "s");
  std::filesystem::create_symlink(top / "secret.txt", top / "ws" / "tests" / "link.py");
  const auto ws = top / "ws";
  EXPECT_EQ(path_within(ws, ws / "tests" / "t.py"), "tests/t.py");
  EXPECT_EQ(path_within(ws, ws / "tests" / ".." / "tests" / "t.py"), "tests/t.py");
  EXPECT_EQ(path_within(ws, ws / "tests" / "new.py"), "tests/new.py");  // not there yet: still inside
  EXPECT_TRUE(path_within(ws, ws / ".." / "secret.txt").empty());
  EXPECT_TRUE(path_within(ws, ws / "tests" / "link.py").empty());  // a link out of the workspace
  EXPECT_TRUE(path_within(ws, "/etc/passwd").empty());
  EXPECT_EQ(path_within(ws, ws), ".");
}

}  // namespace spark::SPARK_TEST_FILE_ID
