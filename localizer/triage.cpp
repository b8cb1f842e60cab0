#include "localizer/triage.h"

#include <filesystem>
#include <optional>
#include <unordered_map>

#include "localizer/suggest.h"
#include "localizer/verdict.h"
#include "miner/change_since.h"
#include "miner/git_history.h"
#include "miner/miner.h"
#include "miner/mining_store.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// What changed between a test's last recorded pass and this failure, for the verdict: from the last pass to the
// failure's commit (`commit`), or to the work tree when there is none. nullopt when the history has no pass, or git
// cannot tell (a commit a shallow clone lacks).
std::optional<ChangesSinceLastPass> changes_since_last_pass(const GitRepository& repo, const TestHistory& h,
                                                            const std::string& commit, const TestCodeRule& rule) {
  if (!h.last_passed_commit) return std::nullopt;
  ChangesSinceLastPass c;
  c.last_passed = *h.last_passed_commit;
  c.failing = commit.empty() ? "the work tree" : commit;
  auto paths = commit.empty() ? repo.changed_in_work_tree(c.last_passed) : repo.changed_paths(c.last_passed, commit);
  if (!paths) return std::nullopt;
  for (auto& p : *paths) (rule.matches(p) ? c.test_code : c.product).push_back(std::move(p));
  return c;
}

// The query's files as the repository names them: a --test file is named from the current folder, which may be below
// the repository's top. nullopt for a file outside the work tree.
std::optional<std::string> repository_path(const GitRepository& repo, const std::string& path) {
  std::error_code ec;
  const fs::path top = fs::weakly_canonical(repo.workdir(), ec);
  const fs::path p(path);
  // A repository path (a report's, a recorded one) names a file under the top; a --test file, one from here.
  const fs::path file = !p.is_absolute() && fs::exists(top / p, ec) ? top / p : fs::absolute(p, ec);
  const fs::path rel = fs::weakly_canonical(file, ec).lexically_relative(top);
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel.generic_string();
}

}  // namespace

Status add_change_since(KnowledgeBase* kb, const TriageContext& triage, std::vector<Case>& queries,
                        std::vector<std::string>& notes) {
  std::optional<MiningStore> store;
  if (kb && triage.since.empty()) store.emplace(*kb);
  if (!store && triage.since.empty()) return {};
  std::unique_ptr<GitRepository> repo;
  const auto repository = [&]() -> Result<const GitRepository*> {
    if (!repo) {
      auto opened = GitRepository::open(triage.repository.empty() ? "." : triage.repository);
      TRY(opened);
      repo = std::move(*opened);
    }
    return repo.get();
  };
  auto rule = triage.test_code.empty() ? Result<TestCodeRule>(TestCodeRule()) : TestCodeRule::parse(triage.test_code);
  if (!rule) rule = TestCodeRule();  // add_triage says so
  const int64_t now = now_epoch();
  for (auto& q : queries) {
    if (q.change) continue;
    std::string since = triage.since, breaking;
    if (since.empty()) {
      auto h = store->history(q.test_id, now);
      if (!h || !*h || !(*h)->last_passed_commit) continue;
      since = *(*h)->last_passed_commit;
      breaking = (*h)->first_failing_commit.value_or("");
    }
    auto r = repository();
    if (!r) {
      if (!triage.since.empty()) return fail("--since " + triage.since + ": " + r.error().message);
      notes.push_back("what changed since " + q.test_id + " last passed is not known: " + r.error().message);
      return {};
    }
    // The files as git names them, and back.
    std::vector<SourceFile> files;
    std::map<std::string, std::string> named;  // repository path → the query's
    for (const auto& f : q.files)
      if (auto p = repository_path(**r, f.path)) {
        named[*p] = f.path;
        files.push_back({*p, f.content});
      }
    // The failure's commit: the run's (record's), a case's own (--case), else HEAD and the files as they are.
    const std::string to = !triage.commit.empty() ? triage.commit : q.faulty_commit.value_or("HEAD");
    auto change = change_since(**r, since, to, breaking, files, {*rule, 1000});
    if (!change) {
      if (!triage.since.empty()) return fail("--since " + triage.since + ": " + change.error().message);
      notes.push_back(q.test_id + ": what changed since its last pass at " + since.substr(0, 10) +
                      " is not known: " + change.error().message);
      continue;
    }
    for (auto& l : change->lines) l.at.path = named[l.at.path];
    q.change = std::move(*change);
  }
  return {};
}

void add_triage(KnowledgeBase* kb, const TriageContext& triage, const std::vector<Case>& queries,
                std::vector<Result<Localization>>& results, std::vector<std::string>& notes) {
  VerdictContext context;
  std::error_code ec;
  context.repository =
      fs::weakly_canonical(triage.repository.empty() ? fs::path(".") : fs::path(triage.repository), ec);
  std::optional<MiningStore> store;
  if (kb) {
    store.emplace(*kb);
    constexpr size_t kExamples = 2000;  // the newest; a word-overlap pass over them per failure stays cheap
    if (auto product = store->product_failures(kExamples); product) {
      for (auto& p : *product)
        context.product_examples.push_back(product_example(std::move(p.test_id), std::move(p.commit), p.message));
    } else {
      notes.push_back("the knowledge base's failures could not be read: no product examples (" +
                      product.error().message + ")");
    }
  }
  // Each run's commit time, from the repository: runs recorded out of order count in commit order. The repository is
  // opened at the first lookup (history() asks only for a test with two runs or more: localize without recorded runs
  // loads no git library), one lookup per commit.
  std::optional<std::unique_ptr<GitRepository>> repo;
  std::unordered_map<std::string, std::optional<int64_t>> times;
  const auto repository = [&]() -> const GitRepository* {
    if (!repo) {
      auto opened = GitRepository::open(context.repository);
      repo.emplace(opened ? std::move(*opened) : nullptr);
    }
    return repo->get();
  };
  const auto commit_time = [&](const std::string& sha) -> std::optional<int64_t> {
    auto [it, added] = times.try_emplace(sha);
    if (added && repository())
      if (auto t = repository()->commit_time(sha); t) it->second = *t;
    return it->second;
  };
  auto rule =
      triage.test_code.empty() ? Result<TestCodeRule>(TestCodeRule()) : TestCodeRule::parse(triage.test_code);
  if (!rule) {
    notes.push_back("mine.test_code: " + rule.error().message + "; the default rule is used");
    rule = TestCodeRule();
  }
  const int64_t now = now_epoch();
  for (size_t i = 0; i < results.size() && i < queries.size(); ++i) {
    if (!results[i]) continue;
    Localization& loc = *results[i];
    if (store) {
      auto h = store->history(queries[i].test_id, now, commit_time);
      if (h)
        loc.history = std::move(*h);
      else
        loc.notes.push_back("its recorded runs could not be read: " + h.error().message);
    }
    std::optional<ChangesSinceLastPass> changes;
    if (loc.history && loc.history->last_passed_commit && repository())
      changes = changes_since_last_pass(*repository(), *loc.history, triage.commit, *rule);
    // Suggestions follow the final ranking (an LLM's, when one ranked).
    if (loc.llm && loc.llm->used) loc.suggestions = suggest_edits(queries[i], loc);
    loc.verdict = judge(queries[i], loc, loc.history, context, changes);
  }
}


}  // namespace spark
