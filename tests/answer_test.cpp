#include "localizer/answer.h"

#include <gtest/gtest.h>

#include <map>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

// Lines 1..20 exist; 5 and 10 are blank.
bool is_code(int id) { return id != 5 && id != 10; }

std::vector<int> ids(std::string_view answer, int max_id = 20) { return parse_answer(answer, max_id, is_code).ids; }

TEST(answer, json_in_the_requested_format) {
  const auto a =
      parse_answer(R"({"faulty_lines": [{"line": 12, "code": "x = 1"}, {"line": 3, "code": "y"}]})", 20, is_code);
  EXPECT_EQ(a.format, "json");
  EXPECT_EQ(a.ids, (std::vector<int>{12, 3}));
}

TEST(answer, json_variants_fences_and_prose_around) {
  EXPECT_EQ(ids("Here you go:\n```json\n[{\"line_number\": 7}, {\"line_number\": 2}]\n```\nHope it helps"),
            (std::vector<int>{7, 2}));
  EXPECT_EQ(ids("[4, 8, 15]"), (std::vector<int>{4, 8, 15}));
  EXPECT_EQ(ids(R"({"result": [{"id": "line 9"}, {"id": 11}]})"), (std::vector<int>{9, 11}));
  EXPECT_EQ(ids("<think>line 1 looks fine, maybe line 2</think>\n{\"faulty_lines\": [{\"line\": 6}]}"),
            (std::vector<int>{6}));
}

TEST(answer, free_text_forms) {
  EXPECT_EQ(ids("line 12: assert x == 1\nLine 3: y = 2"), (std::vector<int>{12, 3}));
  EXPECT_EQ(ids("1. Line 14\n2. Line 2\n3. line 7"), (std::vector<int>{14, 2, 7}));
  EXPECT_EQ(ids("1. 14: foo()\n2. 2: bar()"), (std::vector<int>{14, 2}));
  EXPECT_EQ(ids("12. assert x"), (std::vector<int>{12}));  // the number is the id, not a list's numbering
  EXPECT_EQ(ids("- L8\n- L9"), (std::vector<int>{8, 9}));
  EXPECT_EQ(ids("lines 11-13"), (std::vector<int>{11, 12, 13}));
  EXPECT_EQ(ids("3, 17, 6"), (std::vector<int>{3, 17, 6}));
}

TEST(answer, the_marker_echoed_back_is_ignored) {
  const auto a = parse_answer("17: x = compute()  # !!! high likelihood of being faulty !!!\n4: y = 1", 20, is_code);
  EXPECT_EQ(a.ids, (std::vector<int>{17, 4}));
}

TEST(answer, out_of_range_duplicates_and_blank_lines_are_dropped_and_counted) {
  const auto a = parse_answer(
      R"({"faulty_lines": [{"line": 99}, {"line": 3}, {"line": 3}, {"line": 0}, {"line": 5}, {"line": 4}]})", 20,
      is_code);
  EXPECT_EQ(a.ids, (std::vector<int>{3, 4}));
  EXPECT_EQ(a.out_of_range, 2u);
  EXPECT_EQ(a.duplicates, 1u);
  EXPECT_EQ(a.not_code, 1u);
}

TEST(answer, only_out_of_range_ids_give_nothing) {
  const auto a = parse_answer("line 40\nline 41", 20, is_code);
  EXPECT_TRUE(a.ids.empty());
  EXPECT_EQ(a.out_of_range, 2u);
}

TEST(answer, code_quoted_without_a_number_is_found_by_its_text) {
  const std::map<std::string, int> code = {{"assert total == 3", 9}};
  const auto by_code = [&](std::string_view c) -> std::optional<int> {
    auto it = code.find(std::string(c));
    return it == code.end() ? std::nullopt : std::optional<int>(it->second);
  };
  EXPECT_EQ(parse_answer("`assert total == 3`", 20, is_code, by_code).ids, (std::vector<int>{9}));
  EXPECT_EQ(parse_answer(R"([{"code": "assert total == 3  # !!! high likelihood of being faulty !!!"}])", 20, is_code,
                         by_code)
                .ids,
            (std::vector<int>{9}));
}

TEST(answer, a_cut_off_json_answer_still_yields_its_complete_entries) {
  EXPECT_EQ(ids(R"({"faulty_lines": [{"line": 12, "code": "x"}, {"line": 3, "code": "y = )"),
            (std::vector<int>{12, 3}));
}

// llama.cpp's grammar-constrained answer (keys in the schema's order, code first; line breaks between a key and its
// value), cut at max_tokens inside the third object: the two complete objects count, read as JSON.
TEST(answer, a_structured_answer_cut_off_yields_the_objects_it_completed) {
  const std::string cut =
      "{\n\n  \"faulty_lines\": [ {\n\n  \"code\":\" pounded \\\" pounded\", \"line\"\n\n  :17 },\n"
      "  {\n  \"code\":\"has}]\", \"line\"\n\n  : 4 },{ \"code\":\"hashashas";
  const ParsedAnswer a = parse_answer(cut, 20, is_code);
  EXPECT_EQ(a.ids, (std::vector<int>{17, 4}));
  EXPECT_EQ(a.format, "json");
  // A complete answer is read whole, as before; an unbalanced one gives nothing from this rule.
  EXPECT_EQ(ids(R"({"faulty_lines": [{"code": "x", "line": 2}]} and then {"line": 9})"), (std::vector<int>{2, 9}));
  EXPECT_TRUE(ids("{\"faulty_lines\": [{\"code\": \"x\", \"line\"\n: 2]").empty());
  // The unfinished rest counts only as a "line" key: code in it names no line ("l2 = compute(l1", "lineno = 4").
  EXPECT_EQ(
      ids("{\"faulty_lines\": [{\"line\": 7, \"code\": \"x\"}, {\"line\": 9, \"code\": \"l2 = compute(l1, lineno = 4"),
      (std::vector<int>{7, 9}));
  // A cut answer whose complete objects name only rejected ids counts them once, and the text rules answer.
  const ParsedAnswer rejected = parse_answer("[{\"line\": 99}, {\"line\": 5}, {\"li", 20, is_code);
  EXPECT_EQ(rejected.out_of_range + rejected.not_code, 2u);
}

TEST(answer, nonsense_and_huge_ranges) {
  EXPECT_TRUE(ids("I cannot determine the fault.").empty());
  EXPECT_EQ(parse_answer("I cannot", 20, is_code).format, "none");
  EXPECT_EQ(ids("lines 1-100000", 200000), (std::vector<int>{1}));  // a range that names nothing in particular
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
