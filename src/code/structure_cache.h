// A bounded cache of parsed structures (code_structure.h) keyed by file content and language: many cases share one
// test-file version.
// Optionally backed by a folder (persist_in), so a new process does not parse again a test-file version an earlier
// one parsed: `spark localize` keeps them in LOCAL_DIR/structures/.
// Thread safety: not thread-safe; one per thread. Processes may share the folder (files are written whole and
// renamed into place; a file that does not read back whole is ignored, parsed again and replaced).
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "code/code_structure.h"
#include "code/python_structure.h"

namespace spark {

// The structure as bytes ("SPKCOD01" …), and back; nullopt for bytes that are not one whole structure of `stamp`.
std::string serialize_structure(const CodeStructure& s, uint64_t stamp);
std::optional<CodeStructure> deserialize_structure(std::string_view bytes, uint64_t stamp);

class StructureCache {
 public:
  explicit StructureCache(size_t capacity = 64) : capacity_(capacity) {}
  // The structure of `content` in the language of `path`'s extension, else of `case_language` (the case's
  // `language` field), else the line-level fallback (language_for). `path` (optional) also lets a new version of a
  // known Python file be reparsed incrementally.
  std::shared_ptr<const CodeStructure> get(std::string_view content, std::string_view path = {},
                                           std::string_view case_language = {});
  // See PythonParser::function_span (not cached: a cheap lookup after an often incremental parse).
  std::optional<std::pair<int, int>> function_span(std::string_view content, std::string_view path,
                                                   const std::string& class_name, const std::string& function) {
    return parser_.function_span(content, path, class_name, function);
  }
  // Structures missing from memory are looked up in `dir` (one file per content, valid for a spark built from the same
  // sources only: each file holds their stamp, cmake/code_stamp.cmake), and those parsed are written there; the
  // folder keeps the `max_files` most recently written. Errors (a read-only folder) only mean no persistence.
  void persist_in(const std::filesystem::path& dir, size_t max_files = 512);
  // Structures read from the folder, and parsed, by this cache (for tests).
  size_t loaded() const { return loaded_; }
  size_t parsed() const { return parsed_; }

 private:
  std::filesystem::path file_for(uint64_t key, size_t bytes) const;
  std::shared_ptr<const CodeStructure> from_disk(uint64_t key, std::string_view content);
  void to_disk(uint64_t key, std::string_view content, const CodeStructure& s);
  size_t capacity_;
  PythonParser parser_;
  std::list<uint64_t> order_;  // most recent first
  std::unordered_map<uint64_t, std::pair<std::shared_ptr<const CodeStructure>, std::list<uint64_t>::iterator>> map_;
  std::filesystem::path dir_;
  size_t max_files_ = 512;
  size_t loaded_ = 0, parsed_ = 0;
};

}  // namespace spark
