#include "localizer/index_build.h"
#include "localizer/localizer.h"

#include <gtest/gtest.h>

#include <set>

#include "localizer/report.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using testing::TempDir;

namespace {

// A small knowledge base of failures in two styles: wrong expected literal in an assertion, wrong dictionary key.
std::vector<Case> corpus() {
  std::vector<Case> out;
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    const std::string code = "import shapes\n\n\ndef test_area_" + n + "():\n    shape = {'w': " + n + ", 'h': 2}\n" +
                             "    result = shapes.area(shape)\n    assert result == " + std::to_string(2 * i + 1) + "\n";
    nlohmann::json j = testing::sample_case("area-" + n, code, 7,
                                            "tests/test_x.py:7: in test_area_" + n + "\n    assert result == " +
                                                std::to_string(2 * i + 1) + "\nE   assert " + std::to_string(2 * i) +
                                                " == " + std::to_string(2 * i + 1),
                                            "2026-01-0" + std::to_string(i + 1) + "T00:00:00Z");
    j["test_id"] = "tests/test_x.py::test_area_" + n;
    j["fixed_commit"] = "abcdef0123456789";
    out.push_back(*case_from_json(j));
  }
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    const std::string code = "def test_lookup_" + n + "():\n    d = {'alpha': 1}\n    value = d['alpah']\n    assert value == 1\n";
    nlohmann::json j = testing::sample_case("key-" + n, code, 3,
                                            "tests/test_x.py:3: in test_lookup_" + n + "\n    value = d['alpah']\nE   KeyError: 'alpah'",
                                            "2026-02-0" + std::to_string(i + 1) + "T00:00:00Z");
    j["test_id"] = "tests/test_x.py::test_lookup_" + n;
    out.push_back(*case_from_json(j));
  }
  return out;
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<SearchEngine> engine;
  Fixture() {
    kb = std::move(*KnowledgeBase::open(dir / "kb", true));
    EXPECT_TRUE(kb->import_cases(corpus(), {}, false));
    auto report = build_index(*kb, {}, {});
    EXPECT_TRUE(report) << (report ? "" : report.error().message);
    std::vector<std::string> notes;
    auto e = SearchEngine::open(*kb, {}, notes);
    EXPECT_TRUE(e) << (e ? "" : e.error().message);
    engine = std::move(*e);
  }
};

Case query() {
  const std::string code = "def test_lookup_new():\n    d = {'alpha': 1, 'beta': 2}\n\n    value = d['alpah']\n    assert value == 1\n";
  nlohmann::json j = testing::sample_case("q", code, 4, "tests/test_x.py:4: in test_lookup_new\n    value = d['alpah']\nE   KeyError: 'alpah'",
                                          "2026-03-01T00:00:00Z");
  j["test_id"] = "tests/test_x.py::test_lookup_new";
  j.erase("faulty_lines");
  return *case_from_json(j);
}

}  // namespace

TEST(Localizer, follows_algorithm_1_retrieves_annotates_and_ranks) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  LocalizeOptions o;
  o.k = 3;
  auto loc = localizer.localize(query(), o);
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_FALSE(loc->degraded);
  ASSERT_EQ(loc->retrieved.size(), 1u);
  EXPECT_TRUE(loc->retrieved[0].id.starts_with("key-"));
  ASSERT_EQ(loc->annotations.size(), 1u);
  EXPECT_EQ(loc->annotations[0].line.line, 4);
  EXPECT_DOUBLE_EQ(loc->annotations[0].distance, 0.0);
  ASSERT_EQ(loc->ranked.size(), 3u);
  EXPECT_EQ(loc->ranked[0].line, 4);
  EXPECT_TRUE(loc->ranked[0].annotated);
  EXPECT_FALSE(loc->ranked[0].reasons.empty());
  const std::string annotated = Localizer::render_annotated(query(), loc->annotations);
  EXPECT_EQ(annotated,
            "1: def test_lookup_new():\n2:     d = {'alpha': 1, 'beta': 2}\n"
            "4:     value = d['alpah']  # !!! high likelihood of being faulty !!!\n5:     assert value == 1\n");
}

TEST(Localizer, comments_and_headers_come_after_the_lines_that_can_be_faulty) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  // Comments next to the failing line that repeat the error's words: without the rule they would rank high.
  const std::string code = "def test_lookup_new():\n    # alpah is the KeyError we expect\n    d = {'alpha': 1}\n"
                           "    # value d alpah\n    value = d['alpah']\n    assert value == 1\n";
  nlohmann::json j = testing::sample_case("q", code, 5, "tests/test_x.py:5: in test_lookup_new\n    value = d['alpah']\n"
                                          "E   KeyError: 'alpah'", "2026-03-01T00:00:00Z");
  j["test_id"] = "tests/test_x.py::test_lookup_new";
  j.erase("faulty_lines");
  LocalizeOptions o;
  o.k = 10;
  auto loc = localizer.localize(*case_from_json(j), o);
  ASSERT_TRUE(loc) << loc.error().message;
  ASSERT_EQ(loc->ranked.size(), 6u);  // every non-blank line
  // The three code lines first, then the def header and the two comments, each with the reason.
  std::set<std::string> first, last;
  for (size_t i = 0; i < 3; ++i) first.insert(loc->ranked[i].code);
  for (size_t i = 3; i < 6; ++i) {
    last.insert(loc->ranked[i].code);
    EXPECT_NE(loc->ranked[i].reasons.back().find("with no evidence against it: ranked after the lines that can be faulty"),
              std::string::npos) << loc->ranked[i].reasons.back();
  }
  EXPECT_EQ(first, (std::set<std::string>{"d = {'alpha': 1}", "value = d['alpah']", "assert value == 1"}));
  EXPECT_EQ(last, (std::set<std::string>{"def test_lookup_new():", "# alpah is the KeyError we expect", "# value d alpah"}));
}

TEST(Localizer, never_retrieves_the_query_itself_and_honours_r_and_the_policy) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  Case self = corpus()[8];
  LocalizeOptions o;
  o.r = 3;
  auto loc = localizer.localize(self, o);
  ASSERT_TRUE(loc);
  ASSERT_EQ(loc->retrieved.size(), 3u);
  for (const auto& rc : loc->retrieved) EXPECT_NE(rc.id, self.id);
  o.r = 1;
  o.similarity_floor = 0.0;  // the policy alone decides here
  o.policy = *parse_policy("all-preceding");
  Case early = query();
  early.failure_epoch = *parse_iso8601("2026-01-03T12:00:00Z");
  auto pre = localizer.localize(early, o);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->filtered_size, 3u);
  ASSERT_EQ(pre->retrieved.size(), 1u);
  EXPECT_TRUE(pre->retrieved[0].id.starts_with("area-"));  // only earlier cases are allowed
  // From its second failure on, a Localizer finds a query's own case by its hashes, not a pass over the cases: every
  // stored case, asked for again and again under another id (its exact duplicate), retrieves neither itself nor it.
  for (int round = 0; round < 2; ++round)
    for (const Case& stored : corpus()) {
      LocalizeOptions all;
      all.r = 20;
      all.similarity_floor = -1.0;
      auto again = localizer.localize(stored, all);
      ASSERT_TRUE(again) << again.error().message;
      EXPECT_EQ(again->retrieved.size(), corpus().size() - 1);
      for (const auto& rc : again->retrieved) EXPECT_NE(rc.id, stored.id);
      Case duplicate = stored;
      duplicate.id = "another-id-" + stored.id;
      auto dup = localizer.localize(duplicate, all);
      ASSERT_TRUE(dup);
      for (const auto& rc : dup->retrieved) EXPECT_NE(rc.id, stored.id) << "its exact duplicate";
      Case changed = stored;
      changed.error_message += "\nE   and another line";
      auto same_id = localizer.localize(changed, all);
      ASSERT_TRUE(same_id);
      for (const auto& rc : same_id->retrieved) EXPECT_NE(rc.id, stored.id) << "its own id";
    }
}

TEST(Localizer, degrades_to_the_baseline_without_a_knowledge_base_or_a_similar_case) {
  Localizer bare(nullptr, nullptr);
  auto loc = bare.localize(query(), {});
  ASSERT_TRUE(loc);
  EXPECT_TRUE(loc->degraded);
  EXPECT_TRUE(loc->annotations.empty());
  ASSERT_FALSE(loc->ranked.empty());
  EXPECT_EQ(loc->ranked[0].line, 4);  // the traceback still points the way
  ASSERT_EQ(loc->notes.size(), 1u);

  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  LocalizeOptions o;
  o.similarity_floor = 0.999;
  auto far = localizer.localize(query(), o);
  ASSERT_TRUE(far);
  EXPECT_TRUE(far->degraded);
  EXPECT_NE(far->notes[0].find("below the floor"), std::string::npos);
}

// Issue 36 part 2: a query line in the form a past fix gave its faulty line is not annotated (it is already corrected);
// the same knowledge base without the fix annotates it, as the paper's annotation does.
TEST(Localizer, a_line_closer_to_a_past_fixs_new_side_than_to_its_faulty_line_is_not_annotated) {
  const std::string past =
      "import settings\n\n\ndef test_timeout():\n    value = settings.get('timeout_seconds', 30)\n"
      "    assert value == 60\n";
  const std::string now =
      "import settings\n\n\ndef test_default():\n    value = settings.get('timeout_seconds', 60)\n"
      "    assert value == 60\n\n\ndef test_timeout():\n    value = settings.get('timeout_seconds', 30)\n"
      "    assert value == 60\n";
  const std::string error = "tests/test_x.py:11: in test_timeout\n    assert value == 60\nE   assert 30 == 60";
  nlohmann::json q = testing::sample_case("q", now, 10, error, "2026-03-01T00:00:00Z");
  q["test_id"] = "tests/test_x.py::test_timeout";
  q.erase("faulty_lines");
  for (const bool with_fix : {true, false}) {
    SCOPED_TRACE(with_fix ? "with the fix" : "without it");
    TempDir dir;
    auto kb = std::move(*KnowledgeBase::open(dir / "kb", true));
    nlohmann::json c = testing::sample_case("past", past, 5,
                                            "tests/test_x.py:6: in test_timeout\n    assert value == 60"
                                            "\nE   assert 30 == 60",
                                            "2026-01-01T00:00:00Z");
    c["test_id"] = "tests/test_x.py::test_timeout_old";
    if (with_fix) c["faulty_lines"][0]["fix"] = {"    value = settings.get('timeout_seconds', 60)"};
    ASSERT_TRUE(kb->import_cases({*case_from_json(c)}, {}, false));
    ASSERT_TRUE(build_index(*kb, {}, {}));
    std::vector<std::string> notes;
    auto engine = SearchEngine::open(*kb, {}, notes);
    ASSERT_TRUE(engine);
    Localizer localizer(kb.get(), engine->get());
    LocalizeOptions o;
    o.k = 3;
    o.explain = LineRef{"", 5};
    auto loc = localizer.localize(*case_from_json(q), o);
    ASSERT_TRUE(loc) << loc.error().message;
    ASSERT_EQ(loc->retrieved.size(), 1u);
    std::set<int> annotated;
    for (const auto& a : loc->annotations) annotated.insert(a.line.line);
    EXPECT_EQ(annotated, (with_fix ? std::set<int>{10} : std::set<int>{5, 10}));
    ASSERT_TRUE(loc->explanation);
    double fix_evidence = 0;
    for (const auto& t : loc->explanation->terms)
      if (t.feature == "resembles_fix") fix_evidence = t.value;
    if (with_fix)
      EXPECT_GT(fix_evidence, 0.0);
    else
      EXPECT_EQ(fix_evidence, 0.0);
    ASSERT_FALSE(loc->ranked.empty());
    EXPECT_EQ(loc->ranked[0].line, 10);
  }
}

TEST(Localizer, a_parametrize_row_is_said_to_decorate_the_test_not_to_run_in_its_body) {
  const std::string code =
      "import pytest\n\n\n@pytest.mark.parametrize(\"a,b\", [\n    (1, 2),\n    (2, 5),\n])\n"
      "def test_double(a, b):\n    assert a * 2 == b\n";
  nlohmann::json j =
      testing::sample_case("q", code, 6, "tests/test_x.py:9: in test_double\n    assert a * 2 == b\nE   assert 4 == 5");
  j["test_id"] = "tests/test_x.py::test_double[2-5]";
  j.erase("faulty_lines");
  Localizer localizer(nullptr, nullptr);
  LocalizeOptions o;
  o.k = 20;
  auto loc = localizer.localize(*case_from_json(j), o);
  ASSERT_TRUE(loc) << loc.error().message;
  const auto row =
      std::find_if(loc->ranked.begin(), loc->ranked.end(), [](const RankedElement& e) { return e.line == 6; });
  ASSERT_NE(row, loc->ranked.end());
  const std::string reasons = ::testing::PrintToString(row->reasons);
  EXPECT_NE(reasons.find("in the failing test's decorators"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("decorates the failing test, "), std::string::npos) << reasons;
  EXPECT_EQ(reasons.find("own body"), std::string::npos) << reasons;
  EXPECT_EQ(reasons.find("ran shortly before"), std::string::npos) << reasons;
  // The assertion keeps the body's words.
  const auto assertion =
      std::find_if(loc->ranked.begin(), loc->ranked.end(), [](const RankedElement& e) { return e.line == 9; });
  ASSERT_NE(assertion, loc->ranked.end());
  EXPECT_NE(::testing::PrintToString(assertion->reasons).find("in the failing test's own body"), std::string::npos);
}

TEST(Localizer, aggregates_to_statements_blocks_and_functions) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  LocalizeOptions o;
  o.level = Level::function;
  o.k = 5;
  auto loc = localizer.localize(query(), o);
  ASSERT_TRUE(loc);
  ASSERT_EQ(loc->ranked.size(), 1u);  // one function in the file
  EXPECT_EQ(loc->ranked[0].line, 1);
  EXPECT_EQ(loc->ranked[0].end_line, 5);
}

TEST(report, formats_are_well_formed) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  LocalizeOptions o;
  o.k = 12;
  auto loc = localizer.localize(query(), o);
  ASSERT_TRUE(loc);
  ReportContext ctx{"all", Level::line, 12, 0.05, "test"};
  const auto j = nlohmann::json::parse(report_json(*loc, ctx));
  EXPECT_EQ(j["schema"], "spark.localize/1");
  EXPECT_EQ(j["ranked"][0]["line"], 4);
  EXPECT_EQ(j["annotations"][0]["case"], loc->retrieved[0].id);
  const auto sarif = nlohmann::json::parse(report_sarif(*loc, ctx));
  EXPECT_EQ(sarif["version"], "2.1.0");
  const auto& r0 = sarif["runs"][0]["results"][0];
  EXPECT_EQ(r0["ruleId"], "spark/suspicious-test-line");
  EXPECT_EQ(r0["locations"][0]["physicalLocation"]["region"]["startLine"], 4);
  EXPECT_TRUE(r0["partialFingerprints"].contains("sparkTestLine/v1"));
  // Fewer lines than k: all of them; GitHub output stays within 10 annotations.
  const std::string gh = report_github({*loc}, ctx);
  EXPECT_LE(std::count(gh.begin(), gh.end(), '\n'), 10);
  EXPECT_TRUE(gh.starts_with("::warning file=tests/test_x.py,line=4,title=spark%3A most suspicious line for ")) << gh;
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {

// GitHub's workflow commands are one per line.
size_t gh_annotations(const std::string& gh) { return static_cast<size_t>(std::count(gh.begin(), gh.end(), '\n')); }

TEST(report_github, a_failure_gets_one_annotation_at_its_top_line_and_lists_its_other_lines_in_it) {
  Localization loc;
  loc.test_id = "tests/t.py::test_x";
  loc.ranked.push_back({"tests/t.py", 7, 7, 0.62, "assert total(cart) == 30", false, {"in the traceback"}});
  loc.ranked.push_back({"tests/t.py", 5, 5, 0.31, "cart = [10, 15]", false, {}});
  loc.ranked.push_back({"tests/conftest.py", 3, 3, 0.02, "@pytest.fixture", false, {}});
  const std::string gh = report_github({loc}, {"all", Level::line, 5, 0.05, "test"});
  EXPECT_EQ(gh_annotations(gh), 1u) << gh;
  EXPECT_TRUE(gh.starts_with("::warning file=tests/t.py,line=7,title=spark%3A most suspicious line for "
                             "tests/t.py%3A%3Atest_x::assert total(cart) == 30%0A- in the traceback%0Aless suspicious:"
                             "%0A2. tests/t.py:5 (0.31)  cart = [10, 15]%0A3. tests/conftest.py:3 (0.02)  @pytest.fixture\n"))
      << gh;
}

TEST(report_github, lines_as_suspicious_as_the_top_get_their_own_annotation_three_at_most) {
  Localization loc;
  loc.test_id = "tests/t.py::test_x";
  for (int i = 1; i <= 15; ++i) loc.ranked.push_back({"tests/t.py", i, i, 0.5, "x, y: " + std::to_string(i), false, {"why"}});
  const std::string gh = report_github({loc}, {"all", Level::line, 15, 0.05, "test"});
  EXPECT_EQ(gh_annotations(gh), 3u) << gh;
  EXPECT_NE(gh.find("::warning file=tests/t.py,line=2,title=spark%3A also suspicious for tests/t.py%3A%3Atest_x "
                    "(rank 2)::x, y: 2%0A- why\n"),
            std::string::npos)
      << gh;
  // The top's message lists the twelve others, not the two annotated.
  EXPECT_NE(gh.find("less suspicious:%0A4. tests/t.py:4 (0.50)  x, y: 4"), std::string::npos) << gh;
  EXPECT_NE(gh.find("%0A15. tests/t.py:15 (0.50)  x, y: 15"), std::string::npos) << gh;
  EXPECT_EQ(gh.find("%0A2. tests/t.py:2 "), std::string::npos) << gh;
}

TEST(report_github, a_line_that_failures_rank_below_their_tops_alike_gets_one_annotation_naming_them) {
  // A fixture's typo breaks four tests: each stops on a line of its own, and all rank the fixture's line second.
  std::vector<Localization> run(4);
  for (size_t t = 0; t < run.size(); ++t) {
    const int own = 30 + 10 * static_cast<int>(t);
    run[t].test_id = "tests/test_s.py::test_" + std::to_string(t);
    run[t].ranked.push_back({"tests/test_s.py", own, own, 0.73, "signer = make()", false, {}});
    run[t].ranked.push_back({"tests/test_s.py", 21, 21, 0.6, "return partial(Signer, secret_kye=key)", false, {}});
    run[t].ranked.push_back({"tests/test_s.py", own + 1, own + 1, 0.4, "assert signer", false, {}});
  }
  const std::string gh = report_github(run, {"all", Level::line, 5, 0.05, "test"});
  EXPECT_EQ(gh_annotations(gh), 5u) << gh;
  EXPECT_NE(gh.find("\n::warning file=tests/test_s.py,line=21,title=spark%3A suspicious line for 4 failing tests "
                    "(rank 2)::return partial(Signer, secret_kye=key)%0Afailing tests: tests/test_s.py::test_0, "),
            std::string::npos)
      << gh;
  // Each top's message lists its own third line, not the fixture's line, which has its annotation.
  EXPECT_NE(gh.find("less suspicious:%0A3. tests/test_s.py:31 (0.40)  assert signer\n"), std::string::npos) << gh;
  EXPECT_EQ(gh.find("2. tests/test_s.py:21"), std::string::npos) << gh;
}

TEST(report_github, a_runs_failures_share_ten_annotations_and_the_same_line_is_one_naming_its_failures) {
  // One fixture bug broke 39 tests: each ranks the fixture's line first and four lines of its own far below it.
  std::vector<Localization> run(39);
  for (size_t t = 0; t < run.size(); ++t) {
    run[t].test_id = "tests/test_m.py::test_" + std::to_string(t);
    run[t].ranked.push_back({"tests/conftest.py", 12, 12, 0.9, "return Client(url)", false, {"in the traceback"}});
    for (int i = 0; i < 4; ++i) {
      const int line = 100 + static_cast<int>(t) * 10 + i;
      run[t].ranked.push_back({"tests/test_m.py", line, line, 0.5, "x = " + std::to_string(line), false, {}});
    }
  }
  const std::string gh = report_github(run, {"all", Level::line, 5, 0.05, "test"});
  EXPECT_EQ(gh, "::warning file=tests/conftest.py,line=12,title=spark%3A most suspicious line for 39 failing tests::"
                "return Client(url)%0Afailing tests: tests/test_m.py::test_0, tests/test_m.py::test_1, "
                "tests/test_m.py::test_2, tests/test_m.py::test_3, tests/test_m.py::test_4 and 34 more%0A- in the "
                "traceback\n");
  // A line that is the top of some failures and close to the top of another says for how many it is the top.
  run.resize(3);
  std::swap(run[2].ranked[0], run[2].ranked[1]);
  run[2].ranked[0].score = 0.95;
  const std::string mixed = report_github(run, {"all", Level::line, 5, 0.05, "test"});
  EXPECT_EQ(gh_annotations(mixed), 2u) << mixed;
  EXPECT_TRUE(mixed.starts_with("::warning file=tests/conftest.py,line=12,title=spark%3A suspicious line for 3 failing "
                                "tests (the most for 2)::"))
      << mixed;
  EXPECT_NE(mixed.find("\n::warning file=tests/test_m.py,line=120,title=spark%3A most suspicious line for "
                       "tests/test_m.py%3A%3Atest_2::"),
            std::string::npos)
      << mixed;
  // Fifteen failures with lines of their own: nine annotations and one naming the other six.
  std::vector<Localization> many(15);
  for (size_t t = 0; t < many.size(); ++t) {
    many[t].test_id = "tests/test_m.py::test_" + std::to_string(t);
    many[t].ranked.push_back({"tests/test_m.py", static_cast<int>(10 * t + 1), static_cast<int>(10 * t + 1), 0.7,
                              "y = " + std::to_string(t), false, {}});
  }
  const std::string more = report_github(many, {"all", Level::line, 5, 0.05, "test"});
  EXPECT_EQ(gh_annotations(more), 10u) << more;
  EXPECT_NE(more.find("::warning title=spark%3A 6 more::more suspicious lines for 15 failing tests:%0Atests/test_m.py:91 "
                      "for tests/test_m.py::test_9  y = 9%0A"),
            std::string::npos)
      << more;
}

}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

// A test whose line 3 quotes the missing key.
const std::string kLookupCode = "def test_lookup_new():\n    d = {'alpha': 1}\n    value = d['alpah']\n    assert value == 1\n";

Case bad_query(const std::string& code, const std::string& error, const std::string& test_id) {
  nlohmann::json j = testing::sample_case("bad", code, 1, error, "2026-03-01T00:00:00Z");
  j["test_id"] = test_id;
  j.erase("faulty_lines");
  return *case_from_json(j);
}

bool has_note(const Localization& loc, const std::string& part) {
  return std::any_of(loc.notes.begin(), loc.notes.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

}  // namespace

TEST(Localizer, a_test_file_with_syntax_errors_still_ranks_every_line) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  const std::string code = "def test_lookup_new(:\n    d = {'alpha': 1\n    value = d['alpah']\n    assert value == 1\n";
  LocalizeOptions o;
  o.k = 10;
  auto loc = localizer.localize(bad_query(code, "tests/test_x.py:3: in test_lookup_new\nE   KeyError: 'alpah'",
                                          "tests/test_x.py::test_lookup_new"), o);
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_EQ(loc->ranked.size(), 4u);
  EXPECT_TRUE(has_note(*loc, "does not parse cleanly as Python")) << ::testing::PrintToString(loc->notes);
  // The line the traceback names, which also quotes the missing key, is still found.
  EXPECT_EQ(loc->ranked[0].line, 3);
}

TEST(Localizer, a_traceback_with_no_frame_in_the_test_files_ranks_without_a_failing_statement) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  auto loc = localizer.localize(bad_query(kLookupCode, "lib/store.py:12: in get\n    return self.d[k]\nE   KeyError: 'alpah'",
                                          "tests/test_x.py::test_lookup_new"), {});
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_FALSE(loc->ranked.empty());
  EXPECT_FALSE(loc->gate.has_value());
  EXPECT_TRUE(has_note(*loc, "names no line of the test files")) << ::testing::PrintToString(loc->notes);
  EXPECT_EQ(loc->ranked[0].line, 3);  // the line that uses the quoted key
  auto none = localizer.localize(bad_query(kLookupCode, "it broke", "tests/test_x.py::test_lookup_new"), {});
  ASSERT_TRUE(none);
  EXPECT_TRUE(has_note(*none, "holds no traceback"));
}

TEST(Localizer, a_ten_megabyte_error_message_is_read_in_part_and_said) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  std::string error = "tests/test_x.py:3: in test_lookup_new\n    value = d['alpah']\n";
  while (error.size() < 10u << 20) error += "lib/noise.py:1: in spin\n    spin()\n";
  error += "tests/test_x.py:3: in test_lookup_new\nE   KeyError: 'alpah'\n";
  auto loc = localizer.localize(bad_query(kLookupCode, error, "tests/test_x.py::test_lookup_new"), {});
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_TRUE(has_note(*loc, "the ranker read its first")) << ::testing::PrintToString(loc->notes);
  ASSERT_TRUE(loc->gate.has_value());
  EXPECT_EQ(loc->gate->exception, "KeyError");
  EXPECT_EQ(loc->ranked[0].line, 3);
}

TEST(Localizer, a_test_id_naming_no_function_in_the_file_ranks_without_scope) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  auto loc = localizer.localize(bad_query(kLookupCode, "tests/test_x.py:3: in test_gone\nE   KeyError: 'alpah'",
                                          "tests/test_x.py::test_gone"), {});
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_FALSE(loc->ranked.empty());
  EXPECT_TRUE(has_note(*loc, "names no function found in the test files")) << ::testing::PrintToString(loc->notes);
}

TEST(Localizer, reports_the_gate_and_explains_it_on_the_failing_statement) {
  Fixture f;
  Localizer localizer(f.kb.get(), f.engine.get());
  auto loc = localizer.localize(query(), {});
  ASSERT_TRUE(loc) << loc.error().message;
  ASSERT_TRUE(loc->gate.has_value());
  EXPECT_EQ(loc->gate->line.line, 4);
  EXPECT_EQ(loc->gate->exception, "KeyError");
  EXPECT_EQ(loc->gate->form, "lookup");
  EXPECT_TRUE(loc->gate->raised_in_test);
  EXPECT_GT(loc->gate->probability, 0.0);
  EXPECT_LT(loc->gate->probability, 1.0);
  const auto& top = loc->ranked[0];
  ASSERT_EQ(top.line, 4);
  EXPECT_TRUE(std::any_of(top.reasons.begin(), top.reasons.end(),
                          [](const std::string& r) { return r.find("makes this statement the fault with probability") != std::string::npos; }))
      << ::testing::PrintToString(top.reasons);
  EXPECT_TRUE(std::any_of(top.reasons.begin(), top.reasons.end(),
                          [](const std::string& r) { return r.find("holds a value the failure shows") != std::string::npos; }))
      << ::testing::PrintToString(top.reasons);
}


// An HNSW index is checked against the exact search at build time, and the report says how it did. A flat index is
// exact: nothing to check.
TEST(build_index, an_hnsw_index_is_checked_against_an_exact_search) {
  TempDir dir;
  auto kb = std::move(*KnowledgeBase::open(dir / "kb", true));
  std::vector<Case> cases = corpus();
  const size_t base = cases.size();
  for (size_t i = 0; i < base; ++i)
    for (int copy = 0; copy < 8; ++copy) {
      nlohmann::json j = case_to_json(cases[i]);
      j["id"] = cases[i].id + "-v" + std::to_string(copy);
      j["error_message"] = cases[i].error_message + "\nvariant " + std::to_string(copy) + " of the failure";
      cases.push_back(*case_from_json(j));
    }
  ASSERT_TRUE(kb->import_cases(cases, {}, false));
  auto flat = build_index(*kb, {}, {});
  ASSERT_TRUE(flat) << flat.error().message;
  EXPECT_EQ(flat->kind, "flat");
  EXPECT_EQ(flat->recall_checked, 0u);
  IndexBuildOptions options;
  options.index.hnsw_threshold = 8;
  auto hnsw = build_index(*kb, {}, options);
  ASSERT_TRUE(hnsw) << hnsw.error().message;
  EXPECT_EQ(hnsw->kind, "hnsw");
  EXPECT_EQ(hnsw->recall_checked, std::min(kRecallSample, cases.size()));
  // A few dozen vectors: HNSW with the exact refinement finds the true nearest for every one.
  EXPECT_EQ(hnsw->recall_matched, hnsw->recall_checked);
}

TEST(build_index, vectors_built_per_version_on_threads_equal_each_case_embedded_alone) {
  // Cases sharing a test-file version (and a failing test) are embedded from shared blocks on several threads; each
  // vector must be bit-identical to embedding the case alone with the same statistics.
  TempDir dir;
  auto kb = std::move(*KnowledgeBase::open(dir / "kb", true));
  std::vector<Case> cases = corpus();
  const size_t base = cases.size();
  for (size_t i = 0; i < base; ++i)
    for (int copy = 0; copy < 3; ++copy) {
      nlohmann::json j = case_to_json(cases[i]);
      j["id"] = cases[i].id + "-copy" + std::to_string(copy);
      j["error_message"] = cases[i].error_message + "\nattempt " + std::to_string(copy);
      cases.push_back(*case_from_json(j));
    }
  ASSERT_TRUE(kb->import_cases(cases, {}, false));
  std::string identity;
  for (unsigned threads : {1u, 3u}) {
    IndexBuildOptions options;
    options.threads = threads;
    auto report = build_index(*kb, {}, options);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->threads, threads);
    EXPECT_EQ(report->versions, base);  // every copy shares its original's version
    EXPECT_EQ(report->test_functions, base);
    if (identity.empty()) identity = report->embedder;
    EXPECT_EQ(report->embedder, identity);  // the statistics do not depend on the thread count
    std::vector<std::string> notes;
    auto engine = SearchEngine::open(*kb, {}, notes);
    ASSERT_TRUE(engine) << engine.error().message;
    auto entries = kb->entries();
    ASSERT_TRUE(entries);
    ASSERT_EQ(entries->size(), cases.size());
    for (const auto& e : *entries) {
      auto c = kb->load(e.rowid);
      ASSERT_TRUE(c);
      auto alone = (*engine)->embed(*c);
      ASSERT_TRUE(alone);
      EXPECT_EQ(*alone, (*engine)->index().vector(e.rowid)) << c->id;
    }
  }
  // Cases added after the build are embedded by version too when the index catches up: still bit-identical.
  std::vector<Case> late;
  for (size_t i = 0; i < 4; ++i) {
    nlohmann::json j = case_to_json(cases[i]);
    j["id"] = cases[i].id + "-late";
    j["error_message"] = cases[i].error_message + "\nlate";
    late.push_back(*case_from_json(j));
  }
  ASSERT_TRUE(kb->import_cases(late, {}, false));
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->added_since_load(), 4u);
  for (const auto& c : late) {
    auto rowid = kb->find(c.id);
    ASSERT_TRUE(rowid && *rowid);
    auto stored = kb->load(**rowid);
    ASSERT_TRUE(stored);
    EXPECT_EQ(*(*engine)->embed(*stored), (*engine)->index().vector(**rowid)) << c.id;
  }
}

TEST(build_index, a_cases_language_reads_its_file_of_no_known_extension_in_bulk_as_alone) {
  // A Java test file with no extension: the extension says nothing, so the case's `language` field decides how it
  // is read. The store keeps that field beside the record (schema 4), so the per-version pass reads the file as Java
  // too, and each vector equals the case embedded alone.
  TempDir dir;
  auto kb = std::move(*KnowledgeBase::open(dir / "kb", true));
  const std::string java =
      "package com.example.shop;\n"
      "class CartCheck {\n"
      "    @Test\n"
      "    void totalCountsItems() {\n"
      "        int expected = 3;\n"
      "        assertEquals(expected, cart.total());\n"
      "    }\n"
      "    @Test\n"
      "    void emptyCart() {\n"
      "        cart.clear();\n"
      "        assertEquals(0, cart.total());\n"
      "    }\n"
      "}\n";
  std::vector<Case> cases = corpus();
  for (int i = 0; i < 3; ++i) {
    nlohmann::json j = {{"id", "java-" + std::to_string(i)},
                        {"project", "demo/shop"},
                        {"test_id", "com.example.shop.CartCheck#" + std::string(i == 2 ? "emptyCart" : "totalCountsItems")},
                        {"language", "java"},
                        {"failure_time", "2026-01-02T00:00:00Z"},
                        {"error_message", "org.opentest4j.AssertionFailedError: expected: <3> but was: <" +
                                              std::to_string(i) + ">"},
                        {"files", {{{"path", "checks/CartCheck"}, {"content", java}}}},
                        {"faulty_lines", {{{"path", "checks/CartCheck"}, {"line", i == 2 ? 10 : 5}}}}};
    auto c = case_from_json(j);
    ASSERT_TRUE(c) << c.error().message;
    cases.push_back(*c);
  }
  ASSERT_TRUE(kb->import_cases(cases, {}, false));
  std::vector<std::string> languages;
  ASSERT_TRUE(kb->for_each_sketch(0, [&](KnowledgeBase::CaseSketch&& s) -> Status {
    languages.push_back(s.language);
    return {};
  }));
  ASSERT_EQ(languages.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(languages[i], cases[i].language) << cases[i].id;
  auto report = build_index(*kb, {}, {});
  ASSERT_TRUE(report) << report.error().message;
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(*kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  for (const auto& c : cases) {
    auto rowid = kb->find(c.id);
    ASSERT_TRUE(rowid && *rowid);
    auto stored = kb->load(**rowid);
    ASSERT_TRUE(stored);
    EXPECT_EQ(*(*engine)->embed(*stored), (*engine)->index().vector(**rowid)) << c.id;
  }
}

// With the built-in embedder, a search whose best hit shares less than the test code's share of the cosine is repeated
// exactly (VectorIndexOptions::exact_below), by a query's engine as by the ranker's training; its shares decide the
// bound. The OpenAI-compatible embedder's searches keep the graph's answer.
TEST(SearchEngine, searches_exactly_below_the_built_in_embedders_same_test_code_similarity) {
  EXPECT_FLOAT_EQ(exact_search_bound(HashedTfidfEmbedder()), 0.5f);
  HashedTfidfOptions shares;
  shares.error_weight = 0.7;
  shares.test_function_weight = 0.2;
  shares.code_weight = 0.1;
  EXPECT_FLOAT_EQ(exact_search_bound(HashedTfidfEmbedder(shares)), 0.3f);
  OpenAiEmbedderOptions openai;
  openai.base_url = "http://127.0.0.1:9/v1";
  EXPECT_LT(exact_search_bound(OpenAiEmbedder(openai)), -1.0f);  // below any cosine: never
  Fixture f;
  EXPECT_FLOAT_EQ(f.engine->index().exact_below(), 0.5f);
}

TEST(SearchEngine, keeps_the_cases_filtering_needs_in_a_file_beside_the_index) {
  Fixture f;
  const auto dir = f.kb->index_dir();
  auto manifest = VectorIndex::read_manifest(dir);
  ASSERT_TRUE(manifest);
  const std::string first = manifest->file_of("cases.bin");
  ASSERT_FALSE(first.empty());
  auto entries = f.kb->entries();
  ASSERT_TRUE(entries);
  // What the engine read from the file is what the store holds.
  const auto& facts = f.engine->facts();
  ASSERT_EQ(facts.size(), entries->size());
  for (size_t i = 0; i < facts.size(); ++i) {
    EXPECT_EQ(facts[i].rowid, (*entries)[i].rowid);
    EXPECT_EQ(facts[i].failure_epoch, (*entries)[i].failure_epoch);
    EXPECT_EQ(facts[i].labelled, (*entries)[i].labelled);
    EXPECT_EQ(facts[i].id_hash, fact_hash((*entries)[i].id));
    EXPECT_EQ(facts[i].key_hash, fact_hash((*entries)[i].content_key));
  }
  // A stored case localized as a query does not retrieve itself (its id and content key are in the file as hashes).
  auto stored = f.kb->load(facts.front().rowid);
  ASSERT_TRUE(stored);
  Localizer localizer(f.kb.get(), f.engine.get());
  auto loc = localizer.localize(*stored, {});
  ASSERT_TRUE(loc) << loc.error().message;
  for (const auto& r : loc->retrieved) EXPECT_NE(r.rowid, facts.front().rowid);

  // A case learned since: the engine reads the store, and persist writes a new file for the new state.
  auto more = corpus();
  nlohmann::json j = case_to_json(more.front());
  j["id"] = "late-1";
  j["error_message"] = more.front().error_message + "\nlate";
  ASSERT_TRUE(f.kb->import_cases({*case_from_json(j)}, {}, false));
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(*f.kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->facts().size(), facts.size() + 1);
  ASSERT_TRUE((*engine)->persist(*f.kb));
  auto after = VectorIndex::read_manifest(dir);
  ASSERT_TRUE(after);
  EXPECT_NE(after->file_of("cases.bin"), first);
  EXPECT_FALSE(std::filesystem::exists(dir / first));
  auto reopened = SearchEngine::open(*f.kb, {}, notes);
  ASSERT_TRUE(reopened) << reopened.error().message;
  EXPECT_EQ((*reopened)->facts().size(), facts.size() + 1);
  EXPECT_EQ((*reopened)->facts().back().id_hash, fact_hash("late-1"));

  // A cases file that does not match the index (damaged, or from another state) is refused by its checksum.
  testing::write_file(dir / after->file_of("cases.bin"), "SPKCAS01");
  auto damaged = SearchEngine::open(*f.kb, {}, notes, /*verify_vectors=*/false);
  ASSERT_FALSE(damaged);
  EXPECT_NE(damaged.error().message.find("checksum mismatch"), std::string::npos) << damaged.error().message;
}

TEST(SearchEngine, keeps_what_a_retrieval_reads_of_each_labelled_case_beside_the_index) {
  Fixture f;
  auto manifest = VectorIndex::read_manifest(f.kb->index_dir());
  ASSERT_TRUE(manifest);
  EXPECT_FALSE(manifest->file_of("labels.bin").empty());
  auto entries = f.kb->entries();
  ASSERT_TRUE(entries);
  for (const auto& e : *entries) {
    auto kept = f.engine->label(e.rowid);
    ASSERT_TRUE(kept) << kept.error().message;
    ASSERT_TRUE(*kept);
    auto c = f.kb->load(e.rowid);
    ASSERT_TRUE(c);
    EXPECT_EQ(label_to_json(**kept), label_to_json(case_label(*c)));
    EXPECT_EQ((*kept)->lines.size(), c->faulty_lines.size());
  }
  // A case learned after the build has no label there: its retrieval reads the store.
  auto more = corpus();
  nlohmann::json j = case_to_json(more.back());
  j["id"] = "late-1";
  ASSERT_TRUE(f.kb->import_cases({*case_from_json(j)}, {}, false));
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(*f.kb, {}, notes);
  ASSERT_TRUE(engine) << engine.error().message;
  auto late = f.kb->find("late-1");
  ASSERT_TRUE(late && *late);
  auto none = (*engine)->label(**late);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  Localizer localizer(f.kb.get(), engine->get());
  LocalizeOptions o;
  o.r = 20;
  auto loc = localizer.localize(query(), o);
  ASSERT_TRUE(loc) << loc.error().message;
  EXPECT_TRUE(std::any_of(loc->retrieved.begin(), loc->retrieved.end(),
                          [](const RetrievedCase& r) { return r.id == "late-1" && !r.faulty_lines.empty(); }));

  // A labels file cut short, or pointing outside itself, is an error naming it.
  TempDir dir;
  ASSERT_TRUE(index_files::write_labels(dir / "labels.bin", {{7, label_to_json(case_label(more.front()))}}));
  auto whole = index_files::MappedLabels::open(dir / "labels.bin", nullptr);
  ASSERT_TRUE(whole) << whole.error().message;
  auto seven = whole->find(7);
  ASSERT_TRUE(seven && *seven);
  EXPECT_EQ((*seven)->id, more.front().id);
  auto bytes = *read_file(dir / "labels.bin");
  testing::write_file(dir / "cut.bin", bytes.substr(0, bytes.size() - 10));
  auto cut = index_files::MappedLabels::open(dir / "cut.bin", nullptr);
  ASSERT_TRUE(cut);
  auto outside = cut->find(7);
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().message.find("cut.bin"), std::string::npos) << outside.error().message;
  testing::write_file(dir / "short.bin", "SPKLAB01");
  auto refused = index_files::MappedLabels::open(dir / "short.bin", nullptr);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("short.bin"), std::string::npos);
}

}  // namespace spark::SPARK_TEST_FILE_ID
