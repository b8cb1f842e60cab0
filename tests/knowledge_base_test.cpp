#include "store/knowledge_base.h"
#include "store/postgres_db.h"
#include "store/sqlite_db.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <thread>

#include "base/text.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using testing::sample_case;
using testing::TempDir;

namespace {
const std::string kCode = "def test_a():\n    x = 1\n    assert x == 2\n";

Case make(const std::string& id, int line = 3, const std::string& error = "E   assert 1 == 2") {
  return *case_from_json(sample_case(id, kCode, line, error));
}
}  // namespace

TEST(KnowledgeBase, imports_loads_and_counts) {
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  ASSERT_TRUE(kb) << kb.error().message;
  auto s = (*kb)->import_cases({make("a"), make("b", 2)}, {}, false);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->added, 2u);
  EXPECT_EQ(*(*kb)->count(), 2u);
  auto id = (*kb)->find("b");
  ASSERT_TRUE(id && *id);
  auto c = (*kb)->load(**id);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->faulty_lines[0].line, 2);
  EXPECT_EQ(c->files[0].content, kCode);
  EXPECT_EQ(case_to_json(*c), case_to_json(make("b", 2)));
}

TEST(KnowledgeBase, reimport_is_harmless_and_a_conflict_stores_nothing) {
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  ASSERT_TRUE((*kb)->import_cases({make("a")}, {}, false));
  const auto gen = *(*kb)->generation();
  auto again = (*kb)->import_cases({make("a")}, {}, false);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->unchanged, 1u);
  EXPECT_EQ(*(*kb)->generation(), gen);
  // "c" is new but "a" conflicts: the whole import is rolled back.
  auto conflict = (*kb)->import_cases({make("c"), make("a", 2)}, {{"x.jsonl:1"}, {"x.jsonl:2"}}, false);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(
      conflict.error().message,
      "x.jsonl:2: id \"a\" is already in the knowledge base with a different record (use --replace to overwrite it)");
  EXPECT_EQ(*(*kb)->count(), 1u);
  EXPECT_FALSE((*kb)->find("c")->has_value());
  auto replaced = (*kb)->import_cases({make("a", 2)}, {}, true);
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->replaced, 1u);
  EXPECT_GT(*(*kb)->generation(), gen);
}

// Keys are computed a chunk ahead on another thread: a conflict deep in a large import (past several chunks, and with
// a chunk still being prepared) is named by its own origin and still stores nothing; a large import stores every
// case with the keys a one-case import gives it.
TEST(KnowledgeBase, a_conflict_deep_in_a_large_import_is_named_and_stores_nothing) {
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  ASSERT_TRUE((*kb)->import_cases({make("c150")}, {}, false));
  std::vector<Case> many;
  std::vector<CaseOrigin> origins;
  for (int i = 0; i < 300; ++i) {
    many.push_back(make("c" + std::to_string(i), 2 + i % 2, "E   assert " + std::to_string(i) + " == 2"));
    origins.push_back({"big.jsonl:" + std::to_string(i + 1)});
  }
  auto conflict = (*kb)->import_cases(many, origins, false);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().message,
            "big.jsonl:151: id \"c150\" is already in the knowledge base with a different record "
            "(use --replace to overwrite it)");
  EXPECT_EQ(*(*kb)->count(), 1u);
  auto replaced = (*kb)->import_cases(many, origins, true);
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(replaced->added, 299u);
  EXPECT_EQ(replaced->replaced, 1u);
  TempDir one_dir;
  auto one = KnowledgeBase::open(one_dir / "kb", true);
  const auto entries = *(*kb)->entries();
  ASSERT_EQ(entries.size(), 300u);
  for (const auto& e : entries) {
    const int i = std::stoi(e.id.substr(1));
    ASSERT_TRUE((*one)->import_cases({many[static_cast<size_t>(i)]}, {}, false));
    auto alone = *(*one)->entries();
    EXPECT_EQ(alone.back().content_key, e.content_key) << e.id;
  }
}

TEST(KnowledgeBase, refuses_a_newer_schema_a_foreign_database_and_a_corrupt_file) {
  TempDir dir;
  {
    auto kb = KnowledgeBase::open(dir / "kb", true);
    ASSERT_TRUE(kb);
  }
  sqlite3* db = nullptr;
  sqlite3_open((dir / "kb" / "kb.sqlite").c_str(), &db);
  sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto newer = KnowledgeBase::open(dir / "kb", false);
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().message.find("schema version 99, newer than this spark understands"), std::string::npos);

  std::filesystem::create_directories(dir / "foreign");
  sqlite3_open((dir / "foreign" / "kb.sqlite").c_str(), &db);
  sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto foreign = KnowledgeBase::open(dir / "foreign", false);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("not a spark knowledge base"), std::string::npos);

  testing::write_file(dir / "corrupt" / "kb.sqlite", std::string(8192, 'x'));
  auto corrupt = KnowledgeBase::open(dir / "corrupt", false);
  ASSERT_FALSE(corrupt);
  EXPECT_NE(corrupt.error().message.find("kb.sqlite"), std::string::npos);
  EXPECT_NE(corrupt.error().message.find("not a database"), std::string::npos);

  auto missing = KnowledgeBase::open(dir / "none", false);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no knowledge base at"), std::string::npos);
}

namespace {

// A store at `dir` holding the case "old", then turned by `sql` into what an older spark left.
void make_older_store(const std::filesystem::path& dir, const char* sql) {
  {
    auto kb = KnowledgeBase::open(dir, true);
    ASSERT_TRUE(kb);
    ASSERT_TRUE((*kb)->import_cases({make("old", 1)}, {}, false));
  }
  sqlite3* db = nullptr;
  sqlite3_open((dir / "kb.sqlite").c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

// The one integer `sql` selects from the store; -1 when the query fails or gives no row.
int64_t one_number(KnowledgeBase& kb, const std::string& sql) {
  auto st = kb.database().prepare(sql);
  if (!st) return -1;
  auto row = st->step();
  return row && *row ? st->int64(0) : -1;
}

}  // namespace

TEST(KnowledgeBase, a_schema_1_store_is_upgraded_in_place_keeping_its_cases) {
  TempDir dir;
  // What a schema-1 store looked like: no miner tables.
  make_older_store(dir / "kb", "DROP TABLE outcomes; DROP TABLE failures; PRAGMA user_version=1");
  auto kb = KnowledgeBase::open(dir / "kb", false);
  ASSERT_TRUE(kb) << kb.error().message;
  EXPECT_TRUE((*kb)->find("old")->has_value());
  auto st = (*kb)->database().prepare("SELECT count(*) FROM failures");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(one_number(**kb, "PRAGMA user_version"), kSchemaVersion);
}

TEST(KnowledgeBase, a_schema_5_store_loses_its_unused_embeddings_table_and_keeps_its_cases) {
  TempDir dir;
  // What a schema-5 store looked like: an `embeddings` table beside the cases, never read.
  make_older_store(dir / "kb",
                   "CREATE TABLE embeddings(case_rowid INTEGER PRIMARY KEY REFERENCES cases(rowid) ON DELETE CASCADE, "
                   "embedder TEXT NOT NULL, vector BLOB NOT NULL); PRAGMA user_version=5");
  auto kb = KnowledgeBase::open(dir / "kb", false);
  ASSERT_TRUE(kb) << kb.error().message;
  EXPECT_TRUE((*kb)->find("old")->has_value());
  EXPECT_EQ(one_number(**kb, "SELECT count(*) FROM sqlite_master WHERE name = 'embeddings'"), 0);
  EXPECT_EQ(one_number(**kb, "PRAGMA user_version"), kSchemaVersion);
}

TEST(KnowledgeBase, a_schema_6_store_gets_rowid_tables_for_its_large_rows_keeping_every_row) {
  TempDir dir;
  // What a schema-6 store looked like: blobs, outcomes and failures WITHOUT ROWID (made again here as they were).
  const std::string older = [] {
    std::string sql = "PRAGMA foreign_keys=OFF; BEGIN;";
    for (const auto& [table, definition] : std::vector<std::pair<std::string, std::string>>{
             {"blobs", "sha TEXT PRIMARY KEY, content TEXT NOT NULL"},
             {"outcomes",
              "commit_sha TEXT NOT NULL, test_id TEXT NOT NULL, outcome TEXT NOT NULL, time INTEGER, "
              "message TEXT NOT NULL, origin TEXT NOT NULL, recorded_at INTEGER NOT NULL, "
              "PRIMARY KEY(commit_sha, test_id)"}})
      sql += "CREATE TABLE old_" + table + "(" + definition + ") WITHOUT ROWID; INSERT INTO old_" + table +
             " SELECT * FROM " + table + "; DROP TABLE " + table + "; ALTER TABLE old_" + table + " RENAME TO " +
             table + ";";
    sql += "INSERT INTO outcomes VALUES ('c1', 't.py::test_a', 'failed', 1, '" + std::string(20000, 'm') +
           "', 'run', 1); CREATE INDEX outcomes_test ON outcomes(test_id); COMMIT; PRAGMA user_version=6;";
    return sql;
  }();
  make_older_store(dir / "kb", older.c_str());
  auto kb = KnowledgeBase::open(dir / "kb", false);
  ASSERT_TRUE(kb) << kb.error().message;
  auto old = (*kb)->find("old");
  ASSERT_TRUE(old && old->has_value());
  auto loaded = (*kb)->load(**old);
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->files.size(), make("old", 1).files.size());
  EXPECT_EQ(loaded->files[0].content, make("old", 1).files[0].content);
  EXPECT_EQ(
      one_number(
          **kb,
          "SELECT count(*) FROM sqlite_master WHERE name IN ('blobs', 'outcomes', 'failures') AND type = 'table' AND "
          "sql NOT LIKE '%WITHOUT ROWID%'"),
      3);
  EXPECT_EQ(one_number(**kb, "SELECT length(message) FROM outcomes WHERE test_id = 't.py::test_a'"), 20000);
  EXPECT_EQ(one_number(**kb, "SELECT count(*) FROM sqlite_master WHERE name = 'outcomes_test'"), 1);
  EXPECT_EQ(one_number(**kb, "PRAGMA user_version"), kSchemaVersion);
  // Foreign keys are on again: a case file naming a missing blob is refused.
  EXPECT_FALSE((*kb)->database().exec("INSERT INTO case_files VALUES (1, 9, 'x.py', 'no-such-blob')"));
}

TEST(KnowledgeBase, concurrent_writers_wait_instead_of_failing) {
  TempDir dir;
  ASSERT_TRUE(KnowledgeBase::open(dir / "kb", true));
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      auto kb = KnowledgeBase::open(dir / "kb", false);
      if (!kb) {
        ++failures;
        return;
      }
      for (int i = 0; i < 20; ++i)
        if (!(*kb)->import_cases({make("w" + std::to_string(w) + "-" + std::to_string(i))}, {}, false)) ++failures;
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*(*KnowledgeBase::open(dir / "kb", false))->count(), 80u);
}

TEST(KnowledgeBase, shares_one_blob_between_cases_with_the_same_file) {
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  std::vector<Case> cases;
  for (int i = 0; i < 10; ++i) cases.push_back(make("c" + std::to_string(i), 3, "E   error " + std::to_string(i)));
  ASSERT_TRUE((*kb)->import_cases(cases, {}, false));
  sqlite3* db = nullptr;
  sqlite3_open((dir / "kb" / "kb.sqlite").c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT count(*) FROM blobs", -1, &st, nullptr);
  sqlite3_step(st);
  EXPECT_EQ(sqlite3_column_int(st, 0), 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(KnowledgeBase, keys_stay_as_stores_written_before_have_them) {
  // Stored keys are compared with keys computed later (the query's content key, a re-imported file's blob key), so
  // their formulas never change: the content key of case.h, and per file two FNV-1a streams and the length.
  TempDir dir;
  auto kb = std::move(*KnowledgeBase::open(dir / "kb", true));
  Case c = make("k");
  c.files.push_back({"tests/helpers.py", std::string(100000, 'x') + "\ndef helper():\n    return 1\n"});
  ASSERT_TRUE(kb->import_cases({c}, {}, false));
  auto entries = kb->entries();
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front().content_key, content_key(c));
  std::vector<std::string> keys;
  ASSERT_TRUE(kb->for_each_sketch(0, [&](KnowledgeBase::CaseSketch&& s) -> Status {
    for (const auto& [path, key] : s.files) keys.push_back(key);
    return {};
  }));
  ASSERT_EQ(keys.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
    for (unsigned char ch : c.files[i].content) {
      a = (a ^ ch) * 0x100000001b3ULL;
      b = (b ^ ch) * 0x100000001b3ULL;
    }
    EXPECT_EQ(keys[i], hex64(a) + hex64(b) + "-" + std::to_string(c.files[i].content.size()));
  }
  auto blobs = kb->blobs(keys);
  ASSERT_TRUE(blobs);
  EXPECT_EQ((*blobs)[1], c.files[1].content);
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

TEST(postgres_url, the_password_never_leaves_the_url_in_messages) {
  EXPECT_TRUE(is_postgres_url("postgresql://h/db"));
  EXPECT_TRUE(is_postgres_url("postgres://h/db"));
  EXPECT_FALSE(is_postgres_url(".spark"));
  EXPECT_FALSE(is_postgres_url("mysql://h/db"));
  EXPECT_EQ(redact_postgres_url("postgresql://spark:s3cret@db.internal:5433/kb?sslmode=require"),
            "postgresql://spark@db.internal:5433/kb?sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://spark:p@ss@db/kb"), "postgresql://spark@db/kb");  // '@' in the password
  EXPECT_EQ(redact_postgres_url("postgresql://spark:p%40ss@db/kb"), "postgresql://spark@db/kb");
  EXPECT_EQ(redact_postgres_url("postgresql://db/kb?password=s3cret&sslmode=verify-full"),
            "postgresql://db/kb?sslmode=verify-full");
  EXPECT_EQ(redact_postgres_url("postgresql://db/kb?password=s3cret"), "postgresql://db/kb");
  EXPECT_EQ(redact_postgres_url("postgres://spark@db"), "postgres://spark@db");
  EXPECT_EQ(redact_postgres_url("postgresql://spark:s3cret@db"), "postgresql://spark@db");
}

// Issue 40: libpq takes a URL's user information up to its first '@', so with an '@' left unencoded in the password
// the rest of the password became the host name, and libpq's message ("could not translate host name
// "2s3cret@127.0.0.1"") printed it. Such a URL is refused before libpq reads it, saying how to write it.
TEST(postgres_url, an_unencoded_at_sign_in_the_password_is_refused_and_no_part_of_the_password_is_printed) {
  for (const std::string url : {"postgresql://spark:hunter@2s3cret@127.0.0.1:1/kb",
                                "postgres://spark:a@b@c@2s3cret@localhost:1/kb?sslmode=disable"}) {
    auto db = PostgresDb::connect(url, 2);
    ASSERT_FALSE(db);
    const std::string& m = db.error().message;
    EXPECT_EQ(m.find("2s3cret"), std::string::npos) << m;
    EXPECT_EQ(m.find("hunter"), std::string::npos) << m;
    EXPECT_NE(m.find("%40"), std::string::npos) << m;
    TempDir dir;
    auto r = testing::run_spark({"kb", "status", "--kb", url}, dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.find("2s3cret"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("2s3cret"), std::string::npos) << r.out;
  }
  // Encoded, the same password is the password: the message is libpq's about the server, which names no part of it.
  auto encoded = PostgresDb::connect("postgresql://spark:hunter%402s3cret@127.0.0.1:1/kb", 2);
  ASSERT_FALSE(encoded);
  EXPECT_EQ(encoded.error().message.find("2s3cret"), std::string::npos) << encoded.error().message;
  EXPECT_NE(encoded.error().message.find("cannot connect"), std::string::npos) << encoded.error().message;
}

TEST(postgres_url, only_connection_failures_that_may_pass_are_retried) {
  // connect() ends the message by what libpq's ping found (the real cases run in fault_postgres).
  EXPECT_TRUE(is_transient_connect_error(
      "knowledge base postgresql://spark@127.0.0.1:1/kb: cannot connect: connection to server at \"127.0.0.1\", port 1 "
      "failed: Connection refused (the server did not answer)"));
  EXPECT_TRUE(is_transient_connect_error(
      "knowledge base x: cannot connect: FATAL:  the database system is starting up (the server is not accepting "
      "connections now)"));
  EXPECT_FALSE(is_transient_connect_error(
      "knowledge base x: cannot connect: FATAL:  password authentication failed for user \"spark\""));
  EXPECT_FALSE(
      is_transient_connect_error("knowledge base x: cannot connect: FATAL:  database \"nope\" does not exist"));
  EXPECT_FALSE(is_transient_connect_error("x.jsonl:3: a test named (the server did not answer)"));
}

// A record's retry once gave up: the reconnect failed with "starting up", and libpq's ping a moment later found the
// server up, so the failure was taken for one that would not pass (fault_postgres's restart test, on a loaded machine).
TEST(postgres_url, a_server_starting_up_is_transient_whatever_the_ping_finds_after) {
  const auto note = [](const std::string& m, bool no_answer, bool rejected) {
    return "knowledge base x: cannot connect: " + note_connect_failure(m, no_answer, rejected);
  };
  const std::string starting =
      "connection to server at \"127.0.0.1\", port 40297 failed: FATAL:  the database system is starting up";
  EXPECT_TRUE(is_transient_connect_error(note(starting, false, false)));  // the ping found the server up
  EXPECT_TRUE(is_transient_connect_error(note(starting, false, true)));
  EXPECT_TRUE(is_transient_connect_error(note("FATAL:  the database system is shutting down", false, false)));
  EXPECT_TRUE(is_transient_connect_error(note("Connection refused", true, false)));
  EXPECT_FALSE(
      is_transient_connect_error(note("FATAL:  password authentication failed for user \"spark\"", false, false)));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
