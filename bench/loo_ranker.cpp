// Leave-one-out measurement of the built-in ranker on a labelled corpus, against two references computed in the same
// run (issue: "measure it leave-one-out on the dev corpus"):
//   traceback — the lines of the test files the error names, deepest first, then by distance to the deepest one;
//   plain     — SPARK's plain order: annotated lines first (closest match first), then the traceback order.
// Each case is held out of the knowledge base (with its exact duplicates). The ranker's weights for a case are
// learnt from the other projects only (cross-project folds), so no case is scored by weights its own labels shaped;
// the in-sample weights (what `spark index` learns from everything) are reported beside them.
//
//   build/bench/spark_loo [--r N] [--ablate] CASES.jsonl...
//                         [--query-form OTHER.jsonl...] [--common-with OTHER.jsonl...]
// --common-with: only the cases whose id the other files hold too (training and tables), so that two forms of one
// corpus are compared on the same cases (dev-tblong lacks one of dev's 498).
// --query-form: the same failures in another form (../shared/data/dev-tblong beside ../shared/data/dev): the
// knowledge base and the ranker's training hold the first files' cases; each held-out case is queried with its error
// message from the other files (matched by id; cases without one are left out of the tables).
//
// Rows per subset: the error names a faulty line ("leak") or not, per project, seeded / campaign / history. --ablate
// prints one table instead: each feature group removed in turn, per subset. SPARK_LOO_DIAG=1 adds diagnostics: the
// gate's inputs per case (/tmp/spark_loo_gate.tsv) and the cases whose first rank is wrong with the features of the
// first line and of the first faulty line (/tmp/spark_loo_top.tsv).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "base/text.h"
#include "localizer/held_out.h"
#include "localizer/index_build.h"
#include "localizer/localizer.h"

using namespace spark;
namespace fs = std::filesystem;

namespace {

struct LineRow {
  FeatureVector x;
  std::string kind;
  bool in_reach = false, faulty = false, annotated = false;
  double distance = 1.0;
  size_t file = 0;
  int line = 0;
};

struct HeldCase {
  std::string id, project, subset;  // subset: seeded | campaign | history
  // What broke it (the case's change since its last pass): "test side" (a line of its test code changed), "product
  // side" (only product code changed), "" (no last pass known).
  std::string broke;
  bool names_faulty_line = false;
  bool retrieved_same_project = false;
  size_t annotated = 0, annotated_true = 0;
  std::vector<LineRow> rows;
  TrainingCase tc;  // the rows' features, the gate's inputs and labels
  std::vector<size_t> traceback_order, plain_order;
};

// Rank (1-based) of the first faulty element in `order`, 0 if none.
size_t first_hit(const HeldCase& c, const std::vector<size_t>& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (c.rows[order[i]].faulty) return i + 1;
  return 0;
}

struct Tally {
  size_t n = 0;
  std::array<size_t, 4> hits{};  // @1, @3, @5, @10
  double rr = 0;
  void add(size_t first) {
    ++n;
    const size_t ks[] = {1, 3, 5, 10};
    for (size_t i = 0; i < 4; ++i) hits[i] += first != 0 && first <= ks[i] ? 1 : 0;
    rr += first ? 1.0 / static_cast<double>(first) : 0.0;
  }
  std::string row(const std::string& name) const {
    char buf[256];
    const auto pct = [&](size_t h) { return n ? 100.0 * static_cast<double>(h) / static_cast<double>(n) : 0.0; };
    std::snprintf(buf, sizeof buf, "| %-24s | %4zu | %5.1f | %5.1f | %5.1f | %5.1f | %.3f |", name.c_str(), n,
                  pct(hits[0]), pct(hits[1]), pct(hits[2]), pct(hits[3]), n ? rr / static_cast<double>(n) : 0.0);
    return buf;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Options: --ablate (each feature group removed in turn, per subset).
  TrainingOptions training;
  bool ablate = false;
  size_t r_option = 1;
  std::vector<std::string> files, query_files, common_files;
  std::vector<std::string>* into = &files;  // where the next file name goes
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--r" && i + 1 < argc) {
      r_option = static_cast<size_t>(std::stoul(argv[++i]));
    } else if (a == "--ablate") {
      ablate = true;
    } else if (a == "--query-form") {
      into = &query_files;  // the files after it
    } else if (a == "--common-with") {
      into = &common_files;
    } else {
      into->push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr,
                 "usage: spark_loo [--r N] [--ablate] CASES.jsonl... [--query-form "
                 "OTHER.jsonl...] [--common-with OTHER.jsonl...]\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = fs::temp_directory_path() / ("spark-loo-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<Case> cases;
  std::vector<CaseOrigin> origins;
  if (auto s = read_corpora(files, cases, origins); !s) {
    std::fprintf(stderr, "spark_loo: %s\n", s.error().message.c_str());
    return 1;
  }
  if (!common_files.empty()) {  // the cases whose id the other corpus has too, in training and in the tables
    std::vector<Case> other;
    std::vector<CaseOrigin> other_origins;
    if (auto s = read_corpora(common_files, other, other_origins); !s) {
      std::fprintf(stderr, "spark_loo: %s\n", s.error().message.c_str());
      return 1;
    }
    std::set<std::string> ids;
    for (const auto& c : other) ids.insert(c.id);
    std::vector<Case> kept;
    std::vector<CaseOrigin> kept_origins;
    for (size_t i = 0; i < cases.size(); ++i)
      if (ids.contains(cases[i].id)) {
        kept.push_back(std::move(cases[i]));
        kept_origins.push_back(std::move(origins[i]));
      }
    std::fprintf(stderr, "spark_loo: %zu of %zu cases are in the other corpus too\n", kept.size(), cases.size());
    cases = std::move(kept);
    origins = std::move(kept_origins);
  }
  std::map<std::string, std::string> query_form;  // case id -> its error message in the other form
  if (!query_files.empty()) {
    std::vector<Case> other;
    std::vector<CaseOrigin> other_origins;
    if (auto s = read_corpora(query_files, other, other_origins); !s) {
      std::fprintf(stderr, "spark_loo: %s\n", s.error().message.c_str());
      return 1;
    }
    for (auto& c : other) query_form[c.id] = std::move(c.error_message);
  }
  auto kb = KnowledgeBase::open(dir, true);
  if (!kb || !(*kb)->import_cases(cases, origins, false)) return 1;
  IndexBuildOptions build;
  build.training = training;
  build.r = r_option;
  auto report = build_index(**kb, {}, build);
  if (!report) {
    std::fprintf(stderr, "spark_loo: %s\n", report.error().message.c_str());
    return 1;
  }
  std::vector<std::string> notes;
  auto engine = SearchEngine::open(**kb, {}, notes);
  if (!engine) return 1;
  auto entries = (*kb)->entries();
  std::vector<int64_t> rowids;
  for (const auto& e : *entries) rowids.push_back(e.rowid);
  std::map<std::string, std::string> project_of_id;
  for (const auto& c : cases) project_of_id[c.id] = c.project;

  const double epsilon = 0.05;
  StructureCache cache;
  // Every held-out case's rows, as `options` queries it.
  const auto collect = [&](const HeldOutOptions& options, std::vector<HeldCase>& held) {
    return for_each_held_out(
      **kb, *entries, rowids, (*engine)->index(),
      [&](int64_t, const Case& c) { return (*engine)->embed(c); }, options,
      cache, [&](const HeldOut& h) -> Status {
        compute_features(h.view, h.faulty, h.similarity, epsilon, KindPrior{}, h.held_out.error_message);
        HeldCase hc;
        hc.id = h.held_out.id;
        hc.project = h.held_out.project;
        hc.tc = training_case(h.view, h.held_out.faulty_lines);
        // meta is read here for analysis only (which subset a case belongs to); the localizer never reads it.
        const auto& meta = h.held_out.record.contains("meta") ? h.held_out.record["meta"] : nlohmann::json::object();
        hc.subset = h.held_out.source.value_or("") == "history" ? "history"
                    : meta.value("operator", "") == "campaign" ? "campaign" : "seeded";
        if (const auto& change = h.held_out.change)
          hc.broke = !change->lines.empty() ? "test side" : !change->product.empty() ? "product side" : "";
        std::set<std::pair<std::string, int>> truth;
        for (const auto& fl : h.held_out.faulty_lines) truth.insert({fl.path, fl.line});
        for (const auto& fr : h.view.frames)
          for (const auto& fl : h.held_out.faulty_lines)
            hc.names_faulty_line = hc.names_faulty_line || (fr.line == fl.line && same_file(fr.path, fl.path));
        for (const auto& id : h.retrieved_ids) hc.retrieved_same_project |= project_of_id[id] == hc.project;
        for (const auto& ql : h.view.lines) {
          const auto& file = h.view.files[ql.file];
          const auto li = static_cast<size_t>(ql.line - 1);
          LineRow r;
          r.x = ql.x;
          r.kind = file.structure->kind[li];
          r.in_reach = !file.scope.found || file.scope.role[li] == ScopeRole::own || file.scope.role[li] == ScopeRole::support;
          r.faulty = truth.contains({file.source->path, ql.line});
          r.annotated = ql.best_match >= 0 && ql.best_distance <= epsilon;
          r.distance = ql.best_distance;
          r.file = ql.file;
          r.line = ql.line;
          hc.annotated += r.annotated;
          hc.annotated_true += r.annotated && r.faulty;
          hc.rows.push_back(std::move(r));
        }
        // Reference (a): traceback order.
        std::vector<size_t> order(hc.rows.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::map<std::pair<size_t, int>, size_t> frame_depth;  // deeper frames get larger numbers
        size_t depth = 0;
        for (const auto& fr : h.view.frames)
          for (size_t f = 0; f < h.view.files.size(); ++f)
            if (same_file(fr.path, h.view.files[f].source->path)) frame_depth[{f, fr.line}] = ++depth;
        const auto tb_key = [&](size_t i) {
          const auto& r = hc.rows[i];
          auto it = frame_depth.find({r.file, r.line});
          const long named = it == frame_depth.end() ? 0 : static_cast<long>(it->second);
          const long dist = h.view.stop_file == static_cast<int>(r.file) ? std::abs(r.line - h.view.stop_line) : 1L << 30;
          return std::tuple<long, long, size_t, int>(-named, dist, r.file, r.line);
        };
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tb_key(a) < tb_key(b); });
        hc.traceback_order = order;
        // Reference (b): annotated lines first (closest match first), then the traceback order.
        std::vector<size_t> plain = order;
        std::stable_sort(plain.begin(), plain.end(), [&](size_t a, size_t b) {
          const auto& ra = hc.rows[a];
          const auto& rb = hc.rows[b];
          if (ra.annotated != rb.annotated) return ra.annotated;
          if (ra.annotated && ra.distance != rb.distance) return ra.distance < rb.distance;
          return false;
        });
        hc.plain_order = plain;
        held.push_back(std::move(hc));
        return {};
      });
  };
  // The ranker learns from the cases as stored; the held-out cases are queried in the form --query-form gives, if
  // any (a knowledge base of one failure form serving queries of another).
  std::vector<HeldCase> learnt_from, held;
  if (auto s = collect(HeldOutOptions{build.r, build.similarity_floor, {}}, learnt_from); !s) {
    std::fprintf(stderr, "spark_loo: %s\n", s.error().message.c_str());
    return 1;
  }
  if (query_form.empty()) {
    held = learnt_from;
  } else {
    HeldOutOptions options{build.r, build.similarity_floor, {}};
    options.as_queried = [&](Case& c) {
      if (auto it = query_form.find(c.id); it != query_form.end()) c.error_message = it->second;
    };
    if (auto s = collect(options, held); !s) {
      std::fprintf(stderr, "spark_loo: %s\n", s.error().message.c_str());
      return 1;
    }
    std::erase_if(held, [&](const HeldCase& h) { return !query_form.contains(h.id); });
  }

  // Ranker weights: per project fold (trained on the other projects), and in-sample (trained on everything).
  std::set<std::string> projects;
  for (const auto& h : held) projects.insert(h.project);
  // A feature group removed: its line features and gate inputs are zero in training and in ranking.
  struct Mask {
    std::string name;
    std::vector<size_t> features, gate_inputs;
  };
  const auto masked = [](const Mask& m, FeatureVector x) {
    for (size_t f : m.features) x[f] = 0.0;
    return x;
  };
  const auto masked_gate = [](const Mask& m, GateVector g) {
    for (size_t f : m.gate_inputs) g[f] = 0.0;
    return g;
  };
  const auto train = [&](const std::function<bool(const HeldCase&)>& use, const Mask& mask) {
    KindCounts counts;
    for (const auto& h : learnt_from)
      if (use(h))
        for (const auto& r : h.rows) counts.add_line(r.kind, r.in_reach, r.faulty);
    const KindPrior prior = counts.prior();
    std::vector<TrainingCase> tcs;
    for (const auto& h : learnt_from) {
      if (!use(h)) continue;
      TrainingCase tc = h.tc;
      for (size_t i = 0; i < tc.rows.size(); ++i) {
        tc.rows[i][kKindPrior] = prior.get(h.rows[i].kind);
        tc.rows[i] = masked(mask, tc.rows[i]);
      }
      tc.gate = masked_gate(mask, tc.gate);
      tcs.push_back(std::move(tc));
    }
    return train_ranker(std::move(tcs), prior, build.training);
  };
  const auto ranker_order = [&](const HeldCase& h, const RankerModel& m, const Mask& mask) {
    std::vector<FeatureVector> rows = h.tc.rows;
    for (size_t i = 0; i < rows.size(); ++i) rows[i][kKindPrior] = m.kind_prior.get(h.rows[i].kind);
    if (h.tc.has_stop) apply_gate(m.gate, masked_gate(mask, h.tc.gate), rows);
    for (auto& x : rows) x = masked(mask, x);
    const auto prob = m.probabilities(rows);
    std::vector<std::pair<double, size_t>> scored;
    for (size_t i = 0; i < h.rows.size(); ++i) scored.emplace_back(prob[i], i);
    // Ties keep the traceback order, as the localizer breaks ties by distance to the stopping line.
    std::vector<size_t> pos(h.rows.size());
    for (size_t i = 0; i < h.traceback_order.size(); ++i) pos[h.traceback_order[i]] = i;
    std::stable_sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : pos[a.second] < pos[b.second];
    });
    std::vector<size_t> order;
    for (const auto& [sc, i] : scored) order.push_back(i);
    return order;
  };
  const Mask none{"full model", {}, {}};
  const auto subsets_of = [](const HeldCase& h) {
    std::vector<std::string> out{"all", h.names_faulty_line ? "leak" : "no-leak", h.subset};
    if (!h.broke.empty()) out.push_back("broke: " + h.broke);
    return out;
  };
  if (ablate) {
    const std::vector<Mask> masks = {
        none,
        {"- retrieval (annotated, resembles, same test, outside test)",
         {kAnnotated, kResembles, kSameTest, kOutsideTest},
         {kGateStopAnnotated, kGateOtherAnnotated}},
        {"- retrieval trust (same test, outside test)", {kSameTest, kOutsideTest}, {}},
        {"- traceback (line, frame, named line, not reached, near)",
         {kTracebackLine, kTracebackFrame, kNamedLine, kNotReached, kNearFailure, kGate},
         {}},
        {"- scope (own body, support, module)", {kOwnBody, kSupport, kModuleLevel}, {}},
        {"- kind prior", {kKindPrior}, {}},
        {"- error overlap", {kErrorOverlap}, {}},
        {"- data-flow slice", {kSlice}, {}},
        {"- failure form (values, names)",
         {kValueMatch, kNameMatch},
         {kGateAssertion, kGateType, kGateName, kGateLookup, kGateValue, kGateRaisedInTest, kGateStopValue,
          kGateOtherValue, kGateStopName, kGateOtherName, kGateStopIsAssert}},
        {"- gate", {kGate}, {}},
        {"- change since the last pass (changed, uses a product change)", {kChangedSincePass, kUsesProductChange}, {}},
    };
    const std::vector<std::string> cols = {"all",      "leak",    "no-leak",          "seeded",
                                           "campaign", "history", "broke: test side", "broke: product side"};
    std::printf("# Ablation, leave-one-project-out, line level (Hit@1 / Hit@5 in %%), objective pairwise\n\n");
    std::printf("| model |");
    for (const auto& c : cols) std::printf(" %s |", c.c_str());
    std::printf("\n|---|");
    for (size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    std::set<std::string> projects_;
    for (const auto& h : held) projects_.insert(h.project);
    for (const auto& m : masks) {
      std::map<std::string, RankerModel> fm;
      for (const auto& p : projects_) fm[p] = train([&](const HeldCase& h) { return h.project != p; }, m);
      std::map<std::string, Tally> t;
      for (const auto& h : held) {
        const size_t r = first_hit(h, ranker_order(h, fm[h.project], m));
        for (const auto& k : subsets_of(h)) t[k].add(r);
      }
      std::printf("| %s |", m.name.c_str());
      for (const auto& c : cols) {
        const auto& x = t[c];
        std::printf(" %.1f / %.1f |", x.n ? 100.0 * x.hits[0] / x.n : 0.0, x.n ? 100.0 * x.hits[2] / x.n : 0.0);
      }
      std::printf("\n");
    }
    std::printf("\nn:");
    std::map<std::string, size_t> n;
    for (const auto& h : held)
      for (const auto& k : subsets_of(h)) ++n[k];
    for (const auto& c : cols) std::printf(" %s=%zu", c.c_str(), n[c]);
    std::printf("\n");
    fs::remove_all(dir);
    return 0;
  }
  std::map<std::string, RankerModel> fold_model;
  for (const auto& p : projects) fold_model[p] = train([&](const HeldCase& h) { return h.project != p; }, none);
  const RankerModel all_model = train([](const HeldCase&) { return true; }, none);
  const RankerModel prior_model = [&] {
    RankerModel m = RankerModel::prior();
    m.kind_prior = all_model.kind_prior;
    return m;  // the prior's own gate
  }();

  struct Row {
    Tally ranker, in_sample, prior, traceback, plain;
  };
  std::map<std::string, Row> table;
  size_t annotated = 0, annotated_true = 0, cases_with_true_annotation = 0, same_project = 0;
  for (const auto& h : held) {
    const size_t r1 = first_hit(h, ranker_order(h, fold_model[h.project], none));
    const size_t r2 = first_hit(h, ranker_order(h, all_model, none));
    const size_t r3 = first_hit(h, ranker_order(h, prior_model, none));
    const size_t rt = first_hit(h, h.traceback_order);
    const size_t rp = first_hit(h, h.plain_order);
    for (const std::string& key :
         {std::string("all"), "project: " + h.project, "subset: " + h.subset,
          std::string(h.names_faulty_line ? "error names a faulty line" : "error names no faulty line"),
          std::string(h.names_faulty_line ? "leak" : "no-leak") + ", project: " + h.project,
          h.broke.empty() ? std::string("broke: not known") : "broke: " + h.broke}) {
      auto& row = table[key];
      row.ranker.add(r1);
      row.in_sample.add(r2);
      row.prior.add(r3);
      row.traceback.add(rt);
      row.plain.add(rp);
    }
    annotated += h.annotated;
    annotated_true += h.annotated_true;
    cases_with_true_annotation += h.annotated_true > 0;
    same_project += h.retrieved_same_project;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("# Leave-one-out, line level: %zu cases, %zu projects (%.1f s)\n\n", held.size(), projects.size(), secs);
  std::printf("Retrieval (top-1, built-in embedder, floor %.2f): a same-project case for %zu of %zu cases (%.1f%%).\n",
              build.similarity_floor, same_project, held.size(), 100.0 * same_project / std::max<size_t>(1, held.size()));
  std::printf("Annotation (eps %.2f): %zu lines annotated, %zu truly faulty (%.1f%%); at least one true faulty line "
              "annotated in %zu of %zu cases (%.1f%%).\n\n",
              epsilon, annotated, annotated_true, 100.0 * annotated_true / std::max<size_t>(1, annotated),
              cases_with_true_annotation, held.size(), 100.0 * cases_with_true_annotation / std::max<size_t>(1, held.size()));
  std::printf("Hit@k in %%, MRR. ranker = built-in ranker with weights learnt on the other projects; in-sample = weights "
              "learnt on all cases; prior = the documented prior weights.\n\n");
  for (const auto& [key, row] : table) {
    std::printf("## %s\n\n| order | n | Hit@1 | Hit@3 | Hit@5 | Hit@10 | MRR |\n|---|---|---|---|---|---|---|\n", key.c_str());
    std::printf("%s\n%s\n%s\n%s\n%s\n\n", row.ranker.row("ranker (cross-project)").c_str(),
                row.in_sample.row("ranker (in-sample)").c_str(), row.prior.row("ranker (prior weights)").c_str(),
                row.traceback.row("(a) traceback order").c_str(), row.plain.row("(b) SPARK plain order").c_str());
  }
  std::printf("Weights learnt on all cases:");
  for (size_t i = 0; i < kFeatureCount; ++i) std::printf(" %s=%.2f", std::string(feature_name(i)).c_str(), all_model.weights[i]);
  if (std::getenv("SPARK_LOO_DIAG")) {
    size_t n = 0, stop_first = 0, hit_wo_stop = 0, hit5_wo_stop = 0;
    for (const auto& h : held) {
      if (h.names_faulty_line || !h.tc.has_stop) continue;
      ++n;
      auto order = ranker_order(h, fold_model[h.project], none);
      stop_first += h.tc.rows[order[0]][kTracebackLine] > 0;
      std::erase_if(order, [&](size_t i) { return h.tc.rows[i][kTracebackLine] > 0; });
      const size_t r = first_hit(h, order);
      hit_wo_stop += r == 1;
      hit5_wo_stop += r >= 1 && r <= 5;
    }
    if (FILE* out = std::fopen("/tmp/spark_loo_gate.tsv", "w")) {
      for (const auto& h : held) {
        if (!h.tc.has_stop) continue;
        std::fprintf(out, "%s\t%s\t%d\t%.3f", h.id.c_str(), h.subset.c_str(), h.tc.gate_label ? 1 : 0,
                     fold_model[h.project].gate.probability(h.tc.gate));
        for (double g : h.tc.gate) std::fprintf(out, "\t%.2f", g);
        std::fprintf(out, "\n");
      }
      std::fclose(out);
    }
    if (FILE* out = std::fopen("/tmp/spark_loo_top.tsv", "w")) {
      for (const auto& h : held) {
        auto order = ranker_order(h, fold_model[h.project], none);
        const size_t r = first_hit(h, order);
        if (r == 1) continue;
        std::fprintf(out, "%s\t%d\t%zu", h.id.c_str(), h.names_faulty_line ? 1 : 0, r);
        for (size_t k : {order[0], r ? order[r - 1] : order[0]}) {
          std::fprintf(out, "\t%d", h.rows[k].line);
          for (size_t f = 1; f < kFeatureCount; ++f)
            if (h.tc.rows[k][f] != 0) std::fprintf(out, " %s=%.2f", std::string(feature_name(f)).c_str(), h.tc.rows[k][f]);
        }
        std::fprintf(out, "\n");
      }
      std::fclose(out);
    }
    std::printf("\nno-leak with a failing statement: %zu; it ranks first in %zu; without it Hit@1 %zu, Hit@5 %zu\n", n,
                stop_first, hit_wo_stop, hit5_wo_stop);
  }
  // The gate on its own, cross-project: does it tell the cases where the failing statement is the fault?
  {
    size_t n = 0, right = 0, tp = 0, fp = 0, pos = 0;
    double brier = 0;
    for (const auto& h : held) {
      if (!h.tc.has_stop) continue;
      const double p = fold_model[h.project].gate.probability(h.tc.gate);
      ++n;
      pos += h.tc.gate_label;
      right += (p >= 0.5) == h.tc.gate_label;
      tp += p >= 0.5 && h.tc.gate_label;
      fp += p >= 0.5 && !h.tc.gate_label;
      brier += (p - h.tc.gate_label) * (p - h.tc.gate_label);
    }
    std::printf("\nGate (cross-project) on %zu cases with a failing statement (%zu of them faulty there): accuracy at "
                "0.5 %.1f%%, recall %.1f%%, precision %.1f%%, Brier score %.3f\n",
                n, pos, 100.0 * right / std::max<size_t>(1, n), 100.0 * tp / std::max<size_t>(1, pos),
                100.0 * tp / std::max<size_t>(1, tp + fp), brier / std::max<size_t>(1, n));
  }
  std::printf("\nGate learnt on all cases:");
  for (size_t i = 0; i < kGateCount; ++i)
    std::printf(" %s=%.2f", std::string(gate_feature_name(i)).c_str(), all_model.gate.weights[i]);
  std::printf("\n");
  fs::remove_all(dir);
  return 0;
}
