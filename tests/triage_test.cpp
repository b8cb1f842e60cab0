// Issue 36: what a CI engineer asks before "which line" — suggested edits from similar cases' fixes (suggest.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_schema.h"
#include "localizer/localizer.h"
#include "localizer/report.h"
#include "localizer/suggest.h"
#include "localizer/verdict.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using testing::run_spark;
using testing::TempDir;
using testing::write_file;

namespace {

using testing::day;

using testing::commit;

// Real pytest at its defaults, with a JUnit report.
void pytest_junit(const TempDir& dir, const std::string& report) {
  const auto r = testing::run_pytest({"--junitxml=" + report, "tests"}, dir.path());
  ASSERT_TRUE(std::filesystem::exists(dir / report)) << r.out << r.err;
}

const nlohmann::json* localization_of(const nlohmann::json& run, const std::string& test_id) {
  for (const auto& l : run)
    if (l["test_id"] == test_id) return &l;
  return nullptr;
}

Case query_of(const std::string& code) {
  nlohmann::json j = testing::sample_case("q", code, 1, "E   AttributeError", "2026-03-01T00:00:00Z");
  j.erase("faulty_lines");
  return *case_from_json(j);
}

RetrievedCase past(const std::string& id, double similarity, const std::string& faulty,
                   const std::vector<std::string>& fix) {
  RetrievedCase rc;
  rc.id = id;
  rc.similarity = similarity;
  rc.faulty_lines = {{"tests/test_old.py", 7}};
  rc.faulty_text = {faulty};
  rc.fixes[rc.faulty_lines[0]] = fix;
  return rc;
}

// The query's line `line` ranked first with `score`.
Localization ranked_at(int line, double score) {
  Localization loc;
  RankedElement e;
  e.path = "tests/test_x.py";
  e.line = e.end_line = line;
  e.score = score;
  loc.ranked.push_back(e);
  return loc;
}

}  // namespace

TEST(suggest, a_renamed_method_is_proposed_on_the_querys_line_that_still_calls_the_old_name) {
  const Case q = query_of("def test_total():\n    order = make()\n    assert order.total_price() == 3\n");
  Localization loc = ranked_at(3, 0.8);
  loc.retrieved.push_back(past("c1", 0.9, "    r = cart.total_price()", {"    r = cart.total()"}));
  const auto s = suggest_edits(q, loc);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].line, (LineRef{"tests/test_x.py", 3}));
  EXPECT_EQ(s[0].old_line, "    assert order.total_price() == 3");
  EXPECT_EQ(s[0].new_line, "    assert order.total() == 3");
  EXPECT_EQ(s[0].old_tokens, "total_price");
  EXPECT_EQ(s[0].new_tokens, "total");
  EXPECT_EQ(s[0].from_case, "c1");
  EXPECT_NEAR(s[0].confidence, 0.9 * 0.8, 1e-9);
  EXPECT_TRUE(s[0].preferred);

  // A plain name `total_price` (no "." before it) is another thing than the attribute: no suggestion.
  const Case other = query_of("def test_total():\n    order = make()\n    assert total_price(order) == 3\n");
  EXPECT_TRUE(suggest_edits(other, loc).empty());
  // A line the localizer does not point at gets none.
  EXPECT_TRUE(suggest_edits(q, ranked_at(2, 0.8)).empty());
}

TEST(suggest, a_name_that_occurs_several_times_is_renamed_everywhere_a_literal_is_not_guessed) {
  const Case q =
      query_of("def test_total():\n    a, b = make(), make()\n    assert a.total_price() == b.total_price()\n");
  Localization loc = ranked_at(3, 0.5);
  loc.retrieved.push_back(past("c1", 0.9, "    r = cart.total_price()", {"    r = cart.total()"}));
  auto s = suggest_edits(q, loc);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].new_line, "    assert a.total() == b.total()");

  // A changed literal: proposed on a line like the faulty one where it stands once.
  const Case lit = query_of("def test_timeout():\n    x = 1\n    value = settings.get('timeout', 30)\n");
  Localization l2 = ranked_at(3, 0.5);
  l2.retrieved.push_back(
      past("c2", 0.8, "    value = settings.get('timeout', 30)", {"    value = settings.get('timeout', 60)"}));
  s = suggest_edits(lit, l2);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].new_line, "    value = settings.get('timeout', 60)");
  // ... but where it stands twice, which one is meant is not known: none.
  const Case twice = query_of("def test_timeout():\n    x = 1\n    value = settings.get('timeout', 30, 30)\n");
  EXPECT_TRUE(suggest_edits(twice, l2).empty());
  // ... nor on a line unlike the faulty one.
  const Case unlike = query_of("def test_timeout():\n    x = 1\n    assert compute_everything_else(30) is None\n");
  EXPECT_TRUE(suggest_edits(unlike, l2).empty());
}

TEST(suggest, the_ranked_lines_edits_come_before_an_annotated_line_the_ranker_left_out) {
  // Line 3 (the failing test's, ranked) and line 7 (another test's, annotated only) hold the old name.
  const Case q = query_of(
      "def test_total():\n    order = make()\n    assert order.total_price() == 3\n\n\ndef test_other():\n"
      "    r = cart.total_price()\n");
  Localization loc = ranked_at(3, 0.4);
  Annotation a;
  a.line = {"tests/test_x.py", 7};
  loc.annotations.push_back(a);
  loc.retrieved.push_back(past("c1", 0.9, "    r = cart.total_price()", {"    r = cart.total()"}));
  const auto s = suggest_edits(q, loc);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].line.line, 3);  // ranked first, though 0.9 × 0.4 < 0.9 × 0.5
  EXPECT_NEAR(s[0].confidence, 0.36, 1e-9);
  EXPECT_EQ(s[1].line.line, 7);
  EXPECT_NEAR(s[1].confidence, 0.45, 1e-9);
}

TEST(suggest, conflicting_edits_of_one_line_are_both_listed_the_more_similar_cases_first) {
  const Case q = query_of("def test_total():\n    order = make()\n    assert order.total_price() == 3\n");
  Localization loc = ranked_at(3, 1.0);
  loc.retrieved.push_back(past("less", 0.6, "    r = cart.total_price()", {"    r = cart.price_total()"}));
  loc.retrieved.push_back(past("more", 0.9, "    r = cart.total_price()", {"    r = cart.total()"}));
  // The same edit from a third case is one suggestion (the most confident's).
  loc.retrieved.push_back(past("same", 0.7, "    x = basket.total_price()", {"    x = basket.total()"}));
  const auto s = suggest_edits(q, loc);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].from_case, "more");
  EXPECT_TRUE(s[0].preferred);
  EXPECT_EQ(s[0].new_line, "    assert order.total() == 3");
  EXPECT_EQ(s[1].from_case, "less");
  EXPECT_FALSE(s[1].preferred);
  EXPECT_EQ(s[1].new_line, "    assert order.price_total() == 3");
}

TEST(suggest, a_fix_that_is_no_token_level_change_suggests_nothing) {
  const Case q = query_of("def test_total():\n    order = make()\n    assert order.total_price() == 3\n");
  const std::string faulty = "    r = cart.total_price()";
  for (const auto& fix : std::vector<std::vector<std::string>>{
           {},                                        // deleted
           {"    r = cart.total()", "    assert r"},  // several lines (a rewritten file, a long fix)
           {"    r = sum(item.price * item.count for item in cart.items)"},  // more than three tokens replaced
           {"    r  =  cart.total_price( )"},                                // whitespace only
           {"    r = cart.total_price()  # checked"},                        // a comment only
       }) {
    Localization loc = ranked_at(3, 1.0);
    loc.retrieved.push_back(past("c", 0.9, faulty, fix));
    EXPECT_TRUE(suggest_edits(q, loc).empty()) << (fix.empty() ? "[]" : fix[0]);
  }
  // A case with no fix kept (mined before fixes were kept) suggests nothing.
  Localization loc = ranked_at(3, 1.0);
  loc.retrieved.push_back(past("c", 0.9, faulty, {"    r = cart.total()"}));
  loc.retrieved[0].fixes.clear();
  EXPECT_TRUE(suggest_edits(q, loc).empty());
  // A fix of 10,000 lines suggests nothing either.
  loc.retrieved[0].fixes[loc.retrieved[0].faulty_lines[0]] = std::vector<std::string>(10000, "    r = cart.total()");
  EXPECT_TRUE(suggest_edits(q, loc).empty());
}

TEST(verdict, the_machines_words_are_the_environment_and_the_repositorys_own_module_is_not) {
  const auto own = [](std::string_view m) { return m == "shop"; };
  const auto env = [&](const std::string& message) { return environment_reason(message, own); };
  EXPECT_TRUE(env("E   ModuleNotFoundError: No module named 'requests'"));
  EXPECT_TRUE(
      env("E   ImportError: cannot import name 'x' from 'yaml' (/usr/lib/python3/dist-packages/yaml/__init__.py)"));
  EXPECT_FALSE(env("E   ModuleNotFoundError: No module named 'shop.checkout'"));
  EXPECT_TRUE(env("E   ConnectionRefusedError: [Errno 111] Connection refused"));
  EXPECT_TRUE(env("E   socket.gaierror: [Errno -3] Temporary failure in name resolution"));
  EXPECT_TRUE(env("E   Failed: Timeout >15.0s"));
  EXPECT_TRUE(env("E   PermissionError: [Errno 13] Permission denied: '/var/lib/x'"));
  EXPECT_TRUE(env("E   OSError: [Errno 28] No space left on device"));
  EXPECT_TRUE(env("E   NotADirectoryError: [Errno 20] Not a directory: '/tmp/x/a-file/tmp/pytest-of-root'"));
  // A file a test made inside its tmp_path is the test's business.
  EXPECT_FALSE(
      env("E   FileNotFoundError: [Errno 2] No such file or directory: "
          "'/tmp/pytest-of-root/pytest-260/test_rotate0/log.1'"));
  EXPECT_FALSE(env("E   assert 3 == 4"));
  EXPECT_FALSE(env("E   AttributeError: 'Cart' object has no attribute 'total_price'"));
}

TEST(verdict, a_frame_in_the_standard_library_is_neither_the_tests_nor_the_products) {
  nlohmann::json j = testing::sample_case(
      "q", "import pathlib\n\n\ndef test_a():\n    pathlib.Path('x').read_text()\n", 5,
      "tests/test_x.py:5: in test_a\n    pathlib.Path('x').read_text()\n/usr/lib/python3.11/pathlib.py:1058: in "
      "read_text\n    with self.open(mode='r') as f:\nE   IsADirectoryError: [Errno 21] Is a directory: 'x'",
      "2026-03-01T00:00:00Z");
  j["test_id"] = "tests/test_x.py::test_a";
  j.erase("faulty_lines");
  const Verdict v = judge(*case_from_json(j), Localization{}, std::nullopt, {});
  ASSERT_FALSE(v.reasons.empty());
  EXPECT_NE(v.reasons[0].find("raised in the test's own code"), std::string::npos) << v.reasons[0];
  EXPECT_EQ(v.kind, VerdictKind::test);
  // Raised in the product's code: the product's side.
  j["error_message"] =
      "tests/test_x.py:5: in test_a\n    shop.total()\nshop/cart.py:3: in total\n    return x / 0\n"
      "E   ZeroDivisionError: division by zero";
  const Verdict p = judge(*case_from_json(j), Localization{}, std::nullopt, {});
  EXPECT_NE(p.reasons[0].find("raised beneath the test, in shop/cart.py"), std::string::npos) << p.reasons[0];
  EXPECT_EQ(p.kind, VerdictKind::product);
  // A flaky history wins over everything.
  TestHistory h;
  h.flaky = true;
  h.flaky_runs = 1;
  EXPECT_EQ(judge(*case_from_json(j), Localization{}, h, {}).kind, VerdictKind::flaky);
}

TEST(suggest, review_cases_overlaps_constants_shared_hunks_and_unrelated_lines_are_not_guessed) {
  // Overlapping occurrences of a two-token change: each token is replaced at most once.
  {
    const Case q = query_of("def test_a():\n    x = 1\n    f(a a a)\n");
    Localization loc = ranked_at(3, 1.0);
    loc.retrieved.push_back(past("c", 0.9, "    f(a a)", {"    f(b)"}));
    const auto s = suggest_edits(q, loc);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].new_line, "    f(b a)");
  }
  // True → False is a changed literal: only on a line like the faulty one.
  {
    const Case q = query_of("def test_a():\n    strict = True\n    config.load(path, enabled=True)\n");
    Localization loc = ranked_at(2, 1.0);
    loc.ranked.push_back(ranked_at(3, 1.0).ranked[0]);
    loc.retrieved.push_back(
        past("c", 0.9, "    config.load(path, enabled=True)", {"    config.load(path, enabled=False)"}));
    const auto s = suggest_edits(q, loc);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].line.line, 3);
  }
  // Two faulty lines of one hunk that became one line (2 → 1): no line-for-line change, no suggestion.
  {
    const Case q = query_of("def test_a():\n    b = 2\n    a = 1\n");
    Localization loc = ranked_at(2, 1.0);
    loc.ranked.push_back(ranked_at(3, 1.0).ranked[0]);
    RetrievedCase rc = past("c", 0.9, "    a = 1", {"    a = 3"});
    rc.faulty_lines.push_back({"tests/test_old.py", 8});
    rc.faulty_text.emplace_back("    b = 2");
    rc.fixes[rc.faulty_lines[1]] = {"    a = 3"};
    loc.retrieved.push_back(rc);
    EXPECT_TRUE(suggest_edits(q, loc).empty());
  }
  // A "fix" that shares no token with the line is another line, not a change of it.
  {
    const Case q = query_of("def test_a():\n    b = 2\n");
    Localization loc = ranked_at(2, 1.0);
    loc.retrieved.push_back(past("c", 0.9, "b = 2", {"a != 3"}));
    EXPECT_TRUE(suggest_edits(q, loc).empty());
  }
}

TEST(verdict, quoted_words_and_import_cycles_are_not_the_machines) {
  const auto env = [](const std::string& message) { return environment_reason(message, {}); };
  EXPECT_FALSE(env("E   Failed: DID NOT RAISE <class 'PermissionError'>"));
  EXPECT_FALSE(env("E   assert 'Connection refused' in 'ok'"));
  EXPECT_FALSE(env("E   AssertionError: expected the job to have timed out"));
  EXPECT_FALSE(
      env("E   ImportError: cannot import name 'Cart' from partially initialized module 'shop.cart' "
          "(most likely due to a circular import) (/src/shop/cart.py)"));
  EXPECT_TRUE(env("E   requests.exceptions.ConnectionError: Connection refused"));
  EXPECT_TRUE(env("Error: connect ECONNREFUSED 127.0.0.1:5432"));
}

TEST(verdict, a_published_copy_holds_no_secret_of_a_suggestion_or_a_reason) {
  const Redactor redactor = *Redactor::make();
  const Case q = query_of("def test_a():\n    x = 1\n    password = \"hunter2secretvalue\"\n");
  Localization loc = ranked_at(3, 1.0);
  Suggestion sg;
  sg.line = {"tests/test_x.py", 3};
  sg.old_line = "    password = \"hunter2secretvalue\"";
  sg.new_line = "    password = \"n3wsecretvalue99\"";
  sg.old_tokens = "\"hunter2secretvalue\"";
  sg.new_tokens = "\"n3wsecretvalue99\"";
  loc.suggestions.push_back(sg);
  Verdict v;
  v.kind = VerdictKind::environment;
  v.reasons = {"a connection was refused: OperationalError: postgres://app:s3cr3tPassw0rd@db/x refused"};
  loc.verdict = v;
  std::map<std::string, size_t> counts;
  EXPECT_GT(redact_localization(loc, q, redactor, counts), 0u);
  EXPECT_TRUE(loc.suggestions.empty());
  EXPECT_EQ(loc.verdict->reasons[0].find("s3cr3tPassw0rd"), std::string::npos) << loc.verdict->reasons[0];
}

TEST(markdown, one_row_per_failure_one_diff_block_per_edit_and_test_text_escaped) {
  Localization a = ranked_at(3, 0.9);
  a.test_id = "tests/test_x.py::test_a[<b>|@team]";
  Suggestion sg;
  sg.line = {"tests/test_x.py", 3};
  sg.old_line = "    assert order.total_price() == 3";
  sg.new_line = "    assert order.total() == 3";
  sg.old_tokens = "total_price";
  sg.new_tokens = "total";
  sg.from_case = "c1";
  a.suggestions.push_back(sg);
  Localization b = a;  // another row of the same parametrized test: the same edit
  b.test_id = "tests/test_x.py::test_a[2]";
  const std::string md = report_markdown({&a, &b}, {"tests/test_y.py::test_b: cannot read it"}, ReportContext{});
  EXPECT_NE(md.find("### spark: 3 failing tests"), std::string::npos) << md;
  EXPECT_NE(md.find("&lt;b&gt;&#124;&#64;team"), std::string::npos) << md;  // no markup, no cell break, no mention
  // The table holds no raw "@" (inside the diff's code fence GitHub links no mention).
  EXPECT_EQ(md.substr(0, md.find("####")).find("@team"), std::string::npos) << md;
  size_t blocks = 0;
  for (size_t at = md.find("```diff"); at != std::string::npos; at = md.find("```diff", at + 1)) ++blocks;
  EXPECT_EQ(blocks, 1u) << md;
  EXPECT_NE(md.find("| not localized |"), std::string::npos) << md;
}

TEST(suggest, tokens_keep_strings_and_stop_at_comments_by_language) {
  const std::string py = "x = f'a # b' + 'c'  # note";
  const auto t = code_tokens(py, Language::python);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(py.substr(t[2].begin, t[2].end - t[2].begin), "f'a # b'");
  EXPECT_EQ(t[2].kind, CodeToken::string);
  const std::string js = "const a = b // 2;  // c";
  EXPECT_EQ(code_tokens(js, Language::javascript).size(), 4u);    // const a = b
  EXPECT_EQ(code_tokens("a // 2", Language::python).size(), 4u);  // floor division
}

// A fix whose new side is not UTF-8 keeps its case, with no `fix` on that line; one that makes the file binary is
// named and labels nothing; neither stops the others.
TEST(triage, a_fix_not_utf8_is_not_kept_and_a_binary_fix_is_named) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / "tests" / "test_a.py", "def test_a():\n    x = 1\n    assert x == 2\n");
  write_file(dir / "tests" / "test_b.py", "def test_b():\n    y = 1\n    assert y == 2\n");
  write_file(dir / "tests" / "test_c.py", "def test_c():\n    z = 1\n    assert z == 2\n");
  commit(dir, "broken", 1);
  const std::string broken = testing::head_sha(dir);
  write_file(dir / "tests" / "test_a.py", "def test_a():\n    x = 2  # caf\xe9\n    assert x == 2\n");
  static constexpr char kBinary[] = "def test_b():\n    y = 2\0\n    assert y == 2\n";
  write_file(dir / "tests" / "test_b.py", std::string(kBinary, sizeof kBinary - 1));
  write_file(dir / "tests" / "test_c.py", "def test_c():\n    z = 2\n    assert z == 2\n");
  commit(dir, "fix", 2);
  const std::string fixed = testing::head_sha(dir);
  std::string outcomes;
  for (const char* t : {"a", "b", "c"})
    outcomes += R"({"commit": ")" + broken + R"(", "time": ")" + day(1) + R"(", "test_id": "tests/test_)" + t +
                ".py::test_" + t + R"(", "outcome": "failed", "message": "E assert 1 == 2"})" + "\n" +
                R"({"commit": ")" + fixed + R"(", "time": ")" + day(2) + R"(", "test_id": "tests/test_)" + t +
                ".py::test_" + t + R"(", "outcome": "passed", "message": ""})" + "\n";
  write_file(dir / "o.jsonl", outcomes);
  auto mined = run_spark({"mine", "--outcomes", "o.jsonl"}, dir.path());
  ASSERT_EQ(mined.exit_code, 0) << mined.err;
  EXPECT_NE(mined.err.find("tests/test_b.py at " + fixed.substr(0, 10) + ": a binary file"), std::string::npos)
      << mined.err;
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0);
  std::map<std::string, nlohmann::json> by_test;
  std::istringstream lines(exported.out);
  for (std::string line; std::getline(lines, line);) {
    auto c = nlohmann::json::parse(line);
    by_test[c["test_id"]] = c;
  }
  ASSERT_EQ(by_test.size(), 2u) << exported.out;
  EXPECT_FALSE(by_test["tests/test_a.py::test_a"]["faulty_lines"][0].contains("fix")) << exported.out;
  EXPECT_EQ(by_test["tests/test_c.py::test_c"]["faulty_lines"][0]["fix"], nlohmann::json::array({"    z = 2"}));
}

// A test renamed between runs starts a history of its own: the old name's runs are not counted for it.
TEST(triage, a_test_renamed_between_runs_has_a_history_of_its_own) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  write_file(dir / "tests" / "test_a.py", "def test_old():\n    assert 1 == 2\n");
  commit(dir, "old", 1);
  pytest_junit(dir, "r1.xml");
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path()).exit_code, 0);
  write_file(dir / "tests" / "test_a.py", "def test_new():\n    assert 1 == 2\n");
  commit(dir, "renamed", 2);
  pytest_junit(dir, "r2.xml");
  auto r2 = run_spark({"record", "--junit", "r2.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const auto run = nlohmann::json::parse(r2.out);
  const auto* renamed = localization_of(run, "tests/test_a.py::test_new");
  ASSERT_TRUE(renamed) << r2.out;
  EXPECT_EQ((*renamed)["history"]["runs"], 1) << (*renamed)["history"];
  EXPECT_EQ((*renamed)["history"]["failing_runs"], 1);
  EXPECT_EQ((*renamed)["history"]["first_failing_commit"], testing::head_sha(dir));
}

// A failure fixed outside the test code is kept as a product example: when the same failure comes back, the verdict
// says product, naming the example.
TEST(triage, a_failure_like_one_fixed_in_the_product_is_the_products) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\n");
  write_file(dir / "shop" / "__init__.py", "");
  write_file(dir / "shop" / "calc.py", "def add(a, b):\n    return a - b\n");
  write_file(dir / "tests" / "__init__.py", "");
  write_file(dir / "tests" / "test_calc.py",
             "from shop.calc import add\n\n\ndef test_add_prices():\n    assert add(2, 3) == 5\n");
  commit(dir, "add", 1);
  pytest_junit(dir, "r1.xml");
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path()).exit_code, 0);
  write_file(dir / "shop" / "calc.py", "def add(a, b):\n    return a + b\n");
  commit(dir, "fix add", 2);
  pytest_junit(dir, "r2.xml");
  auto r2 = run_spark({"record", "--junit", "r2.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_NE(r2.err.find("1 fixed outside the test code"), std::string::npos) << r2.err;
  // The product breaks the same way again.
  write_file(dir / "shop" / "calc.py", "def add(a, b):\n    return a - b  # faster\n");
  commit(dir, "speed up add", 3);
  pytest_junit(dir, "r3.xml");
  auto r3 = run_spark({"record", "--junit", "r3.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  const auto run = nlohmann::json::parse(r3.out);
  const auto* again = localization_of(run, "tests/test_calc.py::test_add_prices");
  ASSERT_TRUE(again) << r3.out;
  EXPECT_EQ((*again)["verdict"]["class"], "product") << (*again)["verdict"];
  EXPECT_NE((*again)["verdict"].dump().find("fixed outside the test code"), std::string::npos) << (*again)["verdict"];
}

// The issue's end-to-end story, with real git and real pytest at its defaults: a product change renames a method
// that two tests call; one test is fixed (learnt); the next failing test gets the same edit suggested, and applying
// it makes it pass. A test that fails and passes at the same commit is flaky and never learnt; a missing third-party
// module is the environment's; `history` counts the failing runs since the first failing commit.
TEST(triage, a_renamed_method_is_learnt_from_one_fix_suggested_for_the_next_test_and_passes_when_applied) {
  TempDir dir;
  git(dir, "init -q");
  write_file(dir / ".gitignore", "*.xml\n.spark/\n__pycache__/\nstate.txt\n");
  write_file(dir / "shop" / "__init__.py", "");
  write_file(dir / "shop" / "cart.py",
             "class Cart:\n    def __init__(self, prices):\n        self.prices = list(prices)\n\n"
             "    def total_price(self):\n        return sum(self.prices)\n");
  write_file(dir / "tests" / "__init__.py", "");
  write_file(dir / "tests" / "test_cart.py",
             "from shop.cart import Cart\n\n\ndef test_cart_total():\n    cart = Cart([1, 2, 3])\n"
             "    assert cart.total_price() == 6\n");
  write_file(dir / "tests" / "test_order.py",
             "from shop.cart import Cart\n\n\ndef test_order_total():\n    order_cart = Cart([2, 3])\n"
             "    shipping = 0\n    assert order_cart.total_price() + shipping == 5\n");
  // Fails on every other run at the same code: flaky.
  write_file(dir / "tests" / "test_flaky.py",
             "import pathlib\n\n\ndef test_sometimes():\n    state = pathlib.Path('state.txt')\n"
             "    n = int(state.read_text()) if state.exists() else 0\n    state.write_text(str(n + 1))\n"
             "    assert n % 2 == 1\n");
  commit(dir, "shop", 1);
  pytest_junit(dir, "r1.xml");  // test_sometimes fails (n = 0)
  ASSERT_EQ(run_spark({"record", "--junit", "r1.xml", "--no-localize"}, dir.path()).exit_code, 0);
  pytest_junit(dir, "r1b.xml");  // ... and passes at the same commit (n = 1)
  auto r1b = run_spark({"record", "--junit", "r1b.xml", "--no-localize"}, dir.path());
  ASSERT_EQ(r1b.exit_code, 0) << r1b.err;

  // The product renames total_price to total: both tests fail, at two commits in a row.
  write_file(dir / "shop" / "cart.py",
             "class Cart:\n    def __init__(self, prices):\n        self.prices = list(prices)\n\n"
             "    def total(self):\n        return sum(self.prices)\n");
  commit(dir, "rename total_price to total", 2);
  const std::string rename = testing::head_sha(dir);
  pytest_junit(dir, "r2.xml");
  write_file(dir / "NOTES", "x\n");
  commit(dir, "notes", 3);
  pytest_junit(dir, "r3.xml");
  // Recorded out of order: the newer commit's run first.
  ASSERT_EQ(run_spark({"record", "--junit", "r3.xml", "--no-localize"}, dir.path()).exit_code, 0);
  ASSERT_EQ(run_spark({"record", "--junit", "r2.xml", "--no-localize", "--commit", rename}, dir.path()).exit_code, 0);

  // One test is fixed.
  write_file(dir / "tests" / "test_cart.py",
             "from shop.cart import Cart\n\n\ndef test_cart_total():\n    cart = Cart([1, 2, 3])\n"
             "    assert cart.total() == 6\n");
  commit(dir, "fix test_cart for the rename", 4);
  pytest_junit(dir, "r4.xml");  // test_sometimes fails again here (n = 2): a new commit, not flaky there
  auto r4 = run_spark({"record", "--junit", "r4.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r4.exit_code, 0) << r4.err;
  const auto run = nlohmann::json::parse(r4.out);
  for (const auto& one : run)
    for (const auto& problem : testing::schema_problems(one, "localize.schema.json")) ADD_FAILURE() << problem;

  // The fix was learnt, with the fix's line kept.
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0);
  ASSERT_NE(exported.out.find("\"fix\":[\"    assert cart.total() == 6\"]"), std::string::npos) << exported.out;

  const auto* order = localization_of(run, "tests/test_order.py::test_order_total");
  ASSERT_TRUE(order) << r4.out;
  // history: failing since the rename, 3 failing runs (r2, r3, r4), last passed before it.
  const auto& h = (*order)["history"];
  EXPECT_EQ(h["failing_runs"], 3) << h;
  EXPECT_EQ(h["flaky"], false);
  EXPECT_EQ(h["first_failing_commit"], rename);
  // Only the product changed since the test last passed (its own file did not): the product's, named.
  EXPECT_EQ((*order)["verdict"]["class"], "product") << (*order)["verdict"];
  EXPECT_NE((*order)["verdict"]["reasons"][0].get<std::string>().find("only code outside its test code changed"),
            std::string::npos)
      << (*order)["verdict"];
  EXPECT_NE((*order)["verdict"]["reasons"][0].get<std::string>().find("shop/cart.py"), std::string::npos)
      << (*order)["verdict"];
  // The suggestion: the same rename on the line that still calls the old name.
  ASSERT_FALSE((*order)["suggestions"].empty()) << (*order).dump(2);
  const auto& sg = (*order)["suggestions"][0];
  EXPECT_EQ(sg["path"], "tests/test_order.py");
  EXPECT_EQ(sg["line"], 7);
  EXPECT_EQ(sg["change"]["old"], "total_price");
  EXPECT_EQ(sg["change"]["new"], "total");
  EXPECT_EQ(sg["new"], "    assert order_cart.total() + shipping == 5");
  // Applied (by the test, never by spark), the test passes.
  std::string code = testing::slurp(dir / "tests" / "test_order.py");
  ASSERT_EQ(code.find(sg["old"].get<std::string>()), code.find("    assert order_cart"));
  code.replace(code.find(sg["old"].get<std::string>()), sg["old"].get<std::string>().size(),
               sg["new"].get<std::string>());
  write_file(dir / "tests" / "test_order.py", code);
  const auto applied = testing::run_pytest({"tests/test_order.py"}, dir.path());
  EXPECT_EQ(applied.exit_code, 0) << applied.out;
  git(dir, "checkout -- tests/test_order.py");  // the runs below are commit 4's, not the edited work tree's

  // The flaky test: its failure at the first commit passed there too. Fail and pass again at one commit: reported
  // flaky, never learnt.
  pytest_junit(dir, "r5.xml");  // n = 3: passes at commit 4, where it failed in r4
  ASSERT_EQ(run_spark({"record", "--junit", "r5.xml", "--no-localize"}, dir.path()).exit_code, 0);
  pytest_junit(dir, "r6.xml");  // n = 4: fails again at commit 4
  auto r6 = run_spark({"record", "--junit", "r6.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r6.exit_code, 0) << r6.err;
  const auto run6 = nlohmann::json::parse(r6.out);
  const auto* flaky = localization_of(run6, "tests/test_flaky.py::test_sometimes");
  ASSERT_TRUE(flaky) << r6.out;
  EXPECT_EQ((*flaky)["verdict"]["class"], "flaky") << (*flaky)["verdict"];
  EXPECT_EQ((*flaky)["history"]["flaky"], true);
  EXPECT_GE((*flaky)["history"]["flaky_runs"], 2);
  exported = run_spark({"export"}, dir.path());
  EXPECT_EQ(exported.out.find("test_sometimes"), std::string::npos) << "a flaky failure was learnt";

  // The summary a person reads in CI.
  auto md = run_spark({"localize", "--junit", "r6.xml", "--format", "markdown"}, dir.path());
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| test | verdict |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("<b>flaky</b>"), std::string::npos) << md.out;

  // A test importing a third-party module this machine lacks (pytest stops at the collection error): the machine's.
  write_file(dir / "tests" / "test_http.py",
             "import leftpad_http_client_xyz\n\n\ndef test_get():\n    assert leftpad_http_client_xyz.get('/')\n");
  commit(dir, "an http test", 5);
  pytest_junit(dir, "r7.xml");
  auto r7 = run_spark({"record", "--junit", "r7.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r7.exit_code, 0) << r7.err;
  const auto run7 = nlohmann::json::parse(r7.out);
  const auto* http = localization_of(run7, "tests/test_http.py");
  ASSERT_TRUE(http) << r7.out;
  EXPECT_EQ((*http)["verdict"]["class"], "environment") << (*http)["verdict"];
  EXPECT_NE((*http)["verdict"]["reasons"][0].get<std::string>().find("leftpad_http_client_xyz"), std::string::npos);
  // A module of the repository's own that is missing is its code's fault, not the machine's.
  write_file(dir / "tests" / "test_http.py",
             "import shop.checkout\n\n\ndef test_get():\n    assert shop.checkout.pay()\n");
  commit(dir, "an own module", 6);
  pytest_junit(dir, "r8.xml");
  auto r8 = run_spark({"localize", "--junit", "r8.xml", "--format", "json"}, dir.path());
  ASSERT_EQ(r8.exit_code, 0) << r8.err;
  const auto run8 = nlohmann::json::parse(r8.out);
  const auto* own = localization_of(run8, "tests/test_http.py");
  ASSERT_TRUE(own) << r8.out;
  EXPECT_NE((*own)["verdict"]["class"], "environment") << (*own)["verdict"];
}

}  // namespace spark::SPARK_TEST_FILE_ID
