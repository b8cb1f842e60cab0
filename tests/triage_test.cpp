// Issue 36: what a CI engineer asks before "which line" — suggested edits from similar cases' fixes (suggest.h).
#include <gtest/gtest.h>

#include "localizer.h"
#include "suggest.h"
#include "test_util.h"

namespace spark {

namespace {

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

}  // namespace spark
