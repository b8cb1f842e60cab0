// The built-in ranker keeps learning as labelled cases arrive (issue 34, part 8): the retraining margin, the sample
// bound, the new ranker file beside the old one until the manifest switches, and, end to end, cases imported two at
// a time becoming a learnt ranker without `spark index` (record's path: lifecycle_test.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/case.h"
#include "localizer/index_build.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::run_spark;
using testing::TempDir;
using testing::write_file;

using testing::numbered_case;

std::vector<Case> arriving_cases(int from, int to) {
  std::vector<Case> out;
  for (int i = from; i < to; ++i) out.push_back(*case_from_json(numbered_case(i)));
  return out;
}

struct Store {
  TempDir dir;
  std::unique_ptr<KnowledgeBase> kb = std::move(*KnowledgeBase::open(dir / "kb", true));
  void add(int from, int to) { ASSERT_TRUE(kb->import_cases(arriving_cases(from, to), {}, false)); }
  // `spark index`: the ranker's origin.
  std::string build() {
    auto built = build_index(*kb, {}, {});
    EXPECT_TRUE(built) << (built ? "" : built.error().message);
    return built ? built->ranker : "";
  }
  // Built at 3 labelled cases (the prior ranker), then grown to `to` without a build.
  void grown_after_a_prior_build(int to) {
    add(0, 3);
    EXPECT_EQ(build(), "prior");
    add(3, to);
  }
  std::unique_ptr<SearchEngine> engine() {
    std::vector<std::string> notes;
    auto e = SearchEngine::open(*kb, {}, notes);
    EXPECT_TRUE(e) << (e ? "" : e.error().message);
    return e ? std::move(*e) : nullptr;
  }
};

}  // namespace

TEST(next_training_at, first_at_the_minimum_then_a_quarter_more) {
  const IndexBuildOptions o;
  EXPECT_EQ(next_training_at(0, o), 20u);
  EXPECT_EQ(next_training_at(19, o), 20u);
  EXPECT_EQ(next_training_at(20, o), 25u);
  EXPECT_EQ(next_training_at(83, o), 104u);  // 83 + ⌈20.75⌉
  EXPECT_EQ(next_training_at(1000, o), 1250u);
  IndexBuildOptions tiny;
  tiny.learn_again_growth = 0.001;
  EXPECT_EQ(next_training_at(20, tiny), 21u);  // at least one case more
}

// No retraining just below the margin, a retraining at it; stamped with the labelled cases it learnt at.
TEST(learn_ranker_if_due, not_just_below_the_margin_and_at_it) {
  Store s;
  s.add(0, 20);
  EXPECT_EQ(s.build(), "trained on 20 labelled cases");
  s.add(20, 24);  // 24 < 25 = next_training_at(20)
  auto below = s.engine();
  ASSERT_TRUE(below);
  EXPECT_EQ(below->ranker().labelled_cases, 20u);
  auto not_due = learn_ranker_if_due(*s.kb, *below);
  ASSERT_TRUE(not_due) << not_due.error().message;
  EXPECT_FALSE(*not_due);
  EXPECT_EQ(below->ranker().origin, "trained on 20 labelled cases");
  s.add(24, 25);
  auto at = s.engine();
  ASSERT_TRUE(at);
  auto due = learn_ranker_if_due(*s.kb, *at);
  ASSERT_TRUE(due) << due.error().message;
  ASSERT_TRUE(*due);
  EXPECT_EQ((*due)->was, "trained on 20 labelled cases");
  EXPECT_EQ((*due)->now.origin, "trained on 25 labelled cases");
  EXPECT_EQ(at->ranker().labelled_cases, 25u);
  EXPECT_GT(at->ranker().trained_at, 0);
}

// A prior ranker (built at a few cases) learns at the minimum; the sample bound caps what it learns from, not the
// count the margin grows from.
TEST(learn_ranker_if_due, a_prior_ranker_learns_at_the_minimum_from_at_most_the_sample_bound) {
  Store s;
  s.grown_after_a_prior_build(19);
  auto engine = s.engine();
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->ranker().labelled_cases, 3u);
  auto not_yet = learn_ranker_if_due(*s.kb, *engine);
  ASSERT_TRUE(not_yet);
  EXPECT_FALSE(*not_yet);
  s.add(19, 30);
  engine = s.engine();
  IndexBuildOptions bounded;
  bounded.max_training_cases = 22;
  auto due = learn_ranker_if_due(*s.kb, *engine, bounded);
  ASSERT_TRUE(due) << due.error().message;
  ASSERT_TRUE(*due);
  EXPECT_EQ((*due)->was, "prior");
  EXPECT_EQ((*due)->now.origin, "trained on 22 labelled cases");
  EXPECT_EQ((*due)->now.labelled_cases, 30u);
}

// The new ranker goes to a file of its own: until the engine's persist switches the manifest, a reader opening the
// index gets the old ranker whole; after it, the new one; an engine opened before keeps the one it loaded.
TEST(learn_ranker_if_due, readers_see_the_old_ranker_or_the_new_one) {
  Store s;
  s.grown_after_a_prior_build(21);
  auto writer = s.engine();
  auto earlier_reader = s.engine();
  ASSERT_TRUE(writer && earlier_reader);
  auto due = learn_ranker_if_due(*s.kb, *writer);
  ASSERT_TRUE(due && *due);
  auto before_switch = s.engine();
  ASSERT_TRUE(before_switch);
  EXPECT_EQ(before_switch->ranker().origin, "prior");
  ASSERT_TRUE(writer->persist(*s.kb));
  auto after_switch = s.engine();
  ASSERT_TRUE(after_switch);
  EXPECT_EQ(after_switch->ranker().origin, "trained on 21 labelled cases");
  EXPECT_EQ(after_switch->ranker().labelled_cases, 21u);
  EXPECT_EQ(earlier_reader->ranker().origin, "prior");
}

TEST(RankerModel, a_model_saved_before_its_schedule_was_kept_counts_from_its_training_cases) {
  TempDir dir;
  RankerModel m = RankerModel::prior();
  m.origin = "trained on 83 labelled cases";
  m.training_cases = 83;
  m.labelled_cases = 90;
  m.trained_at = 1767225600;
  m.train_seconds = 1.5;
  ASSERT_TRUE(m.save(dir / "ranker.json"));
  auto back = RankerModel::load(dir / "ranker.json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->labelled_cases, 90u);
  EXPECT_EQ(back->trained_at, 1767225600);
  EXPECT_DOUBLE_EQ(back->train_seconds, 1.5);
  auto j = nlohmann::json::parse(testing::slurp(dir / "ranker.json"));
  for (const char* key : {"labelled_cases", "trained_at", "train_seconds"}) j.erase(key);
  write_file(dir / "old.json", j.dump());
  auto old = RankerModel::load(dir / "old.json");
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_EQ(old->labelled_cases, 83u);
  EXPECT_EQ(old->trained_at, 0);
}

// Cases arriving two at a time through `spark import` (and localized in between): the ranker learns at 20 labelled
// cases without `spark index`, and again at 25, not at 24; the import says so, the localization's JSON names the
// learnt ranker, `spark kb status` says when it learnt and from how many.
TEST(spark_import, cases_arriving_two_at_a_time_make_a_learnt_ranker_without_spark_index) {
  TempDir dir;
  write_file(dir / "tests" / "test_new.py",
             "import shapes\n\n\ndef test_area_new():\n    w = 3\n    shape = {'w': w, 'h': 2}\n"
             "    result = shapes.area(shape)\n    assert result == 7\n");
  write_file(dir / "failure.txt", "tests/test_new.py:8: in test_area_new\n    assert result == 7\nE   assert 6 == 7\n");
  const std::vector<std::string> localize = {"localize", "--test", "tests/test_new.py", "--error", "failure.txt",
                                             "--format", "json"};
  const auto arrive = [&](int from, int to) {
    std::string jsonl;
    for (int i = from; i < to; ++i) jsonl += numbered_case(i).dump() + "\n";
    const std::string file = "arrived-" + std::to_string(from) + ".jsonl";
    write_file(dir / file, jsonl);
    auto r = run_spark({"import", file}, dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  arrive(0, 2);
  auto first = run_spark(localize, dir.path());  // builds the index: two labelled cases, the prior
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(nlohmann::json::parse(first.out)["ranker"], "builtin (prior)") << first.out;
  for (int i = 2; i < 18; i += 2) {
    auto r = arrive(i, i + 2);
    EXPECT_EQ(r.err.find("ranker"), std::string::npos) << r.err;
  }
  auto status = run_spark({"kb", "status"}, dir.path());
  EXPECT_NE(status.out.find("ranker: prior weights (last tried at 2 labelled cases, "), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("learns at 20 labelled cases (now 18)"), std::string::npos) << status.out;
  auto learnt = arrive(18, 20);
  EXPECT_NE(learnt.err.find("spark: ranker retrained on 20 labelled cases (was prior) in "), std::string::npos)
      << learnt.err;
  EXPECT_NE(learnt.err.find("it learns again at 25 labelled cases"), std::string::npos) << learnt.err;
  auto second = run_spark(localize, dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(nlohmann::json::parse(second.out)["ranker"], "builtin (trained on 20 labelled cases)") << second.out;
  EXPECT_EQ(second.err.find("prior weights"), std::string::npos) << second.err;
  status = run_spark({"kb", "status"}, dir.path());
  EXPECT_NE(status.out.find("ranker: trained on 20 labelled cases (learnt at 20 labelled cases, 20"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("learns again at 25 labelled cases (now 20)"), std::string::npos) << status.out;
  // The margin: 24 labelled cases are just below it, 25 reach it.
  EXPECT_EQ(arrive(20, 22).err.find("ranker"), std::string::npos);
  EXPECT_EQ(arrive(22, 24).err.find("ranker"), std::string::npos);
  auto again = arrive(24, 25);
  EXPECT_NE(again.err.find("ranker retrained on 25 labelled cases (was trained on 20 labelled cases)"),
            std::string::npos)
      << again.err;
  auto third = run_spark(localize, dir.path());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(nlohmann::json::parse(third.out)["ranker"], "builtin (trained on 25 labelled cases)") << third.out;
  // Nothing due: `spark index` finds the index up to date and the ranker as it was.
  auto index = run_spark({"index"}, dir.path());
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_NE(index.out.find("up to date"), std::string::npos) << index.out;
  EXPECT_EQ(index.err.find("ranker"), std::string::npos) << index.err;
}

// A knowledge base whose ranker kept the prior while cases arrived by a way that does not retrain (here: the library,
// as an earlier spark left it): `spark localize` learns before it ranks, `spark index` on an index up to date too.
TEST(spark_localize, a_ranker_due_learns_before_the_run_ranks_and_so_does_spark_index) {
  for (const bool through_index : {false, true}) {
    TempDir dir;
    {
      auto kb = KnowledgeBase::open(dir / ".spark", true);
      ASSERT_TRUE(kb);
      ASSERT_TRUE((*kb)->import_cases(arriving_cases(0, 30), {}, false));
      ASSERT_TRUE(build_index(**kb, {}, {}));
      std::vector<std::string> notes;
      auto engine = SearchEngine::open(**kb, {}, notes);
      ASSERT_TRUE(engine);
      ASSERT_TRUE((*engine)->replace_ranker(**kb, RankerModel::prior()));  // labelled_cases 0: due at 20
      ASSERT_TRUE((*engine)->persist(**kb));
    }
    write_file(dir / "tests" / "test_x.py", numbered_case(40)["files"][0]["content"].get<std::string>());
    write_file(dir / "failure.txt", numbered_case(40)["error_message"].get<std::string>());
    if (through_index) {
      auto index = run_spark({"index"}, dir.path());
      ASSERT_EQ(index.exit_code, 0) << index.err;
      EXPECT_NE(index.out.find("up to date"), std::string::npos) << index.out;
      EXPECT_NE(index.err.find("ranker retrained on 30 labelled cases (was prior)"), std::string::npos) << index.err;
    }
    auto r =
        run_spark({"localize", "--test", "tests/test_x.py", "--error", "failure.txt", "--format", "json"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ranker"], "builtin (trained on 30 labelled cases)") << r.out;
    EXPECT_EQ(r.err.find("ranker retrained") == std::string::npos, through_index) << r.err;
  }
}

}  // namespace spark::SPARK_TEST_FILE_ID
