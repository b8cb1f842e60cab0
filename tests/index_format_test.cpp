// End-to-end: an index an earlier spark wrote in an earlier format, met by the real `spark` binary on a knowledge base
// the test makes. The index keeps one format (IndexManifest::kFormat); the commands build an older one again.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "retrieval/index_checksums.h"
#include "retrieval/vector_index.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_spark;
using testing::slurp;
using testing::TempDir;
using testing::write_file;

const std::string kTest =
    "import pytest\n\n\ndef add(a, b):\n    return a + b\n\n\ndef test_add():\n    expected = 5\n"
    "    assert add(2, 2) == expected\n\n\ndef test_sub():\n    assert 3 - 1 == 2\n";

// A project with a knowledge base of eight failures of one test, indexed.
void make_indexed_project(const TempDir& dir) {
  std::string cases;
  for (int i = 0; i < 8; ++i) {
    json c =
        testing::sample_case("c" + std::to_string(i), kTest, 9,
                             "tests/test_x.py:10: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5",
                             "2026-01-0" + std::to_string(i + 1) + "T00:00:00Z");
    c["test_id"] = "tests/test_x.py::test_add";
    cases += c.dump() + "\n";
  }
  write_file(dir / "cases.jsonl", cases);
  auto imp = run_spark({"import", "cases.jsonl"}, dir.path());
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  auto idx = run_spark({"index"}, dir.path());
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  write_file(dir / "tests" / "test_x.py", kTest);
  write_file(dir / "failure.txt",
             "tests/test_x.py:10: in test_add\n    assert add(2, 2) == expected\nE   assert 4 == 5\n");
}

// Rewrites the saved index as format 5 wrote it: its vectors file with a 64-byte header (format 6's is one page), the
// manifest's format 5, its checksums of the files as they now are; every file of it two hours old, as an earlier
// spark's index is when a newer spark first meets it. The names of its data files.
std::set<std::string> rewrite_as_format_5(const fs::path& index) {
  auto j = json::parse(slurp(index / "manifest.json"));
  EXPECT_EQ(j["format"], IndexManifest::kFormat);
  const fs::path vectors = index / j["vectors_file"].get<std::string>();
  const std::string bytes = slurp(vectors);
  EXPECT_EQ(bytes.substr(0, 8), "SPKVEC01");
  write_file(vectors, bytes.substr(0, 64) + bytes.substr(4096));
  j["format"] = 5;
  j["vectors_checksum"] = *file_checksum(vectors);
  write_file(index / "manifest.json", j.dump(2));
  std::set<std::string> files = {j["vectors_file"], j["ids_file"]};
  if (j.contains("graph_file")) files.insert(j["graph_file"].get<std::string>());
  for (const auto& [name, entry] : j["files"].items()) files.insert(entry["file"].get<std::string>());
  for (const auto& f : files) fs::last_write_time(index / f, fs::file_time_type::clock::now() - std::chrono::hours(2));
  return files;
}

TEST(index_format, an_earlier_format_is_rebuilt_by_the_next_localize_which_answers_as_before_and_says_why) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(make_indexed_project(dir));
  const std::vector<std::string> localize = {"localize", "--test", "tests/test_x.py", "--error", "failure.txt",
                                             "--format", "json"};
  auto before = run_spark(localize, dir.path());
  ASSERT_EQ(before.exit_code, 0) << before.err;
  const auto stored = run_spark({"export"}, dir.path());
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  const fs::path index = dir / ".spark" / "index";
  const std::set<std::string> old_files = rewrite_as_format_5(index);

  auto after = run_spark(localize, dir.path());
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  EXPECT_NE(after.err.find("the vector index was written in an earlier spark's format ("), std::string::npos)
      << after.err;
  EXPECT_NE(after.err.find(".spark/index/manifest.json: format 5, this spark reads 6): rebuilt it over 8 case(s), as "
                           "`spark index` does"),
            std::string::npos)
      << after.err;
  // Nothing stored is lost; the index is of the current format, the earlier one's files gone.
  EXPECT_EQ(run_spark({"export"}, dir.path()).out, stored.out);
  auto m = VectorIndex::read_manifest(index);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->format, IndexManifest::kFormat);
  EXPECT_EQ(m->count, 8u);
  for (const auto& f : old_files) EXPECT_FALSE(fs::exists(index / f)) << f;
  // The next localize opens it as it is, with no note.
  auto again = run_spark(localize, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, before.out);
  EXPECT_EQ(again.err.find("earlier spark"), std::string::npos) << again.err;
}

TEST(index_format, spark_index_rebuilds_an_earlier_format_and_says_why) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(make_indexed_project(dir));
  const fs::path index = dir / ".spark" / "index";
  rewrite_as_format_5(index);
  auto idx = run_spark({"index"}, dir.path());
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  EXPECT_NE(idx.err.find("rebuilding the vector index: "), std::string::npos) << idx.err;
  EXPECT_NE(idx.err.find(".spark/index/manifest.json: index format 5 was written by an earlier spark (this one reads "
                         "format 6): run `spark index --rebuild`"),
            std::string::npos)
      << idx.err;
  EXPECT_NE(idx.out.find("indexed 8 case(s)"), std::string::npos) << idx.out;
  auto m = VectorIndex::read_manifest(index);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->format, IndexManifest::kFormat);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
