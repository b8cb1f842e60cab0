#include "cli/common.h"

#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "base/text.h"
#include "localizer/index_lifecycle.h"
#include "miner/mining_store.h"
#include "store/postgres_db.h"

namespace spark::cli {

namespace fs = std::filesystem;

// Messages quote what spark read (test ids, reports, a server's answer): printed through terminal_lines, so no
// control character or workflow command in them reaches a terminal or a CI log (base/text.h).
int report_error(const Error& e) {
  std::fprintf(stderr, "spark: error: %s\n", terminal_lines(e.message).c_str());
  return 1;
}

int usage_error(const Error& e) {
  report_error(e);
  return 2;
}

int usage_error(const std::string& message) { return usage_error(Error{message}); }

void note(const std::string& message) { std::fprintf(stderr, "spark: %s\n", terminal_lines(message).c_str()); }

namespace {

// Makes spark's own folder with a .gitignore of `*` (its contents never belong in the repository it sits in).
Status make_spark_folder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  if (path_exists(dir / ".gitignore")) return {};  // a user's own, kept
  return write_file_atomic(dir / ".gitignore", "*\n");
}

}  // namespace

Result<std::unique_ptr<KnowledgeBase>> open_kb(const Common& common, bool create) {
  // A store made here is made with its folder's .gitignore; a folder that exists already is the user's.
  if (const fs::path own = local_folder(common); create && !path_exists(own)) TRY(make_spark_folder(own));
  return open_knowledge_base(common.kb_dir, create, 30000, common.local_dir);
}

bool kb_exists(const Common& common) {
  return is_postgres_url(common.kb_dir) || path_exists(fs::path(common.kb_dir) / "kb.sqlite");
}

std::string local_folder(const Common& common) {
  return is_postgres_url(common.kb_dir) ? common.local_dir : common.kb_dir;
}

// Writes a command's result to `path` atomically, or to standard output when `path` is empty; the exit code.
bool write_stdout(std::string_view text) {
  const size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 && written == text.size() && !std::ferror(stdout);
}

int write_output(const std::string& path, const std::string& text) {
  if (!path.empty() && path != "-") {
    if (auto w = write_file_atomic(path, text); !w) return report_error(w.error());
    return 0;
  }
  return write_stdout(text) ? 0 : report_error(Error{"cannot write to standard output"});
}

void learn_ranker_if_due(const Common& common) {
  std::vector<std::string> notes;
  auto kb = open_kb(common, false);
  const Status learnt = kb ? learn_ranker_if_due(**kb, common.embedder, notes) : Status(std::unexpected(kb.error()));
  for (const auto& n : notes) note(n);
  if (!learnt) note("the ranker did not learn again (it stays as it was): " + learnt.error().message);
}

Status common_from_config(const Config& config, Common& common) {
  common.kb_dir = config.str("kb");
  common.kb_source = config.get("kb").source;
  common.local_dir = config.str("local_dir");
  common.embedder.kind = config.str("embedder.kind");
  common.embedder.openai.base_url = config.str("embedder.base_url");
  common.embedder.openai.model = config.str("embedder.model");
  common.embedder.openai.api_key = config.str("embedder.api_key");
  common.redaction_rules = config.redaction_rules();
  if (config.boolean("redact.enabled")) {
    auto r = Redactor::make(common.redaction_rules);
    if (!r) return std::unexpected(with_context(config.file() ? config.file()->string() + ": " : "", r.error()));
    common.redactor = std::make_shared<const Redactor>(std::move(*r));
  }
  common.embedder.openai.redactor = common.redactor;
  return {};
}

}  // namespace spark::cli
