#include "localizer/data_flow.h"

#include <gtest/gtest.h>

#include "base/text.h"
#include "code/python_structure.h"
#include "code/scope.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(def_use, assignments_loops_with_and_mutating_calls) {
  auto a = def_use("w, h = 2, size");
  EXPECT_TRUE(has(a.defs, "w") && has(a.defs, "h"));
  EXPECT_TRUE(has(a.uses, "size"));
  auto sub = def_use("table[key] = value  # a comment naming other");
  EXPECT_EQ(sub.defs, std::vector<std::string>{"table"});
  EXPECT_TRUE(has(sub.uses, "key") && has(sub.uses, "value"));
  EXPECT_FALSE(has(sub.uses, "other"));
  auto aug = def_use("total += price * 2");
  EXPECT_TRUE(has(aug.defs, "total") && has(aug.uses, "total") && has(aug.uses, "price"));
  auto attr = def_use("self.inventory = Inventory()");
  EXPECT_EQ(attr.defs, std::vector<std::string>{"self.inventory"});
  auto loop = def_use("for item in items:");
  EXPECT_EQ(loop.defs, std::vector<std::string>{"item"});
  EXPECT_TRUE(has(loop.uses, "items"));
  auto with = def_use("with open(path) as handle:");
  EXPECT_EQ(with.defs, std::vector<std::string>{"handle"});
  EXPECT_TRUE(has(with.uses, "path"));
  auto call = def_use("self.inventory.add(\"gear\", 5, price)");
  EXPECT_EQ(call.defs, std::vector<std::string>{"self.inventory"});
  EXPECT_TRUE(has(call.uses, "price"));
  EXPECT_FALSE(has(call.uses, "gear"));  // string contents are not names
  // Not assignments: comparisons, keyword arguments.
  EXPECT_TRUE(def_use("assert result == 20").defs.empty());
  EXPECT_TRUE(def_use("check(x, strict=True)").defs.empty());
  EXPECT_TRUE(def_use("y = f(a=1) == 3").defs == std::vector<std::string>{"y"});
}

std::map<int, int> slice_of(const std::string& source, int stop_line, const std::string& test_id = "") {
  const CodeStructure s = analyze_python(source);
  const auto lines = split_lines(source);
  std::vector<ScopeRole> roles;
  if (!test_id.empty()) roles = estimate_scope(s, test_id).role;
  return backward_slice(s, std::vector<std::string_view>(lines.begin(), lines.end()), stop_line, roles);
}

TEST(def_use, java_and_javascript_declarations_loops_and_calls) {
  auto decl = def_use("        final Map<String, Integer> counts = cart.counts(); // a comment naming other", Language::java);
  EXPECT_EQ(decl.defs, std::vector<std::string>{"counts"});
  EXPECT_TRUE(has(decl.uses, "cart.counts"));
  EXPECT_FALSE(has(decl.uses, "other"));
  auto typed = def_use("int expected = 3;", Language::java);
  EXPECT_EQ(typed.defs, std::vector<std::string>{"expected"});
  auto object = def_use("Cart cart = new Cart();", Language::java);
  EXPECT_EQ(object.defs, std::vector<std::string>{"cart"});
  EXPECT_FALSE(has(object.uses, "new"));
  auto loop = def_use("for (String item : cart.items()) {", Language::java);
  EXPECT_EQ(loop.defs, std::vector<std::string>{"item"});
  EXPECT_TRUE(has(loop.uses, "cart.items"));
  auto call = def_use("cart.add(\"pear\", 2);", Language::java);
  EXPECT_EQ(call.defs, std::vector<std::string>{"cart"});
  auto field = def_use("this.total = 0;", Language::java);
  EXPECT_EQ(field.defs, std::vector<std::string>{"this.total"});
  auto assertion = def_use("assertEquals(expected, cart.total());", Language::java);
  EXPECT_TRUE(assertion.defs.empty());
  EXPECT_TRUE(has(assertion.uses, "expected"));
  auto js = def_use("const { total, items: list } = summarize(cart);", Language::javascript);
  EXPECT_TRUE(has(js.defs, "total") && has(js.defs, "list")) << js.defs.size();
  EXPECT_FALSE(has(js.defs, "items"));
  auto arrow = def_use("cart.items.forEach((x) => seen.push(x));", Language::javascript);
  EXPECT_EQ(arrow.defs, std::vector<std::string>{"cart.items"});  // the arrow's `=` is not an assignment
  auto of = def_use("for (const [name, n] of entries) {", Language::typescript);
  EXPECT_TRUE(has(of.uses, "entries"));
  auto expectation = def_use("expect(cart.total()).toBe(expected);", Language::javascript);
  EXPECT_TRUE(expectation.defs.empty());
  EXPECT_TRUE(has(expectation.uses, "expected"));
}

TEST(backward_slice, follows_names_back_through_the_test_function) {
  const std::string source =
      "def test_area():\n"            // 1
      "    unrelated = 5\n"           // 2
      "    w, h = 2, 4\n"             // 3  faulty: hop 2 (defines w, h used by line 4)
      "    shape = make(w, h)\n"      // 4  hop 1
      "    items = []\n"              // 5  hop 2 (items used by the append)
      "    items.append(shape)\n"     // 6  hop 1? no: items is not used by line 7
      "    result = area(shape)\n"    // 7  hop 1
      "    assert result == 6\n";     // 8  the failing line
  const auto slice = slice_of(source, 8);
  EXPECT_EQ(slice.count(2), 0u);
  EXPECT_EQ(slice.at(7), 1);
  EXPECT_EQ(slice.at(4), 2);
  EXPECT_EQ(slice.at(3), 3);
  EXPECT_EQ(slice.count(5), 0u);
  EXPECT_EQ(slice.count(6), 0u);
  EXPECT_EQ(slice.count(8), 0u);
}

TEST(backward_slice, reaches_self_attributes_set_up_in_setup_method) {
  const std::string source =
      "class TestInventory:\n"                         // 1
      "    def setup_method(self):\n"                  // 2
      "        self.inventory = Inventory()\n"         // 3  hop 1 (the failing line uses self.inventory itself)
      "        self.other = 1\n"                       // 4
      "        self.inventory.add('gear', 2, 1.5)\n"   // 5  hop 1
      "\n"
      "    def test_total(self):\n"                    // 7
      "        self.inventory.add('gear', 5, 2.5)\n"   // 8  hop 1
      "        assert self.inventory.total() == 7.5\n";  // 9 the failing line
  const auto slice = slice_of(source, 9, "tests/test_x.py::TestInventory::test_total");
  EXPECT_EQ(slice.at(8), 1);
  EXPECT_EQ(slice.at(3), 1);
  EXPECT_EQ(slice.at(5), 1);
  EXPECT_EQ(slice.count(4), 0u);
}

TEST(backward_slice, goes_into_the_fixtures_the_test_names_and_the_helpers_it_calls) {
  const std::string source =
      "import pytest\n"                        // 1
      "\n"
      "@pytest.fixture\n"                      // 3
      "def cart():\n"                          // 4
      "    items = ['pen', 'ink']\n"           // 5  hop 2: defines what the fixture returns
      "    other = 3\n"                        // 6
      "    return Cart(items)\n"               // 7  hop 1: the fixture's value, a parameter the failing line uses
      "\n"
      "def price_of(name):\n"                  // 9
      "    table = {'pen': 2}\n"               // 10 hop 3
      "    return table[name]\n"               // 11 hop 2: the helper's value
      "\n"
      "def test_total(cart):\n"                // 13
      "    expected = price_of('pen')\n"       // 14 hop 1
      "    assert cart.total() == expected\n"; // 15 the failing line
  const auto slice = slice_of(source, 15, "tests/test_x.py::test_total");
  EXPECT_EQ(slice.at(14), 1);
  EXPECT_EQ(slice.at(7), 1);
  EXPECT_EQ(slice.at(5), 2);
  EXPECT_EQ(slice.count(6), 0u);
  EXPECT_EQ(slice.at(11), 2);
  EXPECT_EQ(slice.at(10), 3);
}

TEST(backward_slice, bad_input_gives_an_empty_slice_not_a_crash) {
  EXPECT_TRUE(slice_of("def test_x(:\n    assert (\n", 2).empty());  // a syntax error: nothing defines anything
  EXPECT_TRUE(slice_of("x = 1\n", 5).empty());    // a line past the end
  EXPECT_TRUE(slice_of("", 1).empty());
  EXPECT_TRUE(slice_of("assert y\n", 1).empty());  // nothing before it
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
