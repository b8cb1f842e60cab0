// The defaults several parts share, in one place: the paper's annotation threshold ε and the retrieval settings, the
// closest-* policies' window, the LLM's context window. The option structs of localizer/, src/llm/ and cli/, the
// configuration's registry (config.cpp) and the command-line help take them from here, so a default is changed once.
// Contract: constants and a pure formatting function; nothing to own, nothing fails.
#pragma once

#include <cstddef>
#include <string>

#include "base/text.h"

namespace spark::defaults {

inline constexpr double kEpsilon = 0.05;          // annotation threshold ε, normalized Levenshtein (docs/LOCALIZER.md)
inline constexpr double kSimilarityFloor = 0.10;  // retrieved cases below this cosine similarity are not used
inline constexpr double kWindowFraction = 0.10;   // closest-* policies: the window's share of the labelled cases
inline constexpr size_t kContextTokens = 32768;   // the model's context window: prompt + answer must fit

// A default as help and `spark config` print it: two decimals ("0.05", "0.10").
inline std::string text(double value) { return fixed(value, 2); }

}  // namespace spark::defaults
