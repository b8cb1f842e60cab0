// End-to-end on the development corpus (../shared/data/dev): the real binary, imported, indexed, localized.
// A plain clone has no ../shared: these tests skip with a message there, and run in CI where it is present.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "code/python_structure.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

using nlohmann::json;
using testing::dev_data;
using testing::run_spark;
using testing::TempDir;

namespace {

#define REQUIRE_DEV_DATA()                                                                                   \
  const std::filesystem::path data = dev_data();                                                            \
  if (data.empty()) GTEST_SKIP() << "../shared/data/dev is absent (a plain clone): development-corpus tests skipped"

// Under the sanitizers (6 to 8 times slower) the corpus-wide loops below take every 4th case or its first project: the
// same code on the same real data, a quarter of the iterations. The plain pass runs them whole.
#if defined(SPARK_ASAN)
constexpr size_t kSanitizerStride = 4;
#else
constexpr size_t kSanitizerStride = 1;
#endif

std::vector<std::string> corpus_files(const std::filesystem::path& data) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(data))
    if (std::filesystem::exists(entry.path() / "cases.jsonl")) files.push_back((entry.path() / "cases.jsonl").string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST(dev_corpus, imports_exports_losslessly_and_localizes_every_project) {
  REQUIRE_DEV_DATA();
  TempDir dir;
  std::vector<std::string> files = corpus_files(data);
  if (kSanitizerStride > 1) files.resize(1);
  std::vector<std::string> args = {"import"};
  for (const auto& f : files) args.push_back(f);
  auto imp = run_spark(args, dir.path());
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  auto again = run_spark(args, dir.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;

  // Export is the same objects, in the same order (unknown keys would move under meta; the corpus has none).
  auto exp = run_spark({"export"}, dir.path());
  ASSERT_EQ(exp.exit_code, 0);
  std::vector<json> in, out;
  for (const auto& f : files) {
    std::ifstream s(f);
    std::string line;
    while (std::getline(s, line))
      if (!line.empty()) in.push_back(json::parse(line));
  }
  const std::string stored = std::to_string(in.size());
  if (kSanitizerStride == 1) {
    EXPECT_EQ(stored, "498");  // the whole development corpus
  }
  EXPECT_NE(again.out.find("0 new, 0 replaced, " + stored + " unchanged"), std::string::npos) << again.out;
  std::istringstream es(exp.out);
  std::string line;
  while (std::getline(es, line)) out.push_back(json::parse(line));
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i], out[i]) << "case " << i;

  auto idx = run_spark({"index"}, dir.path());
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  EXPECT_NE(idx.out.find("ranker: trained on " + stored + " labelled cases"), std::string::npos) << idx.out;

  // One query per project, as a user would run it: its own case is in the knowledge base and must not be retrieved.
  for (const auto& f : files) {
    std::ifstream s(f);
    std::getline(s, line);
    const json c = json::parse(line);
    auto r = run_spark({"localize", "--case", f, "--id", c["id"], "-k", "10", "--format", "json"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["ranked"].size(), 10u);
    for (const auto& rc : j["retrieved"]) EXPECT_NE(rc["id"], c["id"]);
    EXPECT_EQ(j["knowledge_base"]["after_policy"], in.size() - 1);
    for (const auto& e : j["ranked"]) EXPECT_FALSE(e["reasons"].empty());
  }
}

TEST(dev_corpus, policies_narrow_the_knowledge_base_by_time) {
  REQUIRE_DEV_DATA();
  TempDir dir;
  const std::string file = corpus_files(data).front();
  ASSERT_EQ(run_spark({"import", file}, dir.path()).exit_code, 0);
  ASSERT_EQ(run_spark({"index"}, dir.path()).exit_code, 0);
  std::ifstream s(file);
  std::string line;
  std::getline(s, line);
  const std::string id = json::parse(line)["id"];
  std::map<std::string, int> sizes;
  for (const std::string policy : {"all", "all-preceding", "closest-by-time", "closest-time-preceding"}) {
    auto r = run_spark({"localize", "--case", file, "--id", id, "--policy", policy, "--format", "json"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    sizes[policy] = json::parse(r.out)["knowledge_base"]["after_policy"];
  }
  EXPECT_GE(sizes["all"], sizes["all-preceding"]);
  EXPECT_GE(sizes["all-preceding"], sizes["closest-time-preceding"]);
  EXPECT_LE(sizes["closest-by-time"], sizes["all"] / 10 + 1);
}

}  // namespace spark::SPARK_TEST_FILE_ID

#include "localizer/held_out.h"
#include "localizer/index_build.h"
#include "localizer/localizer.h"

namespace spark::SPARK_TEST_FILE_ID {

TEST(dev_corpus, leave_one_out_retrieval_finds_same_project_cases_and_annotation_marks_true_lines) {
  REQUIRE_DEV_DATA();
  TempDir dir;
  auto kb = KnowledgeBase::open(dir / "kb", true);
  ASSERT_TRUE(kb);
  std::vector<Case> cases;
  std::set<std::string> projects;
  for (const auto& f : corpus_files(data)) {
    auto read = read_cases_jsonl(f);
    ASSERT_TRUE(read) << read.error().message;
    for (auto& c : read->cases) {
      projects.insert(c.project);
      cases.push_back(std::move(c));
    }
  }
  ASSERT_TRUE((*kb)->import_cases(cases, {}, false));
  ASSERT_TRUE(build_index(**kb, {}, {}));
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  ASSERT_TRUE(engine);
  auto entries = (*kb)->entries();
  // What the index keeps of each labelled case for a retrieval is what the case itself gives, case for case (fixes,
  // conftest.py faulty lines, lines outside the test function, long test ids: whatever the real corpus holds).
  size_t labels = 0;
  for (const auto& e : *entries) {
    if (!e.labelled) continue;
    auto kept = (*engine)->label(e.rowid);
    ASSERT_TRUE(kept) << kept.error().message;
    ASSERT_TRUE(*kept) << "no label kept for case " << e.id;
    auto c = (*kb)->load(e.rowid);
    ASSERT_TRUE(c);
    ASSERT_EQ(label_to_json(**kept), label_to_json(case_label(*c))) << e.id;
    ++labels;
  }
  EXPECT_EQ(labels, cases.size());
  std::vector<int64_t> rowids;
  std::map<std::string, std::string> project_of;
  for (size_t i = 0; i < entries->size(); i += kSanitizerStride) rowids.push_back((*entries)[i].rowid);
  for (const auto& c : cases) project_of[c.id] = c.project;
  size_t n = 0, same_project = 0, with_true_annotation = 0;
  StructureCache cache;
  auto status = for_each_held_out(
      **kb, *entries, rowids, (*engine)->index(), [&](int64_t, const Case& c) { return (*engine)->embed(c); }, {},
      cache, [&](const HeldOut& h) -> Status {
        ++n;
        for (const auto& id : h.retrieved_ids) {
          EXPECT_NE(id, h.held_out.id);
          same_project += project_of[id] == h.held_out.project ? 1 : 0;
        }
        compute_features(h.view, h.faulty, h.similarity, 0.05, {}, h.held_out.error_message);
        bool hit = false;
        for (const auto& ql : h.view.lines)
          if (ql.best_match >= 0 && ql.best_distance <= 0.05)
            for (const auto& fl : h.held_out.faulty_lines)
              hit = hit || (fl.line == ql.line && fl.path == h.view.files[ql.file].source->path);
        with_true_annotation += hit ? 1 : 0;
        return {};
      });
  ASSERT_TRUE(status) << status.error().message;
  ASSERT_EQ(n, rowids.size());
  std::printf("leave-one-out on %zu cases: top-1 case from the same project for %.1f%%; at least one true faulty line "
              "annotated (eps 0.05) for %.1f%%\n",
              n, 100.0 * same_project / n, 100.0 * with_true_annotation / n);
  // Not tuned numbers: better than picking a project at random, and measurable at all.
  EXPECT_GT(static_cast<double>(same_project) / n, 1.0 / static_cast<double>(projects.size()));
  EXPECT_GT(with_true_annotation, 0u);
}

TEST(dev_corpus, the_scanned_function_span_is_the_parsed_one_across_every_test_file) {
  REQUIRE_DEV_DATA();
  std::set<std::string> seen;
  size_t checked = 0, declined = 0;
  for (const auto& file : corpus_files(data)) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      const json record = json::parse(line);
      for (const auto& f : record.at("files")) {
        // One version a path (versions of a file differ by a few lines; CI time).
        if (!seen.insert(f.at("path").get<std::string>()).second) continue;
        const std::string content = f.at("content").get<std::string>();
        PythonParser parser;
        const auto st = parser.analyze(content);
        // At most 16 functions a file version, spread over it: each question scans the whole file (CI time).
        const size_t step = std::max<size_t>(1, st.functions.size() / 16);
        for (size_t fi = 0; fi < st.functions.size(); fi += step)
          for (const std::string& cls : {st.functions[fi].class_name, std::string()}) {
            const auto& fn = st.functions[fi];
            const auto scanned = scan_function_span(content, cls, fn.name);
            ++checked;
            if (!scanned) {
              ++declined;
              continue;
            }
            ASSERT_EQ(*scanned, parser.parsed_function_span(content, "", cls, fn.name))
                << f.at("path").get<std::string>() << " " << cls << "::" << fn.name;
          }
      }
    }
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_LT(declined * 100, checked);  // the parse is the exception
}

}  // namespace spark::SPARK_TEST_FILE_ID
