// The edge every spark subcommand stands on: the settings all of them share (the store, the embedder, redaction),
// errors and notes on stderr ("spark: error: …" returns 1, a usage error 2), results written atomically, and opening
// the knowledge base. A command's own flags and body are in its file (commands.h lists them).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "formats/config.h"
#include "formats/redact.h"
#include "localizer/case_embedding.h"
#include "store/knowledge_base.h"

namespace spark::cli {

struct Common {
  std::string kb_dir = ".spark";     // a folder (SQLite) or a postgresql:// URL
  std::string kb_source;             // how it was chosen: "flag --kb", "env SPARK_KB", "default: the nearest …"
  std::string local_dir = ".spark";  // with a server store: this runner's index, spool and LLM answer cache
  EmbedderConfig embedder;
  std::shared_ptr<const Redactor> redactor;    // null when redaction is off (--no-redact, redact.enabled = false)
  std::vector<RedactionRule> redaction_rules;  // the user's rules (for `export --redact`, which asks for redaction)
};

// Fills Common from the effective configuration (the OpenAI embedder gets the redactor).
Status common_from_config(const Config& config, Common& common);

// Shared by the commands: "spark: error: …" (returns 1), "spark: …" on stderr, the knowledge base, and a result
// written atomically to a file or to standard output ("" or "-").
int report_error(const Error& e);
// A usage error (an argument missing, malformed or naming what does not exist): said as report_error says an error;
// returns 2, the exit code of a usage error.
int usage_error(const std::string& message);
int usage_error(const Error& e);
void note(const std::string& message);
Result<std::unique_ptr<KnowledgeBase>> open_kb(const Common& common, bool create);
// True when there may be a store to open: a server store, or a folder holding kb.sqlite.
bool kb_exists(const Common& common);
// The local folder of this store: the SQLite store's own folder, or local_dir for a server store.
std::string local_folder(const Common& common);

// When the ranker is due to learn again (`spark record` localizing nothing): learn_ranker_if_due
// (localizer/index_lifecycle.h) on the store, its notes said; a failure is a note, the ranker staying as it was, and
// the command goes on.
void learn_ranker_if_due(const Common& common);
// Writes `text` to `path` atomically, or to standard output when `path` is "" or "-"; the exit code.
int write_output(const std::string& path, const std::string& text);
// Writes `text` to standard output; false when any of it could not be written (a full disk, a file-size limit, a
// closed pipe), fwrite's short count and the stream's error flag both read: a large write bypasses the buffer, so
// fflush alone does not see its failure.
bool write_stdout(std::string_view text);

}  // namespace spark::cli
