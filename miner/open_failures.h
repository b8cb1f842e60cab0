// The open failures as `spark failures` shows them (docs/schemas): one test's open failures as a JSON object (its
// first failing commit names it), the list and one failure as text, and finding a failure by id, prefix or test id.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "miner/mining_store.h"
#include "miner/recording.h"

namespace spark {

// One failure (or one test's open failures, oldest first) as `spark failures --format json` writes it; the ages in
// commits from `history` (null: unknown); the message with `with_message`.
nlohmann::json open_failure_json(const std::vector<StoredFailure>& rows, const TipHistory* history, bool with_message);
// The document `spark failures --format json` writes around those objects.
nlohmann::json failures_json(const nlohmann::json& failures, const TipHistory* history);
// `spark failures list` and `show` as text.
std::string list_text(const nlohmann::json& failures);
std::string show_text(const nlohmann::json& j);
// `spark failures list` (the open failures, one entry per test) and `show` (the failures `found` holds): as JSON
// (`json`) or as text; ages in commits from `history` (null: unknown). Text quotes what was recorded as it is (the
// caller prints it as untrusted text).
Result<std::string> failures_list(MiningStore& store, const TipHistory* history, bool as_json);
std::string failures_show(const std::vector<StoredFailure>& found, const TipHistory* history, bool as_json);

// `spark failures dismiss`: closes the open failures `found` holds (one test's) as dismissed by `author` for `reason`;
// what was done, as a line to say. An error when they are not open.
Result<std::string> dismiss_failures(MiningStore& store, const std::vector<StoredFailure>& found,
                                     const std::string& author, const std::string& reason);

// The failures `id` names: a test id (its open failures, else its latest one), or a failure id or a unique prefix of
// one (an open failure stands for its test's open failures, oldest first; a closed one for itself).
Result<std::vector<StoredFailure>> find_failures(MiningStore& store, const std::string& id, const std::string& kb);

}  // namespace spark
