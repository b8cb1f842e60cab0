#include "formats/failure_form.h"

#include <gtest/gtest.h>

#include <tuple>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(failure_form, pytest_assert_with_where_lines) {
  const auto f = parse_failure_form(
      "tests/test_cart.py:14: in test_total\n"
      "    assert cart.total() == 20\n"
      "E   assert 21 == 20\n"
      "E    +  where 21 = <bound method Cart.total of <Cart>>()\n");
  EXPECT_EQ(f.exception, "AssertionError");
  EXPECT_EQ(f.group, ExceptionGroup::assertion);
  EXPECT_TRUE(has(f.values, "21"));
  EXPECT_TRUE(has(f.values, "20"));
  EXPECT_TRUE(f.names.empty());
}

TEST(failure_form, pytest_string_diff_lines) {
  const auto f = parse_failure_form(
      "tests/test_x.py:9: in test_echo\n"
      "    assert out == \"hello\\n\"\n"
      "E   AssertionError: assert 'hallo\\n' == 'hello\\n'\n"
      "E     - hello\n"
      "E     ?  ^\n"
      "E     + hallo\n");
  EXPECT_EQ(f.exception, "AssertionError");
  EXPECT_EQ(f.message, "assert 'hallo\\n' == 'hello\\n'");
  EXPECT_TRUE(has(f.values, "'hallo\\n'"));
  EXPECT_TRUE(has(f.values, "'hello\\n'"));
  EXPECT_TRUE(has(f.values, "hello"));
  EXPECT_TRUE(has(f.values, "hallo"));
  EXPECT_FALSE(has(f.values, "^"));  // the "?" guide line is not a value
}

TEST(failure_form, unittest_lists_differ_and_first_differing_element) {
  const auto f = parse_failure_form(
      "tests/test_r.py:42: in test_basic\n"
      "    self.assertEqual(actual, expected)\n"
      "E   AssertionError: Lists differ: [(10, 20), (11, 21)] != [(10, 20), (12, 21)]\n"
      "E   \n"
      "E   First differing element 1:\n"
      "E   (11, 21)\n"
      "E   (12, 21)\n");
  EXPECT_TRUE(has(f.values, "[(10, 20), (11, 21)]"));
  EXPECT_TRUE(has(f.values, "[(10, 20), (12, 21)]"));
  EXPECT_TRUE(has(f.values, "(11, 21)"));
  EXPECT_TRUE(has(f.values, "(12, 21)"));
}

TEST(failure_form, comparison_inside_brackets_and_quotes_is_not_split) {
  const auto f = parse_failure_form("E   assert ['a == b', (1 != 2)] == []\n");
  ASSERT_EQ(f.values.size(), 3u);  // the two sides, and the quoted string
  EXPECT_EQ(f.values[0], "['a == b', (1 != 2)]");
  EXPECT_EQ(f.values[1], "[]");
}

TEST(failure_form, names_from_name_attribute_type_and_import_errors) {
  auto n = parse_failure_form("E   NameError: name 'totl' is not defined. Did you mean: 'total'?\n");
  EXPECT_EQ(n.group, ExceptionGroup::name);
  EXPECT_TRUE(has(n.names, "totl"));
  EXPECT_TRUE(has(n.suggestions, "total"));
  auto a = parse_failure_form("E   AttributeError: 'list' object has no attribute 'name'\n");
  EXPECT_EQ(a.names, std::vector<std::string>{"name"});  // the attribute, not the type
  auto t = parse_failure_form("E   TypeError: Cart.add() got an unexpected keyword argument 'qty'\n");
  EXPECT_EQ(t.group, ExceptionGroup::type);
  EXPECT_TRUE(has(t.names, "qty"));
  EXPECT_TRUE(has(t.names, "add"));
  auto i = parse_failure_form("E   ImportError: cannot import name 'parse_all' from 'pkg.util'\n");
  EXPECT_TRUE(has(i.names, "parse_all"));
  EXPECT_TRUE(has(i.names, "util"));
  auto k = parse_failure_form("E   KeyError: 'cost'\n");
  EXPECT_EQ(k.group, ExceptionGroup::lookup);
  EXPECT_TRUE(has(k.names, "cost"));
  EXPECT_TRUE(has(k.values, "'cost'"));
}

TEST(failure_form, the_last_exception_of_a_chain_wins) {
  const auto f = parse_failure_form(
      "src/x.py:682: in invoke\n"
      "E   KeyError: 'prog_name'\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "tests/test_c.py:39: in test_forward\n"
      "E   AttributeError: 'list' object has no attribute 'name'\n");
  EXPECT_EQ(f.exception, "AttributeError");
  EXPECT_EQ(f.names, std::vector<std::string>{"name"});
}

TEST(failure_form, native_traceback_and_dotted_exception_names) {
  const auto f = parse_failure_form(
      "Traceback (most recent call last):\n"
      "  File \"tests/test_v.py\", line 5, in test_parse\n"
      "    parse('x')\n"
      "click.exceptions.UsageError: No such option: --cont\n");
  EXPECT_EQ(f.exception, "UsageError");
  EXPECT_EQ(f.group, ExceptionGroup::other);
  EXPECT_EQ(f.message, "No such option: --cont");
}

TEST(failure_form, nodes_error_codes_after_the_exception_name) {
  // node's assert module: "AssertionError [ERR_ASSERTION]: …" is an assertion, as Python's AssertionError is.
  const std::string frames =
      "    at TestContext.<anonymous> (file:///home/ci/shop/tests/cart.test.js:24:12)\n"
      "    at Test.runInAsyncScope (node:async_hooks:206:9)\n";
  const std::vector<std::tuple<std::string, ExceptionGroup, std::string>> read = {
      {"AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n2 !== 3\n\n", ExceptionGroup::assertion,
       "Expected values to be strictly equal:"},
      {"TypeError [ERR_INVALID_ARG_TYPE]: The \"path\" argument must be of type string\n", ExceptionGroup::type,
       "The \"path\" argument must be of type string"}};
  for (const auto& [text, group, message] : read) {
    const auto f = parse_failure_form(text + frames);
    EXPECT_EQ(f.group, group) << text;
    EXPECT_EQ(f.message, message) << text;
  }
}

TEST(failure_form, text_without_an_exception_reads_nothing) {
  const auto f = parse_failure_form("something went wrong\nno idea what\n");
  EXPECT_EQ(f.group, ExceptionGroup::none);
  EXPECT_TRUE(f.values.empty() && f.names.empty());
  EXPECT_EQ(parse_failure_form("").group, ExceptionGroup::none);
}

TEST(failure_form, a_ten_megabyte_message_is_read_with_bounded_values) {
  std::string huge = "E   AssertionError: assert [";
  while (huge.size() < 10u * 1024 * 1024) huge += "1234567, ";
  huge += "0] == []\n";
  for (int i = 0; i < 100; ++i) huge += "E   - " + std::to_string(i) + "\n";
  const auto f = parse_failure_form(huge);
  EXPECT_EQ(f.exception, "AssertionError");
  EXPECT_LE(f.values.size(), FailureForm::kMaxValues);
  for (const auto& v : f.values) EXPECT_LE(v.size(), FailureForm::kMaxValueLength);
}

TEST(failure_form, literal_tokens_and_canonical_code) {
  EXPECT_EQ(canonical_code("  x  =  \"a\"\t+ 'b' "), "x = 'a' + 'b'");
  const auto t = literal_tokens("record = Record((\"1234\", '45'), 7, 12.5, x2)  # '99'");
  EXPECT_EQ(t, (std::vector<std::string>{"'1234'", "'45'", "12.5"}));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID

namespace spark::SPARK_TEST_FILE_ID {
namespace {

TEST(failure_form, generic_checks_and_names_in_reprs) {
  auto none = parse_failure_form("E   assert None is not None\n");
  EXPECT_TRUE(none.generic_check);
  auto exit = parse_failure_form(
      "E   AssertionError: \nE   assert 1 == 0\nE    +  where 1 = <Result AttributeError('echo_line')>.exit_code\n");
  EXPECT_TRUE(exit.generic_check);
  EXPECT_TRUE(has(exit.names, "echo_line"));
  auto truth = parse_failure_form("E   assert not [1]\n");
  EXPECT_TRUE(truth.generic_check);
  auto specific = parse_failure_form("E   assert 21 == 20\n");
  EXPECT_FALSE(specific.generic_check);
  auto quoted = parse_failure_form("E   click.exceptions.NoSuchOption: No such option '--foo'.\n");
  EXPECT_TRUE(has(quoted.values, "'--foo'"));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
