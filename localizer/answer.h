// Reading the model's answer: the element ids it ranked, in its order (docs/LLM.md, "Parsing the answer").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

struct ParsedAnswer {
  std::vector<int> ids;     // distinct, in range, in the answer's order (not cut at k)
  size_t out_of_range = 0;  // ids outside 1..max_id
  size_t duplicates = 0;
  size_t not_code = 0;          // in range but a blank line
  std::string format = "none";  // json | text | none
};

// `is_element(id)`: the id names a line of code (not blank). `id_of_code(text)`: the id of the line whose code is
// `text` (an answer that quotes code without its number), or nullopt.
ParsedAnswer parse_answer(std::string_view answer, int max_id, const std::function<bool(int)>& is_element,
                          const std::function<std::optional<int>(std::string_view)>& id_of_code = {});

}  // namespace spark
