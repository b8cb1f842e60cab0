// End-to-end per language: the real `spark` binary imports labelled Java and JavaScript cases, indexes them and
// localizes a new failure of each from its stack trace, asserting on --format json; a test file of a language spark
// has no grammar for is localized line by line and said so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark {
namespace {

using nlohmann::json;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

const std::string kJavaPath = "src/test/java/com/example/shop/CartTest.java";
const std::string kJava =
    "package com.example.shop;\n"                            // 1
    "\n"                                                     // 2
    "import org.junit.jupiter.api.Test;\n"                   // 3
    "\n"                                                     // 4
    "class CartTest {\n"                                     // 5
    "    private Cart cart;\n"                               // 6
    "\n"                                                     // 7
    "    @BeforeEach\n"                                      // 8
    "    void setUp() {\n"                                   // 9
    "        cart = new Cart();\n"                           // 10
    "        cart.add(\"apple\", 2);\n"                      // 11
    "    }\n"                                                // 12
    "\n"                                                     // 13
    "    @Test\n"                                            // 14
    "    void totalCountsItems() {\n"                        // 15
    "        int expected = 3;\n"                            // 16
    "        int total = cart.total();\n"                    // 17
    "        assertEquals(expected, total);\n"               // 18
    "    }\n"                                                // 19
    "\n"                                                     // 20
    "    @Test\n"                                            // 21
    "    void emptyCart() {\n"                               // 22
    "        cart.clear();\n"                                // 23
    "        assertEquals(0, cart.total());\n"               // 24
    "    }\n"                                                // 25
    "}\n";                                                   // 26

const std::string kJavaTrace =
    "org.opentest4j.AssertionFailedError: expected: <3> but was: <2>\n"
    "\tat org.junit.jupiter.api.AssertionUtils.fail(AssertionUtils.java:151)\n"
    "\tat org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:528)\n"
    "\tat app//com.example.shop.CartTest.totalCountsItems(CartTest.java:18)\n"
    "\tat java.base/java.lang.reflect.Method.invoke(Method.java:568)\n";

const std::string kJsPath = "tests/cart.test.js";
const std::string kJs =
    "const test = require('node:test');\n"                   // 1
    "const assert = require('node:assert');\n"               // 2
    "const { Cart } = require('../src/cart');\n"             // 3
    "\n"                                                     // 4
    "test.describe('Cart', () => {\n"                        // 5
    "  let cart;\n"                                          // 6
    "  test.beforeEach(() => {\n"                            // 7
    "    cart = new Cart();\n"                               // 8
    "    cart.add('apple', 2);\n"                            // 9
    "  });\n"                                                // 10
    "\n"                                                     // 11
    "  test('counts items', () => {\n"                       // 12
    "    const expected = 3;\n"                              // 13
    "    assert.strictEqual(cart.total(), expected);\n"      // 14
    "  });\n"                                                // 15
    "});\n";                                                 // 16

const std::string kJsTrace =
    "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n2 !== 3\n\n"
    "    at TestContext.<anonymous> (file:///home/ci/shop/tests/cart.test.js:14:12)\n"
    "    at Test.runInAsyncScope (node:async_hooks:206:9)\n"
    "    at Test.run (node:internal/test_runner/test.js:631:25)\n";

json labelled(const std::string& id, const std::string& test_id, const std::string& language, const std::string& path,
              const std::string& content, int faulty, const std::string& error, int day) {
  return {{"id", id},
          {"project", "demo/shop"},
          {"test_id", test_id},
          {"language", language},
          {"failure_time", "2026-01-0" + std::to_string(day) + "T00:00:00Z"},
          {"error_message", error},
          {"files", {{{"path", path}, {"content", content}}}},
          {"faulty_lines", {{{"path", path}, {"line", faulty}}}},
          {"source", "seeded"}};
}

// A knowledge base of earlier Java and JavaScript failures whose faulty line was the expected value.
struct Workspace {
  TempDir dir;
  Workspace() {
    std::string jsonl;
    for (int i = 1; i <= 3; ++i) {
      jsonl += labelled("java" + std::to_string(i), "com.example.shop.CartTest#totalCountsItems", "java", kJavaPath,
                        kJava, 16, kJavaTrace, i)
                   .dump() +
               "\n";
      jsonl += labelled("js" + std::to_string(i), kJsPath + " > Cart > counts items", "javascript", kJsPath, kJs, 13,
                        kJsTrace, i + 3)
                   .dump() +
               "\n";
    }
    write_file(dir / "cases.jsonl", jsonl);
    auto imp = run_spark({"import", "cases.jsonl"}, dir.path());
    EXPECT_EQ(imp.exit_code, 0) << imp.err;
    auto idx = run_spark({"index"}, dir.path());
    EXPECT_EQ(idx.exit_code, 0) << idx.err;
  }
};

bool ranks(const json& j, int line) {
  for (const auto& e : j["ranked"])
    if (e["line"] == line) return true;
  return false;
}

TEST(languages, a_java_failure_is_localized_from_its_stack_trace) {
  Workspace w;
  write_file(w.dir / kJavaPath, kJava);
  // Not the same failure as a stored one (an exact duplicate is kept out of its own search): another value.
  std::string trace = kJavaTrace;
  trace.replace(trace.find("<2>"), 3, "<1>");
  write_file(w.dir / "failure.txt", trace);
  auto r = run_spark({"localize", "--test", kJavaPath, "--error", "failure.txt", "-k", "3", "--format", "json"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["test_id"], "com.example.shop.CartTest#totalCountsItems");  // from the trace and the package line
  ASSERT_FALSE(j["annotations"].empty());
  EXPECT_EQ(j["annotations"][0]["line"], 16);
  EXPECT_EQ(j["ranked"][0]["line"], 16);
  EXPECT_TRUE(ranks(j, 18));  // the failing statement
  for (const auto& e : j["ranked"]) {
    EXPECT_GE(e["line"].get<int>(), 14) << e.dump();  // nothing from another test
    EXPECT_LE(e["line"].get<int>(), 19) << e.dump();
  }
  for (const auto& n : j["notes"]) EXPECT_EQ(n.get<std::string>().find("Python"), std::string::npos) << n;
  // The text report marks the annotated line with a Java comment.
  auto text = run_spark({"localize", "--test", kJavaPath, "--error", "failure.txt", "-k", "3", "--color", "never"},
                        w.dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("// !!! high likelihood of being faulty !!!"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("# !!! high"), std::string::npos) << text.out;
}

TEST(languages, a_javascript_failure_is_localized_from_its_stack_trace) {
  Workspace w;
  write_file(w.dir / kJsPath, kJs);
  std::string trace = kJsTrace;
  trace.replace(trace.find("2 !== 3"), 7, "1 !== 3");
  write_file(w.dir / "failure.txt", trace);
  auto r = run_spark({"localize", "--test", kJsPath, "--error", "failure.txt", "-k", "3", "--format", "json"},
                     w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["test_id"], kJsPath + " > Cart > counts items");
  ASSERT_FALSE(j["annotations"].empty());
  EXPECT_EQ(j["annotations"][0]["line"], 13);
  EXPECT_EQ(j["ranked"][0]["line"], 13);
  EXPECT_TRUE(ranks(j, 14));
}

TEST(languages, a_test_file_of_an_unknown_language_is_ranked_line_by_line_and_said_so) {
  TempDir dir;
  write_file(dir / "spec" / "cart_spec.rb",
             "describe Cart do\n  it 'totals' do\n    expect(Cart.new.total).to eq(3)\n  end\nend\n");
  write_file(dir / "failure.txt", "Failure/Error: expect(Cart.new.total).to eq(3)\n  expected: 3\n       got: 2\n");
  auto r = run_spark({"localize", "--test", "spec/cart_spec.rb", "--error", "failure.txt", "-k", "2", "--format", "json"},
                     dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["ranked"].size(), 2u);
  bool said = false;
  for (const auto& n : j["notes"])
    said = said || n.get<std::string>().find("spark reads no structure in this language") != std::string::npos;
  EXPECT_TRUE(said) << j["notes"].dump();
}

}  // namespace
}  // namespace spark
