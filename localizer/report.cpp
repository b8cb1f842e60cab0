#include "localizer/report.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/junit.h"

namespace spark {

using nlohmann::json;

namespace {

std::string location(const RankedElement& e) {
  return e.path + ":" + std::to_string(e.line) + (e.end_line > e.line ? "-" + std::to_string(e.end_line) : "");
}

std::string short_commit(const std::optional<std::string>& sha) { return sha ? sha->substr(0, 10) : std::string("?"); }

// "verified" / "not verified: AssertionError: …" / "not run: why", for a suggestion that was verified (--verify); ""
// when it was not asked for.
std::string verification_words(const Suggestion& sg) {
  if (!sg.verification) return "";
  std::string out(verify_status_name(sg.verification->status));
  if (sg.verification->status == VerifyStatus::verified) return out + ": the test passes with this edit";
  if (!sg.verification->message.empty()) out += ": " + sg.verification->message;
  return out;
}

// The failure's history and verdict (formats/triage.h), null when not known.
void add_triage_json(const Localization& loc, json& j) {
  if (loc.history) {
    const TestHistory& h = *loc.history;
    const auto opt = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
    j["history"] = {{"first_failing_commit", opt(h.first_failing_commit)},
                    {"failing_runs", h.failing_runs},
                    {"last_passed_commit", opt(h.last_passed_commit)},
                    {"age_days", h.age_days ? json(*h.age_days) : json(nullptr)},
                    {"flaky", h.flaky},
                    {"flaky_runs", h.flaky_runs},
                    {"runs", h.runs}};
  } else {
    j["history"] = nullptr;
  }
  if (loc.change) {
    const ChangeEvidence& c = *loc.change;
    json changed = json::array(), uses = json::array();
    for (const auto& l : c.changed)
      changed.push_back({{"path", l.line.path},
                         {"line", l.line.line},
                         {"commit", l.commit.empty() ? json(nullptr) : json(l.commit)}});
    for (const auto& u : c.uses)
      uses.push_back({{"path", u.line.path},
                      {"line", u.line.line},
                      {u.literal ? "literal" : "name", u.token},
                      {"changed_in", u.path},
                      {"commit", u.commit.empty() ? json(nullptr) : json(u.commit)}});
    j["change"] = {{"last_pass_commit", c.last_pass},
                   {"break_commit", c.break_commit.empty() ? json(nullptr) : json(c.break_commit)},
                   {"changed_lines", std::move(changed)},
                   {"changed_lines_elsewhere", c.changed_elsewhere},
                   {"uses_product_change", std::move(uses)},
                   {"product_changes", c.product_changes}};
  } else {
    j["change"] = nullptr;
  }
  if (loc.verdict)
    j["verdict"] = {{"class", verdict_kind_name(loc.verdict->kind)},
                    {"probability", loc.verdict->probability},
                    {"reasons", loc.verdict->reasons}};
  else
    j["verdict"] = nullptr;
}

}  // namespace

std::string history_line(const TestHistory& h) {
  std::string out;
  if (h.first_failing_commit) {
    out = "failing since " + short_commit(h.first_failing_commit) + ", " + std::to_string(h.failing_runs) +
          " failing run" + (h.failing_runs == 1 ? "" : "s");
    if (h.age_days) out += ", " + fixed(*h.age_days, *h.age_days < 10 ? 1 : 0) + " days";
    out += h.last_passed_commit ? "; last passed at " + short_commit(h.last_passed_commit)
                                : "; never passed in the recorded runs";
  } else {
    out = "no failing run recorded before this one";
    if (h.last_passed_commit) out += "; last passed at " + short_commit(h.last_passed_commit);
  }
  if (h.flaky)
    out += "; failed and passed at the same commit " + std::to_string(h.flaky_runs) + " time" +
           (h.flaky_runs == 1 ? "" : "s") + ": flaky (never learnt as a case)";
  return out;
}

std::string change_line(const ChangeEvidence& c) {
  std::string out = "since the last pass at " + c.last_pass.substr(0, 10);
  if (!c.break_commit.empty()) out += " (first failing at " + c.break_commit.substr(0, 10) + ")";
  out += ": " + std::to_string(c.changed.size()) + " line" + (c.changed.size() == 1 ? "" : "s") + " it runs changed";
  for (size_t i = 0; i < c.changed.size() && i < 5; ++i)
    out += (i ? ", " : " (") + std::to_string(c.changed[i].line.line);
  if (c.changed.size() > 5) out += " …";
  if (!c.changed.empty()) out += ")";
  if (c.changed_elsewhere) out += ", " + std::to_string(c.changed_elsewhere) + " of other tests";
  out += "; " + std::to_string(c.product_changes) + " product name" + (c.product_changes == 1 ? "" : "s") +
         " or value" + (c.product_changes == 1 ? "" : "s") + " changed";
  if (!c.uses.empty()) {
    out += ", " + std::to_string(c.uses.size()) + " line" + (c.uses.size() == 1 ? "" : "s") + " it runs use" +
           (c.uses.size() == 1 ? "s" : "") + " one";
    for (size_t i = 0; i < c.uses.size() && i < 3; ++i)
      out += (i ? ", " : " (") + std::to_string(c.uses[i].line.line) + ": " + c.uses[i].token;
    if (c.uses.size() > 3) out += " …";
    out += ")";
  }
  return out;
}

std::string verdict_line(const Verdict& v) {
  std::string out = std::string(verdict_kind_name(v.kind)) + " (" + fixed(v.probability, 2) + ")";
  if (!v.reasons.empty()) out += ": " + v.reasons.front();
  for (size_t i = 1; i < v.reasons.size(); ++i) out += "; " + v.reasons[i];
  return out;
}

std::string report_text(const Localization& loc, const ReportContext& ctx, bool color) {
  const auto paint = [color](const char* code, const std::string& s) {
    return color ? std::string("\x1b[") + code + "m" + s + "\x1b[0m" : s;
  };
  // Test ids, paths, code, messages and the model's words come from outside: each is printed through terminal_line,
  // so no control character or workflow command reaches a terminal or a CI log (base/text.h).
  const auto safe = [](std::string_view s) { return terminal_line(s); };
  std::string out;
  out += "spark: " + std::to_string(loc.ranked.size()) + " suspicious " + std::string(level_name(ctx.level)) +
         (loc.ranked.size() == 1 ? "" : "s") + " for " + safe(loc.test_id) + "\n";
  out += "  ranker: " + loc.ranker + (loc.degraded ? " — no similar case used (baseline behaviour)" : "") + "\n";
  out += "  knowledge base: " + std::to_string(loc.knowledge_base_size) + " labelled case(s), " +
         std::to_string(loc.filtered_size) + " after policy " + ctx.policy + "\n";
  if (loc.verdict) out += "  verdict: " + safe(verdict_line(*loc.verdict)) + "\n";
  if (loc.history) out += "  history: " + safe(history_line(*loc.history)) + "\n";
  if (loc.change) out += "  change: " + safe(change_line(*loc.change)) + "\n";
  for (const auto& rc : loc.retrieved) {
    if (rc.similarity < kShowSimilarFloor) {
      out += "  closest case: " + safe(rc.id) + ", similarity " + fixed(rc.similarity, 2) + ", below " +
             fixed(kShowSimilarFloor, 2) + ": not shown (a case this far away is not a similar failure)\n";
      continue;
    }
    out += "  similar case: " + safe(rc.id) + " (" + safe(rc.test_id) + "), similarity " + fixed(rc.similarity, 2);
    if (rc.fixed_commit) out += ", fixed in " + safe(rc.fixed_commit->substr(0, 10));
    out += "\n";
    for (size_t i = 0; i < rc.faulty_lines.size(); ++i) {
      out += "    its faulty line " + std::to_string(rc.faulty_lines[i].line) + ": " + safe(trim(rc.faulty_text[i])) +
             "\n";
      if (auto fix = rc.fixes.find(rc.faulty_lines[i]); fix != rc.fixes.end()) {
        if (fix->second.empty()) out += "      fixed by deleting it\n";
        for (size_t k = 0; k < fix->second.size() && k < 3; ++k)
          out += std::string(k ? "               " : "      fixed as: ") + safe(trim(fix->second[k])) + "\n";
        if (fix->second.size() > 3)
          out += "               (" + std::to_string(fix->second.size() - 3) + " more lines)\n";
      }
    }
  }
  if (loc.gate)
    out += "  failing statement " + safe(loc.gate->line.path) + ":" + std::to_string(loc.gate->line.line) +
           ": the fault itself with probability " + fixed(loc.gate->probability, 2) + " (" +
           (loc.gate->exception.empty() ? "no exception read" : safe(loc.gate->exception)) +
           (loc.gate->raised_in_test ? ", raised in the test's code" : ", raised beneath the test") +
           (loc.gate->generic_check ? ", a generic check" : "") + ")\n";
  out += "  annotated lines (normalized Levenshtein <= " + fixed(ctx.epsilon, 2) +
         "): " + std::to_string(loc.annotations.size()) + "\n";
  if (loc.llm && !loc.llm->model.empty()) {
    const LlmReport& l = *loc.llm;
    out += "  LLM: " + safe(l.model) + ", mode " + l.mode + (l.used ? "" : " — not used: " + safe(l.error)) + "\n";
    if (l.attempts > 0)
      out += "       " + std::to_string(l.prompt_tokens) + " prompt + " + std::to_string(l.completion_tokens) +
             " answer tokens" + (l.usage_reported ? "" : " (estimated)") + ", " + fixed(l.seconds, 2) + " s, " +
             std::to_string(l.attempts) + " attempt(s)" +
             (l.truncated
                  ? ", code cut to " + std::to_string(l.shown_lines) + " of " + std::to_string(l.total_lines) + " lines"
                  : "") +
             "\n";
  }
  out += "\n";
  size_t rank = 0;
  for (const auto& e : loc.ranked) {
    ++rank;
    out += paint("1", std::to_string(rank) + ". " + safe(location(e))) +
           (e.source == "llm"      ? "  (LLM)"
            : e.source == "filled" ? "  (filled, built-in score " + fixed(e.score, 3) + ")"
                                   : "  score " + fixed(e.score, 3)) +
           (e.annotated ? "  " + paint("33", annotation_marker(language_for(e.path, ""))) : "") + "\n";
    out += "     " + paint("36", safe(clip(e.code, 160))) + "\n";
    for (const auto& r : e.reasons) out += "     - " + safe(r) + "\n";
  }
  if (loc.ranked.empty()) out += "  (the test code has no non-blank line to rank)\n";
  if (!loc.suggestions.empty()) {
    const bool tried =
        std::ranges::any_of(loc.suggestions, [](const Suggestion& sg) { return sg.verification.has_value(); });
    out += "\n" + paint("1", "suggested edits") +
           (tried ? " (a similar case's fix, repeated here; each tried in a scratch work tree, verified first; your "
                    "files are not changed):\n"
                  : " (a similar case's fix, repeated here; not applied):\n");
    for (const auto& sg : loc.suggestions) {
      out += "  " + safe(sg.line.path) + ":" + std::to_string(sg.line.line) + "  " + safe(sg.old_tokens) + " -> " +
             safe(sg.new_tokens) + "  (from case " + safe(sg.from_case) + ", confidence " + fixed(sg.confidence, 2) +
             (sg.preferred ? "" : "; another edit of this line is preferred") + ")\n";
      if (sg.verification)
        out += "  " +
               paint(sg.verification->status == VerifyStatus::verified       ? "1;32"
                     : sg.verification->status == VerifyStatus::not_verified ? "33"
                                                                             : "2",
                     safe(verification_words(sg))) +
               "\n";
      out += "  " + paint("31", "- " + safe(clip(sg.old_line, 160))) + "\n";
      out += "  " + paint("32", "+ " + safe(clip(sg.new_line, 160))) + "\n";
    }
  }
  if (loc.explanation) {
    const LineExplanation& ex = *loc.explanation;
    out += "\n" + paint("1", "explain " + safe(ex.line.path) + ":" + std::to_string(ex.line.line)) + "\n";
    if (!ex.note.empty()) {
      out += "  " + safe(ex.note) + "\n";
    } else {
      out += "  " + safe(clip(ex.code, 160)) + "\n  score " + fixed(ex.score, 3) +
             " = sigmoid(sum of weight x value); " +
             (ex.rank ? "its element's rank: " + std::to_string(ex.rank) : std::string("not ranked")) + "\n";
      char row[160];
      std::snprintf(row, sizeof row, "  %-16s %9s %9s %13s\n", "feature", "value", "weight", "contribution");
      out += row;
      for (const auto& t : ex.terms) {
        std::snprintf(row, sizeof row, "  %-16s %9.3f %9.3f %13.3f\n", t.feature.c_str(), t.value, t.weight,
                      t.contribution);
        out += row;
      }
    }
  }
  return out;
}

namespace {

// `llm` of the localize report (docs/FORMATS.md).
json llm_json(const LlmReport& l) {
  json redactions = json::object();
  for (const auto& [rule, n] : l.redactions) redactions[rule] = n;
  json out = {
      {"mode", l.mode},
      {"model", l.model.empty() ? json(nullptr) : json(l.model)},
      {"endpoint", l.endpoint.empty() ? json(nullptr) : json(l.endpoint)},
      {"used", l.used},
      {"error", l.error.empty() ? json(nullptr) : json(l.error)},
      {"tokens", {{"prompt", l.prompt_tokens}, {"answer", l.completion_tokens}, {"estimated", !l.usage_reported}}},
      {"seconds", l.seconds},
      {"attempts", l.attempts},
      {"structured", l.structured},
      {"answer",
       {{"raw", l.raw_answer},
        {"format", l.answer_format},
        {"from_llm", l.from_llm},
        {"filled", l.filled},
        {"out_of_range", l.out_of_range},
        {"duplicates", l.duplicates},
        {"not_code", l.not_code}}},
      {"code_lines", {{"shown", l.shown_lines}, {"total", l.total_lines}, {"truncated", l.truncated}}},
      {"context",
       {{"tokens", l.context_tokens}, {"source", l.context_source}, {"scale", l.token_scale}, {"counted", l.counted}}},
      {"redactions", redactions}};
  if (!l.prompt.empty()) out["prompt"] = l.prompt;
  return out;
}

}  // namespace

std::string report_json(const Localization& loc, const ReportContext& ctx) {
  json j;
  j["schema"] = "spark.localize/1";
  j["test_id"] = loc.test_id;
  j["language"] = loc.language.empty() ? json(nullptr) : json(loc.language);
  j["level"] = std::string(level_name(ctx.level));
  j["k"] = ctx.k;
  j["ranker"] = loc.ranker;
  j["degraded"] = loc.degraded;
  j["knowledge_base"] = {
      {"labelled", loc.knowledge_base_size}, {"after_policy", loc.filtered_size}, {"policy", ctx.policy}};
  j["epsilon"] = ctx.epsilon;
  j["retrieved"] = json::array();
  for (const auto& rc : loc.retrieved) {
    json r = {{"id", rc.id},
              {"test_id", rc.test_id},
              {"project", rc.project},
              {"similarity", rc.similarity},
              {"shown", rc.similarity >= kShowSimilarFloor},
              {"faulty_commit", rc.faulty_commit ? json(*rc.faulty_commit) : json(nullptr)},
              {"fixed_commit", rc.fixed_commit ? json(*rc.fixed_commit) : json(nullptr)}};
    r["faulty_lines"] = json::array();
    for (size_t i = 0; i < rc.faulty_lines.size(); ++i) {
      json fl = {{"path", rc.faulty_lines[i].path}, {"line", rc.faulty_lines[i].line}, {"text", rc.faulty_text[i]}};
      if (auto fix = rc.fixes.find(rc.faulty_lines[i]); fix != rc.fixes.end()) fl["fix"] = fix->second;
      r["faulty_lines"].push_back(std::move(fl));
    }
    j["retrieved"].push_back(std::move(r));
  }
  j["annotations"] = json::array();
  for (const auto& a : loc.annotations) {
    const auto& rc = loc.retrieved[a.case_index];
    j["annotations"].push_back({{"path", a.line.path},
                                {"line", a.line.line},
                                {"distance", a.distance},
                                {"case", rc.id},
                                {"matched", {{"path", a.matched.path}, {"line", a.matched.line}}}});
  }
  j["ranked"] = json::array();
  size_t rank = 0;
  for (const auto& e : loc.ranked)
    j["ranked"].push_back({{"rank", ++rank},
                           {"path", e.path},
                           {"line", e.line},
                           {"end_line", e.end_line},
                           {"score", e.score},
                           {"code", e.code},
                           {"annotated", e.annotated},
                           {"source", e.source},
                           {"reasons", e.reasons}});
  j["suggestions"] = json::array();
  for (const auto& sg : loc.suggestions) {
    json one = {{"path", sg.line.path},
                {"line", sg.line.line},
                {"old", sg.old_line},
                {"new", sg.new_line},
                {"change", {{"old", sg.old_tokens}, {"new", sg.new_tokens}}},
                {"from_case", sg.from_case},
                {"from_line", {{"path", sg.from_line.path}, {"line", sg.from_line.line}}},
                {"confidence", sg.confidence},
                {"preferred", sg.preferred}};
    if (sg.verification)
      one["verification"] = {{"status", verify_status_name(sg.verification->status)},
                             {"message", sg.verification->message},
                             {"seconds", sg.verification->seconds}};
    j["suggestions"].push_back(std::move(one));
  }
  add_triage_json(loc, j);
  j["notes"] = loc.notes;
  if (loc.gate)
    j["gate"] = {{"path", loc.gate->line.path},
                 {"line", loc.gate->line.line},
                 {"probability", loc.gate->probability},
                 {"exception", loc.gate->exception},
                 {"form", loc.gate->form},
                 {"raised_in_test", loc.gate->raised_in_test},
                 {"generic_check", loc.gate->generic_check}};
  if (loc.explanation) {
    const LineExplanation& ex = *loc.explanation;
    json e = {{"path", ex.line.path}, {"line", ex.line.line}};
    if (!ex.note.empty()) {
      e["note"] = ex.note;
    } else {
      e["code"] = ex.code;
      e["score"] = ex.score;
      e["rank"] = ex.rank ? json(ex.rank) : json(nullptr);
      e["features"] = json::array();
      for (const auto& t : ex.terms)
        e["features"].push_back(
            {{"feature", t.feature}, {"value", t.value}, {"weight", t.weight}, {"contribution", t.contribution}});
    }
    j["explain"] = std::move(e);
  }
  if (loc.llm) j["llm"] = llm_json(*loc.llm);
  return json_text(j, 2) + "\n";
}

size_t redact_localization(Localization& loc, const Case& query, const Redactor& redactor,
                           std::map<std::string, size_t>& counts) {
  size_t n = 0;
  const auto r = [&](std::string& text) { n += redactor.redact(text, counts); };
  // The query's files, redacted whole, line by line (counted where their lines are shown).
  std::map<std::string, std::vector<std::string>, std::less<>> files;
  for (const auto& f : query.files) {
    std::string content = f.content;
    std::map<std::string, size_t> whole;
    redactor.redact(content, whole);
    auto& lines = files[f.path];
    for (const auto& l : split_lines(content)) lines.emplace_back(l);
  }
  const auto line_of = [&](const std::string& path, int line, std::string& code) {
    const auto it = files.find(path);
    if (it != files.end() && line >= 1 && static_cast<size_t>(line) <= it->second.size()) {
      code = std::string(trim(it->second[static_cast<size_t>(line) - 1]));  // reports show lines trimmed
      for (size_t at = code.find("[REDACTED:"); at != std::string::npos; at = code.find("[REDACTED:", at + 1)) {
        const size_t end = code.find(']', at);
        if (end == std::string::npos) break;
        ++counts[code.substr(at + 10, end - at - 10)];
        ++n;
      }
    } else {
      r(code);
    }
  };
  for (auto& e : loc.ranked) {
    line_of(e.path, e.line, e.code);
    for (auto& reason : e.reasons) r(reason);
  }
  for (auto& c : loc.retrieved) {
    for (auto& text : c.faulty_text) r(text);
    for (auto& [line, fix] : c.fixes)
      for (auto& text : fix) r(text);
  }
  // A suggested edit of a line that holds a secret is not published: the lines redacted, its tokens would still be
  // the secret's (a rule that needs the line's context does not match them alone).
  std::erase_if(loc.suggestions, [&](Suggestion& sg) {
    const size_t before = n;
    r(sg.old_line);
    r(sg.new_line);
    r(sg.old_tokens);
    r(sg.new_tokens);
    return n != before;
  });
  for (auto& sg : loc.suggestions)
    if (sg.verification) r(sg.verification->message);
  if (loc.verdict)
    for (auto& reason : loc.verdict->reasons) r(reason);
  if (loc.explanation) {
    line_of(loc.explanation->line.path, loc.explanation->line.line, loc.explanation->code);
    r(loc.explanation->note);
  }
  for (auto& note : loc.notes) r(note);
  if (loc.llm) {
    r(loc.llm->error);
    r(loc.llm->raw_answer);
    r(loc.llm->prompt);
  }
  return n;
}

std::string report_sarif(const Localization& loc, const ReportContext& ctx) {
  json rule = {{"id", "spark/suspicious-test-line"},
               {"name", "SuspiciousTestLine"},
               {"shortDescription", {{"text", "Likely faulty line in a failing test"}}},
               {"fullDescription",
                {{"text",
                  "spark ranks the lines of a failing test by how likely they are to be the "
                  "fault, using similar failures fixed before."}}},
               {"defaultConfiguration", {{"level", "warning"}}}};
  json results = json::array();
  size_t rank = 0;
  for (const auto& e : loc.ranked) {
    ++rank;
    std::string message = "Rank " + std::to_string(rank) + " of " + std::to_string(loc.ranked.size()) + " suspicious " +
                          std::string(level_name(ctx.level)) + "s for failing test " + loc.test_id;
    if (!e.reasons.empty()) message += ": " + e.reasons.front();
    for (size_t i = 1; i < e.reasons.size(); ++i) message += "; " + e.reasons[i];
    // Stable across runs and line moves: the test, the file and the line's text.
    const std::string fingerprint = hex64(fnv1a64(loc.test_id + "\n" + e.path + "\n" + e.code));
    // A suggested edit of one of the element's lines is the result's proposed fix (SARIF §3.55), never applied: the
    // whole line replaced (a region with lines and no columns spans them without their line break).
    json fixes = json::array();
    for (const auto& sg : loc.suggestions)
      if (sg.preferred && sg.line.path == e.path && sg.line.line >= e.line &&
          sg.line.line <= std::max(e.line, e.end_line))
        fixes.push_back(
            {{"description",
              {{"text", "Repeat case " + sg.from_case + "'s fix: " + sg.old_tokens + " -> " + sg.new_tokens +
                            " (confidence " + fixed(sg.confidence, 2) + ")" +
                            (sg.verification ? "; " + verification_words(sg) : std::string())}}},
             {"artifactChanges",
              json::array({{{"artifactLocation", {{"uri", sg.line.path}}},
                            {"replacements",
                             json::array({{{"deletedRegion", {{"startLine", sg.line.line}, {"endLine", sg.line.line}}},
                                           {"insertedContent", {{"text", sg.new_line}}}}})}}})}});
    results.push_back(
        {{"ruleId", "spark/suspicious-test-line"},
         {"ruleIndex", 0},
         {"level", rank == 1 ? "warning" : "note"},
         {"message", {{"text", message}}},
         {"locations", json::array({{{"physicalLocation",
                                      {{"artifactLocation", {{"uri", e.path}}},
                                       {"region", {{"startLine", e.line}, {"endLine", e.end_line}}}}}}})},
         {"partialFingerprints", {{"sparkTestLine/v1", fingerprint}}},
         {"properties", {{"rank", rank}, {"score", e.score}, {"annotated", e.annotated}, {"source", e.source}}}});
    if (!fixes.empty()) results.back()["fixes"] = std::move(fixes);
  }
  json sarif = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs",
       json::array(
           {{{"tool", {{"driver", {{"name", "spark"}, {"version", ctx.version}, {"rules", json::array({rule})}}}}},
             {"results", results}}})}};
  return json_text(sarif, 2) + "\n";
}

namespace {

// Text from outside in a Markdown table cell: control characters and workflow commands defused (terminal_line), then
// HTML's specials (html_escape), the cell separator, "@" (no mention pings anyone) and Markdown's own marks as
// entities, so nothing renders as markup.
std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : html_escape(terminal_line(s))) switch (c) {
      case '|':
        out += "&#124;";
        break;
      case '@':
        out += "&#64;";
        break;
      case '`':
        out += "&#96;";
        break;
      case '*':
        out += "&#42;";
        break;
      case '_':
        out += "&#95;";
        break;
      case '[':
        out += "&#91;";
        break;
      case ']':
        out += "&#93;";
        break;
      case '\\':
        out += "&#92;";
        break;
      case '~':
        out += "&#126;";
        break;
      case '$':
        out += "&#36;";
        break;
      default:
        out += c;
    }
  return out;
}

std::string md_code(std::string_view s) { return "<code>" + md_cell(s) + "</code>"; }

// A fence longer than any run of backticks in `text`.
std::string fence_for(std::string_view text) {
  size_t run = 0, longest = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

}  // namespace

std::string report_markdown(const std::vector<const Localization*>& run, const std::vector<std::string>& errors,
                            const ReportContext& ctx) {
  // Each cell's text from outside is cut (a test id is already within kTestIdLimit; a case id, tokens, a code line
  // or an error may be any length), and each row or edit block is added only while the whole stays within the limit,
  // less room for the lines that count what was left out.
  constexpr size_t kCellBytes = 1024, kLineBytes = 2000, kTailRoom = 512;
  const size_t room = kMarkdownSummaryLimit - kTailRoom;
  const auto cell_code = [&](std::string_view s) { return md_code(clip(s, kCellBytes)); };
  std::map<std::string, size_t> by_verdict;
  for (const auto* loc : run)
    ++by_verdict[std::string(verdict_kind_name(loc->verdict ? loc->verdict->kind : VerdictKind::unknown))];
  std::string out = "### spark: " + std::to_string(run.size() + errors.size()) + " failing test" +
                    (run.size() + errors.size() == 1 ? "" : "s");
  if (!by_verdict.empty()) {
    out += " (";
    bool first = true;
    for (const auto& [kind, n] : by_verdict) {
      out += (first ? "" : ", ") + std::to_string(n) + " " + md_cell(clip(kind, kCellBytes));
      first = false;
    }
    out += ")";
  }
  out += "\n\n| test | verdict | seen before / suggested edit | top " + std::string(level_name(ctx.level)) +
         "s |\n|---|---|---|---|\n";
  size_t left_out = 0;
  for (const auto* loc : run) {
    std::string verdict = loc->verdict ? "<b>" + md_cell(clip(verdict_kind_name(loc->verdict->kind), kCellBytes)) +
                                             "</b> " + fixed(loc->verdict->probability, 2)
                                       : std::string("—");
    if (loc->history && loc->history->flaky)
      verdict += "<br>flaky: passed at the same commit " + std::to_string(loc->history->flaky_runs) + "×";
    else if (loc->history && loc->history->first_failing_commit)
      verdict += "<br>failing since " + cell_code(loc->history->first_failing_commit->substr(0, 10)) + ", " +
                 std::to_string(loc->history->failing_runs) + " run" + (loc->history->failing_runs == 1 ? "" : "s");
    std::string seen;
    for (const auto& rc : loc->retrieved)
      if (rc.similarity >= kShowSimilarFloor) {
        seen = "like " + cell_code(rc.id) + " (" + fixed(rc.similarity, 2) + ")";
        if (rc.fixed_commit) seen += ", fixed in " + cell_code(rc.fixed_commit->substr(0, 10));
        break;
      }
    for (const auto& sg : loc->suggestions)
      if (sg.preferred) {
        seen += std::string(seen.empty() ? "" : "<br>") + "edit line " + std::to_string(sg.line.line) + ": " +
                cell_code(sg.old_tokens) + " → " + cell_code(sg.new_tokens) + " (" + fixed(sg.confidence, 2) + ")";
        if (sg.verification)
          seen += sg.verification->status == VerifyStatus::verified
                      ? " **verified**"
                      : " (" + std::string(verify_status_name(sg.verification->status)) + ")";
        break;
      }
    if (seen.empty()) seen = "—";
    std::string top;
    for (size_t i = 0; i < loc->ranked.size() && i < 3; ++i) {
      const auto& e = loc->ranked[i];
      top += std::string(i ? "<br>" : "") + std::to_string(i + 1) + ". " +
             cell_code(e.path + ":" + std::to_string(e.line)) + " " + md_code(clip(std::string(trim(e.code)), 80));
    }
    if (top.empty()) top = "—";
    const std::string row =
        "| " + md_code(clip(loc->test_id, kTestIdLimit)) + " | " + verdict + " | " + seen + " | " + top + " |\n";
    if (left_out > 0 || out.size() + row.size() > room)
      ++left_out;
    else
      out += row;
  }
  for (const auto& e : errors) {
    const std::string row = "| " + md_cell(clip(e, kLineBytes)) + " | not localized | — | — |\n";
    if (left_out > 0 || out.size() + row.size() > room)
      ++left_out;
    else
      out += row;
  }
  if (left_out > 0)
    out += "\n… and " + std::to_string(left_out) + " more failure" + (left_out == 1 ? "" : "s") +
           " (the summary is kept within " + std::to_string(kMarkdownSummaryLimit >> 10) +
           " KiB): `spark failures list` lists them\n";
  bool header = false;
  size_t edits_left_out = 0;
  // One block per edit: a parametrized test's rows (or several tests sharing a helper) would repeat the same one.
  std::set<std::tuple<std::string, int, std::string>> shown;
  for (const auto* loc : run)
    for (const auto& sg : loc->suggestions) {
      if (!shown.emplace(sg.line.path, sg.line.line, sg.new_line).second) continue;
      const std::string body =
          "# " + terminal_line(clip(sg.line.path, kCellBytes)) + ":" + std::to_string(sg.line.line) + " (" +
          terminal_line(clip(loc->test_id, kTestIdLimit)) + "; from case " +
          terminal_line(clip(sg.from_case, kCellBytes)) + ", confidence " + fixed(sg.confidence, 2) +
          (sg.preferred ? "" : ", an alternative") + ")\n" +
          (sg.verification ? "# " + terminal_line(clip(verification_words(sg), kLineBytes)) + "\n" : std::string()) +
          "-" + terminal_line(clip(sg.old_line, kLineBytes)) + "\n+" + terminal_line(clip(sg.new_line, kLineBytes)) +
          "\n";
      const std::string fence = fence_for(body);
      std::string block = "\n" + fence + "diff\n" + body + fence + "\n";
      if (!header) block = "\n#### Suggested edits (from similar cases' fixes; not applied)\n" + block;
      if (edits_left_out > 0 || out.size() + block.size() > room) {
        ++edits_left_out;
        continue;
      }
      header = true;
      out += block;
    }
  if (edits_left_out > 0)
    out += "\n… and " + std::to_string(edits_left_out) + " more suggested edit" + (edits_left_out == 1 ? "" : "s") +
           " (the summary is kept within " + std::to_string(kMarkdownSummaryLimit >> 10) + " KiB)\n";
  return out;
}

namespace {

// A workflow command's data: its text made safe for the log first (control characters escaped, commands defused:
// base/text.h), then GitHub's own escapes, which the runner undoes before it shows the annotation.
std::string gh_escape_data(std::string_view s) {
  std::string out;
  for (char c : terminal_lines(s)) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else
      out += c;
  }
  return out;
}

std::string gh_escape_property(std::string_view s) {
  std::string out;
  for (char c : gh_escape_data(s)) {
    if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

// What triage asks first, for a failure's top annotation's title: whose fault, seen before, an edit to try
// (" [test 0.73; seen before: CASE; edit: a -> b]"), or "" when nothing is known.
std::string triage_facts(const Localization& loc, const RankedElement& e) {
  std::vector<std::string> facts;
  if (loc.verdict)
    facts.push_back(std::string(verdict_kind_name(loc.verdict->kind)) + " " + fixed(loc.verdict->probability, 2));
  if (loc.history && loc.history->flaky) facts.emplace_back("flaky");
  for (const auto& rc : loc.retrieved)
    if (rc.similarity >= kShowSimilarFloor) {
      facts.push_back("seen before: " + rc.id);
      break;
    }
  for (const auto& sg : loc.suggestions)
    if (sg.preferred && sg.line.path == e.path && sg.line.line >= e.line &&
        sg.line.line <= std::max(e.line, e.end_line)) {
      facts.push_back(
          "edit: " + sg.old_tokens + " -> " + sg.new_tokens +
          (sg.verification ? " (" + std::string(verify_status_name(sg.verification->status)) + ")" : std::string()));
      break;
    }
  if (facts.empty()) return "";
  std::string out = " [";
  for (size_t f = 0; f < facts.size(); ++f) out += (f ? "; " : "") + facts[f];
  return out + "]";
}

}  // namespace

std::string report_github(const std::vector<Localization>& run, const ReportContext& ctx) {
  // Each failure gets one annotation, at its top line; a next line of it (among its first kPerFailure) gets its own
  // only when its score is close to the top's (kCloseToTop of it) or at least half the run's failures (two or more)
  // rank it there too (one fixture's line second for every test the fixture broke). The same lines (file, line, end
  // line) annotated for several failures are one annotation naming them. A failure's other ranked lines are listed in
  // its top annotation's message.
  constexpr double kCloseToTop = 0.9;
  constexpr size_t kPerFailure = 3;
  using Where = std::tuple<std::string_view, int, int>;
  std::map<Where, size_t> ranked_by;  // how many failures rank a line among their first kPerFailure
  for (const auto& loc : run)
    for (size_t i = 0; i < loc.ranked.size() && i < kPerFailure; ++i)
      ++ranked_by[Where(loc.ranked[i].path, loc.ranked[i].line, loc.ranked[i].end_line)];
  struct Group {
    const RankedElement* element = nullptr;  // the best-ranked occurrence
    size_t rank = 0;                         // its best rank
    size_t top_for = 0;                      // the failures whose top line it is
    std::vector<const Localization*> failures;
  };
  std::vector<Group> groups;
  std::map<Where, size_t> index;
  for (const auto& loc : run)
    for (size_t i = 0; i < loc.ranked.size() && i < kPerFailure; ++i) {
      const RankedElement& e = loc.ranked[i];
      const bool close = loc.ranked[0].score > 0 && e.score >= kCloseToTop * loc.ranked[0].score;
      const size_t shared = ranked_by[Where(e.path, e.line, e.end_line)];
      if (i > 0 && !close && (shared < 2 || 2 * shared < run.size())) continue;
      const auto [it, added] = index.try_emplace(Where(e.path, e.line, e.end_line), groups.size());
      if (added) groups.emplace_back();
      Group& g = groups[it->second];
      if (!g.element || i + 1 < g.rank) {
        g.element = &e;
        g.rank = i + 1;
      }
      g.top_for += i == 0 ? 1 : 0;
      g.failures.push_back(&loc);
    }
  // Top lines first; among them, the one more failures share.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.failures.size() > b.failures.size();
  });
  const std::string level = std::string(level_name(ctx.level));
  constexpr size_t kLimit = 10;  // GitHub shows no more annotations of a step
  const size_t n = groups.size();
  const size_t shown = n <= kLimit ? n : kLimit - 1;
  std::string out;
  for (size_t i = 0; i < shown; ++i) {
    const Group& g = groups[i];
    const RankedElement& e = *g.element;
    const size_t count = g.failures.size();
    std::string title;
    std::string msg = clip(e.code, 200);
    if (count == 1) {
      const Localization& loc = *g.failures.front();
      title = g.rank == 1 ? "spark: most suspicious " + level + " for " + loc.test_id
                          : "spark: also suspicious for " + loc.test_id + " (rank " + std::to_string(g.rank) + ")";
      if (g.rank == 1) {
        title += triage_facts(loc, e);
        if (loc.verdict) msg += "\nverdict: " + verdict_line(*loc.verdict);
        if (loc.history) msg += "\nhistory: " + history_line(*loc.history);
      }
    } else {
      title = "spark: " + std::string(g.rank == 1 ? "most " : "") + "suspicious " + level + " for " +
              std::to_string(count) + " failing tests" + (g.rank > 1 ? " (rank " + std::to_string(g.rank) + ")" : "");
      if (g.rank == 1 && g.top_for < count)
        title = "spark: suspicious " + level + " for " + std::to_string(count) + " failing tests (the most for " +
                std::to_string(g.top_for) + ")";
      constexpr size_t kNamed = 5;
      msg += "\nfailing tests:";
      for (size_t t = 0; t < count && t < kNamed; ++t) msg += (t ? ", " : " ") + g.failures[t]->test_id;
      if (count > kNamed) msg += " and " + std::to_string(count - kNamed) + " more";
    }
    for (const auto& r : e.reasons) msg += "\n- " + r;
    if (count == 1 && g.rank == 1) {
      // The failure's ranked lines that have no annotation of their own.
      const Localization& loc = *g.failures.front();
      constexpr size_t kListed = 40;  // an annotation's message stays readable
      std::string rest;
      size_t listed = 0, left = 0;
      for (size_t r = 1; r < loc.ranked.size(); ++r) {
        const RankedElement& o = loc.ranked[r];
        if (index.contains(Where(o.path, o.line, o.end_line))) continue;
        if (listed++ >= kListed) {
          ++left;
          continue;
        }
        rest += "\n" + std::to_string(r + 1) + ". " + o.path + ":" + std::to_string(o.line) + " (" + fixed(o.score, 2) +
                ")  " + clip(o.code, 120);
      }
      if (!rest.empty())
        msg += "\nless suspicious:" + rest + (left ? "\n... and " + std::to_string(left) + " more" : "");
    }
    out += "::warning file=" + gh_escape_property(e.path) + ",line=" + std::to_string(e.line) +
           (e.end_line > e.line ? ",endLine=" + std::to_string(e.end_line) : "") +
           ",title=" + gh_escape_property(title) + "::" + gh_escape_data(msg) + "\n";
  }
  if (shown < n) {
    std::string rest = "more suspicious " + level + "s for " +
                       (run.size() == 1 ? run.front().test_id : std::to_string(run.size()) + " failing tests") + ":";
    constexpr size_t kListed = 40;  // an annotation's message stays readable
    for (size_t i = shown; i < n && i < shown + kListed; ++i) {
      const RankedElement& e = *groups[i].element;
      const size_t count = groups[i].failures.size();
      rest += "\n" + e.path + ":" + std::to_string(e.line) + " for " +
              (count > 1 ? std::to_string(count) + " failing tests" : groups[i].failures.front()->test_id) + "  " +
              clip(e.code, 120);
    }
    if (n > shown + kListed) rest += "\n... and " + std::to_string(n - shown - kListed) + " more";
    out += "::warning title=" + gh_escape_property("spark: " + std::to_string(n - shown) + " more") +
           "::" + gh_escape_data(rest) + "\n";
  }
  return out;
}

}  // namespace spark
