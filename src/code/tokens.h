// Token counts when a server reports none: an approximation of BPE tokenizers (cl100k/Qwen-style), documented in
// docs/LLM.md. It splits text the way those tokenizers' pre-tokenizers do (letters, digits in runs of up to three,
// punctuation runs, whitespace) and counts a letter run of n characters as 1 + (n - 1) / 6 tokens and a punctuation
// run as one per two characters. Good for comparing prompts with one another, not for billing.
// Contract: a pure function (its one pattern is compiled once, read-only): thread-safe; any text has a count.
#pragma once

#include <cstddef>
#include <string_view>

namespace spark {

size_t estimate_tokens(std::string_view text);

// The model's tokens per token of estimate_tokens(), by the tokenizer family its name suggests, for prompt budgets
// where the server cannot count (llama.cpp's /tokenize can): the largest ratio of the dev corpora's prompts with each
// family's real tokenizer (bench/token_ratio.py, docs/LLM.md "Token estimate"), rounded up; a name of no known family
// gets the largest of all, so that an unknown tokenizer's prompt is cut a little too much rather than refused.
double tokens_per_estimate(std::string_view model);

}  // namespace spark
