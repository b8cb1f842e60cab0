// End-to-end per language: the real `spark` binary imports labelled Java and JavaScript cases, indexes them and
// localizes a new failure of each from its stack trace, asserting on --format json; a test file of a language spark
// has no grammar for is localized line by line and said so; and the lifecycle of a real Java project (javac and
// JUnit 5's console launcher from Debian) and of a real JavaScript project (Jest with jest-junit from the npm
// registry), both installed by scripts/setup.sh --tests: record → fix → learned case → the next failure localized
// with it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
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

// Localizes a new failure of `path` (its trace with `from` replaced by `to`: not an exact duplicate of a stored
// failure, which is kept out of its own search) in the workspace; checks the id made from the trace, the annotated
// line (the stored cases' faulty line) ranked first, and the failing statement among the ranked.
json localize_new_failure(const Workspace& w, const std::string& path, const std::string& content, std::string trace,
                          const std::string& from, const std::string& to, const std::string& test_id, int annotated,
                          int failing) {
  write_file(w.dir / path, content);
  trace.replace(trace.find(from), from.size(), to);
  write_file(w.dir / "failure.txt", trace);
  auto r = run_spark({"localize", "--test", path, "--error", "failure.txt", "-k", "3", "--format", "json"},
                     w.dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return json::object();
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["test_id"], test_id);
  EXPECT_FALSE(j["annotations"].empty()) << r.out;
  if (!j["annotations"].empty()) {
    EXPECT_EQ(j["annotations"][0]["line"], annotated);
  }
  EXPECT_EQ(j["ranked"][0]["line"], annotated);
  EXPECT_TRUE(ranks(j, failing)) << r.out;
  for (const auto& n : j["notes"]) EXPECT_EQ(n.get<std::string>().find("Python"), std::string::npos) << n;
  return j;
}

TEST(languages, a_java_failure_is_localized_from_its_stack_trace) {
  Workspace w;
  // The test id from the trace and the package line.
  const json j = localize_new_failure(w, kJavaPath, kJava, kJavaTrace, "<2>", "<1>",
                                      "com.example.shop.CartTest#totalCountsItems", 16, 18);
  for (const auto& e : j["ranked"]) {
    EXPECT_GE(e["line"].get<int>(), 14) << e.dump();  // nothing from another test
    EXPECT_LE(e["line"].get<int>(), 19) << e.dump();
  }
  // The text report marks the annotated line with a Java comment.
  auto text = run_spark({"localize", "--test", kJavaPath, "--error", "failure.txt", "-k", "3", "--color", "never"},
                        w.dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("// !!! high likelihood of being faulty !!!"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("# !!! high"), std::string::npos) << text.out;
}

TEST(languages, a_javascript_failure_is_localized_from_its_stack_trace) {
  Workspace w;
  localize_new_failure(w, kJsPath, kJs, kJsTrace, "2 !== 3", "1 !== 3", kJsPath + " > Cart > counts items", 13, 14);
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
  EXPECT_EQ(j["language"], "other");
}

// --- A real Java project -----------------------------------------------------------------------------------------

const std::string kCartJava =
    "package com.example.shop;\n\n"
    "import java.util.LinkedHashMap;\nimport java.util.Map;\n\n"
    "public class Cart {\n"
    "    private final Map<String, Integer> items = new LinkedHashMap<>();\n\n"
    "    public void add(String name, int count) {\n        items.merge(name, count, Integer::sum);\n    }\n\n"
    "    public int total() {\n        return items.values().stream().mapToInt(Integer::intValue).sum();\n    }\n}\n";

// Line 20 holds the expected total; `expected` and `pear` vary it.
std::string cart_test(int expected, int pear) {
  return "package com.example.shop;\n"                                                   // 1
         "\n"                                                                            // 2
         "import static org.junit.jupiter.api.Assertions.assertEquals;\n"                // 3
         "\n"                                                                            // 4
         "import org.junit.jupiter.api.BeforeEach;\n"                                    // 5
         "import org.junit.jupiter.api.Test;\n"                                          // 6
         "\n"                                                                            // 7
         "class CartTest {\n"                                                            // 8
         "    private Cart cart;\n"                                                      // 9
         "\n"                                                                            // 10
         "    @BeforeEach\n"                                                             // 11
         "    void setUp() {\n"                                                          // 12
         "        cart = new Cart();\n"                                                  // 13
         "        cart.add(\"apple\", 2);\n"                                           // 14
         "    }\n"                                                                       // 15
         "\n"                                                                            // 16
         "    @Test\n"                                                                   // 17
         "    void totalCountsItems() {\n"                                               // 18
         "        cart.add(\"pear\", " + std::to_string(pear) + ");\n"                 // 19
         "        int expected = " + std::to_string(expected) + ";\n"                    // 20
         "        assertEquals(expected, cart.total());\n"                               // 21
         "    }\n"                                                                       // 22
         "\n"                                                                            // 23
         "    @Test\n"                                                                   // 24
         "    void emptyCartIsZero() {\n"                                                // 25
         "        assertEquals(0, new Cart().total());\n"                                // 26
         "    }\n"                                                                       // 27
         "}\n";                                                                          // 28
}

const std::string kCartTestPath = "src/test/java/com/example/shop/CartTest.java";

// Compiles the project and runs its tests with JUnit 5's console launcher; the Jupiter engine's report is `report`.
void junit5(const TempDir& dir, const std::string& report) {
  const std::string root = dir.path().string();
  const std::string cmd =
      "cd '" + root + "' && rm -rf out reports && javac -d out -cp /usr/share/java/junit-jupiter-api.jar:"
      "/usr/share/java/apiguardian-api.jar src/main/java/com/example/shop/Cart.java " + kCartTestPath +
      " > javac.log 2>&1 && java -jar /usr/share/java/junit-platform-console-standalone.jar -cp out "
      "--select-package com.example.shop --reports-dir reports --disable-banner --details=none > junit.log 2>&1; "
      "cp reports/TEST-junit-jupiter.xml " + report + " 2>/dev/null";
  (void)std::system(cmd.c_str());
  ASSERT_TRUE(std::filesystem::exists(dir / report))
      << "javac or JUnit 5 did not run (scripts/setup.sh --tests installs default-jdk-headless and junit5): "
      << testing::slurp(dir / "javac.log") << (std::filesystem::exists(dir / "junit.log") ? testing::slurp(dir / "junit.log") : "");
}

// A real project's lifecycle: its test fails at commit 1 (its expected value is wrong), `spark record` opens and
// localizes the failure; a fix commit passes and `spark record` labels the expected value's line into the knowledge base;
// a later failure of the same test retrieves the learned case, whose faulty line weighs for the same line.
struct RealProject {
  std::string test_path, test_id, language;
  int expected_line = 0, failing_line = 0, changed_line = 0;
  std::function<std::string(int expected, int added)> test_source;
  std::function<void(const TempDir&)> create;                             // the files besides the test
  std::function<void(const TempDir&, const std::string& report)> run;     // runs the tests, writes the JUnit report
};

json record(const TempDir& dir, const std::string& report, std::string& err) {
  auto r = run_spark({"record", "--junit", report, "--format", "json"}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  err = r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::array();
}

// The reasons the built-in ranker gave `line`, joined.
std::string reasons_of(const json& localized, int line) {
  std::string out;
  for (const auto& e : localized["ranked"])
    if (e["line"] == line)
      for (const auto& reason : e["reasons"]) out += reason.get<std::string>() + "\n";
  return out;
}

void learn_and_reuse(const RealProject& p) {
  TempDir dir;
  testing::git(dir, "init");
  write_file(dir / ".gitignore", "out/\nreports/\n*.xml\n*.log\n.spark/\n");
  p.create(dir);
  write_file(dir / p.test_path, p.test_source(4, 1));  // 2 + 1 is not 4: the test's expected value is wrong
  testing::git(dir, "add -A");
  testing::git(dir, "commit -m broken", "2026-02-01T00:00:00Z");
  ASSERT_NO_FATAL_FAILURE(p.run(dir, "r1.xml"));
  std::string err;
  const json loc1 = record(dir, "r1.xml", err);
  EXPECT_NE(err.find("recorded 2 outcomes"), std::string::npos) << err;
  EXPECT_NE(err.find("opened 1 failure"), std::string::npos) << err;
  ASSERT_EQ(loc1.size(), 1u) << loc1.dump() << err;
  EXPECT_EQ(loc1[0]["test_id"], p.test_id);
  EXPECT_EQ(loc1[0]["language"], p.language);  // the test file's, named in the JSON
  EXPECT_TRUE(ranks(loc1[0], p.failing_line)) << loc1.dump();  // the failing statement, named by the stack trace
  // The fix: the expected value. The first passing run labels the failure.
  write_file(dir / p.test_path, p.test_source(3, 1));
  testing::git(dir, "commit -am fix", "2026-02-02T00:00:00Z");
  ASSERT_NO_FATAL_FAILURE(p.run(dir, "r2.xml"));
  record(dir, "r2.xml", err);
  EXPECT_NE(err.find("1 labelled into the knowledge base"), std::string::npos) << err;
  auto exported = run_spark({"export"}, dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const auto learned = json::parse(exported.out);
  EXPECT_EQ(learned["language"], p.language);
  EXPECT_EQ(learned["test_id"], p.test_id);
  // The faulty line, with its fix: the same line as the fix wrote it (its expected value changed).
  ASSERT_EQ(learned["faulty_lines"].size(), 1u);
  json line = learned["faulty_lines"][0];
  ASSERT_TRUE(line.contains("fix") && line["fix"].size() == 1u) << line;
  EXPECT_NE(line["fix"][0].get<std::string>().find("expected"), std::string::npos) << line;
  line.erase("fix");
  EXPECT_EQ(line, (json{{"path", p.test_path}, {"line", p.expected_line}}));
  // The next failure of the test: the learned case is retrieved. Its faulty line ("… expected = 4;") was fixed as the
  // query's same line now reads ("… expected = 3;"): the line is in the corrected form, evidence against it
  // (fix-aware annotation), not for it.
  write_file(dir / p.test_path, p.test_source(3, 2));
  testing::git(dir, "commit -am more", "2026-02-03T00:00:00Z");
  ASSERT_NO_FATAL_FAILURE(p.run(dir, "r3.xml"));
  const json loc3 = record(dir, "r3.xml", err);
  ASSERT_EQ(loc3.size(), 1u) << loc3.dump();
  ASSERT_EQ(loc3[0]["retrieved"].size(), 1u) << loc3.dump();
  EXPECT_EQ(loc3[0]["retrieved"][0]["faulty_lines"][0]["line"], p.expected_line);
  const std::string why = reasons_of(loc3[0], p.expected_line);
  EXPECT_NE(why.find("resembles the fixed form of faulty line " + std::to_string(p.expected_line) + " of case"),
            std::string::npos)
      << loc3.dump();
  EXPECT_EQ(why.find("similar to faulty line"), std::string::npos) << loc3.dump();
  // Data flow read in the language: the expected value's line sets a value the failing statement uses.
  EXPECT_NE(why.find("sets a value the failing line uses"), std::string::npos) << loc3.dump();
  EXPECT_TRUE(ranks(loc3[0], p.changed_line)) << loc3.dump();  // the changed line, feeding the failing statement
}

TEST(languages, a_real_java_projects_failure_is_recorded_learned_from_its_fix_and_used_for_the_next) {
  learn_and_reuse({kCartTestPath, "com.example.shop.CartTest#totalCountsItems", "java", 20, 21, 19, cart_test,
                   [](const TempDir& dir) { write_file(dir / "src/main/java/com/example/shop/Cart.java", kCartJava); },
                   junit5});
}

// --- A real JavaScript project -----------------------------------------------------------------------------------

const std::string kCartJs =
    "class Cart {\n"
    "  constructor() { this.items = new Map(); }\n"
    "  add(name, n) { this.items.set(name, (this.items.get(name) || 0) + n); }\n"
    "  total() { let t = 0; for (const n of this.items.values()) t += n; return t; }\n"
    "}\n"
    "module.exports = { Cart };\n";

// Line 12 holds the expected total.
std::string cart_test_js(int expected, int pear) {
  return "const { Cart } = require('../src/cart');\n"         // 1
         "\n"                                                 // 2
         "describe('Cart', () => {\n"                         // 3
         "  let cart;\n"                                      // 4
         "  beforeEach(() => {\n"                             // 5
         "    cart = new Cart();\n"                           // 6
         "    cart.add('apple', 2);\n"                        // 7
         "  });\n"                                            // 8
         "\n"                                                 // 9
         "  test('counts items', () => {\n"                   // 10
         "    cart.add('pear', " + std::to_string(pear) + ");\n"      // 11
         "    const expected = " + std::to_string(expected) + ";\n"   // 12
         "    expect(cart.total()).toBe(expected);\n"         // 13
         "  });\n"                                            // 14
         "\n"                                                 // 15
         "  test('empty cart is zero', () => {\n"             // 16
         "    expect(new Cart().total()).toBe(0);\n"          // 17
         "  });\n"                                            // 18
         "});\n";                                             // 19
}

// Runs the project's tests with Jest, jest-junit writing `report` as docs/MINER.md says to configure it.
void jest(const TempDir& dir, const std::string& report) {
  const std::string tools = std::string(SPARK_SOURCE_DIR) + "/third_party/js-test-tools/node_modules";
  const std::string cmd = "cd '" + dir.path().string() + "' && JEST_JUNIT_OUTPUT_FILE=" + report +
                          " JEST_JUNIT_ADD_FILE_ATTRIBUTE=true JEST_JUNIT_ANCESTOR_SEPARATOR=' > '"
                          " JEST_JUNIT_CLASSNAME='{classname}' JEST_JUNIT_TITLE='{title}' '" + tools +
                          "/.bin/jest' --ci --rootDir . --reporters=default '--reporters=" + tools +
                          "/jest-junit' > jest.log 2>&1";
  (void)std::system(cmd.c_str());
  ASSERT_TRUE(std::filesystem::exists(dir / report))
      << "Jest did not run (scripts/setup.sh --tests installs it into third_party/js-test-tools): "
      << testing::slurp(dir / "jest.log");
}

TEST(languages, a_real_javascript_projects_failure_is_recorded_learned_from_its_fix_and_used_for_the_next) {
  learn_and_reuse({kJsPath, kJsPath + " > Cart > counts items", "javascript", 12, 13, 11, cart_test_js,
                   [](const TempDir& dir) {
                     write_file(dir / "package.json", "{\"name\": \"shop\", \"private\": true}\n");
                     write_file(dir / "src/cart.js", kCartJs);
                   },
                   jest});
}

// The same project tested with node's own test runner and its JUnit reporter (node 18.20 and later), which names
// no file: spark finds the test file by the names it holds.
std::string cart_test_node(int expected, int pear) {
  return "const { describe, test, beforeEach } = require('node:test');\n"  // 1
         "const assert = require('node:assert');\n"                        // 2
         "const { Cart } = require('../src/cart');\n"                      // 3
         "\n"                                                              // 4
         "describe('Cart', () => {\n"                                      // 5
         "  let cart;\n"                                                   // 6
         "  beforeEach(() => {\n"                                          // 7
         "    cart = new Cart();\n"                                        // 8
         "    cart.add('apple', 2);\n"                                     // 9
         "  });\n"                                                         // 10
         "\n"                                                              // 11
         "  test('counts items', () => {\n"                                // 12
         "    cart.add('pear', " + std::to_string(pear) + ");\n"           // 13
         "    const expected = " + std::to_string(expected) + ";\n"        // 14
         "    assert.strictEqual(cart.total(), expected);\n"               // 15
         "  });\n"                                                         // 16
         "\n"                                                              // 17
         "  test('empty cart is zero', () => {\n"                          // 18
         "    assert.strictEqual(new Cart().total(), 0);\n"                // 19
         "  });\n"                                                         // 20
         "});\n";                                                          // 21
}

void node_test(const TempDir& dir, const std::string& report) {
  const std::string cmd = "cd '" + dir.path().string() + "' && node --test --test-reporter=junit "
                          "--test-reporter-destination=" + report + " " + kJsPath + " > node.log 2>&1";
  (void)std::system(cmd.c_str());
  ASSERT_TRUE(std::filesystem::exists(dir / report))
      << "node's test runner wrote no JUnit report (it needs node 18.20 or later; scripts/setup.sh --tests installs "
         "nodejs): " << testing::slurp(dir / "node.log");
}

TEST(languages, a_real_node_test_projects_failure_is_recorded_learned_from_its_fix_and_used_for_the_next) {
  learn_and_reuse({kJsPath, kJsPath + " > Cart > counts items", "javascript", 14, 15, 13, cart_test_node,
                   [](const TempDir& dir) {
                     write_file(dir / "package.json", "{\"name\": \"shop\", \"private\": true}\n");
                     write_file(dir / "src/cart.js", kCartJs);
                   },
                   node_test});
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
