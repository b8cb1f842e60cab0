// The vector index's lifecycle (localizer/index_lifecycle.h), driven directly: missing → built, stale → caught up, made by an
// older embedder or damaged → built again, holding cases the store lost → built again with the reason.
#include "localizer/index_lifecycle.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

Case numbered(int i) { return *case_from_json(testing::numbered_case(i)); }

std::vector<Case> numbered_cases(int from, int to) {
  std::vector<Case> out;
  for (int i = from; i < to; ++i) out.push_back(numbered(i));
  return out;
}

std::unique_ptr<KnowledgeBase> store_of(const TempDir& dir, int cases) {
  auto kb = KnowledgeBase::open(dir / "kb", true);
  EXPECT_TRUE(kb) << kb.error().message;
  EXPECT_TRUE((*kb)->import_cases(numbered_cases(0, cases), {}, false));
  return std::move(*kb);
}

// A store of `cases` cases with its index built.
std::unique_ptr<KnowledgeBase> indexed_store(const TempDir& dir, int cases) {
  auto kb = store_of(dir, cases);
  auto built = build_index(*kb, {}, {});
  EXPECT_TRUE(built) << built.error().message;
  return kb;
}

bool said(const std::vector<std::string>& notes, const std::string& part) {
  for (const auto& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& notes) {
  std::string out;
  for (const auto& n : notes) out += n + "\n";
  return out;
}

// The manifest rewritten as an older built-in embedder would have written it.
void as_made_by_an_older_embedder(const fs::path& index_dir) {
  auto manifest = nlohmann::json::parse(testing::slurp(index_dir / "manifest.json"));
  const std::string embedder = manifest["embedder"];
  manifest["embedder"] = "builtin-tfidf-v1/" + embedder.substr(embedder.find('/') + 1);
  testing::write_file(index_dir / "manifest.json", manifest.dump());
}

// The index's cases file overwritten: its checksum no longer matches.
void damage_cases_file(const fs::path& index_dir) {
  auto manifest = VectorIndex::read_manifest(index_dir);
  ASSERT_TRUE(manifest) << manifest.error().message;
  testing::write_file(index_dir / manifest->file_of(index_files::kCases), "SPKCAS01");
}

TEST(open_or_build_engine, a_store_without_cases_has_no_engine_and_nothing_to_say) {
  TempDir dir;
  auto kb = store_of(dir, 0);
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ(*engine, nullptr);
  EXPECT_TRUE(notes.empty()) << joined(notes);
  EXPECT_FALSE(fs::exists(kb->index_dir() / "manifest.json"));
}

TEST(open_or_build_engine, a_missing_index_is_built_and_said) {
  TempDir dir;
  auto kb = store_of(dir, 6);
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  ASSERT_NE(*engine, nullptr);
  EXPECT_EQ((*engine)->index().size(), 6u);
  EXPECT_EQ(notes, std::vector<std::string>{
                       "the knowledge base had no vector index: built it over 6 case(s), as `spark index` does"});
  // Built once: the next opening has nothing to say.
  std::vector<std::string> again;
  ASSERT_TRUE(open_or_build_engine(*kb, {}, again));
  EXPECT_TRUE(again.empty()) << joined(again);
}

TEST(open_or_build_engine, cases_added_since_the_index_was_saved_are_embedded_not_rebuilt) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  ASSERT_TRUE(kb->import_cases(numbered_cases(6, 8), {}, false));
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->added_since_load(), 2u);
  EXPECT_EQ((*engine)->index().size(), 8u);
  EXPECT_FALSE(said(notes, "built it")) << joined(notes);
  EXPECT_FALSE(said(notes, "rebuilt")) << joined(notes);
}

TEST(open_or_build_engine, an_index_an_older_embedder_made_is_rebuilt_and_said) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  as_made_by_an_older_embedder(kb->index_dir());
  EXPECT_EQ(outdated_embedder(kb->index_dir()), "builtin-tfidf-v1");
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_TRUE(said(notes,
                   "the vector index was made by an older embedder (builtin-tfidf-v1): rebuilt it over 6 "
                   "case(s), as `spark index` does"))
      << joined(notes);
  EXPECT_EQ(outdated_embedder(kb->index_dir()), "");
}

TEST(open_or_build_engine, a_damaged_index_is_an_error_naming_the_folder_and_the_command_that_repairs_it) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  damage_cases_file(kb->index_dir());
  std::vector<std::string> notes;
  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_FALSE(engine);
  const std::string& message = engine.error().message;
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find(" (the vector index in " + kb->index_dir().string() +
                         " is damaged or incomplete: `spark index --rebuild` makes it again from the store)"),
            std::string::npos)
      << message;
  // The command is named once.
  EXPECT_EQ(message.find("spark index --rebuild"), message.rfind("spark index --rebuild")) << message;
}

// The store goes back to a copy taken before its last import (a power cut losing the WAL's tail, a restored backup):
// the index, saved after that import, holds cases the store no longer has. It is built again, with the reason.
TEST(open_or_build_engine, an_index_holding_cases_the_store_lost_is_rebuilt_with_the_reason) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  kb.reset();  // no connection open: the file is the whole store
  fs::copy_file(dir / "kb" / "kb.sqlite", dir / "before.sqlite");
  kb = std::move(*KnowledgeBase::open(dir / "kb", false));
  ASSERT_TRUE(kb->import_cases(numbered_cases(6, 8), {}, false));
  std::vector<std::string> notes;
  auto caught_up = catch_up_index(*kb, {}, notes);
  ASSERT_TRUE(caught_up) << caught_up.error().message;
  ASSERT_EQ(caught_up->added, 2u);
  kb.reset();
  fs::copy_file(dir / "before.sqlite", dir / "kb" / "kb.sqlite", fs::copy_options::overwrite_existing);
  for (const char* tail : {"-wal", "-shm"}) fs::remove((dir / "kb" / "kb.sqlite").string() + tail);
  kb = std::move(*KnowledgeBase::open(dir / "kb", false));

  auto engine = open_or_build_engine(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->index().size(), 6u);
  EXPECT_TRUE(said(notes, "the vector index held cases the knowledge base no longer has (")) << joined(notes);
  EXPECT_TRUE(said(notes, "rebuilt it over 6 case(s)")) << joined(notes);
}

TEST(update_index, builds_a_missing_index_then_finds_it_up_to_date) {
  TempDir dir;
  auto kb = store_of(dir, 6);
  std::vector<std::string> notes;
  auto built = update_index(*kb, {}, /*rebuild=*/false, notes);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->outcome, IndexUpdate::Outcome::built);
  EXPECT_EQ(built->report.cases, 6u);
  EXPECT_TRUE(notes.empty()) << joined(notes);
  auto again = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->outcome, IndexUpdate::Outcome::up_to_date);
  EXPECT_EQ(again->cases, 6u);
  EXPECT_EQ(again->kind, "flat");
  // --rebuild builds it whatever its state.
  auto rebuilt = update_index(*kb, {}, /*rebuild=*/true, notes);
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  EXPECT_EQ(rebuilt->outcome, IndexUpdate::Outcome::built);
  EXPECT_TRUE(notes.empty()) << joined(notes);
}

TEST(update_index, catches_up_a_few_cases_added_since_and_builds_again_after_many) {
  TempDir dir;
  auto kb = indexed_store(dir, 8);
  ASSERT_TRUE(kb->import_cases(numbered_cases(8, 10), {}, false));  // a quarter of 8
  std::vector<std::string> notes;
  auto caught_up = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(caught_up) << caught_up.error().message;
  EXPECT_EQ(caught_up->outcome, IndexUpdate::Outcome::caught_up);
  EXPECT_EQ(caught_up->added, 2u);
  EXPECT_EQ(caught_up->cases, 10u);
  ASSERT_TRUE(kb->import_cases(numbered_cases(10, 14), {}, false));  // more than a quarter of 10
  auto built = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->outcome, IndexUpdate::Outcome::built);
  EXPECT_EQ(built->report.cases, 14u);
  EXPECT_TRUE(notes.empty()) << joined(notes);
}

TEST(update_index, an_older_embedder_or_a_damaged_file_is_built_again_and_said_why) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  as_made_by_an_older_embedder(kb->index_dir());
  std::vector<std::string> notes;
  auto built = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(built->outcome, IndexUpdate::Outcome::built);
  EXPECT_EQ(notes, std::vector<std::string>{"the vector index was made by an older embedder (builtin-tfidf-v1): "
                                            "rebuilding it"});
  notes.clear();
  damage_cases_file(kb->index_dir());
  auto again = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->outcome, IndexUpdate::Outcome::built);
  ASSERT_EQ(notes.size(), 1u) << joined(notes);
  EXPECT_TRUE(notes[0].starts_with("rebuilding the vector index: ")) << notes[0];
}

TEST(catch_up_index, embeds_the_imported_cases_into_the_index_and_saves_it) {
  TempDir dir;
  auto kb = indexed_store(dir, 6);
  ASSERT_TRUE(kb->import_cases(numbered_cases(6, 9), {}, false));
  std::vector<std::string> notes;
  auto caught_up = catch_up_index(*kb, {}, notes);
  ASSERT_TRUE(caught_up) << caught_up.error().message;
  EXPECT_EQ(caught_up->added, 3u);
  EXPECT_FALSE(caught_up->rebuilt);
  EXPECT_FALSE(caught_up->not_saved);
  EXPECT_TRUE(notes.empty()) << joined(notes);
  // Saved: the index is the store's now.
  auto update = update_index(*kb, {}, false, notes);
  ASSERT_TRUE(update) << update.error().message;
  EXPECT_EQ(update->outcome, IndexUpdate::Outcome::up_to_date);
  EXPECT_EQ(update->cases, 9u);
}

TEST(learn_ranker_if_due, leaves_a_store_without_an_index_to_the_command_that_builds_it) {
  TempDir dir;
  auto kb = store_of(dir, 6);
  std::vector<std::string> notes;
  ASSERT_TRUE(learn_ranker_if_due(*kb, {}, notes));
  EXPECT_TRUE(notes.empty()) << joined(notes);
  EXPECT_FALSE(fs::exists(kb->index_dir() / "manifest.json"));
  EXPECT_EQ(ranker_status(*kb), "");
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
