#include "localizer/policy.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace spark {
namespace {

using Filter = std::function<std::vector<const CaseFacts*>(const std::vector<const CaseFacts*>&, int64_t, size_t)>;

std::vector<const CaseFacts*> preceding(const std::vector<const CaseFacts*>& c, int64_t t) {
  std::vector<const CaseFacts*> out;
  for (const auto* e : c)
    if (e->failure_epoch < t) out.push_back(e);
  return out;
}

std::vector<const CaseFacts*> closest(std::vector<const CaseFacts*> c, int64_t t, size_t window) {
  std::stable_sort(c.begin(), c.end(), [t](const CaseFacts* a, const CaseFacts* b) {
    const auto da = std::llabs(a->failure_epoch - t), db = std::llabs(b->failure_epoch - t);
    if (da != db) return da < db;
    if (a->failure_epoch != b->failure_epoch) return a->failure_epoch < b->failure_epoch;
    return a->rowid < b->rowid;
  });
  if (c.size() > window) c.resize(window);
  return c;
}

// The registry: add a policy here and it is available everywhere (--policy, eval, docs list).
const std::map<std::string, Filter>& registry() {
  static const std::map<std::string, Filter> r = {
      {"all", [](const auto& c, int64_t, size_t) { return c; }},
      {"all-preceding", [](const auto& c, int64_t t, size_t) { return preceding(c, t); }},
      {"closest-by-time", [](const auto& c, int64_t t, size_t w) { return closest(c, t, w); }},
      {"closest-time-preceding", [](const auto& c, int64_t t, size_t w) { return closest(preceding(c, t), t, w); }},
  };
  return r;
}

}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

Result<Policy> parse_policy(const std::string& name) {
  if (!registry().contains(name)) {
    std::string known;
    for (const auto& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
    return fail("unknown policy \"" + name + "\" (known: " + known + ")");
  }
  Policy p;
  p.name = name;
  return p;
}

std::vector<int64_t> filter_by_policy(const std::vector<CaseEntry>& cases, int64_t query_epoch, const Policy& policy) {
  return filter_by_policy(facts_of(cases), query_epoch, policy);
}

std::vector<int64_t> filter_by_policy(std::span<const CaseFacts> cases, int64_t query_epoch, const Policy& policy) {
  std::vector<const CaseFacts*> labelled;
  for (const auto& e : cases)
    if (e.labelled) labelled.push_back(&e);
  const size_t window =
      policy.window > 0 ? policy.window
                        : std::max<size_t>(1, static_cast<size_t>(std::ceil(policy.window_fraction * labelled.size())));
  auto it = registry().find(policy.name);
  const auto kept = it == registry().end() ? labelled : it->second(labelled, query_epoch, window);
  std::vector<int64_t> out;
  out.reserve(kept.size());
  for (const auto* e : kept) out.push_back(e->rowid);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace spark
