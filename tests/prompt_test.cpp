// The built-in templates, filled: golden files (tests/golden/prompt_<mode>.txt) pin every word the model sees.
// After an intended template change: SPARK_UPDATE_GOLDEN=1 build/tests/spark_tests --gtest_filter='prompt.*'
#include "localizer/prompt.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "code/structure_cache.h"
#include "code/tokens.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

Case query() {
  Case q;
  q.id = "q";
  q.test_id = "tests/test_shapes.py::test_area";
  q.language = "python";
  q.files.push_back({"tests/test_shapes.py",
                     "from shapes import area\n\n\ndef test_area():\n    shape = 'square'\n    w, h = 2, 3\n"
                     "    result = area(shape, w, h)\n    assert result == 6\n"});
  q.error_message = "tests/test_shapes.py:8: in test_area\n    assert result == 6\nE   assert 4 == 6\n";
  return q;
}

Case similar() {
  Case c;
  c.id = "old-7";
  c.test_id = "tests/test_shapes.py::test_perimeter";
  c.language = "python";
  c.files.push_back({"tests/test_shapes.py",
                     "from shapes import perimeter\n\ndef test_perimeter():\n    shape = 'square'\n"
                     "    assert perimeter(shape, 2, 3) == 10\n"});
  c.error_message = "tests/test_shapes.py:5: in test_perimeter\nE   assert 8 == 10\n";
  c.faulty_lines = {{"tests/test_shapes.py", 4}};
  return c;
}

void check_golden(const std::string& name, const std::string& text) {
  const std::filesystem::path file = std::filesystem::path(SPARK_SOURCE_DIR) / "tests" / "golden" / ("prompt_" + name + ".txt");
  const char* update = std::getenv("SPARK_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    testing::write_file(file, text);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(file)) << file << " is missing: run with SPARK_UPDATE_GOLDEN=1";
  EXPECT_EQ(testing::slurp(file), text) << "the " << name << " prompt changed; if intended, update the golden file";
}

Result<Prompt> build(Mode mode, const std::string& template_text = {}) {
  static StructureCache cache;
  static const Case q = query();
  static const Case s = similar();
  static const QueryView view = make_query_view(q, cache);
  RetrievedCase rc;
  rc.id = s.id;
  rc.similarity = 0.91;
  rc.faulty_lines = s.faulty_lines;
  rc.faulty_text = {"    shape = 'square'"};
  const std::vector<Annotation> annotations = {{{"tests/test_shapes.py", 5}, 0.0, 0, {"tests/test_shapes.py", 4}}};
  PromptOptions o;
  o.mode = mode;
  o.k = 3;
  o.template_text = template_text;
  if (mode == Mode::hybrid) o.ranker_top = {{"tests/test_shapes.py", 8}, {"tests/test_shapes.py", 6}, {"tests/test_shapes.py", 5}};
  return build_prompt(q, view, annotations, {rc}, &s, cache, o);
}

TEST(prompt, builtin_templates_match_their_golden_files) {
  for (Mode m : {Mode::baseline, Mode::default_mode, Mode::annotation_free, Mode::directive, Mode::naive_rag, Mode::hybrid}) {
    auto p = build(m);
    ASSERT_TRUE(p) << p.error().message;
    check_golden(std::string(mode_name(m)), p->text);
  }
}

TEST(prompt, what_each_mode_shows) {
  const auto baseline = build(Mode::baseline)->text;
  const auto standard = build(Mode::default_mode)->text;
  const auto free = build(Mode::annotation_free)->text;
  const auto directive = build(Mode::directive)->text;
  const auto rag = build(Mode::naive_rag)->text;
  const auto hybrid = build(Mode::hybrid)->text;
  // hybrid: the paper's marker where a similar case's faulty line resembles the line, and the ranker's own marker on
  // its top k lines with their ranks; the default mode shows no ranker marker.
  EXPECT_NE(hybrid.find("5:     shape = 'square'  " + std::string(kAnnotationMarker) + "  # <<< ranker's suspect #3 >>>\n"),
            std::string::npos);
  EXPECT_NE(hybrid.find("8:     assert result == 6  # <<< ranker's suspect #1 >>>\n"), std::string::npos);
  EXPECT_NE(hybrid.find("6:     w, h = 2, 3  # <<< ranker's suspect #2 >>>\n"), std::string::npos);
  EXPECT_EQ(standard.find(kRankerMarkerPrefix), std::string::npos);
  const std::string marker(kAnnotationMarker);
  EXPECT_EQ(baseline.find(marker), std::string::npos);
  EXPECT_NE(standard.find("5:     shape = 'square'  " + marker), std::string::npos);
  EXPECT_EQ(free.find("5:     shape = 'square'  " + marker), std::string::npos);
  EXPECT_NE(free.find("Additional Context"), std::string::npos);
  EXPECT_NE(directive.find("5:     shape = 'square'  " + marker), std::string::npos);
  EXPECT_LT(directive.find("Task Instructions"), directive.find("Error Message"));  // instructions first (Fig. 8)
  EXPECT_GT(standard.find("Task Instructions"), standard.find("Error Message"));
  EXPECT_NE(rag.find("assert perimeter(shape, 2, 3) == 10"), std::string::npos);
  EXPECT_NE(rag.find("E   assert 8 == 10"), std::string::npos);
  // Blank lines hidden, the file's own numbers kept, the range named.
  EXPECT_EQ(standard.find("\n2: "), std::string::npos);
  EXPECT_NE(standard.find("4: def test_area():"), std::string::npos);
  EXPECT_NE(standard.find("range 1 to 8"), std::string::npos);
  // Every prompt opens with the same fixed task description (prefix caching on the server).
  const std::string head = standard.substr(0, standard.find("## Inputs"));
  EXPECT_EQ(baseline.substr(0, head.size()), head);
  EXPECT_EQ(directive.substr(0, head.size() - 1), head.substr(0, head.size() - 1));
  // The annotation costs few tokens over the baseline.
  EXPECT_LE(estimate_tokens(standard), estimate_tokens(baseline) + 20);
}

TEST(prompt, a_user_template_replaces_the_builtin_one_and_must_show_code_and_error) {
  auto p = build(Mode::default_mode, "Code:\n{test_code}\nError:\n{err_msg}\nGive {k} of 1..{max_element_id} as {output_template}. {unknown}");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->text.starts_with("Code:\n1: from shapes import area\n"));
  EXPECT_NE(p->text.find("Give 3 of 1..8"), std::string::npos);
  EXPECT_NE(p->text.find("{unknown}"), std::string::npos);
  EXPECT_FALSE(check_template("no placeholders here", "t.txt"));
  EXPECT_NE(check_template("{test_code} only", "t.txt").error().message.find("t.txt: the template has no {err_msg}"),
            std::string::npos);
}

TEST(prompt, test_scope_leaves_other_tests_out) {
  StructureCache cache;
  Case q = query();
  q.files[0].content += "\n\ndef test_other():\n    assert other() == 1\n";
  const QueryView view = make_query_view(q, cache);
  PromptOptions o;
  o.k = 2;
  auto whole = build_prompt(q, view, {}, {}, nullptr, cache, o);
  o.test_scope_only = true;
  auto scoped = build_prompt(q, view, {}, {}, nullptr, cache, o);
  ASSERT_TRUE(whole && scoped);
  EXPECT_NE(whole->text.find("def test_other"), std::string::npos);
  EXPECT_EQ(scoped->text.find("def test_other"), std::string::npos);
  EXPECT_NE(scoped->text.find("8:     assert result == 6"), std::string::npos);
  EXPECT_NE(scoped->text.find("1: from shapes import area"), std::string::npos);  // module level stays
  EXPECT_EQ(scoped->max_element_id, whole->max_element_id);  // ids stay the file's line numbers
}

TEST(prompt, placeholders_inside_the_values_are_not_filled_again) {
  EXPECT_EQ(fill_template("{a} and {b}", {{"a", "{b}"}, {"b", "x"}}), "{b} and x");
  EXPECT_EQ(fill_template("{ not a placeholder } {}", {}), "{ not a placeholder } {}");
}

TEST(prompt, modes_parse_and_say_what_they_retrieve) {
  for (const char* name : {"builtin", "baseline", "default", "random", "annotation-free", "directive", "naive-rag"}) {
    auto m = parse_mode(name);
    ASSERT_TRUE(m) << name;
    EXPECT_EQ(mode_name(*m), name);
  }
  EXPECT_FALSE(parse_mode("fancy"));
  EXPECT_EQ(mode_retrieval(Mode::baseline), Retrieval::none);
  EXPECT_EQ(mode_retrieval(Mode::random), Retrieval::random);
  EXPECT_FALSE(mode_annotates(Mode::annotation_free));
  EXPECT_FALSE(mode_annotates(Mode::naive_rag));
  EXPECT_TRUE(mode_annotates(Mode::directive));
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
