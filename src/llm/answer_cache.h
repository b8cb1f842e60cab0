// LLM answers cached on disk (SQLite), keyed by the model, the request's parameters and the prompt: an interrupted
// evaluation resumes where it stopped, and a re-run costs no requests. Each answer is committed as it arrives; safe
// for the client's worker threads and for several processes sharing one file.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/result.h"

namespace spark {

class SqliteDb;

class AnswerCache {
 public:
  static Result<std::unique_ptr<AnswerCache>> open(const std::filesystem::path& path);
  ~AnswerCache();

  std::optional<std::string> get(const std::string& key);  // the stored answer (JSON text)
  Status put(const std::string& key, const std::string& model, const std::string& answer_json);
  size_t hits() const { return hits_; }
  size_t stores() const { return stores_; }

 private:
  explicit AnswerCache(std::unique_ptr<SqliteDb> db);
  std::unique_ptr<SqliteDb> db_;
  std::mutex mu_;
  size_t hits_ = 0, stores_ = 0;
};

}  // namespace spark
