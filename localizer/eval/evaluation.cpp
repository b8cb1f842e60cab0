#include "localizer/eval/evaluation.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "base/clock.h"
#include "base/text.h"
#include "code/structure_cache.h"
#include "localizer/prompt.h"

namespace spark {

namespace {

Case as_query(const Case& c) {
  Case q = c;
  q.faulty_lines.clear();
  q.record.erase("faulty_lines");
  q.record.erase("meta");  // the localizer never reads meta; it may hold the answer
  return q;
}

size_t non_blank_lines(const Case& c) {
  size_t n = 0;
  for (const auto& f : c.files)
    for (auto l : split_lines(f.content)) n += is_blank(l) ? 0 : 1;
  return n;
}

size_t fold_of(const std::string& id, uint64_t seed, size_t folds) { return fnv1a64(id, seed ^ 0x5bd1e995ULL) % folds; }

// Leave-one-fold-out rankers: per fold, a model learnt from the other folds' labelled cases of the knowledge base
// (their held-out features at this ε and r, and their statement-kind counts).
Result<std::vector<RankerModel>> fold_rankers(KnowledgeBase& kb, SearchEngine& engine, size_t folds, uint64_t seed,
                                              double epsilon, size_t r, double floor) {
  auto entries = kb.entries();
  TRY(entries);
  std::vector<int64_t> rowids;
  std::map<int64_t, size_t> fold;
  for (const auto& e : *entries)
    if (e.labelled) {
      rowids.push_back(e.rowid);
      fold[e.rowid] = fold_of(e.id, seed, folds);
    }
  struct Row {
    size_t fold;
    TrainingCase tc;
    std::vector<std::string> kinds;
  };
  std::vector<Row> rows;
  std::vector<KindCounts> counts(folds);
  StructureCache cache;
  const KindPrior none;
  auto status = for_each_held_out(
      kb, *entries, rowids, engine.index(),
      [&](int64_t rowid, const Case&) -> Result<std::vector<float>> { return engine.index().vector(rowid); },
      HeldOutOptions{r, floor, {}}, cache,
      [&](const HeldOut& h) -> Status {
        int64_t rowid = 0;
        for (const auto& e : *entries)
          if (e.id == h.held_out.id) rowid = e.rowid;
        const size_t f = fold.at(rowid);
        counts[f].add(h.view, h.held_out.faulty_lines);
        compute_features(h.view, h.faulty, h.similarity, epsilon, none, h.held_out.error_message);
        Row row{f, training_case(h.view, h.held_out.faulty_lines), {}};
        for (const auto& ql : h.view.lines)
          row.kinds.push_back(h.view.files[ql.file].structure->kind[static_cast<size_t>(ql.line - 1)]);
        rows.push_back(std::move(row));
        return {};
      });
  TRY(status);
  std::vector<RankerModel> models;
  for (size_t f = 0; f < folds; ++f) {
    KindCounts others;
    for (size_t g = 0; g < folds; ++g)
      if (g != f)
        for (const auto& [k, v] : counts[g].faulty) others.faulty[k] += v;
    for (size_t g = 0; g < folds; ++g)
      if (g != f)
        for (const auto& [k, v] : counts[g].reach) others.reach[k] += v;
    const KindPrior prior = others.prior();
    std::vector<TrainingCase> training;
    for (const auto& row : rows) {
      if (row.fold == f) continue;
      TrainingCase tc = row.tc;
      for (size_t i = 0; i < tc.rows.size(); ++i) tc.rows[i][kKindPrior] = prior.get(row.kinds[i]);
      training.push_back(std::move(tc));
    }
    models.push_back(train_ranker(std::move(training), prior, TrainingOptions{}));
  }
  return models;
}

// One (policy, ε, r) setting of an evaluation: the localize options every mode starts from and the ranker per query.
struct SettingContext {
  const std::string& policy_name;
  double epsilon;
  size_t r;
  const LocalizeOptions& options;
  const std::function<const RankerModel*(const Case&)>& ranker_for;
};

// What one case's localization by an LLM mode gave.
CaseResult llm_result(const Localization& loc, Mode mode) {
  CaseResult o;
  o.annotated = mode_annotates(mode) ? loc.annotations.size() : 0;
  if (mode_annotates(mode))
    for (const auto& an : loc.annotations) o.annotated_lines.push_back(an.line);
  o.kb_size = loc.filtered_size;
  if (!loc.retrieved.empty()) o.similarity = loc.retrieved.front().similarity;
  for (const auto& el : loc.ranked) o.predicted.push_back({el.path, el.line});
  if (loc.llm) {
    const LlmReport& l = *loc.llm;
    o.tokens_in = l.prompt_tokens;
    o.tokens_out = l.completion_tokens;
    o.tokens_estimated = !l.usage_reported;
    o.seconds = l.seconds;
    o.llm_used = l.used;
    o.filled = l.filled;
    o.error = l.error;
    o.cached = l.cached;
    o.answer_form = l.structured && !l.answer_format.empty() && l.answer_format != "none" ? "structured"
                    : l.answer_format.empty()                                             ? "none"
                                                                                          : l.answer_format;
  }
  return o;
}

// The modes without an LLM (builtin, traceback, annotation) at one setting: one localization per case serves all.
Result<std::vector<SettingRun>> run_offline_modes(KnowledgeBase& kb, SearchEngine& engine,
                                                  const std::vector<Case>& queries,
                                                  const std::vector<EvalMode>& offline, const SettingContext& at,
                                                  StructureCache& cache, const EvalOptions& options) {
  const auto ts = std::chrono::steady_clock::now();
  std::vector<SettingRun> runs(offline.size());
  for (size_t j = 0; j < offline.size(); ++j) runs[j].setting = {offline[j], at.policy_name, at.epsilon, at.r};
  Localizer localizer(&kb, &engine);
  for (size_t i = 0; i < queries.size(); ++i) {
    LocalizeOptions lq = at.options;
    lq.ranker = at.ranker_for(queries[i]);
    auto loc = localizer.localize(queries[i], lq);
    if (!loc) return std::unexpected(with_context(queries[i].id + ": ", loc.error()));
    CaseResult base;
    base.annotated = loc->annotations.size();
    for (const auto& an : loc->annotations) base.annotated_lines.push_back(an.line);
    base.kb_size = loc->filtered_size;
    if (!loc->retrieved.empty()) base.similarity = loc->retrieved.front().similarity;
    for (size_t j = 0; j < offline.size(); ++j) {
      const EvalMode& m = offline[j];
      CaseResult o = base;
      if (m == Mode::builtin) {
        for (const auto& el : loc->ranked) o.predicted.push_back({el.path, el.line});
      } else if (m.is(EvalMode::Reference::annotation)) {
        auto a = loc->annotations;
        std::stable_sort(a.begin(), a.end(),
                         [](const Annotation& x, const Annotation& y) { return x.distance < y.distance; });
        for (const auto& an : a) o.predicted.push_back(an.line);
      } else {  // traceback: the test files' frames, deepest first
        const QueryView view = make_query_view(queries[i], cache);
        std::set<std::pair<std::string, int>> seen;
        for (auto it = view.frames.rbegin(); it != view.frames.rend(); ++it)
          for (const auto& f : view.files)
            if (same_file(it->path, f.source->path) && seen.insert({f.source->path, it->line}).second)
              o.predicted.push_back({f.source->path, it->line});
      }
      runs[j].results.push_back(std::move(o));
    }
    if (options.progress)
      options.progress(
          "builtin/reference eps=" + fixed(at.epsilon, 2) + " " + at.policy_name + " r=" + std::to_string(at.r), i + 1,
          queries.size());
  }
  const double wall = seconds_since(ts);
  for (auto& run : runs) run.wall_seconds = wall;
  return runs;
}

// One LLM mode at one setting and k: every case's prompt through the LLM stage (the client's pool and cache).
Result<SettingRun> run_llm_mode(KnowledgeBase& kb, SearchEngine& engine, const std::vector<Case>& queries, Mode mode,
                                size_t k, const SettingContext& at, StructureCache& cache, const EvalOptions& options) {
  const auto ts = std::chrono::steady_clock::now();
  SettingRun run;
  run.setting = {mode, at.policy_name, at.epsilon, at.r};
  run.k_requested = k;
  LlmStageOptions so = options.stage;
  so.mode = mode;
  so.ranker_for = at.ranker_for;
  Localizer localizer(&kb, &engine);
  LlmStage stage(localizer, cache, options.client, so);
  LocalizeOptions lk = at.options;
  lk.k = k;
  const std::string label = run.setting.label() + " k=" + std::to_string(k);
  auto results = stage.run(queries, lk, [&](size_t done, size_t total) {
    if (options.progress) options.progress(label, done, total);
  });
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i]) return std::unexpected(with_context(queries[i].id + ": ", results[i].error()));
    run.results.push_back(llm_result(*results[i], so.mode));
  }
  run.wall_seconds = seconds_since(ts);
  return run;
}

}  // namespace

std::string EvalSetting::label() const {
  return std::string(mode.name()) + " eps=" + fixed(epsilon, 2) + " " + policy + " r=" + std::to_string(r);
}

Result<EvalMode> EvalMode::parse(std::string_view name) {
  if (name == "traceback") return EvalMode(Reference::traceback);
  if (name == "annotation") return EvalMode(Reference::annotation);
  auto mode = parse_mode(name);
  if (mode) return EvalMode(*mode);
  std::string known = "traceback, annotation";
  for (Mode m : {Mode::builtin, Mode::baseline, Mode::default_mode, Mode::random, Mode::annotation_free,
                 Mode::directive, Mode::naive_rag, Mode::hybrid})
    known += ", " + std::string(mode_name(m));
  return fail("unknown mode \"" + std::string(name) + "\" (known: " + known + ")");
}

std::string_view EvalMode::name() const {
  if (const Mode* m = std::get_if<Mode>(&value_)) return mode_name(*m);
  return std::get<Reference>(value_) == Reference::traceback ? "traceback" : "annotation";
}

std::optional<Mode> EvalMode::mode() const {
  if (const Mode* m = std::get_if<Mode>(&value_)) return *m;
  return std::nullopt;
}

bool EvalMode::is(Reference reference) const {
  const Reference* r = std::get_if<Reference>(&value_);
  return r && *r == reference;
}

bool EvalMode::needs_llm() const {
  const Mode* m = std::get_if<Mode>(&value_);
  return m && *m != Mode::builtin;
}

bool EvalMode::annotates() const { return !needs_llm() || mode_annotates(*mode()); }

Result<Evaluation> run_evaluation(KnowledgeBase& kb, SearchEngine& engine, const std::vector<Case>& cases,
                                  const EvalOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Evaluation e;
  e.options = options;
  std::vector<Case> queries;
  std::vector<const Case*> labelled;
  for (const auto& c : cases) {
    if (c.faulty_lines.empty()) continue;
    labelled.push_back(&c);
    queries.push_back(as_query(c));
    e.cases.push_back({c.id, c.project.empty() ? "corpus" : c.project, c.test_id, c.faulty_lines, non_blank_lines(c)});
  }
  if (queries.empty()) return fail("no labelled case to evaluate");
  for (const EvalMode& m : options.modes)
    if (m.needs_llm() && !options.client)
      return fail("mode " + std::string(m.name()) +
                  " needs an LLM: set SPARK_LLM_BASE_URL and SPARK_LLM_MODEL (or llm.base_url, llm.model)");
  const size_t k_max = *std::max_element(options.ks.begin(), options.ks.end());
  StructureCache cache;
  std::map<std::pair<double, size_t>, std::vector<RankerModel>> fold_models;
  const std::vector<RankerModel> no_models;
  for (const auto& policy_name : options.policies) {
    auto policy = parse_policy(policy_name);
    TRY(policy);
    policy->window_fraction = options.window_fraction;
    for (double epsilon : options.epsilons)
      for (size_t r : options.rs) {
        LocalizeOptions lo;
        lo.policy = *policy;
        lo.epsilon = epsilon;
        lo.r = r;
        lo.similarity_floor = options.similarity_floor;
        lo.seed = options.seed;
        lo.level = Level::line;
        lo.k = k_max;
        // The fold models depend on ε and r, not on the policy (the ranker learns from all labelled cases, as at
        // `spark index`): learnt once per (ε, r).
        const auto model_key = std::make_pair(epsilon, r);
        if (options.ranker_folds > 1 && !fold_models.contains(model_key)) {
          auto m = fold_rankers(kb, engine, options.ranker_folds, options.seed, epsilon, r, options.similarity_floor);
          TRY(m);
          if (e.ranker_origins.empty())
            for (size_t f = 0; f < m->size(); ++f)
              e.ranker_origins.push_back("fold " + std::to_string(f) + ": " + (*m)[f].origin);
          fold_models[model_key] = std::move(*m);
        }
        const std::vector<RankerModel>& models = options.ranker_folds > 1 ? fold_models.at(model_key) : no_models;
        const std::function<const RankerModel*(const Case&)> ranker_for = [&](const Case& q) -> const RankerModel* {
          return models.empty() ? nullptr : &models[fold_of(q.id, options.seed, models.size())];
        };
        // builtin, traceback and annotation come from one localization per case.
        std::vector<EvalMode> offline;
        for (const EvalMode& m : options.modes)
          if (!m.needs_llm()) offline.push_back(m);
        const SettingContext at{policy_name, epsilon, r, lo, ranker_for};
        if (!offline.empty()) {
          auto runs = run_offline_modes(kb, engine, queries, offline, at, cache, options);
          TRY(runs);
          for (auto& run : *runs) e.runs.push_back(std::move(run));
        }
        for (const EvalMode& m : options.modes) {
          if (!m.needs_llm()) continue;
          for (size_t k : options.ks) {
            auto run = run_llm_mode(kb, engine, queries, *m.mode(), k, at, cache, options);
            TRY(run);
            e.runs.push_back(std::move(*run));
          }
        }
      }
  }
  e.seconds = seconds_since(t0);
  return e;
}

ElementKeys::ElementKeys(const Evaluation& e, const std::vector<Case>& cases) {
  std::map<std::string, const Case*> by_id;
  for (const auto& c : cases) by_id[c.id] = &c;
  for (const auto& ec : e.cases) cases_.push_back(by_id.at(ec.id));
}

const ElementKeys::Units* ElementKeys::units(size_t case_index, const std::string& path) {
  for (const auto& f : cases_[case_index]->files) {
    if (f.path != path) continue;
    const uint64_t h = fnv1a64(f.content, fnv1a64(f.path)) ^ f.content.size();
    auto it = by_content_.find(h);
    if (it == by_content_.end()) {
      const auto s = structures_.get(f.content, f.path);
      Units u;
      const size_t n = split_lines(f.content).size();
      for (size_t i = 1; i <= n; ++i) {
        u.statement.push_back(unit_of(*s, Level::statement, static_cast<int>(i)));
        u.block.push_back(unit_of(*s, Level::block, static_cast<int>(i)));
        u.function.push_back(unit_of(*s, Level::function, static_cast<int>(i)));
      }
      it = by_content_.emplace(h, std::move(u)).first;
    }
    return &it->second;
  }
  return nullptr;
}

std::string ElementKeys::key(size_t case_index, const LineRef& ref, Level level) {
  if (level == Level::line) return ref.path + ":" + std::to_string(ref.line);
  const Units* u = units(case_index, ref.path);
  const size_t i = static_cast<size_t>(ref.line - 1);
  if (!u || ref.line < 1 || i >= u->statement.size()) return ref.path + ":" + std::to_string(ref.line);
  const auto& v = level == Level::statement ? u->statement : level == Level::block ? u->block : u->function;
  return ref.path + "#" + std::to_string(v[i]);
}

std::vector<CaseMetrics> run_case_metrics(const Evaluation& e, const SettingRun& run, Level level, size_t k,
                                          ElementKeys& keys) {
  std::vector<CaseMetrics> out;
  for (size_t i = 0; i < e.cases.size(); ++i) {
    std::vector<std::string> predicted, faulty;
    for (const auto& p : run.results[i].predicted) predicted.push_back(keys.key(i, p, level));
    for (const auto& f : e.cases[i].faulty) faulty.push_back(keys.key(i, f, level));
    out.push_back(case_metrics(predicted, faulty, k));
  }
  return out;
}

}  // namespace spark
