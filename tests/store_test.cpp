// One behaviour suite for both knowledge-base engines (a typed test suite): the embedded SQLite store and the
// PostgreSQL server store run the same tests, so the two cannot drift. The server is a real one (pg_cluster.h).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "store/knowledge_base.h"
#include "pg_test.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;
using testing::PgCluster;
using testing::run_spark;
using testing::RunResult;
using testing::sample_case;
using testing::TempDir;
using testing::write_file;

struct SqliteBackend {
  static constexpr bool kServer = false;
  static std::string location(const TempDir& dir) { return (dir / "kb").string(); }
};
struct PostgresBackend {
  static constexpr bool kServer = true;
  static std::string location(const TempDir&) { return PgCluster::shared()->new_database(); }
};

template <class Backend>
class Store : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (Backend::kServer) SPARK_NEED_POSTGRES();
    location_ = Backend::location(dir_);
  }
  std::unique_ptr<KnowledgeBase> open(bool create = true) {
    auto kb = KnowledgeBase::open(location_, create, 30000, dir_ / "local");
    if (!kb) {
      ADD_FAILURE() << kb.error().message;
      return nullptr;
    }
    return std::move(*kb);
  }
  RunResult spark(std::vector<std::string> args, const std::filesystem::path& cwd = {}) {
    args.insert(args.begin(), {"--kb", location_, "--local-dir", (dir_ / "local").string()});
    return run_spark(args, cwd.empty() ? dir_.path() : cwd);
  }
  int64_t rows(KnowledgeBase& kb, const std::string& table) {
    auto st = kb.database().prepare("SELECT count(*) FROM " + table);
    EXPECT_TRUE(st);
    EXPECT_TRUE(st->step());
    return st->int64(0);
  }
  TempDir dir_;
  std::string location_;
};

struct BackendNames {
  template <class T>
  static std::string GetName(int) {
    return T::kServer ? "postgresql" : "sqlite";
  }
};
using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;
TYPED_TEST_SUITE(Store, Backends, BackendNames);

Case make_case(const std::string& id, const std::string& content, int line, const std::string& error = "E   assert 1 == 2") {
  auto c = case_from_json(sample_case(id, content, line, error));
  EXPECT_TRUE(c) << c.error().message;
  return *c;
}

TYPED_TEST(Store, cases_round_trip_byte_for_byte) {
  auto kb = this->open();
  ASSERT_TRUE(kb);
  EXPECT_TRUE(kb->created());
  EXPECT_FALSE(*kb->has_cases());
  // NUL bytes, CRLF, tabs and non-ASCII text in contents and messages come back as they went in.
  std::string odd = "def test_a():\r\n\tx = 'caf\xc3\xa9'\n";
  odd += "    y = '" + std::string(1, '\0') + "'\n";
  odd += "    assert x == y\n";
  const std::vector<Case> cases = {make_case("a", odd, 4, "E   assert 'caf\xc3\xa9' == '" + std::string(1, '\0') + "'"),
                                   make_case("b", "def test_b():\n    assert 2 == 3\n", 2),
                                   make_case("c", odd, 3)};
  auto summary = kb->import_cases(cases, {}, false);
  ASSERT_TRUE(summary) << summary.error().message;
  EXPECT_EQ(summary->added, 3u);
  EXPECT_EQ(*kb->count(), 3u);
  EXPECT_TRUE(*kb->has_cases());
  EXPECT_EQ(*kb->generation(), 1);
  auto entries = kb->entries();
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 3u);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ((*entries)[i].id, cases[i].id);
    auto loaded = kb->load((*entries)[i].rowid);
    ASSERT_TRUE(loaded) << loaded.error().message;
    EXPECT_EQ(case_to_json(*loaded), case_to_json(cases[i]));
    EXPECT_EQ(loaded->files.front().content, cases[i].files.front().content);
  }
  // Shared contents are stored once.
  EXPECT_EQ(this->rows(*kb, "blobs"), 2);
  auto found = kb->find("b");
  ASSERT_TRUE(found && *found);
  EXPECT_EQ(**found, (*entries)[1].rowid);
  EXPECT_FALSE(*kb->find("zzz"));
  // The same file again changes nothing, not even the generation.
  auto again = kb->import_cases(cases, {}, false);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->unchanged, 3u);
  EXPECT_EQ(*kb->generation(), 1);
  // A second connection sees it all.
  kb.reset();
  auto reopened = this->open(false);
  ASSERT_TRUE(reopened);
  EXPECT_FALSE(reopened->created());
  EXPECT_EQ(*reopened->count(), 3u);
}

TYPED_TEST(Store, a_changed_record_needs_replace_and_removal_takes_its_contents) {
  auto kb = this->open();
  ASSERT_TRUE(kb);
  ASSERT_TRUE(kb->import_cases({make_case("a", "x = 1\nassert x\n", 2), make_case("b", "y = 2\nassert y\n", 2)},
                               {{"one.jsonl:1"}, {"one.jsonl:2"}}, false));
  const std::vector<Case> changed = {make_case("a", "x = 1\nassert x\n", 1)};
  auto refused = kb->import_cases(changed, {{"two.jsonl:7"}}, false);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("two.jsonl:7: id \"a\" is already in the knowledge base"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(*kb->count(), 2u);
  auto replaced = kb->import_cases(changed, {}, true);
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(replaced->replaced, 1u);
  auto a = kb->load(**kb->find("a"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->faulty_lines.front().line, 1);
  auto removed = kb->remove_cases({"b", "never-there"});
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, 1u);
  EXPECT_EQ(this->rows(*kb, "blobs"), 1);
  EXPECT_EQ(this->rows(*kb, "case_files"), 1);
  EXPECT_EQ(*kb->generation(), 3);
}

TYPED_TEST(Store, settings_and_a_newer_schema_refused_by_name) {
  {
    auto kb = this->open();
    ASSERT_TRUE(kb);
    ASSERT_TRUE(kb->set_setting("k", "one"));
    ASSERT_TRUE(kb->set_setting("k", "two"));
    EXPECT_EQ(**kb->setting("k"), "two");
    EXPECT_FALSE(*kb->setting("absent"));
    if constexpr (TypeParam::kServer) ASSERT_TRUE(kb->set_setting("schema_version", "99"));
    else ASSERT_TRUE(kb->database().exec("PRAGMA user_version=99"));
  }
  auto newer = KnowledgeBase::open(this->location_, true, 30000, this->dir_ / "local");
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().message.find("has schema version 99, newer than this spark understands"), std::string::npos)
      << newer.error().message;
  EXPECT_NE(newer.error().message.find(TypeParam::kServer ? this->location_ : this->location_ + "/kb.sqlite"),
            std::string::npos)
      << newer.error().message;
}

TYPED_TEST(Store, a_schema_3_store_gets_each_cases_language_on_upgrade) {
  std::string store_id;
  {
    auto kb = this->open();
    ASSERT_TRUE(kb);
    auto java = sample_case("java", "class CartCheck {\n  @Test void total() {\n    assertEquals(3, t);\n  }\n}\n", 3);
    java["language"] = "java";
    java["files"][0]["path"] = "checks/CartCheck";
    java["faulty_lines"][0]["path"] = "checks/CartCheck";
    auto c = case_from_json(java);
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_TRUE(kb->import_cases({*c, make_case("plain", "def test_b():\n    assert 2 == 3\n", 2)}, {}, false));
    if (auto id = kb->setting("store_id"); id && *id) store_id = **id;
    // What a schema-3 store looked like: no language column.
    ASSERT_TRUE(kb->database().exec("ALTER TABLE cases DROP COLUMN language"));
    if constexpr (TypeParam::kServer) ASSERT_TRUE(kb->set_setting("schema_version", "3"));
    else ASSERT_TRUE(kb->database().exec("PRAGMA user_version=3"));
  }
  if constexpr (TypeParam::kServer) {
    // Commands that only read leave a server's schema alone and say what to run.
    auto reader = KnowledgeBase::open(this->location_, false, 30000, this->dir_ / "local");
    ASSERT_FALSE(reader);
    EXPECT_NE(reader.error().message.find("older schema: run `spark kb init` first"), std::string::npos)
        << reader.error().message;
  }
  auto kb = this->open(true);
  ASSERT_TRUE(kb);
  EXPECT_FALSE(kb->created());
  std::vector<std::string> languages;  // in rowid order
  ASSERT_TRUE(kb->for_each_sketch(0, [&](KnowledgeBase::CaseSketch&& s) -> Status {
    languages.push_back(s.language);
    return {};
  }));
  EXPECT_EQ(languages, (std::vector<std::string>{"java", "python"}));
  EXPECT_EQ(*kb->count(), 2u);
  if constexpr (TypeParam::kServer) {
    EXPECT_EQ(**kb->setting("schema_version"), std::to_string(kSchemaVersion));
    EXPECT_EQ(**kb->setting("store_id"), store_id);  // the runners' local indexes stay theirs
  } else {
    auto version = kb->database().prepare("PRAGMA user_version");
    ASSERT_TRUE(version && *version->step());
    EXPECT_EQ(version->int64(0), kSchemaVersion);
  }
}

TYPED_TEST(Store, mining_state_and_audit_decisions_through_the_cli) {
  TempDir repo;
  std::vector<int> sizes(12, 1);
  sizes.push_back(30);
  std::string all;
  for (const auto& o : testing::fix_history(repo, sizes)) all += o;
  write_file(repo / "all.jsonl", all);
  auto mined = this->spark({"mine", "--outcomes", "all.jsonl"}, repo.path());
  ASSERT_EQ(mined.exit_code, 0) << mined.err;
  EXPECT_NE(mined.err.find("stored 26 outcomes"), std::string::npos) << mined.err;
  EXPECT_NE(mined.err.find("12 labelled into the knowledge base"), std::string::npos) << mined.err;
  auto list = this->spark({"audit", "--format", "json"}, repo.path());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const json j = json::parse(list.out);
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_EQ(j["cases"][0]["status"], "quarantined");
  EXPECT_NEAR(j["rule"]["threshold"].get<double>(), 26.41, 0.01);
  const std::string id = j["cases"][0]["id"];
  auto accept = this->spark({"audit", "accept", id, "--author", "Auditor", "--reason", "a real fault"}, repo.path());
  ASSERT_EQ(accept.exit_code, 0) << accept.err;
  // A re-run stores nothing new and keeps the decision.
  auto again = this->spark({"mine", "--outcomes", "all.jsonl"}, repo.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("stored 0 outcomes (new or changed); opened 0 failures"), std::string::npos) << again.err;
  const json after = json::parse(this->spark({"audit", "--all", "--format", "json"}, repo.path()).out);
  bool found = false;
  for (const auto& c : after["cases"])
    if (c["id"] == id) {
      found = true;
      EXPECT_EQ(c["status"], "accepted");
      EXPECT_EQ(c["reason"], "a real fault");
    }
  EXPECT_TRUE(found);
  auto kb = this->open(false);
  ASSERT_TRUE(kb);
  EXPECT_EQ(*kb->count(), 13u);
  EXPECT_EQ(this->rows(*kb, "outcomes"), 26);
}

TYPED_TEST(Store, the_local_index_catches_up_with_cases_added_since_it_was_built) {
  std::string first, second;
  for (int i = 0; i < 6; ++i)
    first += sample_case("a" + std::to_string(i), "def test_a():\n    x = " + std::to_string(i) + "\n    assert x == 9\n", 3)
                 .dump() + "\n";
  for (int i = 0; i < 3; ++i)
    second += sample_case("b" + std::to_string(i), "def test_b():\n    y = " + std::to_string(i) + "\n    assert y == 7\n", 3)
                  .dump() + "\n";
  write_file(this->dir_ / "first.jsonl", first);
  write_file(this->dir_ / "second.jsonl", second);
  ASSERT_EQ(this->spark({"import", "first.jsonl"}).exit_code, 0);
  auto index = this->spark({"index"});
  ASSERT_EQ(index.exit_code, 0) << index.err;
  {
    // Another runner adds cases (the library, so that no index of this runner's is touched).
    std::vector<Case> more;
    std::vector<CaseOrigin> origins;
    ASSERT_TRUE(read_corpora({(this->dir_ / "second.jsonl").string()}, more, origins));
    auto kb = this->open(false);
    ASSERT_TRUE(kb);
    ASSERT_TRUE(kb->import_cases(more, origins, false));
  }
  write_file(this->dir_ / "q" / "test_q.py", "def test_b():\n    y = 5\n    assert y == 7\n");
  write_file(this->dir_ / "q" / "error.txt", "q/test_q.py:3: in test_b\n    assert y == 7\nE   assert 5 == 7\n");
  auto loc = this->spark({"localize", "--test", "q/test_q.py", "--error", "q/error.txt"});
  ASSERT_EQ(loc.exit_code, 0) << loc.err;
  EXPECT_NE(loc.out.find("knowledge base: 9 labelled case(s)"), std::string::npos) << loc.out;
  EXPECT_NE((loc.out + loc.err).find("the index lacked 3 case(s)"), std::string::npos) << loc.out << loc.err;
  auto status = this->spark({"kb", "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("cases: 9"), std::string::npos) << status.out;
}

TYPED_TEST(Store, concurrent_importers_into_a_new_store_lose_and_duplicate_nothing) {
  // No `kb init`: the first writers race to create the store (the folder and file, or the server's schema).
  constexpr int kWriters = 8, kEach = 20;
  for (int w = 0; w < kWriters; ++w) {
    std::string lines;
    for (int i = 0; i < kEach; ++i) {
      const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
      // Half of each file is shared with every other writer: the same ids, the same records.
      const std::string shared_id = i % 2 ? id : "shared-" + std::to_string(i);
      lines += sample_case(shared_id, "def test_a():\n    v = " + std::to_string(i) + "\n    assert v == 1\n", 3).dump() + "\n";
    }
    write_file(this->dir_ / ("w" + std::to_string(w) + ".jsonl"), lines);
  }
  std::vector<std::thread> writers;
  std::vector<int> codes(kWriters, -1);
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&, w] { codes[w] = this->spark({"import", "w" + std::to_string(w) + ".jsonl"}).exit_code; });
  for (auto& t : writers) t.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(codes[w], 0) << "writer " << w;
  auto kb = this->open(false);
  ASSERT_TRUE(kb);
  EXPECT_EQ(*kb->count(), static_cast<size_t>(kWriters * kEach / 2 + kEach / 2));
}

// `spark mine --discover --shard I/N` (issue 35): runners that split one history at once, into one store, find every
// fix once.
TYPED_TEST(Store, discovery_shards_at_once_into_one_store_find_every_fix_once) {
  TempDir repo;
  testing::git(repo, "init -q");
  constexpr int kFixes = 6;
  std::string tests;
  for (int i = 0; i < kFixes; ++i)
    tests += "def test_" + std::to_string(i) + "():\n    assert " + std::to_string(i) + " == -1\n\n\n";
  write_file(repo / "tests" / "test_all.py", tests);
  testing::git(repo, "add -A");
  testing::git(repo, "commit -q -m start");
  for (int i = 0; i < kFixes; ++i) {
    const std::string wrong = "assert " + std::to_string(i) + " == -1";
    tests.replace(tests.find(wrong), wrong.size(), "assert " + std::to_string(i) + " == " + std::to_string(i));
    write_file(repo / "tests" / "test_all.py", tests);
    testing::git(repo, "commit -q -am fix" + std::to_string(i));
  }
  const std::string run = "/usr/bin/python3 -B -m pytest {test_id}";
  std::vector<std::thread> runners;
  std::vector<RunResult> results(3);
  for (int s = 0; s < 3; ++s)
    runners.emplace_back([&, s] {
      results[s] = this->spark({"mine", "--discover", "--shard", std::to_string(s + 1) + "/3", "--run", run},
                               repo.path());
    });
  for (auto& t : runners) t.join();
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << r.err;
  auto kb = this->open(false);
  ASSERT_TRUE(kb);
  EXPECT_EQ(*kb->count(), static_cast<size_t>(kFixes));
  EXPECT_EQ(this->rows(*kb, "failures"), kFixes);
  // Every (commit, test) ran once: a second discovery over the whole history runs nothing.
  auto again = this->spark({"mine", "--discover", "--run", run}, repo.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("ran 0 test runs"), std::string::npos) << again.err;
  EXPECT_EQ(*kb->count(), static_cast<size_t>(kFixes));
}

TYPED_TEST(Store, copy_to_the_other_engine_and_back_loses_nothing) {
  TempDir repo;
  std::string all;
  for (const auto& o : testing::fix_history(repo, {1, 2, 1, 3, 1})) all += o;
  write_file(repo / "all.jsonl", all);
  ASSERT_EQ(this->spark({"mine", "--outcomes", "all.jsonl"}, repo.path()).exit_code, 0);
  const auto before = this->spark({"export"});
  ASSERT_EQ(before.exit_code, 0);
  ASSERT_FALSE(before.out.empty());
  // The other engine: a folder when this one is a server, a server database when this one is a folder.
  std::string other;
  if constexpr (TypeParam::kServer) {
    other = (this->dir_ / "copied").string();
  } else {
    if (!PgCluster::shared()) GTEST_SKIP() << "no PostgreSQL test server: " << PgCluster::unavailable_reason();
    other = PgCluster::shared()->new_database();
  }
  auto copy = run_spark({"kb", "copy", this->location_, other}, this->dir_.path());
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  EXPECT_NE(copy.out.find("copied 5 case(s)"), std::string::npos) << copy.out;
  EXPECT_EQ(run_spark({"--kb", other, "export"}, this->dir_.path()).out, before.out);
  // Into a store that is not empty: refused, nothing written.
  auto refused = run_spark({"kb", "copy", this->location_, other}, this->dir_.path());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("is not empty"), std::string::npos) << refused.err;
  // Back again, into a fresh store of this engine: the mining state came along too.
  std::string back = TypeParam::kServer ? PgCluster::shared()->new_database() : (this->dir_ / "back").string();
  ASSERT_EQ(run_spark({"kb", "copy", other, back}, this->dir_.path()).exit_code, 0);
  EXPECT_EQ(run_spark({"--kb", back, "export"}, this->dir_.path()).out, before.out);
  auto rerun = run_spark({"--kb", back, "mine", "--outcomes", "all.jsonl"}, repo.path());
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_NE(rerun.err.find("stored 0 outcomes (new or changed); opened 0 failures"), std::string::npos) << rerun.err;
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
