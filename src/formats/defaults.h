// The default of every setting that code outside the settings table needs as a value, in one place: the table of
// settings (config.cpp's config_keys, which `spark config`, the command-line help and docs/SETTINGS.md are made from)
// and the option structs of localizer/, miner/, src/llm/, src/retrieval/ and cli/ take them from here, so a default is
// changed once. Settings no option struct needs a value of (llm.mode, localize.level, ...) have their default in the
// table alone.
// Contract: constants and pure formatting functions; nothing to own, nothing fails.
#pragma once

#include <cstddef>
#include <string>

#include "base/text.h"

namespace spark::defaults {

// localize.*: the paper's k, r and annotation threshold ε (docs/LOCALIZER.md).
inline constexpr size_t kTopK = 5;                // localize.k: the elements a localization returns
inline constexpr size_t kRetrieved = 1;           // localize.r: the similar cases retrieved
inline constexpr double kEpsilon = 0.05;          // annotation threshold ε, normalized Levenshtein (docs/LOCALIZER.md)
inline constexpr double kSimilarityFloor = 0.10;  // retrieved cases below this cosine similarity are not used
inline constexpr double kWindowFraction = 0.10;   // closest-* policies: the window's share of the labelled cases
inline constexpr double kAnnotationDeadline = 10;  // seconds into one localization after which no more lines are
                                                   // compared with the retrieved faulty lines (docs/LOCALIZER.md)

// llm.*: the model's budget and the HTTP client's patience.
inline constexpr size_t kContextTokens = 32768;  // the model's context window: prompt + answer must fit
inline constexpr int kAnswerTokens = 512;        // llm.max_tokens: reserved for (and the limit of) the answer
inline constexpr double kTemperature = 0;        // greedy: the same prompt, the same answer
inline constexpr size_t kConcurrency = 4;        // requests in flight
inline constexpr double kConnectTimeout = 10;    // seconds to connect
inline constexpr double kRequestTimeout = 300;   // seconds for one request
inline constexpr int kRetries = 4;               // retries on timeouts, 429 and 5xx
inline constexpr double kRetryDelay = 1;         // seconds of the first backoff
inline constexpr double kDeadline = 300;         // seconds for all LLM requests of one localize or record run

inline constexpr const char* kEmbedModel = "bge-m3";  // embedder.model: the OpenAI-compatible embeddings model

// mine.* and record.*.
inline constexpr double kSigma = 3;               // the outlier rule: mean + sigma * sd faulty lines
inline constexpr double kHookTimeout = 1800;      // record.timeout: seconds the post-commit hook's test run may take
inline constexpr double kKbRetrySeconds = 20;     // SPARK_KB_RETRY_SECONDS: `spark record` waiting for a server store

// A default as help and `spark config` print it: two decimals ("0.05", "0.10").
inline std::string text(double value) { return fixed(value, 2); }

// A default as help and `spark config` print it: the shortest form ("3", "300", "0").
inline std::string shortest(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

}  // namespace spark::defaults
