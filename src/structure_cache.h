// A bounded cache of parsed Python structures keyed by file content: many cases share one test-file version.
// Thread safety: not thread-safe; one per thread.
#pragma once

#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "python_structure.h"

namespace spark {

class StructureCache {
 public:
  explicit StructureCache(size_t capacity = 64) : capacity_(capacity) {}
  // `path` (optional) lets a new version of a known file be reparsed incrementally.
  std::shared_ptr<const PythonStructure> get(std::string_view content, std::string_view path = {});
  // See PythonParser::function_span (not cached: a cheap lookup after an often incremental parse).
  std::optional<std::pair<int, int>> function_span(std::string_view content, std::string_view path,
                                                   const std::string& class_name, const std::string& function) {
    return parser_.function_span(content, path, class_name, function);
  }

 private:
  size_t capacity_;
  PythonParser parser_;
  std::list<uint64_t> order_;  // most recent first
  std::unordered_map<uint64_t, std::pair<std::shared_ptr<const PythonStructure>, std::list<uint64_t>::iterator>> map_;
};

}  // namespace spark
