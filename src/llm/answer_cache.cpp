#include "llm/answer_cache.h"

#include "formats/case.h"
#include "store/sqlite_db.h"

namespace spark {

AnswerCache::AnswerCache(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
AnswerCache::~AnswerCache() = default;

Result<std::unique_ptr<AnswerCache>> AnswerCache::open(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  auto db = SqliteDb::open(path, true, 30000);
  TRY(db);
  if (auto s = (*db)->exec("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                           "created INTEGER NOT NULL, answer TEXT NOT NULL)");
      !s)
    return std::unexpected(s.error());
  return std::unique_ptr<AnswerCache>(new AnswerCache(std::move(*db)));
}

std::optional<std::string> AnswerCache::get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto st = db_->prepare("SELECT answer FROM answers WHERE key = ?");
  if (!st) return std::nullopt;
  st->bind(1, key);
  auto row = st->step();
  if (!row || !*row) return std::nullopt;
  ++hits_;
  return st->text(0);
}

Status AnswerCache::put(const std::string& key, const std::string& model, const std::string& answer_json) {
  std::lock_guard lock(mu_);
  auto st = db_->prepare(
      "INSERT INTO answers (key, model, created, answer) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
      "model = excluded.model, created = excluded.created, answer = excluded.answer");
  TRY(st);
  const int64_t now = now_epoch();
  st->bind(1, key).bind(2, model).bind(3, now).bind(4, answer_json);
  if (auto s = st->run(); !s) return s;
  ++stores_;
  return {};
}

}  // namespace spark
