// The language-neutral structure layer: languages by extension and field, Java, JavaScript and TypeScript structures
// (statements, blocks, functions, classes, set-up), test ids and scopes per language, stack traces, the line-level
// fallback, and the bad inputs the issue names (syntax errors, a minified 2 MB file, an unknown language).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "code/brace_structure.h"
#include "code/code_structure.h"
#include "formats/error_message.h"
#include "code/structure_cache.h"
#include "code/scope.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using nlohmann::json;

const std::string kJava =
    "package com.example.shop;\n"                                        // 1
    "\n"                                                                 // 2
    "import org.junit.jupiter.api.Test;\n"                               // 3
    "\n"                                                                 // 4
    "class CartTest {\n"                                                 // 5
    "    private Cart cart;\n"                                           // 6
    "\n"                                                                 // 7
    "    @BeforeEach\n"                                                  // 8
    "    void setUp() {\n"                                               // 9
    "        cart = new Cart();\n"                                       // 10
    "    }\n"                                                            // 11
    "\n"                                                                 // 12
    "    @Test\n"                                                        // 13
    "    void totalCountsItems() {\n"                                    // 14
    "        int total = cart.total();\n"                                // 15
    "        if (total > 2) {\n"                                         // 16
    "            total = total - 1;\n"                                   // 17
    "        } else if (total < 0) {\n"                                  // 18
    "            throw new IllegalStateException(\"negative\");\n"       // 19
    "        } else {\n"                                                 // 20
    "            total++;\n"                                             // 21
    "        }\n"                                                        // 22
    "        check(total);\n"                                            // 23
    "        assertEquals(3, total);\n"                                  // 24
    "    }\n"                                                            // 25
    "\n"                                                                 // 26
    "    private void check(int n) {\n"                                  // 27
    "        assertTrue(n > 0);\n"                                       // 28
    "    }\n"                                                            // 29
    "\n"                                                                 // 30
    "    @Test\n"                                                        // 31
    "    void emptyCart() {\n"                                           // 32
    "        Runnable r = () -> {\n"                                     // 33
    "            cart.clear();\n"                                        // 34
    "        };\n"                                                       // 35
    "        assertEquals(0, cart.total());\n"                           // 36
    "    }\n"                                                            // 37
    "\n"                                                                 // 38
    "    @Nested\n"                                                      // 39
    "    class Inner {\n"                                                // 40
    "        @Test\n"                                                    // 41
    "        void nested() {\n"                                          // 42
    "            assertTrue(cart.isEmpty());\n"                          // 43
    "        }\n"                                                        // 44
    "    }\n"                                                            // 45
    "}\n";                                                               // 46

const std::string kJs =
    "const assert = require('node:assert');\n"              // 1
    "\n"                                                    // 2
    "function makeCart(items) {\n"                          // 3
    "  const cart = new Cart();\n"                          // 4
    "  for (const [name, n] of items) {\n"                  // 5
    "    cart.add(name, n);\n"                              // 6
    "  }\n"                                                 // 7
    "  return cart;\n"                                      // 8
    "}\n"                                                   // 9
    "\n"                                                    // 10
    "describe('Cart', () => {\n"                            // 11
    "  let cart;\n"                                         // 12
    "  beforeEach(() => {\n"                                // 13
    "    cart = makeCart([['apple', 3]]);\n"                // 14
    "  });\n"                                               // 15
    "\n"                                                    // 16
    "  test('counts items', () => {\n"                      // 17
    "    const total = cart.total();\n"                     // 18
    "    if (total > 2) {\n"                                // 19
    "      console.log('many');\n"                          // 20
    "    } else {\n"                                        // 21
    "      console.log('few');\n"                           // 22
    "    }\n"                                               // 23
    "    assert.strictEqual(total, 3);\n"                   // 24
    "  });\n"                                               // 25
    "\n"                                                    // 26
    "  describe('when empty', () => {\n"                    // 27
    "    it('has no total', async () => {\n"                // 28
    "      cart.clear();\n"                                 // 29
    "      expect(cart.total()).toBe(0);\n"                 // 30
    "    });\n"                                             // 31
    "  });\n"                                               // 32
    "});\n";                                                // 33

const FunctionInfo* function_named(const CodeStructure& s, const std::string& name) {
  for (const auto& f : s.functions)
    if (f.name == name) return &f;
  return nullptr;
}

ScopeRole role(const TestScope& scope, int line) { return scope.role[static_cast<size_t>(line - 1)]; }

TEST(language, is_chosen_by_extension_then_by_the_cases_field) {
  EXPECT_EQ(language_for("src/test/java/com/x/FooTest.java", ""), Language::java);
  EXPECT_EQ(language_for("tests/x.test.mjs", "python"), Language::javascript);  // the extension wins
  EXPECT_EQ(language_for("tests/x.test.tsx", ""), Language::typescript);
  EXPECT_EQ(language_for("tests/test_x.py", "java"), Language::python);
  EXPECT_EQ(language_for("tests/SomeTest", "java"), Language::java);
  EXPECT_EQ(language_for("tests/test_x", ""), Language::python);  // no extension, no field: what spark always read
  EXPECT_EQ(language_for("spec/cart_spec.rb", ""), Language::other);
  EXPECT_EQ(language_for("spec/cart_spec.rb", "ruby"), Language::other);
  EXPECT_EQ(parse_language("JS"), Language::javascript);
  EXPECT_FALSE(parse_language("ruby").has_value());
  EXPECT_EQ(comment_prefix(Language::java), "//");
  EXPECT_EQ(comment_prefix(Language::python), "#");
  EXPECT_EQ(kind_key(Language::python, "assign"), "assign");
  EXPECT_EQ(kind_key(Language::java, "assign"), "java:assign");
}

TEST(java_structure, maps_statements_blocks_functions_and_classes) {
  const CodeStructure s = analyze_code(kJava, Language::java);
  EXPECT_EQ(s.language, Language::java);
  EXPECT_FALSE(s.has_syntax_errors);
  ASSERT_EQ(s.line_count, 46);
  const auto at = [&](const std::vector<int>& v, int line) { return v[static_cast<size_t>(line - 1)]; };
  const auto kind = [&](int line) { return s.kind[static_cast<size_t>(line - 1)]; };
  EXPECT_EQ(kind(1), "package");
  EXPECT_EQ(kind(3), "import");
  EXPECT_EQ(kind(6), "field");
  EXPECT_EQ(kind(8), "decorator");
  EXPECT_EQ(kind(9), "def");
  EXPECT_EQ(kind(15), "assign_call");
  EXPECT_EQ(kind(16), "if");
  EXPECT_EQ(kind(18), "elif");
  EXPECT_EQ(kind(19), "raise");
  EXPECT_EQ(kind(20), "else");
  EXPECT_EQ(kind(22), "brace");
  EXPECT_EQ(kind(23), "call");
  EXPECT_EQ(kind(24), "assert_call");
  // Blocks: the branches are blocks of their own; the join after the `if` starts one.
  EXPECT_EQ(at(s.block, 15), 13);  // the function's first block starts at its annotation
  EXPECT_EQ(at(s.block, 16), 13);
  EXPECT_EQ(at(s.block, 17), 17);
  EXPECT_EQ(at(s.block, 19), 19);
  EXPECT_EQ(at(s.block, 21), 21);
  EXPECT_EQ(at(s.block, 23), 23);
  EXPECT_EQ(at(s.block, 24), 23);
  // The lambda's closing line is the rest of its statement, in the statement's block.
  EXPECT_EQ(at(s.statement, 35), 33);
  EXPECT_EQ(at(s.block, 35), at(s.block, 33));
  EXPECT_EQ(at(s.statement, 2), 0);  // blank
  // Functions: methods (def line = the name's line), the lambda nested in its method, a nested class's method.
  const auto* set_up = function_named(s, "setUp");
  ASSERT_NE(set_up, nullptr);
  EXPECT_TRUE(set_up->setup);
  EXPECT_TRUE(set_up->is_fixture());
  EXPECT_EQ(set_up->start, 8);
  EXPECT_EQ(set_up->def_line, 9);
  EXPECT_EQ(set_up->class_name, "CartTest");
  const auto* test = function_named(s, "totalCountsItems");
  ASSERT_NE(test, nullptr);
  EXPECT_FALSE(test->setup);
  EXPECT_EQ(test->decorators, std::vector<std::string>{"Test"});
  EXPECT_TRUE(test->calls.contains("check"));
  EXPECT_EQ(at(s.function, 24), 14);
  EXPECT_EQ(at(s.function, 34), 33);  // inside the lambda
  EXPECT_EQ(at(s.function, 36), 32);
  const auto* nested = function_named(s, "nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->class_name, "CartTest.Inner");
  EXPECT_EQ(function_named(s, "check")->params, std::vector<std::string>{"n"});
  ASSERT_EQ(s.classes.size(), 2u);
  EXPECT_EQ(s.classes[1].name, "Inner");
  EXPECT_EQ(unit_of(s, Level::function, 17), 14);
}

TEST(java_scope, takes_the_test_its_set_up_and_the_helpers_it_calls) {
  const CodeStructure s = analyze_code(kJava, Language::java);
  for (const std::string id : {"com.example.shop.CartTest#totalCountsItems", "com.example.shop.CartTest.totalCountsItems",
                               "CartTest > totalCountsItems()", "com.example.shop.CartTest#totalCountsItems()[1]"}) {
    SCOPED_TRACE(id);
    const TestScope scope = estimate_scope(s, id);
    ASSERT_TRUE(scope.found);
    EXPECT_EQ(scope.function_start, 13);
    EXPECT_EQ(scope.function_end, 25);
    EXPECT_EQ(role(scope, 15), ScopeRole::own);
    EXPECT_EQ(role(scope, 10), ScopeRole::support);  // @BeforeEach
    EXPECT_EQ(role(scope, 28), ScopeRole::support);  // a helper it calls
    EXPECT_EQ(role(scope, 34), ScopeRole::outside);  // another test
    EXPECT_EQ(role(scope, 6), ScopeRole::module);    // a field
  }
  const TestScope inner = estimate_scope(s, "com.example.shop.CartTest$Inner#nested");
  ASSERT_TRUE(inner.found);
  EXPECT_EQ(role(inner, 43), ScopeRole::own);
  EXPECT_EQ(role(inner, 10), ScopeRole::support);  // the outer class's @BeforeEach runs for @Nested tests too
  EXPECT_FALSE(estimate_scope(s, "com.example.shop.CartTest#missing").found);
}

TEST(java_test_id, names_the_file_by_package_and_top_level_class) {
  const auto p = parse_test_id("com.example.shop.CartTest$Inner#nested(int)[2]", Language::java);
  EXPECT_EQ(p.path, "com/example/shop/CartTest.java");
  EXPECT_EQ(p.classes, (std::vector<std::string>{"CartTest", "Inner"}));
  EXPECT_EQ(p.function, "nested");
  const auto surefire = parse_test_id("com.example.shop.CartTest.totalCountsItems", Language::java);
  EXPECT_EQ(surefire.path, "com/example/shop/CartTest.java");
  EXPECT_EQ(surefire.function, "totalCountsItems");
  EXPECT_EQ(language_of_test_id("com.example.shop.CartTest#nested"), Language::java);
  EXPECT_EQ(language_of_test_id("tests/x.test.js > suite > case"), Language::javascript);
  EXPECT_EQ(language_of_test_id("tests/test_x.py::TestC::test_f"), Language::python);
  const CodeStructure s = analyze_code(kJava, Language::java);
  EXPECT_EQ(test_id_at(s, kJava, "src/test/java/com/example/shop/CartTest.java", 34),
            "com.example.shop.CartTest#emptyCart");  // inside the lambda: the test around it
  EXPECT_EQ(test_id_at(s, kJava, "CartTest.java", 43), "com.example.shop.CartTest$Inner#nested");
  EXPECT_EQ(test_id_at(s, kJava, "CartTest.java", 1), "CartTest.java");
}

TEST(javascript_structure, reads_suites_tests_hooks_and_helpers) {
  const CodeStructure s = analyze_code(kJs, Language::javascript);
  EXPECT_FALSE(s.has_syntax_errors);
  const auto kind = [&](int line) { return s.kind[static_cast<size_t>(line - 1)]; };
  EXPECT_EQ(kind(11), "class");
  EXPECT_EQ(kind(17), "def");
  EXPECT_EQ(kind(18), "assign_call");
  EXPECT_EQ(kind(21), "else");
  EXPECT_EQ(kind(24), "assert_call");
  EXPECT_EQ(kind(30), "assert_call");  // expect(...).toBe(...)
  EXPECT_EQ(kind(25), "brace");
  const auto* test = function_named(s, "counts items");
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->class_name, "Cart");
  EXPECT_EQ(test->start, 17);
  EXPECT_EQ(test->end, 25);
  const auto* hook = function_named(s, "beforeEach");
  ASSERT_NE(hook, nullptr);
  EXPECT_TRUE(hook->setup);
  EXPECT_EQ(function_named(s, "has no total")->class_name, "Cart > when empty");
  EXPECT_EQ(function_named(s, "makeCart")->params, std::vector<std::string>{"items"});
  EXPECT_EQ(s.block[static_cast<size_t>(20 - 1)], 20);
  EXPECT_EQ(s.block[static_cast<size_t>(22 - 1)], 22);
  EXPECT_EQ(s.block[static_cast<size_t>(24 - 1)], 24);

  const TestScope scope = estimate_scope(s, "tests/cart.test.js > Cart > counts items");
  ASSERT_TRUE(scope.found);
  EXPECT_EQ(role(scope, 18), ScopeRole::own);
  EXPECT_EQ(role(scope, 14), ScopeRole::support);  // beforeEach of its suite
  EXPECT_EQ(role(scope, 6), ScopeRole::support);   // the helper beforeEach calls
  EXPECT_EQ(role(scope, 29), ScopeRole::outside);
  EXPECT_EQ(role(scope, 12), ScopeRole::module);
  const TestScope nested = estimate_scope(s, "tests/cart.test.js > Cart > when empty > has no total");
  ASSERT_TRUE(nested.found);
  EXPECT_EQ(role(nested, 29), ScopeRole::own);
  EXPECT_EQ(role(nested, 14), ScopeRole::support);  // the outer suite's hook runs for the inner suite's tests
  EXPECT_EQ(test_id_at(s, kJs, "tests/cart.test.js", 30), "tests/cart.test.js > Cart > when empty > has no total");
  const auto parts = parse_test_id("tests/cart.test.js > Cart > when empty > has no total", Language::javascript);
  EXPECT_EQ(parts.path, "tests/cart.test.js");
  EXPECT_EQ(parts.classes, (std::vector<std::string>{"Cart", "when empty"}));
  EXPECT_EQ(parts.function, "has no total");
}

TEST(typescript_structure, parses_types_and_the_tsx_dialect) {
  const std::string ts =
      "interface Item { name: string; n: number }\n"
      "const make = (items: Item[]): Cart => new Cart(items);\n"
      "describe('Cart', () => {\n"
      "  it('totals', async (): Promise<void> => {\n"
      "    const cart: Cart = make([{ name: 'a', n: 1 }]);\n"
      "    expect(cart.total()).toBe(1);\n"
      "  });\n"
      "});\n";
  const CodeStructure s = analyze_code(ts, Language::typescript, "tests/cart.test.ts");
  EXPECT_FALSE(s.has_syntax_errors);
  EXPECT_NE(function_named(s, "make"), nullptr);
  const auto* test = function_named(s, "totals");
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->class_name, "Cart");
  EXPECT_EQ(s.kind[4], "assign_call");
  const std::string tsx = "it('renders', () => {\n  const el = <Cart items={[]} />;\n  expect(el).toBeTruthy();\n});\n";
  EXPECT_FALSE(analyze_code(tsx, Language::typescript, "tests/cart.test.tsx").has_syntax_errors);
  EXPECT_TRUE(analyze_code(tsx, Language::typescript, "tests/cart.test.ts").has_syntax_errors);
}

TEST(code_structure, bad_inputs_still_map_every_line) {
  // A Java file with syntax errors: said, and every non-blank line still has a statement and a block.
  const std::string broken = "class Broken {\n    @Test\n    void t() {\n        int x = ;\n        assertEquals(1, x)\n    }\n}\n";
  const CodeStructure b = analyze_code(broken, Language::java);
  EXPECT_TRUE(b.has_syntax_errors);
  for (int l = 1; l <= b.line_count; ++l) {
    EXPECT_NE(b.statement[static_cast<size_t>(l - 1)], 0) << l;
    EXPECT_NE(b.block[static_cast<size_t>(l - 1)], 0) << l;
  }
  EXPECT_TRUE(estimate_scope(b, "Broken#t").found);
  // A minified one-line 2 MB JavaScript file, nested deeper than the walker goes: one line, one statement.
  std::string minified = "var x=";
  for (int i = 0; minified.size() < (1u << 20); ++i) minified += (i ? "+\"s" : "\"s") + std::to_string(i) + "\"";
  minified += ";";
  for (int i = 0; i < 2 * kMaxNesting; ++i) minified += "(function(){";
  minified += "1";
  for (int i = 0; i < 2 * kMaxNesting; ++i) minified += "})()";
  for (int i = 0; minified.size() < (2u << 20); ++i) minified += ";function f" + std::to_string(i) + "(a){return a+1}";
  const CodeStructure m = analyze_code(minified, Language::javascript);
  ASSERT_EQ(m.line_count, 1);
  EXPECT_EQ(m.statement[0], 1);
  EXPECT_EQ(m.block[0], 1);
  // A language spark has no grammar for: the line-level fallback, each line its own statement and block.
  const CodeStructure r = analyze_code("def test_total\n  expect(cart.total).to eq(3)\nend\n", Language::other);
  EXPECT_EQ(r.language, Language::other);
  EXPECT_EQ(r.statement, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(r.block, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(r.functions.empty());
}

TEST(structure_cache, keys_by_language_and_persists_it) {
  testing::TempDir dir;
  const std::string text = "const a = 1;\nexpect(a).toBe(1);\n";
  StructureCache cache;
  cache.persist_in(dir.path());
  EXPECT_EQ(cache.get(text, "tests/a.test.js")->language, Language::javascript);
  EXPECT_EQ(cache.get(text, "tests/a.test.ts")->language, Language::typescript);
  EXPECT_EQ(cache.get(text, "tests/a.rb")->language, Language::other);
  EXPECT_EQ(cache.get(text, "tests/a", "javascript")->language, Language::javascript);
  EXPECT_EQ(cache.parsed(), 3u);  // the same bytes as JavaScript twice: one parse
  const CodeStructure s = analyze_code(kJava, Language::java);
  const auto back = deserialize_structure(serialize_structure(s, 7), 7);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->language, Language::java);
  EXPECT_EQ(back->block, s.block);
  EXPECT_TRUE(function_named(*back, "setUp")->setup);
  StructureCache again;
  again.persist_in(dir.path());
  EXPECT_EQ(again.get(text, "tests/a.test.ts")->language, Language::typescript);
  EXPECT_EQ(again.loaded(), 1u);
}

TEST(stack_trace, java_frames_come_outermost_first_with_their_package_path) {
  const std::string trace =
      "org.opentest4j.AssertionFailedError: expected: <3> but was: <2>\n"
      "\tat org.junit.jupiter.api.AssertionUtils.fail(AssertionUtils.java:55)\n"
      "\tat org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:528)\n"
      "\tat app//com.example.shop.CartTest.check(CartTest.java:28)\n"
      "\tat app//com.example.shop.CartTest.totalCountsItems(CartTest.java:23)\n"
      "\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)\n"
      "\tat java.base/java.lang.reflect.Method.invoke(Method.java:568)\n"
      "Caused by: java.lang.IllegalStateException: negative\n"
      "\tat com.example.shop.Cart.total(Cart.java:12)\n"
      "\tat com.example.shop.CartTest$Inner.nested(CartTest.java:43)\n"
      "\t... 3 more\n";
  const auto frames = parse_traceback(trace);
  ASSERT_EQ(frames.size(), 7u);
  // The first run, turned around: the outermost (Method.invoke) first, the throwing frame last.
  EXPECT_EQ(frames[0].path, "java/lang/reflect/Method.java");
  EXPECT_EQ(frames[1].path, "com/example/shop/CartTest.java");
  EXPECT_EQ(frames[1].line, 23);
  EXPECT_EQ(frames[1].function, "totalCountsItems");
  EXPECT_EQ(frames[2].line, 28);
  EXPECT_EQ(frames[4].path, "org/junit/jupiter/api/AssertionUtils.java");
  // The cause's run after it, also outermost first.
  EXPECT_EQ(frames[5].path, "com/example/shop/CartTest.java");
  EXPECT_EQ(frames[5].line, 43);
  EXPECT_EQ(frames[6].path, "com/example/shop/Cart.java");
  EXPECT_TRUE(same_file(frames[1].path, "src/test/java/com/example/shop/CartTest.java"));
  EXPECT_FALSE(same_file(frames[1].path, "src/test/java/com/other/CartTest.java"));
}

TEST(stack_trace, javascript_frames_with_urls_and_without_internals) {
  const std::string trace =
      "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n2 !== 3\n\n"
      "    at TestContext.<anonymous> (file:///home/ci/shop/tests/cart.test.js:24:12)\n"
      "    at Test.runInAsyncScope (node:async_hooks:206:9)\n"
      "    at Test.run (node:internal/test_runner/test.js:631:25)\n"
      "    at async Promise.all (index 0)\n"
      "    at makeCart (tests/helpers.js:6:11)\n";
  const auto frames = parse_traceback(trace);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].path, "tests/helpers.js");
  EXPECT_EQ(frames[1].path, "/home/ci/shop/tests/cart.test.js");
  EXPECT_EQ(frames[1].line, 24);
  EXPECT_EQ(frames[1].function, "TestContext.<anonymous>");
  EXPECT_TRUE(same_file(frames[1].path, "tests/cart.test.js"));
  // A trace whose frames point into no known file parses; the localizer then says it has no failing statement.
  EXPECT_TRUE(parse_traceback("Error: boom\n    at <anonymous>\n    at node:internal/main:1:1\n").empty());
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
