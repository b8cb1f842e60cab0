#include "localizer/verdict.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>

#include "base/text.h"
#include "formats/error_message.h"
#include "localizer/localizer.h"

namespace spark {

namespace {

// The lines of the failure that state the error: pytest's "E " lines, else every line (bounded).
std::vector<std::string_view> error_lines(std::string_view text) {
  std::vector<std::string_view> e, all;
  for (auto line : split_lines(text)) {
    const auto t = trim(line);
    if (t.empty()) continue;
    all.push_back(t);
    if (line.starts_with("E ")) e.push_back(trim(line.substr(1)));
  }
  return e.empty() ? all : e;
}

// "No module named 'a.b'" → "a"; "cannot import name 'x' from 'a.b' (/usr/lib/...)" → "a".
std::string top_module(std::string_view line, std::string_view after) {
  auto at = line.find(after);
  if (at == std::string_view::npos) return "";
  at += after.size();
  while (at < line.size() && (line[at] == '\'' || line[at] == '"' || line[at] == ' ')) ++at;
  size_t end = at;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
  return std::string(line.substr(at, end - at));
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::set<std::string> words(std::string_view text) {
  std::set<std::string> out;
  std::string w;
  const auto flush = [&] {
    if (w.size() >= 3 && !std::isdigit(static_cast<unsigned char>(w[0]))) out.insert(w);
    w.clear();
  };
  for (char c : text)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_')
      w += c;
    else
      flush();
  flush();
  return out;
}

double jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() || b.empty()) return 0;
  size_t common = 0;
  for (const auto& w : a) common += b.contains(w) ? 1 : 0;
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

std::string clip_reason(std::string_view s) { return clip(std::string(s), 120); }

// A raised exception's line: "OSError: …", "socket.gaierror: …", "requests.exceptions.ConnectionError: …",
// "Failed: Timeout >15.0s" (pytest-timeout), "TimeoutError" alone; not "assert …" or "Failed: DID NOT RAISE …".
bool exception_line(std::string_view line) {
  if (line.starts_with("Failed: Timeout")) return true;
  size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == '.'))
    ++i;
  if (i == 0 || (i < line.size() && line[i] != ':')) return false;
  std::string name(line.substr(0, i));
  if (const auto dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
  const std::string l = ascii_lower(name);
  if (l.find("assert") != std::string::npos) return false;  // a check's message, whatever it says
  return l.ends_with("error") || l.ends_with("exception") || l == "timeout" || l.ends_with("exit");
}

// A frame's file that is not the repository's: the standard library, an installed package, a frozen or built-in
// module ("<frozen importlib._bootstrap>", "<string>").
bool outside_repository(std::string_view path) {
  return path.empty() || path.front() == '<' || path.find("-packages/") != std::string_view::npos ||
         path.starts_with("/usr/lib/") || path.starts_with("/usr/local/lib/") ||
         path.find("/lib/python3") != std::string_view::npos || path.find("/.pyenv/") != std::string_view::npos ||
         path.find("/node_modules/") != std::string_view::npos || path.starts_with("node:") ||
         path.starts_with("java/") || path.starts_with("org/junit/") || path.starts_with("jdk/");
}

// What changed since the test last passed, as a term of the score (+1.5 its own test code changed, -2.0 only code
// outside the test code did, 0 otherwise) and its reason. `changes` holds the changed files (triage's, from the
// repository); `evidence` the changed lines the test runs (the ranker's, from the case's change), which say more: a
// test file whose change touched only other tests' lines is not this test's code changing.
double weigh_changes(const Case& query, const std::optional<ChangesSinceLastPass>& changes,
                     const std::optional<ChangeEvidence>& evidence, std::vector<std::string>& reasons) {
  std::vector<std::string> reached;
  if (changes)
    for (const auto& p : changes->test_code)
      if (std::any_of(query.files.begin(), query.files.end(),
                      [&](const SourceFile& f) { return same_file(p, f.path); }))
        reached.push_back(p);
  const std::string last_pass = changes ? changes->last_passed : evidence->last_pass;
  std::string since = " between its last pass at " + last_pass.substr(0, 10) + " and its failure";
  if (changes)
    since += changes->failing.size() == 40 ? " at " + changes->failing.substr(0, 10) : " in " + changes->failing;
  const auto named = [](const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size() && i < 3; ++i) out += (i ? ", " : "") + items[i];
    return clip_reason(out + (items.size() > 3 ? " and " + std::to_string(items.size() - 3) + " more" : ""));
  };
  if (evidence && !evidence->changed.empty()) {
    std::vector<std::string> lines;
    for (const auto& c : evidence->changed)
      lines.push_back(c.line.path + ":" + std::to_string(c.line.line) +
                      (c.commit.empty() ? "" : " in " + c.commit.substr(0, 10)));
    reasons.push_back("its test code changed" + since + ", lines it runs (" + named(lines) + ", +1.5)");
    return 1.5;
  }
  // The lines it runs are known and none changed: its files' changes were other tests' code.
  if (evidence) reached.clear();
  if (!reached.empty()) {
    reasons.push_back("its test code changed" + since + " (" + named(reached) + ", +1.5)");
    return 1.5;
  }
  const bool product = (changes && !changes->product.empty()) || (evidence && evidence->product_changes > 0);
  const bool test_files = (changes && !changes->test_code.empty()) || (evidence && evidence->changed_elsewhere > 0);
  if (product) {
    std::string why = "only code outside its test code changed" + since + " (" +
                      (changes && !changes->product.empty()
                           ? named(changes->product)
                           : std::to_string(evidence->product_changes) + " product names or values") +
                      ", -2.0)";
    if (evidence && evidence->changed_elsewhere > 0) why += "; other tests' lines of its files changed too";
    // The product changes the lines it runs use, each with its lines: "total (lines 1, 5)".
    std::vector<std::pair<std::string, std::string>> uses;
    if (evidence)
      for (const auto& u : evidence->uses) {
        auto it = std::find_if(uses.begin(), uses.end(), [&](const auto& p) { return p.first == u.token; });
        if (it == uses.end()) it = uses.insert(uses.end(), {u.token, ""});
        it->second += (it->second.empty() ? "" : ", ") + std::to_string(u.line.line);
      }
    std::vector<std::string> used;
    used.reserve(uses.size());
    for (const auto& [token, lines] : uses)
      used.push_back(token + " (line" + (lines.find(',') == std::string::npos ? " " : "s ") + lines + ")");
    if (!used.empty()) why += "; the lines it runs use what changed: " + named(used);
    reasons.push_back(why);
    return -2.0;
  }
  if (!test_files)
    reasons.push_back("no file changed" + since + " (a flaky test, or the machine)");
  else
    reasons.push_back("only other tests' code changed" + since +
                      (changes && !changes->test_code.empty() ? " (" + named(changes->test_code) + ")" : ""));
  return 0;
}

}  // namespace

std::optional<std::string> environment_reason(std::string_view error_message,
                                              const std::function<bool(std::string_view)>& own_module) {
  const std::string text = failure_text(error_message);
  for (const auto line : error_lines(text)) {
    // Only a raised exception's own line speaks for the machine ("OSError: …", "Failed: Timeout"), not an assertion
    // that quotes the words or a check that an error was raised ("DID NOT RAISE <class 'PermissionError'>").
    if (!exception_line(line) && line.find("command not found") == std::string_view::npos) continue;
    const std::string l = ascii_lower(line);
    // A module that cannot be imported: the machine's when it is not the repository's own. An import cycle of the
    // repository's own modules ("partially initialized module") is its code's.
    if (l.find("partially initialized module") != std::string::npos || l.find("circular import") != std::string::npos)
      return std::nullopt;
    for (const std::string_view marker : {"no module named", "cannot import name"}) {
      if (l.find(marker) == std::string::npos) continue;
      std::string module = marker == "no module named" ? top_module(line, "named") : top_module(line, " from ");
      if (module.empty()) continue;
      if (own_module && own_module(module)) return std::nullopt;  // the repository's own module: its code's fault
      return "a module that is not the repository's own cannot be imported (" + module + "): " + clip_reason(line);
    }
    static const std::vector<std::pair<std::string_view, std::string_view>> kMachine = {
        {"connectionrefusederror", "a connection was refused"},
        {"connection refused", "a connection was refused"},
        {"connectionreseterror", "a connection was reset"},
        {"name or service not known", "a host name could not be resolved"},
        {"temporary failure in name resolution", "a host name could not be resolved"},
        {"nodename nor servname", "a host name could not be resolved"},
        {"network is unreachable", "the network is unreachable"},
        {"failed: timeout", "the run timed out"},
        {"timeouterror", "the run timed out"},
        {"timed out", "the run timed out"},
        {"permissionerror", "a permission was denied"},
        {"permission denied", "a permission was denied"},
        {"read-only file system", "the file system is read-only"},
        {"no space left on device", "the disk is full"},
        {"too many open files", "the process ran out of file descriptors"},
        {"memoryerror", "memory ran out"},
        {"cannot allocate memory", "memory ran out"},
        {"command not found", "a program is not installed"},
    };
    // pytest's own temporary folders (tmp_path's roots: ".../pytest-of-USER" or ".../pytest-of-USER/pytest-N") could
    // not be made: the machine's temporary space, not a file a test made inside them.
    if (const auto at = l.find("pytest-of-"); at != std::string::npos && l.find("error") != std::string::npos) {
      const auto end = l.find_first_of("'\" ", at);
      const std::string_view rest = std::string_view(l).substr(at, end == std::string::npos ? l.npos : end - at);
      if (std::count(rest.begin(), rest.end(), '/') <= 1)
        return "pytest's temporary folder could not be made: " + clip_reason(line);
    }
    for (const auto& [needle, why] : kMachine)
      if (l.find(needle) != std::string::npos) return std::string(why) + ": " + clip_reason(line);
    // Node's error codes, as written (upper case: "FileNotFoundError" holds "enotfound" in lower case).
    static const std::vector<std::pair<std::string_view, std::string_view>> kCodes = {
        {"ECONNREFUSED", "a connection was refused"},
        {"ENOTFOUND", "a host name could not be resolved"},
        {"ETIMEDOUT", "the run timed out"}};
    for (const auto& [code, why] : kCodes)
      if (line.find(code) != std::string_view::npos) return std::string(why) + ": " + clip_reason(line);
  }
  return std::nullopt;
}

ProductExample product_example(std::string test_id, std::string commit, std::string_view message) {
  return {std::move(test_id), std::move(commit), words(failure_text(message))};
}

Verdict judge(const Case& query, const Localization& loc, const std::optional<TestHistory>& history,
              const VerdictContext& context, const std::optional<ChangesSinceLastPass>& changes) {
  Verdict v;
  if (history && history->flaky) {
    v.kind = VerdictKind::flaky;
    v.probability = 0.9;
    v.reasons.push_back("the test failed and passed at the same commit " + std::to_string(history->flaky_runs) +
                        " time(s): its failures are not learnt as cases");
    return v;
  }
  const auto frames = parse_traceback(failure_text(query.error_message));
  const auto own_module = [&](std::string_view module) {
    const std::string m(module);
    std::error_code ec;
    if (!context.repository.empty())
      for (const auto& p : {context.repository / m, context.repository / (m + ".py"), context.repository / "src" / m,
                            context.repository / "lib" / m})
        if (std::filesystem::exists(p, ec)) return true;
    // The traceback or the test files name it as a folder of the repository's.
    const auto in_path = [&](std::string_view path) {
      return path.starts_with(m + "/") || path.find("/" + m + "/") != std::string_view::npos;
    };
    for (const auto& f : frames)
      if (in_path(f.path) && f.path.find("-packages/") == std::string::npos) return true;
    // A test file or helper module of the query's own (tests/calc_helpers.py for calc_helpers) is the repository's.
    for (const auto& f : query.files)
      if (in_path(f.path) || f.path == m + ".py" || f.path.ends_with("/" + m + ".py")) return true;
    return false;
  };
  if (auto why = environment_reason(query.error_message, own_module)) {
    v.kind = VerdictKind::environment;
    v.probability = 0.85;
    v.reasons.push_back(*why);
    return v;
  }

  double score = 0;
  // What changed since the test last passed comes first: a regression is most likely in the code that changed.
  if (changes || loc.change) score += weigh_changes(query, changes, loc.change, v.reasons);
  // The deepest frame in the repository's own code: the standard library, installed packages and frozen modules are
  // neither the test nor the product (a test can misuse them, a machine can break them).
  const TracebackFrame* deepest = nullptr;
  for (auto it = frames.rbegin(); it != frames.rend() && !deepest; ++it)
    if (!outside_repository(it->path)) deepest = &*it;
  bool raised_in_test = false;
  if (deepest)
    for (const auto& f : query.files) raised_in_test = raised_in_test || same_file(deepest->path, f.path);
  const bool assertion = loc.gate && loc.gate->form == "assertion";
  if (raised_in_test) {
    score += 1.0;
    v.reasons.push_back("raised in the test's own code (+1.0)");
  } else if (deepest && !assertion) {
    score -= 1.0;
    v.reasons.push_back("raised beneath the test, in " + clip_reason(deepest->path) + " (-1.0)");
  }
  double best = 0;
  std::string best_id;
  for (const auto& rc : loc.retrieved)
    if (rc.similarity > best) {
      best = rc.similarity;
      best_id = rc.id;
    }
  if (best >= 0.8) {
    score += 1.0;
    v.reasons.push_back("a similar failure (" + best_id + ", similarity " + fixed(best, 2) +
                        ") was the test's fault (+1.0)");
  } else if (best >= 0.6) {
    score += 0.5;
    v.reasons.push_back("a somewhat similar failure (" + best_id + ", similarity " + fixed(best, 2) +
                        ") was the test's fault (+0.5)");
  }
  if (!loc.annotations.empty()) {
    score += 0.5;
    v.reasons.push_back("a line of the test resembles a past faulty line (+0.5)");
  }
  if (!context.product_examples.empty()) {
    const auto mine = words(failure_text(query.error_message));
    double closest = 0;
    const ProductExample* example = nullptr;
    for (const auto& p : context.product_examples)
      if (const double j = jaccard(mine, p.words); j > closest) {
        closest = j;
        example = &p;
      }
    constexpr double kReadsLike = 0.5;
    if (example && closest >= kReadsLike && closest > best) {
      score -= 1.5;
      v.reasons.push_back("reads like a failure of " + example->test_id + " at " + example->commit.substr(0, 10) +
                          " that was fixed outside the test code (word overlap " + fixed(closest, 2) + ", -1.5)");
    }
  }
  const double p_test = sigmoid(score);
  v.kind = p_test >= 0.5 ? VerdictKind::test : VerdictKind::product;
  v.probability = std::max(p_test, 1.0 - p_test);
  if (v.probability < kVerdictConfidenceFloor) {
    v.reasons.push_back("the evidence is too weak to say (" + std::string(p_test >= 0.5 ? "test" : "product") + " " +
                        fixed(v.probability, 2) + " < " + fixed(kVerdictConfidenceFloor, 2) + ")");
    v.kind = VerdictKind::unknown;
  }
  return v;
}

}  // namespace spark
