#include "localizer/llm_stage.h"

#include <set>
#include <unordered_map>

#include "base/text.h"
#include "code/structure_cache.h"
#include "code/tokens.h"

namespace spark {

namespace {

struct UnitSpan {
  int key = 0, first = 0, last = 0;
};

// The unit `line` belongs to at `level`, with its first and last line.
UnitSpan unit_span(const CodeStructure& s, Level level, int line, size_t line_count) {
  if (level == Level::line) return {line, line, line};
  const int u = unit_of(s, level, line);
  UnitSpan span{u, line, line};
  while (span.first > 1 && unit_of(s, level, span.first - 1) == u) --span.first;
  while (static_cast<size_t>(span.last) < line_count && unit_of(s, level, span.last + 1) == u) ++span.last;
  return span;
}

}  // namespace

std::vector<RankedElement> merge_answer(const Case& query, const Prompt& prompt, const ParsedAnswer& answer,
                                        const std::vector<RankedElement>& builtin, Level level, size_t k,
                                        StructureCache& cache) {
  std::vector<RankedElement> out;
  std::set<std::pair<std::string, int>> taken;  // (path, first line of the element)
  std::map<std::pair<std::string, int>, const RankedElement*> by_first;
  for (const auto& e : builtin) by_first[{e.path, e.line}] = &e;
  size_t rank = 0;
  for (int id : answer.ids) {
    if (out.size() >= k) break;
    ++rank;
    const LineRef& ref = prompt.elements[static_cast<size_t>(id)];
    const SourceFile* file = nullptr;
    for (const auto& f : query.files)
      if (f.path == ref.path) file = &f;
    if (!file) continue;
    const auto lines = split_lines(file->content);
    const auto structure = cache.get(file->content, file->path, query.language);
    const UnitSpan span = unit_span(*structure, level, ref.line, lines.size());
    if (!taken.insert({ref.path, span.first}).second) continue;  // two lines of one unit
    RankedElement e;
    auto known = by_first.find({ref.path, span.first});
    if (known != by_first.end()) e = *known->second;
    e.source = "llm";
    e.path = ref.path;
    e.line = span.first;
    e.end_line = span.last;
    if (known == by_first.end()) {
      e.score = 0;
      e.code = std::string(trim(lines[static_cast<size_t>(span.first - 1)]));
    }
    e.reasons.insert(e.reasons.begin(),
                     "ranked #" + std::to_string(rank) + " by the LLM" +
                         (level == Level::line ? "" : " (its line " + std::to_string(ref.line) + ")"));
    out.push_back(std::move(e));
  }
  for (const auto& b : builtin) {
    if (out.size() >= k) break;
    if (!taken.insert({b.path, b.line}).second) continue;
    RankedElement e = b;
    e.source = "filled";
    e.reasons.insert(e.reasons.begin(), "filled in from the built-in ranker (the LLM gave fewer than k usable ids)");
    out.push_back(std::move(e));
  }
  return out;
}

PromptOptions LlmStage::prompt_options(size_t k) {
  PromptOptions popts;
  popts.mode = options_.mode;
  popts.k = k;
  popts.template_text = options_.template_text;
  popts.redactor = options_.redactor.get();
  popts.tokens = options_.tokens;
  popts.test_scope_only = options_.test_scope_only;
  if (client_) {
    const LlmOptions& o = client_->options();
    popts.tokens = {o.context_tokens, static_cast<size_t>(std::max(1, o.max_tokens)), tokens_per_estimate(o.model)};
    // A server that says its context (llama.cpp's -c per slot, vLLM's --max-model-len) is believed over a larger
    // setting: a longer prompt would only be refused. A smaller setting stands (a team's own limit on cost).
    if (options_.mode != Mode::builtin) {
      const ServerFacts& f = client_->facts();
      if (f.context_tokens && f.context_tokens < popts.tokens.context) {
        popts.tokens.context = f.context_tokens;
        context_source_ = f.context_source;
      }
      // A server that counts needs no guess: start from the estimate and learn from its counts (fitted_prompt).
      if (f.counts_tokens) popts.tokens.scale = 1.0;
    }
  }
  return popts;
}

Result<Prompt> LlmStage::fitted_prompt(const Case& query, const Localization& loc, PromptOptions& popts,
                                       bool& counted) {
  counted = false;
  for (int attempt = 0;; ++attempt) {
    auto p = build_prompt_for(query, loc, popts);
    if (!p || !client_) return p;
    const auto n = client_->count_tokens(p->text);
    if (!n) return p;
    counted = true;
    const size_t limit = popts.tokens.context - std::min(popts.tokens.context, popts.tokens.answer);
    const size_t estimate = std::max<size_t>(1, estimate_tokens(p->text));
    p->estimated_tokens = *n;
    // Fits, or cut three times: sent (a server that refuses it is read by retry_overflows, and the failure falls
    // back to the built-in ranker with the reason if it refuses again).
    if (*n <= limit || attempt == 2 || popts.tokens.scale >= kMaxTokenScale) return p;
    // The model's tokenizer makes more of this text than the estimate: learn by how much, a little over.
    popts.tokens.scale =
        std::min(kMaxTokenScale,
                 std::max(popts.tokens.scale * 1.05, 1.02 * static_cast<double>(*n) / static_cast<double>(estimate)));
  }
}

void LlmStage::retry_overflows(const std::vector<Case>& queries, const std::vector<Result<Localization>>& results,
                               std::vector<Sent>& sent, std::vector<Result<ChatAnswer>>& answers,
                               const PromptOptions& popts) {
  std::vector<size_t> again;  // query indexes
  for (size_t i = 0; i < queries.size(); ++i) {
    const size_t r = sent[i].request;
    if (r != static_cast<size_t>(-1) && answers[r] && answers[r]->overflow && results[i]) again.push_back(i);
  }
  if (again.empty()) return;
  RequestPool pool(*client_, again.size());
  std::vector<size_t> asked;  // query indexes, in submission order
  for (size_t i : again) {
    Sent& s = sent[i];
    const ContextOverflow o = *answers[s.request]->overflow;
    const std::string counts =
        (o.prompt_tokens ? std::to_string(o.prompt_tokens) + " tokens" : std::string("the prompt")) + " against " +
        (o.context_tokens ? std::to_string(o.context_tokens) : std::string("a smaller context")) + " of context";
    PromptOptions cut = popts;
    cut.tokens = s.budget;
    if (o.context_tokens && o.context_tokens < cut.tokens.context) cut.tokens.context = o.context_tokens;
    const size_t estimate = std::max<size_t>(1, estimate_tokens(s.prompt.text));
    cut.tokens.scale = std::min(
        kMaxTokenScale, o.prompt_tokens ? std::max(cut.tokens.scale, 1.05 * static_cast<double>(o.prompt_tokens) /
                                                                         static_cast<double>(estimate))
                                        : cut.tokens.scale * 1.5);
    auto p = build_prompt_for(queries[i], *results[i], cut);
    if (!p) {
      answers[s.request] = fail("the server refused the prompt as too long (" + counts +
                                ") and a shorter one could not be made: " + p.error().message);
      continue;
    }
    p->notes.push_back("the server refused the prompt as too long (" + counts + "); cut to fit " +
                       std::to_string(cut.tokens.context) + " tokens and asked once more");
    s.prompt = std::move(*p);
    s.budget = cut.tokens;
    s.context_source = "the server's refusal of a longer prompt";
    s.counted = false;
    pool.submit(asked.size(), {s.prompt.text, s.prompt.schema});
    asked.push_back(i);
  }
  auto more = pool.finish();
  for (size_t j = 0; j < asked.size(); ++j) {
    auto& slot = answers[sent[asked[j]].request];
    slot = std::move(more[j]);
    if (slot && slot->overflow)
      slot = fail("the server refused the prompt as too long twice, the second time cut to fit: " +
                  slot->overflow->message);
  }
}

Result<Prompt> LlmStage::build_prompt_for(const Case& query, const Localization& loc, PromptOptions& popts) {
  std::optional<Case> similar;
  if (options_.mode == Mode::naive_rag && !loc.retrieved.empty() && localizer_.knowledge_base()) {
    auto c = localizer_.knowledge_base()->load(loc.retrieved.front().rowid);
    TRY(c);
    similar = std::move(*c);
  }
  QueryView view = make_query_view(query, cache_);
  if (options_.mode == Mode::hybrid) {
    popts.ranker_top.clear();
    for (const auto& e : loc.ranked)
      if (popts.ranker_top.size() < popts.k) popts.ranker_top.push_back({e.path, e.line});
  }
  return build_prompt(query, view, loc.annotations, loc.retrieved, similar ? &*similar : nullptr, cache_, popts);
}

namespace {

// The report of a prompt, before any answer.
LlmReport prompt_report(const Prompt& p, Mode mode, const LlmClient* client, bool keep_prompt,
                        const TokenBudget& context) {
  LlmReport r;
  r.mode = std::string(mode_name(mode));
  if (client) {
    r.model = client->options().model;
    r.endpoint = client->endpoint();
  }
  r.context_tokens = context.context;
  r.token_scale = context.scale;
  r.shown_lines = p.shown_lines;
  r.total_lines = p.total_lines;
  r.truncated = p.truncated;
  r.redactions = p.redactions;
  if (keep_prompt) r.prompt = p.text;
  r.prompt_tokens = p.estimated_tokens;
  return r;
}

// The model's answer read against its prompt: the ids it names, or the code of shown lines it quotes instead.
ParsedAnswer read_answer(const ChatAnswer& a, const Prompt& p, const Case& query) {
  std::unordered_map<std::string, int> id_by_code;
  for (size_t id = 1; id < p.elements.size(); ++id) {
    if (!p.shown[id]) continue;
    for (const auto& f : query.files)
      if (f.path == p.elements[id].path) {
        const auto lines = split_lines(f.content);
        id_by_code.emplace(std::string(trim(lines[static_cast<size_t>(p.elements[id].line - 1)])),
                           static_cast<int>(id));
      }
  }
  return parse_answer(
      a.content, p.max_element_id,
      [&](int id) { return static_cast<size_t>(id) < p.shown.size() && p.shown[static_cast<size_t>(id)]; },
      [&](std::string_view code) -> std::optional<int> {
        auto it = id_by_code.find(std::string(code));
        return it == id_by_code.end() ? std::nullopt : std::optional<int>(it->second);
      });
}

}  // namespace

void LlmStage::use_answer(const Case& query, const Prompt& p, const ChatAnswer& a, Level level, size_t k,
                          Localization& loc, LlmReport& r) {
  r.prompt_tokens = a.prompt_tokens;
  r.completion_tokens = a.completion_tokens;
  r.usage_reported = a.usage_reported;
  r.seconds = a.seconds;
  r.attempts = a.attempts;
  r.structured = a.structured;
  r.cached = a.cached;
  r.raw_answer = a.content;
  for (const auto& n : a.notes) loc.notes.push_back("LLM: " + n);
  const ParsedAnswer parsed = read_answer(a, p, query);
  r.answer_format = parsed.format;
  r.out_of_range = parsed.out_of_range;
  r.duplicates = parsed.duplicates;
  r.not_code = parsed.not_code;
  loc.ranked = merge_answer(query, p, parsed, loc.ranked, level, k, cache_);
  for (const auto& e : loc.ranked) (e.source == "llm" ? r.from_llm : r.filled)++;
  r.used = r.from_llm > 0;
  if (!r.used) r.error = "the answer named no usable " + std::string(level_name(level)) + " id";
  if (!r.used)
    loc.notes.push_back("the LLM could not be used (" + r.error + "): ranked by spark's built-in ranker");
  else if (r.filled > 0)
    loc.notes.push_back(
        "the LLM's answer gave " + std::to_string(r.from_llm) + " usable id(s) of " + std::to_string(k) + "; " +
        std::to_string(r.filled) + " filled in from the built-in ranker" +
        (parsed.out_of_range ? " (" + std::to_string(parsed.out_of_range) + " out of range dropped)" : ""));
  loc.ranker = r.used ? "llm " + r.model + " (" + r.mode + " mode)" : loc.ranker;
}

// L = LLM(τ', k) for every query: build_prompts (localize, then the mode's prompt; each request goes out as soon as
// its prompt is built, while later failures are still being retrieved and annotated), ask (the pool's answers), and
// read_answers (each answer parsed and merged with the built-in ranking).
std::vector<Result<Localization>> LlmStage::run(const std::vector<Case>& queries, LocalizeOptions options,
                                                const std::function<void(size_t, size_t)>& progress) {
  const size_t k = options.k;
  options.retrieval = mode_retrieval(options_.mode);
  // A prompt is built for the LLM modes when it is sent or shown; the builtin mode has none.
  const bool want_prompt = options_.mode != Mode::builtin && (client_ || options_.keep_prompt);
  const bool ask = want_prompt && client_;
  // merge_answer fills from the built-in top k: each of the j usable ids the model gives takes at most one of its
  // elements, so at least the k - j still needed are left.
  std::vector<Result<Localization>> results;
  std::vector<Sent> sent(queries.size());
  std::optional<RequestPool> pool;
  PromptOptions popts = prompt_options(k);
  if (ask) pool.emplace(*client_, queries.size(), progress);
  size_t asked = 0;
  for (size_t i = 0; i < queries.size(); ++i) {  // build_prompts
    LocalizeOptions lq = options;
    if (options_.ranker_for) lq.ranker = options_.ranker_for(queries[i]);
    auto loc = localizer_.localize(queries[i], lq);
    if (loc && want_prompt) {
      Sent& s = sent[i];
      auto p = ask ? fitted_prompt(queries[i], *loc, popts, s.counted) : build_prompt_for(queries[i], *loc, popts);
      if (!p) {
        results.push_back(std::unexpected(p.error()));
        continue;
      }
      s.prompt = std::move(*p);
      s.budget = popts.tokens;
      s.context_source = context_source_;
      if (ask) {
        s.request = asked++;
        pool->submit(s.request, {s.prompt.text, s.prompt.schema});
      }
    }
    results.push_back(std::move(loc));
  }
  std::vector<Result<ChatAnswer>> answers;  // ask
  if (pool) answers = pool->finish();
  if (ask) retry_overflows(queries, results, sent, answers, popts);
  for (size_t i = 0; i < queries.size(); ++i) {  // read_answers
    if (!results[i]) continue;
    Localization& loc = *results[i];
    if (want_prompt) {
      const Sent& s = sent[i];
      LlmReport r = prompt_report(s.prompt, options_.mode, client_, options_.keep_prompt, s.budget);
      r.context_source = s.context_source;
      r.counted = s.counted;
      for (const auto& n : s.prompt.notes) loc.notes.push_back(n);
      if (s.request != static_cast<size_t>(-1)) {
        if (const auto& a = answers[s.request]; a) {
          use_answer(queries[i], s.prompt, *a, options.level, k, loc, r);
        } else {
          r.error = a.error().message;
          loc.notes.push_back("the LLM could not be used (" + r.error + "): ranked by spark's built-in ranker");
        }
      }
      loc.llm = std::move(r);
    }
    if (loc.ranked.size() > k) loc.ranked.resize(k);
  }
  return results;
}

}  // namespace spark
