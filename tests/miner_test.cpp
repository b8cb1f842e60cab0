// The miner's git layer on real repositories the test makes with git itself.
#include "git_history.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "test_util.h"

namespace spark {
namespace {

using testing::TempDir;
using testing::write_file;

// Runs git in `dir` with fixed identities and the given commit time.
void git(const TempDir& dir, const std::string& args, const std::string& date = "2026-01-01T00:00:00Z") {
  const std::string cmd = "cd '" + dir.path().string() + "' && GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x GIT_COMMITTER_NAME=t " +
                          "GIT_COMMITTER_EMAIL=t@x GIT_AUTHOR_DATE=" + date + " GIT_COMMITTER_DATE=" + date +
                          " git -c init.defaultBranch=main -c commit.gpgsign=false " + args + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

const char* kFaulty =
    "import pytest\n\n\ndef test_area():\n    shape = 'square'\n    assert area(shape, 2, 3) == 6\n";
const char* kFixed =
    "import pytest\n\n\ndef test_area():\n    shape = 'rectangle'\n    assert area(shape, 2, 3) == 6\n";

TEST(git_history, walks_first_parent_history_oldest_first_and_reads_files_from_objects) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / "tests" / "test_a.py", kFaulty);
  git(dir, "add -A");
  git(dir, "commit -m faulty", "2026-01-01T10:00:00Z");
  git(dir, "checkout -b side");
  write_file(dir / "side.txt", "x\n");
  git(dir, "add -A");
  git(dir, "commit -m side-work", "2026-01-02T10:00:00Z");
  git(dir, "checkout main");
  write_file(dir / "tests" / "test_a.py", kFixed);
  git(dir, "add -A");
  git(dir, "commit -m fix", "2026-01-03T10:00:00Z");
  git(dir, "merge --no-ff side -m merge", "2026-01-04T10:00:00Z");

  auto repo = GitRepository::open(dir / "tests");  // opens the repository above
  ASSERT_TRUE(repo) << repo.error().message;
  auto first = (*repo)->history();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 3u);  // faulty, fix, merge: the side branch's commit is not on the first-parent line
  EXPECT_EQ((*first)[0].summary, "faulty");
  EXPECT_EQ((*first)[1].summary, "fix");
  EXPECT_EQ((*first)[0].time, 1767261600);  // 2026-01-01T10:00:00Z
  auto all = (*repo)->history(false);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4u);
  auto bounded = (*repo)->history(true, 1767300000, 1767500000);
  ASSERT_TRUE(bounded);
  ASSERT_EQ(bounded->size(), 1u);
  EXPECT_EQ((*bounded)[0].summary, "fix");

  auto before = (*repo)->file_at((*first)[0].sha, "tests/test_a.py");
  ASSERT_TRUE(before && *before);
  EXPECT_EQ(**before, kFaulty);
  auto missing = (*repo)->file_at((*first)[0].sha, "side.txt");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);
  auto sha = (*repo)->resolve((*first)[1].sha.substr(0, 8));
  ASSERT_TRUE(sha);
  EXPECT_EQ(*sha, (*first)[1].sha);
}

TEST(git_history, bad_input_names_what_is_wrong) {
  TempDir dir;
  auto none = GitRepository::open(dir.path());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("not a git repository"), std::string::npos);
  git(dir, "init");
  write_file(dir / "tests" / "blob.py", std::string("a\0b\n", 4));
  git(dir, "add -A");
  git(dir, "commit -m binary");
  auto repo = GitRepository::open(dir.path());
  ASSERT_TRUE(repo);
  auto unknown = (*repo)->resolve("0123456789abcdef0123456789abcdef01234567");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("no commit \"0123456789abcdef0123456789abcdef01234567\""), std::string::npos);
  auto head = (*repo)->resolve("HEAD");
  ASSERT_TRUE(head);
  auto binary = (*repo)->file_at(*head, "tests/blob.py");
  ASSERT_FALSE(binary);
  EXPECT_NE(binary.error().message.find("a binary file"), std::string::npos);
}

TEST(labelling_diff, removed_and_modified_lines_of_the_faulty_version_only) {
  EXPECT_EQ(*removed_or_modified_lines(kFaulty, kFixed, "t.py"), (std::vector<int>{5}));  // modified
  // Pure additions label nothing.
  EXPECT_TRUE(removed_or_modified_lines("a = 1\nb = 2\n", "a = 1\nx = 0\nb = 2\n", "t.py")->empty());
  // A removed line is faulty; a removed blank line is not.
  EXPECT_EQ(*removed_or_modified_lines("a = 1\n\nb = 2\nc = 3\n", "a = 1\nb = 2\n", "t.py"), (std::vector<int>{4}));
  // Several hunks, in line order.
  EXPECT_EQ(*removed_or_modified_lines("a\nb\nc\nd\ne\n", "A\nb\nc\nD\ne\n", "t.py"), (std::vector<int>{1, 4}));
  EXPECT_TRUE(removed_or_modified_lines("same\n", "same\n", "t.py")->empty());
}

}  // namespace
}  // namespace spark
