// JUnit XML as real runners write it: real pytest runs (Debian's python3-pytest) in both JUnit families, and the
// variants and damage other runners and accidents produce.
#include "formats/junit.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "chat_server.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::TempDir;
using testing::write_file;

const char* kTests =
    "import pytest\n\n\nclass TestShapes:\n    def test_area(self):\n        assert 2 * 3 == 7\n\n\n"
    "@pytest.mark.parametrize('v', [1, 2])\ndef test_param(v):\n    assert v == 1\n\n\ndef test_ok():\n    pass\n\n\n"
    "@pytest.mark.skip(reason='later')\ndef test_skipped():\n    pass\n\n\n"
    "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture failed')\n\n\ndef test_uses_broken(broken):\n    pass\n";

// Runs pytest in `dir` writing `report` in JUnit family `family`; returns pytest's exit status.
int run_pytest(const TempDir& dir, const std::string& report, const std::string& family) {
  const std::string cmd = "cd '" + dir.path().string() + "' && /usr/bin/python3 -B -m pytest -q -p no:cacheprovider --continue-on-collection-errors -o junit_family=" +
                          family + " --junitxml=" + report + " tests > pytest.log 2>&1";
  return std::system(cmd.c_str());
}

const TestOutcome* find(const JunitReport& r, const std::string& id) {
  for (const auto& o : r.outcomes)
    if (o.test_id == id) return &o;
  return nullptr;
}

TEST(junit, real_pytest_reports_in_both_families_map_to_node_ids) {
  TempDir dir;
  write_file(dir / "tests" / "__init__.py", "");
  write_file(dir / "tests" / "test_shapes.py", kTests);
  write_file(dir / "tests" / "test_broken.py", "import no_such_module\n\ndef test_never():\n    pass\n");
  for (const std::string family : {"xunit2", "xunit1"}) {
    run_pytest(dir, family + ".xml", family);
    auto r = read_junit(dir / (family + ".xml"), dir.path());
    ASSERT_TRUE(r) << r.error().message;
    const auto* area = find(*r, "tests/test_shapes.py::TestShapes::test_area");
    ASSERT_TRUE(area) << family;
    EXPECT_EQ(area->outcome, Outcome::failed);
    EXPECT_NE(area->message.find("assert 2 * 3 == 7"), std::string::npos);
    EXPECT_NE(area->message.find("tests/test_shapes.py:6: AssertionError"), std::string::npos);
    EXPECT_EQ(area->file, "tests/test_shapes.py");
    ASSERT_TRUE(area->time);
    const auto* p2 = find(*r, "tests/test_shapes.py::test_param[2]");
    ASSERT_TRUE(p2) << family;
    EXPECT_EQ(p2->outcome, Outcome::failed);
    EXPECT_EQ(find(*r, "tests/test_shapes.py::test_param[1]")->outcome, Outcome::passed);
    EXPECT_EQ(find(*r, "tests/test_shapes.py::test_ok")->outcome, Outcome::passed);
    EXPECT_EQ(find(*r, "tests/test_shapes.py::test_skipped")->outcome, Outcome::skipped);
    const auto* fixture = find(*r, "tests/test_shapes.py::test_uses_broken");
    ASSERT_TRUE(fixture);
    EXPECT_EQ(fixture->outcome, Outcome::error);
    EXPECT_NE(fixture->message.find("fixture failed"), std::string::npos);
    const auto* collection = find(*r, "tests/test_broken.py");
    ASSERT_TRUE(collection) << family;
    EXPECT_TRUE(collection->collection_error);
    EXPECT_EQ(collection->outcome, Outcome::error);
    EXPECT_NE(collection->message.find("no_such_module"), std::string::npos);
    EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
  }
}

TEST(junit, a_report_of_only_collection_errors_at_pytests_defaults) {
  TempDir dir;
  write_file(dir / "tests" / "test_imp.py", "import os\nfrom mylib import nothing\n\n\ndef test_a():\n    assert 1\n");
  write_file(dir / "tests" / "test_syn.py", "def test_c(:\n    pass\n");
  write_file(dir / "tests" / "test_names.py",
             "import pytest\n\n\n@pytest.mark.parametrize('a,b', [(1, 2, 3)])\ndef test_d(a, b):\n    assert a\n\n\n"
             "def test_fine():\n    pass\n");
  write_file(dir / "tests" / "test_ok.py", "def test_ok():\n    pass\n");
  // Debian's pytest 7.2 at its defaults: the session stops at collection errors, so only they are in the report.
  const std::string cmd = "cd '" + dir.path().string() + "' && /usr/bin/python3 -B -m pytest -p no:cacheprovider " +
                          "--junitxml=r.xml > pytest.log 2>&1";
  (void)std::system(cmd.c_str());
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 3u);
  for (const auto& o : r->outcomes) {
    EXPECT_TRUE(o.collection_error) << o.test_id;
    EXPECT_EQ(o.outcome, Outcome::error) << o.test_id;
  }
  const auto* imp = find(*r, "tests/test_imp.py");
  ASSERT_TRUE(imp);
  EXPECT_NE(imp->message.find("tests/test_imp.py:2: in <module>"), std::string::npos) << imp->message;
  const auto* syn = find(*r, "tests/test_syn.py");
  ASSERT_TRUE(syn);
  EXPECT_NE(syn->message.find("SyntaxError"), std::string::npos);
  // Argnames that do not match the values: the function's collection failed, and its message names it.
  const auto* names = find(*r, "tests/test_names.py::test_d");
  ASSERT_TRUE(names);
  EXPECT_EQ(names->file, "tests/test_names.py");
  EXPECT_NE(names->message.find("must be equal to the number of values"), std::string::npos);
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
}

TEST(junit, other_runners_variants) {
  TempDir dir;
  write_file(dir / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  // unittest-xml-reporting: nested suites, classname without the package, file attribute; nose: no timestamp.
  write_file(dir / "unittest.xml",
             "<?xml version=\"1.0\"?>\n<testsuites>\n <testsuite name=\"outer\">\n  <testsuite name=\"test_x.T\" timestamp=\"2026-01-02T03:04:05\">\n"
             "   <testcase classname=\"test_x.T\" name=\"test_a\" file=\"tests/test_x.py\">\n"
             "    <failure type=\"AssertionError\" message=\"False is not true\"><![CDATA[Traceback (most recent call last):\n"
             "  File \"tests/test_x.py\", line 2, in test_a\nAssertionError: False is not true]]></failure>\n"
             "   </testcase>\n  </testsuite>\n </testsuite>\n</testsuites>\n");
  auto u = read_junit(dir / "unittest.xml", dir.path());
  ASSERT_TRUE(u) << u.error().message;
  ASSERT_EQ(u->outcomes.size(), 1u);
  EXPECT_EQ(u->outcomes[0].test_id, "tests/test_x.py::T::test_a");
  EXPECT_EQ(u->outcomes[0].report_line, 5u);
  EXPECT_NE(u->outcomes[0].message.find("line 2, in test_a"), std::string::npos);
  write_file(dir / "nose.xml",
             "<testsuite name=\"nosetests\" tests=\"1\"><testcase classname=\"tests.test_x\" name=\"test_a\">"
             "<error type=\"x\" message=\"boom\"/></testcase></testsuite>");
  auto n = read_junit(dir / "nose.xml", dir.path());
  ASSERT_TRUE(n);
  EXPECT_EQ(n->outcomes[0].test_id, "tests/test_x.py::test_a");
  EXPECT_EQ(n->outcomes[0].outcome, Outcome::error);
  EXPECT_EQ(n->outcomes[0].message, "boom");
  EXPECT_FALSE(n->outcomes[0].time);
}

TEST(junit, bad_reports_are_errors_naming_file_and_line_and_paths_outside_are_never_read) {
  TempDir dir;
  write_file(dir / "repo" / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  write_file(dir / "secret.py", "TOKEN = 'outside'\n");
  write_file(dir / "cut.xml", "<testsuites>\n<testsuite>\n<testcase classname=\"tests.test_x\" name=\"test_a\">\n<failure>boo");
  auto cut = read_junit(dir / "cut.xml", dir / "repo");
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message.find("cut.xml:4: not a readable JUnit report"), std::string::npos) << cut.error().message;
  write_file(dir / "html.xml", "<html>\n<body>502</body></html>");
  auto html = read_junit(dir / "html.xml", dir / "repo");
  ASSERT_FALSE(html);
  EXPECT_NE(html.error().message.find("html.xml:1: not a JUnit report: the root element is <html>"), std::string::npos);
  write_file(dir / "escape.xml",
             "<testsuite>\n<testcase classname=\"secret\" name=\"t\" file=\"../secret.py\"><failure>x</failure></testcase>\n"
             "<testcase classname=\"x\" name=\"t\" file=\"" + (dir / "secret.py").string() + "\"><failure>x</failure></testcase>\n"
             "</testsuite>");
  auto esc = read_junit(dir / "escape.xml", dir / "repo");
  ASSERT_TRUE(esc);
  ASSERT_EQ(esc->outcomes.size(), 2u);
  for (const auto& o : esc->outcomes) EXPECT_TRUE(o.file.empty()) << o.test_id;
  ASSERT_EQ(esc->warnings.size(), 2u);
  EXPECT_NE(esc->warnings[0].find("escape.xml:2: ../secret.py is outside the repository"), std::string::npos) << esc->warnings[0];
  EXPECT_FALSE(inside_root(dir / "repo", "../secret.py"));
  EXPECT_FALSE(inside_root(dir / "repo", (dir / "secret.py").string()));
  EXPECT_TRUE(inside_root(dir / "repo", "tests/test_x.py"));
}

// The report is read by a conforming XML parser (expat, as a stream): what XML does not allow is an error naming the
// line, never a report read in part.
TEST(junit, a_character_xml_does_not_allow_is_an_error_naming_its_line) {
  TempDir dir;
  write_file(dir / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  for (const std::string bad : {"a & b", "a \xff b"}) {
    write_file(dir / "r.xml", "<testsuite>\n<testcase classname=\"tests.test_x\" name=\"test_a\"/>\n"
                              "<testcase classname=\"tests.test_x\" name=\"test_b\">\n<failure>" + bad +
                                  "</failure></testcase>\n</testsuite>\n");
    auto r = read_junit(dir / "r.xml", dir.path());
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("r.xml:4: not a readable JUnit report: not well-formed"), std::string::npos)
        << r.error().message;
  }
}

TEST(junit, a_lone_carriage_return_ends_a_line_of_the_report_as_xml_says) {
  // Found by the junit fuzz target: a report's lines are counted as XML counts them, so the line an outcome names
  // is the one an editor that reads XML shows.
  TempDir dir;
  write_file(dir / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  write_file(dir / "r.xml", "<testsuite>\r\r<testcase classname=\"tests.test_x\" name=\"test_a\"/>\r\n</testsuite>\n");
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 1u);
  EXPECT_EQ(r->outcomes[0].report_line, 3);
}

TEST(junit, control_characters_xml_does_not_allow_are_read_as_question_marks_with_a_warning) {
  // A runner that writes its terminal's colour codes raw (ESC) or a NUL into the report: the report is read.
  TempDir dir;
  write_file(dir / "tests" / "test_x.py", "def test_a():\n    assert False\n");
  write_file(dir / "r.xml", std::string("<testsuite>\n<testcase classname=\"tests.test_x\" name=\"test_a\">\n"
                                        "<failure>\x1b[31mtests/test_x.py:2: AssertionError\x1b[0m \x01") +
                                std::string(1, '\0') + " &#27;[1m &#x1B;[0m &#10;ok &#65;</failure></testcase>\n"
                                "</testsuite>\n");
  auto r = read_junit(dir / "r.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 1u);
  EXPECT_EQ(r->outcomes[0].message, "?[31mtests/test_x.py:2: AssertionError?[0m ?? ?[1m ?[0m \nok A");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("r.xml: 6 control character(s) XML does not allow, the first at line 3"),
            std::string::npos) << r->warnings[0];
  // A reference split between two pieces of the stream is read whole: one at every offset of a 64 KiB boundary.
  for (size_t pad = 65536 - 40; pad < 65536; ++pad) {
    write_file(dir / "s.xml", "<testsuite>" + std::string(pad, ' ') +
                                  "<testcase classname=\"tests.test_x\" name=\"test_a\"><failure>a&#27;b&amp;c"
                                  "</failure></testcase></testsuite>\n");
    auto split = read_junit(dir / "s.xml", dir.path());
    ASSERT_TRUE(split) << pad << ": " << split.error().message;
    ASSERT_EQ(split->outcomes.size(), 1u);
    EXPECT_EQ(split->outcomes[0].message, "a?b&c") << pad;
  }
}

TEST(junit, spark_localize_junit_localizes_every_failure_of_a_real_run_with_the_llm_concurrently) {
  TempDir dir;
  write_file(dir / "tests" / "test_shapes.py", kTests);
  run_pytest(dir, "report.xml", "xunit2");
  testing::ChatServer server([](const httplib::Request& req, httplib::Response& res, int) {
    const std::string prompt = testing::ChatServer::prompt_of(req.body);
    res.set_content(testing::ChatServer::completion(prompt.find("assert v == 1") != std::string::npos &&
                                                            prompt.find("param[") == std::string::npos
                                                        ? "line 11"
                                                        : "line 6"),
                    "application/json");
  });
  auto r = testing::run_spark({"localize", "--junit", "report.xml", "-k", "1", "--format", "json", "--llm-url",
                               server.url(), "--model", "m", "--concurrency", "3"},
                              dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);  // test_area, test_param[2], test_uses_broken (error)
  EXPECT_EQ(j[0]["test_id"], "tests/test_shapes.py::TestShapes::test_area");
  EXPECT_EQ(j[1]["test_id"], "tests/test_shapes.py::test_param[2]");
  EXPECT_EQ(j[2]["test_id"], "tests/test_shapes.py::test_uses_broken");
  EXPECT_EQ(server.calls(), 3u);
  for (const auto& doc : j) EXPECT_EQ(doc["ranked"][0]["source"], "llm");
  auto none = testing::run_spark({"localize", "--junit", "report.xml", "--root", "tests"}, dir.path());
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.err.find("not in tests"), std::string::npos) << none.err;
}

// pytest run from a folder below the repository's top, its configuration at the top: the report names the test files
// from the top, and `spark localize --junit` run from that folder finds them there, as `spark record` does.
TEST(junit, spark_localize_junit_from_a_folder_below_the_top_finds_the_test_files_there) {
  TempDir dir;
  testing::git(dir, "init -q");
  write_file(dir / "pytest.ini", "[pytest]\n");
  write_file(dir / "tests" / "test_shapes.py", kTests);
  testing::run_pytest({"--junitxml=../report.xml"}, dir / "tests");
  auto below =
      testing::run_spark({"localize", "--junit", "../report.xml", "-k", "1", "--format", "json"}, dir / "tests");
  ASSERT_EQ(below.exit_code, 0) << below.err;
  const auto j = nlohmann::json::parse(below.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << below.out << below.err;
  ASSERT_EQ(j.size(), 3u) << below.err;
  EXPECT_EQ(j[0]["test_id"], "tests/test_shapes.py::TestShapes::test_area");
  // --root still decides when given.
  auto given = testing::run_spark({"localize", "--junit", "../report.xml", "--root", "."}, dir / "tests");
  EXPECT_EQ(given.exit_code, 0);
  EXPECT_NE(given.err.find("no failed or erroring test to localize"), std::string::npos) << given.err;
}

TEST(junit, github_annotations_of_a_whole_run_stay_within_ten_and_one_fixture_fault_is_one_annotation) {
  TempDir dir;
  // A fixture fault breaks twelve tests: the fixture's line is suspect for all of them.
  std::string tests = "import pytest\n\n\n@pytest.fixture\ndef client():\n    return {'url': 'http://x'}['uri']\n\n";
  for (int i = 0; i < 12; ++i)
    tests += "\ndef test_" + std::to_string(i) + "(client):\n    value = client + " + std::to_string(i) +
             "\n    assert value\n\n";
  write_file(dir / "tests" / "test_api.py", tests);
  run_pytest(dir, "report.xml", "xunit2");
  auto r = testing::run_spark({"localize", "--junit", "report.xml", "-k", "3", "--format", "github"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t annotations = 0;
  for (size_t at = r.out.find("::warning "); at != std::string::npos; at = r.out.find("::warning ", at + 1)) ++annotations;
  EXPECT_LE(annotations, 10u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), static_cast<std::ptrdiff_t>(annotations)) << r.out;
  EXPECT_NE(r.out.find("::warning file=tests/test_api.py,line=6,title=spark%3A most suspicious line for 12 failing "
                       "tests::"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("line=6,", r.out.find("line=6,") + 1), std::string::npos) << r.out;  // once
}

TEST(junit, java_and_javascript_reports_map_to_their_test_ids) {
  TempDir dir;
  write_file(dir / "src/test/java/com/example/shop/CartTest.java", "package com.example.shop;\nclass CartTest {}\n");
  write_file(dir / "module-a/src/test/java/com/example/util/MathTest.java", "package com.example.util;\n");
  write_file(dir / "node_modules/pkg/com/example/shop/CartTest.java", "// not a source root of the project\n");
  write_file(dir / "tests/cart.test.js", "test('x', () => {});\n");
  write_file(dir / "web/cart.spec.ts", "it('y', () => {});\n");
  write_file(dir / "report.xml",
             "<?xml version=\"1.0\"?>\n<testsuites>\n"
             // the JUnit Platform console launcher (and Gradle): name with "()"; a nested class by '$'
             "<testsuite name=\"JUnit Jupiter\" timestamp=\"2026-11-24T03:59:32\">\n"
             "<testcase name=\"totalCountsItems()\" classname=\"com.example.shop.CartTest\">"
             "<failure message=\"expected: &lt;4&gt; but was: &lt;3&gt;\">org.opentest4j.AssertionFailedError\n"
             "\tat com.example.shop.CartTest.totalCountsItems(CartTest.java:21)</failure></testcase>\n"
             "<testcase name=\"nested()\" classname=\"com.example.shop.CartTest$Inner\"/>\n"
             // Surefire: a plain method name, a class in another module
             "<testcase name=\"adds\" classname=\"com.example.util.MathTest\"/>\n"
             "<testcase name=\"gone\" classname=\"com.example.missing.GoneTest\"/>\n"
             "</testsuite>\n"
             // jest-junit as docs/MINER.md configures it; Vitest
             "<testsuite name=\"Cart\"><testcase classname=\"Cart &gt; when empty\" name=\"has no total\" "
             "file=\"tests/cart.test.js\"><failure>Error: boom\n    at Object.toBe (/ci/shop/tests/cart.test.js:13:26)"
             "</failure></testcase></testsuite>\n"
             "<testsuite name=\"vitest\"><testcase classname=\"web/cart.spec.ts\" name=\"Cart &gt; totals\"/>"
             "<testcase classname=\"web/gone.spec.ts\" name=\"x\"/></testsuite>\n"
             "</testsuites>\n");
  auto r = read_junit(dir / "report.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  const auto* total = find(*r, "com.example.shop.CartTest#totalCountsItems");
  ASSERT_TRUE(total);
  EXPECT_EQ(total->outcome, Outcome::failed);
  EXPECT_EQ(total->file, "src/test/java/com/example/shop/CartTest.java");  // the source root, not node_modules
  EXPECT_NE(total->message.find("CartTest.java:21"), std::string::npos);
  const auto* nested = find(*r, "com.example.shop.CartTest$Inner#nested");
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->file, "src/test/java/com/example/shop/CartTest.java");
  const auto* adds = find(*r, "com.example.util.MathTest#adds");
  ASSERT_TRUE(adds);
  EXPECT_EQ(adds->file, "module-a/src/test/java/com/example/util/MathTest.java");
  const auto* gone = find(*r, "com.example.missing.GoneTest::gone");  // no such file: named, not read
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->file, "");
  const auto* js = find(*r, "tests/cart.test.js > Cart > when empty > has no total");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->outcome, Outcome::failed);
  EXPECT_EQ(js->file, "tests/cart.test.js");
  const auto* vitest = find(*r, "web/cart.spec.ts > Cart > totals");
  ASSERT_TRUE(vitest);
  EXPECT_EQ(vitest->file, "web/cart.spec.ts");
  const auto* missing_js = find(*r, "web/gone.spec.ts > x");
  ASSERT_TRUE(missing_js);
  EXPECT_EQ(missing_js->file, "");
  bool warned = false;
  for (const auto& w : r->warnings) warned = warned || w.find("web/gone.spec.ts is not a test file") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(junit, find_by_tail_prefers_a_test_source_root_then_the_shortest_path) {
  const std::vector<std::string> paths = {"lib/com/x/FooTest.java", "app/src/test/java/com/x/FooTest.java",
                                          "src/test/java/com/x/FooTest.java", "tests/a.test.js"};
  EXPECT_EQ(find_by_tail(paths, "com/x/FooTest.java"), "src/test/java/com/x/FooTest.java");
  EXPECT_EQ(find_by_tail(paths, "x/FooTest.java"), "src/test/java/com/x/FooTest.java");
  EXPECT_EQ(find_by_tail(paths, "/home/ci/shop/tests/a.test.js"), "tests/a.test.js");  // an absolute stack path
  EXPECT_EQ(find_by_tail(paths, "oo/FooTest.java"), "");  // only at a '/'
  EXPECT_EQ(find_by_tail(paths, ""), "");
}

TEST(junit, node_test_reports_name_no_file_and_the_one_test_file_holding_the_names_is_taken) {
  // node:test's reporter: classname "test", describe blocks as nested <testsuite>s, top-level tests right under
  // <testsuites>. A name two files hold is not guessed; a file under node_modules/ or not a test file is not read.
  TempDir dir;
  write_file(dir / "test/cart.test.js",
             "describe('Cart', () => {\n  describe(\"when empty\", () => {\n    test(`has no total`, () => {});\n"
             "  });\n  test('shared', () => {});\n});\ntest('top level', () => {});\n");
  write_file(dir / "test/other.test.js", "describe('Cart', () => { it('shared', () => {}); });\n");
  write_file(dir / "src/cart.js", "// 'top level' 'Cart' 'only here'\n");
  write_file(dir / "node_modules/x/test/a.test.js", "test('only here', () => {});\n");
  write_file(dir / "report.xml",
             "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n"
             "<testsuite name=\"Cart\"><testsuite name=\"when empty\">"
             "<testcase name=\"has no total\" classname=\"test\" failure=\"boom\"><failure type=\"testCodeFailure\" "
             "message=\"boom\">Error [ERR_TEST_FAILURE]: boom</failure></testcase></testsuite>"
             "<testcase name=\"shared\" classname=\"test\"/></testsuite>\n"
             "<testcase name=\"top level\" classname=\"test\"/>\n"
             "<testcase name=\"only here\" classname=\"test\"/>\n"
             "</testsuites>\n");
  auto r = read_junit(dir / "report.xml", dir.path());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcomes.size(), 4u);
  const auto* empty = find(*r, "test/cart.test.js > Cart > when empty > has no total");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->outcome, Outcome::failed);
  EXPECT_EQ(empty->file, "test/cart.test.js");
  const auto* top = find(*r, "test/cart.test.js > top level");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->outcome, Outcome::passed);
  const auto* shared = find(*r, "Cart > shared");  // two test files hold 'Cart' and 'shared'
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->file, "");
  const auto* only = find(*r, "only here");  // held by a non-test file and a file under node_modules/ only
  ASSERT_TRUE(only);
  EXPECT_EQ(only->file, "");
  std::string warnings;
  for (const auto& w : r->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("node:test names no file for \"Cart > shared\", and 2 test files (test/cart.test.js, "
                          "test/other.test.js) hold its names; not read"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("node:test names no file for \"only here\", and no test file in " + dir.path().string() +
                          " holds its names"),
            std::string::npos)
      << warnings;
  EXPECT_TRUE(js_test_path("test/x.js"));
  EXPECT_TRUE(js_test_path("src/cart-test.mjs"));
  EXPECT_TRUE(js_test_path("web/cart.spec.ts"));
  EXPECT_FALSE(js_test_path("src/cart.js"));
  EXPECT_FALSE(js_test_path("node_modules/x/test/a.test.js"));
  EXPECT_FALSE(js_test_path("tests/test_x.py"));
  EXPECT_TRUE(holds_names("it(\"a b\", () => {})", {"a b"}));
  EXPECT_FALSE(holds_names("it('a bc', () => {})", {"a b"}));  // a whole literal only
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
