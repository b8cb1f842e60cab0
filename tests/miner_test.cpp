// The miner's git layer on real repositories the test makes with git itself.
#include "miner/git_history.h"
#include "miner/miner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::TempDir;
using testing::write_file;

using testing::git;
using testing::head_sha;

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

// A loose object's file: the object `rev` names in the repository at `dir`.
std::filesystem::path loose_object_file(const TempDir& dir, const std::string& rev) {
  const std::string sha =
      testing::run_program("/usr/bin/git", {"-C", dir.path().string(), "rev-parse", rev}, dir.path()).out.substr(0, 40);
  return dir / ".git" / "objects" / sha.substr(0, 2) / sha.substr(2);
}

// Replaces a loose object's file with zlib's compression of `content` (python3's zlib: the test links none).
void write_loose_object(const std::filesystem::path& file, const std::string& content) {
  std::filesystem::permissions(file, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  testing::write_file(file.string() + ".raw", content);
  auto r = testing::run_program(
      "/usr/bin/python3",
      {"-c", "import sys, zlib; open(sys.argv[1], 'wb').write(zlib.compress(open(sys.argv[2], 'rb').read()))",
       file.string(), file.string() + ".raw"},
      file.parent_path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// Every way a loose object can be damaged is a read error naming its file and `git fsck`, found in bounded work
// (libgit2 1.5 loops for ever on a truncated one: issue 40); an object moved away is one too.
TEST(git_history, a_damaged_or_missing_loose_object_is_a_read_error_naming_its_file) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / "tests" / "test_a.py", kFaulty);
  git(dir, "add -A");
  git(dir, "commit -m one");
  write_file(dir / "tests" / "test_a.py", kFixed);
  git(dir, "commit -am two");
  const std::string head = head_sha(dir);
  const auto blob = loose_object_file(dir, "HEAD:tests/test_a.py");
  const std::string sound = testing::slurp(blob);
  const auto expect_read_error = [&](const Error& e, const std::string& what) {
    EXPECT_TRUE(is_read_error(e)) << e.message;
    EXPECT_NE(e.message.find(blob.string()), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(what), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("git fsck"), std::string::npos) << e.message;
  };
  const std::vector<std::pair<std::string, std::string>> damage = {
      {"blob 100", "no object header"},                       // no NUL after the header
      {std::string("blob 100\0short", 14), "ends after 5 of the 100 bytes"},
      {std::string("blob 2\0toolong", 14), "more content than its header says"},
      {std::string("blub 3\0abc", 10), "an unknown object type \"blub\""},
      {std::string("blob 99999999999\0abc", 20), "more than its"},
  };
  for (const auto& [content, what] : damage) {
    SCOPED_TRACE(what);
    write_loose_object(blob, content);
    auto repo = GitRepository::open(dir.path());  // a fresh handle: libgit2 caches objects it has read
    ASSERT_TRUE(repo) << repo.error().message;
    auto read = (*repo)->file_at(head, "tests/test_a.py");
    ASSERT_FALSE(read);
    expect_read_error(read.error(), what);
  }
  for (const size_t size : {size_t{0}, size_t{1}, size_t{20}, sound.size() - 1}) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " bytes");
    write_file(blob, sound.substr(0, size));
    auto repo = GitRepository::open(dir.path());
    ASSERT_TRUE(repo);
    auto read = (*repo)->file_at(head, "tests/test_a.py");
    ASSERT_FALSE(read);
    expect_read_error(read.error(), size < 2 ? "" : "truncated");
  }
  write_file(blob, "hello, not an object\n");  // not zlib, and no pack-like header either
  {
    auto repo = GitRepository::open(dir.path());
    ASSERT_TRUE(repo);
    auto read = (*repo)->file_at(head, "tests/test_a.py");
    ASSERT_FALSE(read);
    expect_read_error(read.error(), "no object header");
  }
  std::filesystem::remove(blob);  // gone: libgit2's own "not found", a read error too
  {
    auto repo = GitRepository::open(dir.path());
    ASSERT_TRUE(repo);
    auto read = (*repo)->file_at(head, "tests/test_a.py");
    ASSERT_FALSE(read);
    EXPECT_TRUE(is_read_error(read.error())) << read.error().message;
    EXPECT_NE(read.error().message.find("git fsck"), std::string::npos) << read.error().message;
  }
  write_file(blob, sound);
  auto repo = GitRepository::open(dir.path());
  ASSERT_TRUE(repo);
  auto read = (*repo)->file_at(head, "tests/test_a.py");
  ASSERT_TRUE(read && *read) << (read ? "" : read.error().message);
  EXPECT_EQ(**read, kFixed);
  auto absent = (*repo)->file_at(head, "tests/none.py");  // no such path: no error
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent);

  // A clone that borrows the objects (git clone --shared: objects/info/alternates) reads them guarded as well.
  TempDir borrower;
  const std::string clone = "git clone -q --shared '" + dir.path().string() + "' '" + (borrower / "c").string() +
                            "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(clone.c_str()), 0);
  write_file(blob, sound.substr(0, 20));
  {
    auto shared = GitRepository::open(borrower / "c");
    ASSERT_TRUE(shared);
    auto borrowed = (*shared)->file_at(head, "tests/test_a.py");
    ASSERT_FALSE(borrowed);
    expect_read_error(borrowed.error(), "truncated");
  }
  write_file(blob, sound);

  // A truncated commit: the history, the commit's sha and a short prefix of it are read errors, not a hang.
  const auto commit = loose_object_file(dir, "HEAD");
  std::filesystem::permissions(commit, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  std::filesystem::resize_file(commit, 20);
  auto damaged = GitRepository::open(dir.path());
  ASSERT_TRUE(damaged);
  auto history = (*damaged)->history();
  ASSERT_FALSE(history);
  EXPECT_TRUE(is_read_error(history.error())) << history.error().message;
  EXPECT_NE(history.error().message.find(commit.string()), std::string::npos) << history.error().message;
  for (const std::string& rev : {head, head.substr(0, 8)}) {
    auto resolved = (*damaged)->resolve(rev);
    ASSERT_FALSE(resolved) << rev;
    EXPECT_TRUE(is_read_error(resolved.error())) << resolved.error().message;
    EXPECT_NE(resolved.error().message.find(commit.string()), std::string::npos) << resolved.error().message;
  }
}

TEST(normalize_remote_url, one_name_for_every_spelling_of_a_remote) {
  for (const char* url : {"https://github.com/pallets/click.git", "https://user@GitHub.com/pallets/click",
                          "git@github.com:pallets/click.git", "ssh://git@github.com:22/pallets/click.git/",
                          "http://github.com/pallets/click/"})
    EXPECT_EQ(normalize_remote_url(url), "github.com/pallets/click") << url;
  // A local path names no project (it is one machine's folder).
  for (const char* path : {"/srv/git/calc.git", "../calc", "calc.git", "./x:y", "file:///srv/git/calc.git", ""})
    EXPECT_EQ(normalize_remote_url(path), "") << path;
  EXPECT_EQ(project_slug("github.com/pallets/click"), "click");
  EXPECT_EQ(project_slug("git-0123456789ab"), "git-0123456789ab");
}

TEST(default_project, the_same_from_a_clone_a_worktree_and_the_original) {
  TempDir dir;
  TempDir repo_dir;  // the repository itself
  git(repo_dir, "init -q");
  write_file(repo_dir / "tests" / "test_a.py", "def test_a():\n    assert True\n");
  git(repo_dir, "add -A");
  git(repo_dir, "commit -q -m one");
  const std::string root = head_sha(repo_dir);
  git(repo_dir, "worktree add -q '" + (dir / "wtAC-1").string() + "'");
  git(dir, "clone -q '" + repo_dir.path().string() + "' user2-clone");
  auto original = GitRepository::open(repo_dir.path());
  auto worktree = GitRepository::open(dir / "wtAC-1");
  ASSERT_TRUE(original && worktree);
  // No remote: the root commit names the project, whatever the folder.
  EXPECT_EQ(default_project(**original), "git-" + root.substr(0, 12));
  EXPECT_EQ(default_project(**worktree), default_project(**original));
  // With a remote: its URL, normalised; a clone of it gets the same.
  git(repo_dir, "remote add origin https://github.com/acme/calc.git");
  git(dir, "-C user2-clone remote set-url origin git@github.com:acme/calc.git");
  auto with_remote = GitRepository::open(repo_dir.path());
  auto clone = GitRepository::open(dir / "user2-clone");
  ASSERT_TRUE(with_remote && clone);
  EXPECT_EQ(default_project(**with_remote), "github.com/acme/calc");
  EXPECT_EQ(default_project(**clone), "github.com/acme/calc");
  // A clone of a local path (its origin is that path): the root commit names it, as the original when it has none.
  git(dir, "clone -q '" + repo_dir.path().string() + "' local-clone");
  for (const char* url : {"", "../calc", "file:///srv/git/calc.git"}) {
    if (*url) git(dir, std::string("-C local-clone remote set-url origin ") + url);
    auto local = GitRepository::open(dir / "local-clone");
    ASSERT_TRUE(local);
    EXPECT_EQ(default_project(**local), "git-" + root.substr(0, 12)) << url;
  }
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

TEST(labelling_diff, each_faulty_line_keeps_its_replacement_in_the_fix) {
  using Fixes = std::map<int, std::vector<std::string>>;
  // As many lines added as removed: each its counterpart.
  EXPECT_EQ(*line_fixes("a\nb\nc\nd\ne\n", "A\nb\nc\nD\ne\n", "t.py"), (Fixes{{1, {"A"}}, {4, {"D"}}}));
  // One line became two: the line gets the hunk's whole new side; a removal gets none; a blank removed line is no
  // faulty line.
  EXPECT_EQ(*line_fixes("x = 1\ny = f(x)\n\nz = 3\nw = 4\n", "x = 1\ny = g(x)\ny += 1\nw = 4\n", "t.py"),
            (Fixes{{2, {"y = g(x)", "y += 1"}}, {4, {"y = g(x)", "y += 1"}}}));
  EXPECT_EQ(*line_fixes("keep\ngone\n", "keep\n", "t.py"), (Fixes{{2, {}}}));
  // Every line line_fixes names is one removed_or_modified_lines names.
  const std::string a = "def t():\n    v = 1\n\n    assert v == 2\n", b = "def t():\n    v = 2\n    assert v == 2\n";
  const auto fixes = line_fixes(a, b, "t.py");
  ASSERT_TRUE(fixes);
  std::vector<int> keys;
  for (const auto& [line, fix] : *fixes) keys.push_back(line);
  EXPECT_EQ(keys, *removed_or_modified_lines(a, b, "t.py"));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::head_sha;

// Runs real pytest at the current commit and keeps its JUnit report as reports/<sha>.xml.
void record_run(const TempDir& dir) {
  const std::string sha = head_sha(dir);
  std::filesystem::create_directories(dir / "reports");
  const std::string cmd = "cd '" + dir.path().string() + "' && /usr/bin/python3 -B -m pytest -q -p no:cacheprovider " +
                          "--junitxml=reports/" + sha + ".xml tests > /dev/null 2>&1";
  (void)std::system(cmd.c_str());
  ASSERT_TRUE(std::filesystem::exists(dir / "reports" / (sha + ".xml")));
}

TEST(test_code_rule, the_default_globs_and_a_configured_list) {
  const TestCodeRule rule;
  for (const char* p : {"tests/test_a.py", "a_test.py", "pkg/tests/helpers.py", "tests/conftest.py", "conftest.py",
                        "src/test/java/com/x/Fixtures.java", "mod/src/test/java/Base.java", "FooTest.java",
                        "web/__tests__/util.js", "a.spec.ts", "test/helpers.js"})
    EXPECT_TRUE(rule.matches(p)) << p;
  for (const char* p : {"src/shapes.py", "testing/helpers.py", "src/main/java/Foo.java", "tests/data.json", "lib/x.js"})
    EXPECT_FALSE(rule.matches(p)) << p;
  auto custom = TestCodeRule::parse(" testing/** , tools/fixtures.py,**/check_*.py,");
  ASSERT_TRUE(custom) << custom.error().message;
  EXPECT_EQ(custom->globs().size(), 3u);
  EXPECT_TRUE(custom->matches("testing/helpers.py"));
  EXPECT_TRUE(custom->matches("a/testing/b/helpers.py"));
  EXPECT_TRUE(custom->matches("tools/fixtures.py"));
  EXPECT_FALSE(custom->matches("x/tools/fixtures.py"));  // a path glob is from the top
  EXPECT_TRUE(custom->matches("deep/down/check_sum.py"));
  EXPECT_TRUE(custom->matches("check_sum.py"));
  EXPECT_FALSE(custom->matches("tests/test_a.py"));  // the list replaces the default
  EXPECT_FALSE(custom->matches("testing/notes.txt"));  // not a language spark reads
  for (const char* bad : {"", " , ", "/abs/**", "../up/*.py", "a/../b.py"}) {
    auto r = TestCodeRule::parse(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("mine.test_code"), std::string::npos) << r.error().message;
  }
}

TEST(dependency_paths, conftest_files_up_the_tree_and_the_test_code_a_test_imports) {
  const std::map<std::string, std::string> files = {
      {"conftest.py", "import pytest\n"},
      {"tests/conftest.py", "from tests.fixtures import make\n"},
      {"tests/unit/conftest.py", "\n"},
      {"tests/unit/test_a.py",
       "import os\nimport helpers\nfrom .shared import x as y, (z)\nfrom tests import base\nfrom shapes import area\n"},
      {"tests/unit/helpers.py", "\n"},
      {"tests/unit/shared.py", "\n"},
      {"tests/base.py", "\n"},
      {"tests/fixtures.py", "\n"},
      {"shapes.py", "def area(): pass\n"},  // the system under test: not test code
      {"test/cart.test.js", "const h = require('./helpers/cart');\nimport { x } from \"../lib/util.js\";\n"},
      {"test/helpers/cart.js", "\n"},
      {"lib/util.js", "\n"},
      {"src/test/java/com/x/CartTest.java",
       "package com.x;\nimport com.x.support.Carts;\nimport java.util.List;\nclass CartTest extends BaseTest {\n}\n"},
      {"src/test/java/com/x/support/Carts.java", "\n"},
      {"src/test/java/com/x/BaseTest.java", "\n"}};
  std::vector<std::string> asked;
  const auto read = [&](const std::string& p) -> std::optional<std::string> {
    asked.push_back(p);
    auto it = files.find(p);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const TestCodeRule rule;
  EXPECT_EQ(dependency_paths("tests/unit/test_a.py", read, rule),
            (std::vector<std::string>{"tests/unit/conftest.py", "tests/conftest.py", "conftest.py",
                                      "tests/unit/helpers.py", "tests/unit/shared.py", "tests/base.py",
                                      "tests/fixtures.py"}));
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "shapes.py"), 0);  // not test code: never even read
  EXPECT_EQ(dependency_paths("test/cart.test.js", read, rule), (std::vector<std::string>{"test/helpers/cart.js"}));
  std::vector<std::string> java_files;
  for (const auto& [p, c] : files) java_files.push_back(p);
  TestFiles tf;
  tf.find = [&](const std::string& tail) { return find_by_tail(java_files, tail); };
  EXPECT_EQ(dependency_paths("src/test/java/com/x/CartTest.java", read, rule, &tf),
            (std::vector<std::string>{"src/test/java/com/x/support/Carts.java", "src/test/java/com/x/BaseTest.java"}));
  // A configured rule that also calls the system under test test code takes it in; a missing test file gives nothing.
  const auto wide = dependency_paths("tests/unit/test_a.py", read, *TestCodeRule::parse("*.py"));
  EXPECT_NE(std::find(wide.begin(), wide.end(), "shapes.py"), wide.end());
  EXPECT_TRUE(dependency_paths("tests/gone/test_b.py", read, rule).empty());
}

TEST(spark_mine, labels_real_pytest_failures_by_their_fix_and_counts_fixes_outside_the_tests) {
  TempDir dir;
  git(dir, "init");
  write_file(dir / ".gitignore", "reports/\n__pycache__/\n");
  write_file(dir / "shapes.py", "def area(w, h):\n    return w * h\n");
  const std::string good = "from shapes import area\n\n\ndef test_area():\n    w, h = 2, 3\n    assert area(w, h) == 6\n\n\n"
                           "def test_other():\n    assert area(1, 1) == 1\n";
  write_file(dir / "tests" / "test_shapes.py", good);
  git(dir, "add -A");
  git(dir, "commit -m start", "2026-01-01T10:00:00Z");
  record_run(dir);
  // A test breaks (its input changes), and is fixed two commits later.
  std::string broken = good;
  broken.replace(broken.find("w, h = 2, 3"), 11, "w, h = 2, 4");
  write_file(dir / "tests" / "test_shapes.py", broken);
  git(dir, "commit -am break-test", "2026-01-02T10:00:00Z");
  record_run(dir);
  write_file(dir / "README", "docs\n");
  git(dir, "add -A");
  git(dir, "commit -m docs", "2026-01-03T10:00:00Z");
  record_run(dir);
  write_file(dir / "tests" / "test_shapes.py", good);
  git(dir, "commit -am fix-test", "2026-01-04T10:00:00Z");
  record_run(dir);
  // The system under test breaks test_other and is fixed: not a test-code fault.
  write_file(dir / "shapes.py", "def area(w, h):\n    return w * h + (1 if w == 1 else 0)\n");
  git(dir, "commit -am break-sut", "2026-01-05T10:00:00Z");
  record_run(dir);
  write_file(dir / "shapes.py", "def area(w, h):\n    return w * h\n");
  git(dir, "commit -am fix-sut", "2026-01-06T10:00:00Z");
  record_run(dir);

  std::vector<std::string> args = {"mine", "--repo", ".", "--project", "demo/shapes", "-o", "mined.jsonl", "--outcomes"};
  for (const auto& e : std::filesystem::directory_iterator(dir / "reports")) args.push_back("reports/" + e.path().filename().string());
  auto r = testing::run_spark(args, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 labelled into the knowledge base"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 the same fault as an earlier failure"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 fixed outside the test code"), std::string::npos) << r.err;
  auto cases = read_cases_jsonl(dir / "mined.jsonl");
  ASSERT_TRUE(cases) << cases.error().message;
  // test_area failed at break-test and at docs with the same test code, and one fix mended it: one fault, one case,
  // labelled in the last failing commit's version, with both failing commits behind it.
  ASSERT_EQ(cases->cases.size(), 1u);
  const auto& occurrences = cases->cases[0].record["meta"]["occurrences"];
  EXPECT_EQ(occurrences["count"], 2);
  EXPECT_EQ(occurrences["last_commit"], cases->cases[0].faulty_commit.value_or(""));
  EXPECT_NE(occurrences["last_commit"], occurrences["first_commit"]);
  EXPECT_LE(occurrences["first_time"].get<std::string>(), occurrences["last_time"].get<std::string>());
  for (const auto& c : cases->cases) {
    EXPECT_EQ(c.test_id, "tests/test_shapes.py::test_area");
    ASSERT_EQ(c.faulty_lines.size(), 1u);
    EXPECT_EQ(c.faulty_lines[0].line, 5);  // "w, h = 2, 4"
    EXPECT_EQ(c.source, "history");
    EXPECT_NE(c.error_message.find("assert 8 == 6"), std::string::npos) << c.error_message;
    EXPECT_EQ(c.project, "demo/shapes");
  }
  // The cases import as they are.
  auto imp = testing::run_spark({"--kb", "kb", "import", "mined.jsonl"}, dir.path());
  EXPECT_EQ(imp.exit_code, 0) << imp.err;

  // Bad input: not a repository, a report whose commit is unknown, a malformed outcome line.
  TempDir empty;
  write_file(empty / "o.jsonl", "");
  auto not_repo = testing::run_spark({"mine", "--repo", empty.path().string(), "--outcomes", (empty / "o.jsonl").string()},
                                     dir.path());
  EXPECT_EQ(not_repo.exit_code, 1);
  EXPECT_NE(not_repo.err.find("not a git repository"), std::string::npos);
  write_file(dir / "bad.jsonl", "{\"commit\": \"zz\", \"test_id\": \"t\", \"outcome\": \"failed\"}\n");
  auto bad = testing::run_spark({"mine", "--outcomes", "bad.jsonl"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.jsonl:1: commit \"zz\" is not a hex sha"), std::string::npos) << bad.err;
  write_file(dir / "unknown.jsonl",
             "{\"commit\": \"0123456789abcdef0123456789abcdef01234567\", \"test_id\": \"t\", \"outcome\": \"failed\"}\n");
  auto unknown = testing::run_spark({"mine", "--outcomes", "unknown.jsonl"}, dir.path());
  EXPECT_EQ(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("unknown.jsonl:1: "), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("no commit \"0123456789abcdef0123456789abcdef01234567\""), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("stored 0 outcomes"), std::string::npos) << unknown.err;
}

TEST(read_outcomes_junit, a_bare_clone_maps_classnames_to_files_from_git_objects) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", "reports/\n__pycache__/\n");
  write_file(dir / "tests" / "test_shapes.py", "class TestArea:\n    def test_one(self):\n        assert 1 == 2\n");
  git(dir, "add -A");
  git(dir, "commit -q -m start");
  record_run(dir);  // pytest's default xunit2: no file attributes, only classname "tests.test_shapes.TestArea"
  const std::string sha = head_sha(dir);
  TempDir bare_dir;
  git(bare_dir, "clone -q --bare '" + dir.path().string() + "' repo.git");
  auto bare = GitRepository::open(bare_dir / "repo.git");
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_TRUE((*bare)->bare());
  std::vector<std::string> warnings;
  auto outcomes = read_outcomes_junit(dir / "reports" / (sha + ".xml"), "", **bare, &warnings);
  ASSERT_TRUE(outcomes) << outcomes.error().message;
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].test_id, "tests/test_shapes.py::TestArea::test_one");
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  // A report naming a test file that is not in that commit: a warning naming the file and the commit.
  write_file(dir / "gone.xml",
             "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\" tests=\"1\">"
             "<testcase classname=\"tests.test_gone\" name=\"test_x\" file=\"tests/test_gone.py\" line=\"1\">"
             "<failure message=\"boom\">E boom</failure></testcase></testsuite></testsuites>");
  warnings.clear();
  auto gone = read_outcomes_junit(dir / "gone.xml", sha, **bare, &warnings);
  ASSERT_TRUE(gone) << gone.error().message;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("tests/test_gone.py is not in commit " + sha.substr(0, 10)), std::string::npos)
      << warnings[0];
  // A path that leaves the repository is never looked up, in git objects or elsewhere.
  EXPECT_FALSE(test_files_at(**bare, sha).exists("../repo.git/config"));
  EXPECT_FALSE(test_files_at(**bare, sha).exists("/etc/passwd"));
}

TEST(spark_mine, the_three_sigma_rule_quarantines_outlying_fixes) {
  // Twelve fixes of one line and one that rewrote thirty: mean + 3 sd lies between them.
  TempDir dir;
  git(dir, "init");
  std::string outcomes;
  std::string content;
  for (int i = 0; i < 40; ++i) content += "x" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  write_file(dir / "tests" / "test_m.py", content);
  git(dir, "add -A");
  git(dir, "commit -m base", "2026-01-01T00:00:00Z");
  int day = 2;
  for (int n = 0; n < 13; ++n) {
    const bool big = n == 12;
    const std::string test = "tests/test_m.py::test_" + std::to_string(n);
    std::string next = content;
    for (int l = 0; l < (big ? 30 : 1); ++l) {
      const std::string from = "x" + std::to_string(l) + " = ";
      const size_t at = next.find(from);
      next.insert(at + from.size(), "1 + ");
    }
    const std::string date = "2026-01-" + std::string(day < 10 ? "0" : "") + std::to_string(day) + "T00:00:00Z";
    outcomes += "{\"commit\": \"" + head_sha(dir) + "\", \"test_id\": \"" + test + "\", \"outcome\": \"failed\", \"message\": \"E boom\"}\n";
    write_file(dir / "tests" / "test_m.py", next);
    git(dir, "commit -am fix" + std::to_string(n), date);
    outcomes += "{\"commit\": \"" + head_sha(dir) + "\", \"test_id\": \"" + test + "\", \"outcome\": \"passed\"}\n";
    content = next;
    ++day;
  }
  write_file(dir / "outcomes.jsonl", outcomes);
  auto r = testing::run_spark({"mine", "--outcomes", "outcomes.jsonl", "-o", "cases.jsonl", "--quarantine", "q.jsonl"},
                              dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto kept = read_cases_jsonl(dir / "cases.jsonl");
  auto quarantined = read_cases_jsonl(dir / "q.jsonl");
  ASSERT_TRUE(kept && quarantined);
  EXPECT_EQ(kept->cases.size(), 12u);
  ASSERT_EQ(quarantined->cases.size(), 1u);
  EXPECT_EQ(quarantined->cases[0].faulty_lines.size(), 30u);
  EXPECT_NE(r.err.find("1 quarantined for audit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mean 3.23 + 3.0 x sd 7.73 = 26.41 faulty lines (over 13 mined cases)"), std::string::npos) << r.err;
}

TEST(spark_mine, a_junit5_row_removed_by_its_fix_closes_and_a_test_failing_for_several_commits_labels_once) {
  // adds(...)[3] fails at c1 and c2; c2 fixes another test in the same file; c3 removes the bad row, so the id [3]
  // is gone: its sibling invocations passing close it, and both failures label the row alone, as one case.
  TempDir dir;
  git(dir, "init");
  const auto source = [](bool other_fixed, bool row_removed) {
    return std::string("package com.ex;\n"                                      // 1
                       "\n"                                                     // 2
                       "class TableTest {\n"                                    // 3
                       "    @ParameterizedTest\n"                               // 4
                       "    @CsvSource({\n"                                     // 5
                       "        \"1, 1, 2\",\n"                                 // 6
                       "        \"2, 2, 4\",\n") +                              // 7
           (row_removed ? "" : "        \"2, 3, 7\",\n") +                      // 8
           "    })\n"
           "    void adds(int a, int b, int sum) {\n"
           "        assertEquals(sum, a + b);\n"
           "    }\n"
           "\n"
           "    @Test\n"
           "    void other() {\n"
           "        assertEquals(" + (other_fixed ? "2" : "1") + ", 2);\n"
           "    }\n"
           "}\n";
  };
  const std::string path = "src/test/java/com/ex/TableTest.java";
  const std::string id = "com.ex.TableTest#adds(int, int, int)[";
  std::string outcomes;
  const auto outcome = [&](const std::string& test, const char* result) {
    outcomes += "{\"commit\": \"" + head_sha(dir) + "\", \"test_id\": \"" + test + "\", \"outcome\": \"" + result +
                "\", \"message\": \"org.opentest4j.AssertionFailedError: expected: <7> but was: <5>\\n\\tat "
                "com.ex.TableTest.adds(TableTest.java:11)\"}\n";
  };
  // A commit and its outcomes: adds [1] and [2] pass, [3] as `third` (none once its row is gone), other() as `other`.
  const auto commit = [&](const std::string& name, int day, bool other_fixed, const char* third, const char* other) {
    write_file(dir / path, source(other_fixed, third == nullptr));
    git(dir, "add -A");
    git(dir, "commit -m " + name, "2026-01-0" + std::to_string(day) + "T00:00:00Z");
    outcome(id + "1]", "passed");
    outcome(id + "2]", "passed");
    if (third) outcome(id + "3]", third);
    outcome("com.ex.TableTest#other()", other);
  };
  commit("c1", 2, false, "failed", "failed");
  commit("c2", 3, true, "failed", "passed");
  commit("c3", 4, true, nullptr, "passed");
  write_file(dir / "outcomes.jsonl", outcomes);
  auto r = testing::run_spark({"mine", "--outcomes", "outcomes.jsonl", "-o", "cases.jsonl"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto kept = read_cases_jsonl(dir / "cases.jsonl");
  ASSERT_TRUE(kept) << r.err;
  std::map<std::string, std::vector<int>> lines;
  for (const auto& c : kept->cases)
    for (const auto& l : c.faulty_lines) lines[c.test_id].push_back(l.line);
  const std::map<std::string, std::vector<int>> expected = {{id + "3]", {8}}, {"com.ex.TableTest#other()", {16}}};
  EXPECT_EQ(lines, expected) << r.err;
  EXPECT_NE(r.err.find("0 tests still open"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
