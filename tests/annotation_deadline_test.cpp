// The annotation's deadline and its cost on long lines: compute_features stops comparing lines with the retrieved
// faulty lines when asked to, the localizer says so, and a line of a megabyte shared by a learnt case and the query
// is annotated by the real binary well within the default deadline.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "code/structure_cache.h"
#include "localizer/index_build.h"
#include "localizer/line_features.h"
#include "localizer/localizer.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using nlohmann::json;
using testing::TempDir;

namespace {

constexpr int kRepeats = 8;

// A test that sets `value` eight times in a row, each line the learnt case's faulty line; it stops at line 11.
Case repeated_query() {
  std::string code = "def test_lookup_new():\n    d = {'alpha': 1}\n";
  for (int i = 0; i < kRepeats; ++i) code += "    value = d['alpah']\n";
  code += "    assert value == 1\n";
  json j = testing::sample_case("q", code, 3, "tests/test_x.py:11: in test_lookup_new\n    assert value == 1\nE   KeyError",
                                "2026-03-01T00:00:00Z");
  j["test_id"] = "tests/test_x.py::test_lookup_new";
  j.erase("faulty_lines");
  return *case_from_json(j);
}

Case learnt_case(const std::string& id) {
  const std::string code = "def test_lookup():\n    d = {'alpha': 1}\n    value = d['alpah']\n    assert value == 1\n";
  json j = testing::sample_case(id, code, 3, "tests/test_x.py:3: in test_lookup\n    value = d['alpah']\nE   KeyError: 'alpah'");
  j["test_id"] = "tests/test_x.py::test_lookup";
  return *case_from_json(j);
}

}  // namespace

TEST(compute_features, stops_comparing_lines_once_past_the_deadline_and_says_how_far_it_went) {
  StructureCache cache;
  const Case query = repeated_query();
  std::vector<RetrievedFaultyLine> faulty;
  append_faulty_lines(learnt_case("k"), 0, faulty);
  ASSERT_EQ(faulty.size(), 1u);

  QueryView all = make_query_view(query, cache);
  const auto whole = compute_features(all, faulty, {1.0}, 0.05, {}, query.error_message);
  EXPECT_FALSE(whole.stopped);
  EXPECT_EQ(whole.compared, all.lines.size());

  // The deadline passes at the fourth time it is asked: before the fourth line's comparisons.
  QueryView view = make_query_view(query, cache);
  int asked = 0;
  const auto part = compute_features(view, faulty, {1.0}, 0.05, {}, query.error_message, [&] { return ++asked > 3; });
  EXPECT_TRUE(part.stopped);
  EXPECT_EQ(part.compared, 3u);
  EXPECT_EQ(part.lines, view.lines.size());
  EXPECT_EQ(asked, 4);  // not asked again once past
  ASSERT_EQ(view.lines.size(), all.lines.size());
  for (size_t i = 0; i < view.lines.size(); ++i) {
    const QueryLine& got = view.lines[i];
    const QueryLine& full = all.lines[i];
    if (i < 3) {
      EXPECT_EQ(got.x, full.x) << "line " << got.line;
      EXPECT_EQ(got.best_match, full.best_match);
    } else {
      EXPECT_EQ(got.best_match, -1) << "line " << got.line;
      EXPECT_EQ(got.x[kAnnotated], 0.0);
      EXPECT_EQ(got.x[kResembles], 0.0);
      // The features that need no comparison are all there.
      EXPECT_EQ(got.x[kBias], 1.0);
      EXPECT_EQ(got.x[kTracebackLine], full.x[kTracebackLine]);
      EXPECT_EQ(got.x[kOwnBody], full.x[kOwnBody]);
    }
  }
  int annotated_repeats = 0;
  for (const auto& ql : all.lines) annotated_repeats += ql.x[kAnnotated] > 0 ? 1 : 0;
  EXPECT_EQ(annotated_repeats, kRepeats);  // every repeat, with no deadline
}

TEST(Localizer, a_localization_past_its_deadline_ranks_without_the_rest_of_the_annotation_and_says_so) {
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  ASSERT_TRUE(kb) << kb.error().message;
  ASSERT_TRUE((*kb)->import_cases({learnt_case("k1"), learnt_case("k2")}, {}, false));
  ASSERT_TRUE(build_index(**kb, {}, {}));
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  Localizer localizer(kb->get(), engine->get());

  LocalizeOptions o;
  auto in_time = localizer.localize(repeated_query(), o);
  ASSERT_TRUE(in_time) << in_time.error().message;
  EXPECT_EQ(in_time->annotations.size(), static_cast<size_t>(kRepeats));
  for (const auto& n : in_time->notes) EXPECT_EQ(n.find("deadline"), std::string::npos) << n;

  o.deadline = 0;
  auto late = localizer.localize(repeated_query(), o);
  ASSERT_TRUE(late) << late.error().message;
  EXPECT_TRUE(late->annotations.empty());
  EXPECT_EQ(late->ranked.size(), o.k);  // still ranked, by what needs no comparison
  EXPECT_EQ(late->retrieved.size(), 1u);
  const std::string want = "annotation stopped at the deadline (0 s) after 0 of " +
                           std::to_string(kRepeats + 3) +
                           " lines: the others were ranked without their resemblance to the retrieved faulty lines";
  EXPECT_NE(std::find(late->notes.begin(), late->notes.end(), want), late->notes.end())
      << (late->notes.empty() ? "" : late->notes.back());
}

// An inline blob of a megabyte that the fix changed by one character, learnt, and the failing test holding it: the
// real binary annotates the line (distance 1e-6) in the time of a small test, not the hours a quadratic comparison
// took, and within the default deadline (no note).
TEST(cli, a_megabyte_line_shared_with_a_learnt_case_is_annotated_within_the_deadline) {
  TempDir dir;
  std::string blob;
  for (size_t i = 0; blob.size() < 1'000'000; ++i) blob += "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" + std::to_string(i);
  const auto test = [](const std::string& data) {
    return "import base64\n\n\ndef test_decode():\n    DATA = '" + data + "'\n    assert len(base64.b64decode(DATA)) == 0\n";
  };
  const std::string error = "tests/test_blob.py:6: in test_decode\n    assert len(base64.b64decode(DATA)) == 0\nE   assert 7 == 0\n";
  json c = testing::sample_case("blob", test(blob), 5, error);
  c["test_id"] = "tests/test_blob.py::test_decode";
  c["files"][0]["path"] = "tests/test_blob.py";
  c["faulty_lines"][0]["path"] = "tests/test_blob.py";
  testing::write_file(dir / "cases.jsonl", c.dump() + "\n");
  ASSERT_EQ(testing::run_spark({"import", "cases.jsonl"}, dir.path()).exit_code, 0);
  ASSERT_EQ(testing::run_spark({"index"}, dir.path()).exit_code, 0);
  blob[blob.size() / 2] = '#';
  testing::write_file(dir / "tests" / "test_blob.py", test(blob));
  testing::write_file(dir / "failure.txt", error);
  const auto r = testing::run_spark(
      {"localize", "--test", "tests/test_blob.py", "--error", "failure.txt", "--format", "json"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  ASSERT_EQ(out["annotations"].size(), 1u) << r.err;
  EXPECT_EQ(out["annotations"][0]["line"], 5);
  EXPECT_LT(out["annotations"][0]["distance"].get<double>(), 1e-5);
  for (const auto& n : out["notes"]) EXPECT_EQ(n.get<std::string>().find("deadline"), std::string::npos) << n;
}

}  // namespace spark::SPARK_TEST_FILE_ID
