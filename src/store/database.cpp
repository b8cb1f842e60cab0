#include "store/database.h"

namespace spark {

Status Statement::run() {
  for (;;) {
    auto r = step();
    if (!r) {
      reset();
      return std::unexpected(r.error());
    }
    if (!*r) break;
  }
  reset();
  return {};
}

Result<Transaction> Transaction::begin(Database& db) {
  if (db.in_transaction()) {
    static int counter = 0;
    std::string name = "spark_sp" + std::to_string(++counter);
    TRY(db.exec("SAVEPOINT " + name));
    return Transaction(&db, std::move(name));
  }
  TRY(db.begin_write());
  return Transaction(&db, "");
}

Transaction::~Transaction() {
  if (!db_) return;
  if (savepoint_.empty())
    (void)db_->exec("ROLLBACK");
  else
    (void)db_->exec("ROLLBACK TO SAVEPOINT " + savepoint_ + "; RELEASE SAVEPOINT " + savepoint_);
}

Status Transaction::commit() {
  Database* db = std::exchange(db_, nullptr);
  if (!savepoint_.empty()) return db->exec("RELEASE SAVEPOINT " + savepoint_);
  if (auto s = db->exec("COMMIT"); !s) {
    (void)db->exec("ROLLBACK");
    return s;
  }
  return {};
}

}  // namespace spark
