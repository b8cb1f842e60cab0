// copy_store and export_cases (knowledge_base.h): `spark kb copy`, table by table as the store's own schema defines
// them, and `spark export`, case by case.
#include <string>

#include <nlohmann/json.hpp>

#include "base/text.h"

#include "store/database.h"
#include "store/knowledge_base.h"
#include "store/row_count.h"

namespace spark {

namespace {

Result<int64_t> copy_table(Database& from, Database& to, const StoreTable& t) {
  std::string columns, marks;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    columns += (i ? ", " : "") + t.columns[i];
    marks += i ? ",?" : "?";
  }
  auto read = from.prepare("SELECT " + columns + " FROM " + t.name + " ORDER BY " + t.key);
  auto write = to.prepare("INSERT INTO " + t.name + "(" + columns + ") VALUES (" + marks + ")");
  TRY(read);
  TRY(write);
  int64_t n = 0;
  TRY(read->each_row([&]() -> Status {
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const int col = static_cast<int>(c);
      if (read->is_null(col))
        write->bind_null(col + 1);
      else if (t.integer[c])
        write->bind(col + 1, read->int64(col));
      else
        write->bind(col + 1, read->text(col));
    }
    if (auto s = write->run(); !s) return std::unexpected(with_context(t.name + ": ", s.error()));
    ++n;
    return {};
  }));
  return n;
}

}  // namespace

Result<int64_t> count_rows(Database& db, const std::string& table) {
  auto st = db.prepare("SELECT count(*) FROM " + table);
  TRY(st);
  auto r = st->step();
  TRY(r);
  return st->int64(0);
}

Result<StoreCopy> copy_store(KnowledgeBase& from, KnowledgeBase& to) {
  Database& src = from.database();
  Database& dst = to.database();
  auto tx = Transaction::begin(dst);
  TRY(tx);
  // Only into an empty store: a copy never merges, so nothing there can be lost or half-overwritten. Looked at under
  // the store's write lock, which the transaction holds: of copies into one empty store at once, the first fills it
  // and the others find it filled.
  for (const char* table : {"cases", "outcomes", "failures"}) {
    auto n = count_rows(dst, table);
    TRY(n);
    if (*n > 0)
      return fail(to.name() + " is not empty (" + std::to_string(*n) + " row(s) in " + table +
                  "); kb copy fills only an empty store");
  }
  StoreCopy copied;
  for (const auto& t : copied_tables()) {
    auto n = copy_table(src, dst, t);
    TRY(n);
    copied.rows[t.name] = *n;
  }
  // Settings other than the store's own (schema version, identity, generation) travel with the cases.
  {
    auto read =
        src.prepare("SELECT key, value FROM settings WHERE key NOT IN ('schema_version','store_id','generation')");
    TRY(read);
    TRY(read->each_row([&] { return to.set_setting(read->text(0), read->text(1)); }));
  }
  if (dst.engine() == Engine::postgresql && copied.rows["cases"] > 0)
    TRY(dst.exec("SELECT setval(pg_get_serial_sequence('spark.cases', 'rowid'), (SELECT max(rowid) FROM cases))"));
  TRY(dst.exec("UPDATE settings SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'generation'"));
  // The check before the commit: every row arrived.
  for (const auto& t : copied_tables()) {
    auto a = count_rows(src, t.name), b = count_rows(dst, t.name);
    if (!a || !b) return std::unexpected(!a ? a.error() : b.error());
    if (*a != *b)
      return fail(t.name + ": " + std::to_string(*a) + " row(s) in the source, " + std::to_string(*b) +
                  " in the destination; nothing was written");
  }
  TRY(tx->commit());
  return copied;
}

Result<CasesExport> export_cases(KnowledgeBase& kb, const Redactor* redactor,
                                 const std::function<Status(const std::string&)>& sink) {
  CasesExport done;
  std::string out;
  const Status walked = kb.for_each([&](int64_t, const Case& stored) -> Status {
    ++done.cases;
    if (redactor) {
      Case c = stored;
      done.redacted += redact_case(c, *redactor, done.by_rule);
      out += json_text(case_to_json(c));
    } else {
      out += json_text(case_to_json(stored));
    }
    out += '\n';
    if (out.size() < (size_t{1} << 20)) return {};
    TRY(sink(out));
    out.clear();
    return {};
  });
  TRY(walked);
  if (!out.empty()) TRY(sink(out));
  return done;
}

}  // namespace spark
