#include "code/tokens.h"

#include <cctype>
#include <string>
#include <vector>

#include "base/pcre_regex.h"

namespace spark {

size_t estimate_tokens(std::string_view text) {
  static const Regex pieces = Regex::must(
      R"('(?:[sdmtSDMT]|ll|ve|re|LL|VE|RE)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  size_t tokens = 0;
  pieces.for_each_match(text, [&](const std::vector<std::string_view>& g) {
    const std::string_view p = g[0];
    size_t letters = 0, other = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const unsigned char ch = static_cast<unsigned char>(p[i]);
      if ((ch & 0xC0) == 0x80) continue;  // UTF-8 continuation byte: part of the previous character
      if (std::isalpha(ch) || ch >= 0x80)
        ++letters;
      else if (!std::isspace(ch))
        ++other;
    }
    if (letters > 0)
      tokens += 1 + (letters - 1) / 6;
    else if (other > 0)
      tokens += (other + 1) / 2;
    else
      tokens += 1;  // a whitespace run
  });
  return tokens;
}

}  // namespace spark

namespace spark {

double tokens_per_estimate(std::string_view model) {
  std::string name(model);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t slash = name.rfind('/');  // "Qwen/Qwen2.5-72B-Instruct": the model's own name
  if (slash != std::string::npos) name.erase(0, slash + 1);
  struct Family {
    std::vector<std::string_view> names;  // a name starting with '^' matches at the start only
    double scale;
  };
  // The largest ratio of any dev prompt, per family, rounded up (bench/token_ratio.py; docs/LLM.md, "Token
  // estimate"). OpenAI's own tokenizers (cl100k, o200k) have no vocabulary file here: 1, the estimate's own design,
  // which Llama 3's (cl100k-like, measured at most 0.95) keeps to.
  static const std::vector<Family> families = {
      {{"gpt-2", "gpt2", "gpt-j", "^davinci", "^babbage"}, 1.75},
      {{"llama-2", "llama2", "codellama", "code-llama", "mistral", "mixtral", "phi-3", "phi3", "vicuna"}, 1.45},
      {{"deepseek"}, 1.4},
      {{"gpt-neox", "pythia", "starcoder", "command-r", "gemma"}, 1.3},
      {{"qwen"}, 1.2},
      {{"gpt-4", "gpt4", "gpt-3.5", "gpt-5", "gpt-oss", "^o1", "^o3", "^o4", "llama-3", "llama3", "llama-4", "llama4"},
       1.0},
  };
  for (const auto& f : families)
    for (std::string_view n : f.names)
      if (n.starts_with('^') ? name.starts_with(n.substr(1)) : name.find(n) != std::string::npos) return f.scale;
  return 1.75;
}

}  // namespace spark
