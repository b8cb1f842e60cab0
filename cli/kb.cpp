// `spark kb`: make, inspect and copy knowledge bases (SQLite folder or PostgreSQL server), and the spool that keeps
// `spark record`'s outcomes when a server store cannot be reached.
#include <cstdio>
#include <map>
#include <set>

#include "commands.h"
#include "recording.h"
#include "mining_store.h"
#include "store/postgres_db.h"

namespace spark::cli {

namespace fs = std::filesystem;

namespace {

Result<int64_t> count_rows(Database& db, const std::string& table) {
  auto st = db.prepare("SELECT count(*) FROM " + table);
  TRY(st);
  auto r = st->step();
  TRY(r);
  return st->int64(0);
}

// A table to copy: its columns, 'i' for an integer column and 't' for text in `kinds`; its order.
struct TableCopy {
  const char* name;
  const char* columns;
  const char* kinds;
  const char* order;
};
// Parents before children (case_files refers to cases and blobs). `embeddings` is never read (see
// KnowledgeBase::clear_embeddings) and is not copied.
constexpr TableCopy kTables[] = {
    {"blobs", "sha, content", "tt", "sha"},
    {"cases", "rowid, id, test_id, failure_epoch, labelled, content_key, error_message, record, record_hash, language",
     "ittiittttt", "rowid"},
    {"case_files", "case_rowid, ord, path, blob_sha", "iitt", "case_rowid, ord"},
    {"outcomes", "commit_sha, test_id, outcome, time, message, origin, recorded_at", "tttitti", "commit_sha, test_id"},
    {"failures",
     "commit_sha, test_id, status, time, message, origin, snapshot, fixed_commit, case_id, faulty_count, record, "
     "fixed_files, decided_by, decided_at, reason, kept, updated_at, fault_key, duplicate_of",
     "tttitttttitttittitt", "commit_sha, test_id"},
};

Result<int64_t> copy_table(Database& from, Database& to, const TableCopy& t) {
  const std::string kinds = t.kinds;
  std::string marks;
  for (size_t i = 0; i < kinds.size(); ++i) marks += i ? ",?" : "?";
  auto read = from.prepare(std::string("SELECT ") + t.columns + " FROM " + t.name + " ORDER BY " + t.order);
  auto write = to.prepare(std::string("INSERT INTO ") + t.name + "(" + t.columns + ") VALUES (" + marks + ")");
  TRY(read);
  TRY(write);
  int64_t n = 0;
  for (;;) {
    auto r = read->step();
    TRY(r);
    if (!*r) break;
    for (size_t c = 0; c < kinds.size(); ++c) {
      const int col = static_cast<int>(c);
      if (read->is_null(col))
        write->bind_null(col + 1);
      else if (kinds[c] == 'i')
        write->bind(col + 1, read->int64(col));
      else
        write->bind(col + 1, read->text(col));
    }
    if (auto s = write->run(); !s) return std::unexpected(with_context(std::string(t.name) + ": ", s.error()));
    ++n;
  }
  return n;
}

int kb_copy(const Common& common, const KbArgs& args) {
  if (args.from == args.to) return report_error(Error{"kb copy: the source and the destination are the same store"});
  auto from = open_knowledge_base(args.from, false, 30000, common.local_dir);
  if (!from) return report_error(from.error());
  auto to = open_knowledge_base(args.to, true, 30000, common.local_dir);
  if (!to) return report_error(to.error());
  Database& src = (*from)->database();
  Database& dst = (*to)->database();
  auto tx = Transaction::begin(dst);
  if (!tx) return report_error(tx.error());
  // Only into an empty store: a copy never merges, so nothing there can be lost or half-overwritten. Looked at under
  // the store's write lock, which the transaction holds: of copies into one empty store at once, the first fills it
  // and the others find it filled.
  for (const char* table : {"cases", "outcomes", "failures"}) {
    auto n = count_rows(dst, table);
    if (!n) return report_error(n.error());
    if (*n > 0)
      return report_error(Error{"kb copy: " + (*to)->name() + " is not empty (" + std::to_string(*n) + " row(s) in " +
                                table + "); kb copy fills only an empty store"});
  }
  std::map<std::string, int64_t> copied;
  for (const auto& t : kTables) {
    auto n = copy_table(src, dst, t);
    if (!n) return report_error(with_context("kb copy: ", n.error()));
    copied[t.name] = *n;
  }
  // Settings other than the store's own (schema version, identity, generation) travel with the cases.
  {
    auto read =
        src.prepare("SELECT key, value FROM settings WHERE key NOT IN ('schema_version','store_id','generation')");
    if (!read) return report_error(read.error());
    for (;;) {
      auto r = read->step();
      if (!r) return report_error(r.error());
      if (!*r) break;
      if (auto s = (*to)->set_setting(read->text(0), read->text(1)); !s) return report_error(s.error());
    }
  }
  if (dst.engine() == Engine::postgresql && copied["cases"] > 0)
    if (auto s =
            dst.exec("SELECT setval(pg_get_serial_sequence('spark.cases', 'rowid'), (SELECT max(rowid) FROM cases))");
        !s)
      return report_error(s.error());
  if (auto s = dst.exec("UPDATE settings SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'generation'");
      !s)
    return report_error(s.error());
  // The check before the commit: every row arrived.
  for (const auto& t : kTables) {
    auto a = count_rows(src, t.name), b = count_rows(dst, t.name);
    if (!a || !b) return report_error(!a ? a.error() : b.error());
    if (*a != *b)
      return report_error(Error{"kb copy: " + std::string(t.name) + ": " + std::to_string(*a) +
                                " row(s) in the source, " + std::to_string(*b) +
                                " in the destination; nothing was written"});
  }
  if (auto s = tx->commit(); !s) return report_error(s.error());
  std::printf("copied %lld case(s) (%lld file version(s)), %lld outcome(s), %lld failure(s) from %s to %s\n",
              static_cast<long long>(copied["cases"]), static_cast<long long>(copied["blobs"]),
              static_cast<long long>(copied["outcomes"]), static_cast<long long>(copied["failures"]),
              (*from)->name().c_str(), (*to)->name().c_str());
  note("the vector index is not copied: `spark index` (or the first `spark localize`) builds it for the new store");
  return 0;
}

int kb_status(const Common& common) {
  auto kb = open_kb(common, false);
  if (!kb) return report_error(kb.error());
  Database& db = (*kb)->database();
  std::printf("store: %s (%s)\n", (*kb)->name().c_str(), (*kb)->engine() == Engine::sqlite ? "SQLite" : "PostgreSQL");
  if (!common.kb_source.empty()) std::printf("chosen by: %s\n", common.kb_source.c_str());
  std::printf("schema version: %d\n", kSchemaVersion);
  for (const char* table : {"cases", "blobs", "outcomes", "failures"}) {
    auto n = count_rows(db, table);
    if (!n) return report_error(n.error());
    std::printf("%s: %lld\n", std::string(table) == "blobs" ? "file versions" : table, static_cast<long long>(*n));
  }
  auto open = MiningStore(**kb).failures({FailureStatus::open});
  if (!open) return report_error(open.error());
  std::set<std::string> tests;
  for (const auto& f : *open) tests.insert(f.test_id);
  std::printf("open failures: %zu (in %zu test(s); `spark failures list`)\n", open->size(), tests.size());
  auto g = (*kb)->generation();
  if (!g) return report_error(g.error());
  std::printf("generation: %lld\n", static_cast<long long>(*g));
  std::printf("local index: %s%s\n", (*kb)->index_dir().c_str(),
              path_exists((*kb)->index_dir() / "manifest.json") ? "" : " (not built)");
  if (const std::string ranker = ranker_status(**kb); !ranker.empty()) std::printf("ranker: %s\n", ranker.c_str());
  const auto spooled = spool_files(local_folder(common));
  if (!spooled.empty())
    std::printf("spool: %zu report(s) waiting in %s\n", spooled.size(), spool_dir(local_folder(common)).c_str());
  return 0;
}

}  // namespace

int cmd_kb(const Common& common, const KbArgs& args) {
  if (args.action == "copy") return kb_copy(common, args);
  if (args.action == "status") return kb_status(common);
  auto kb = open_kb(common, true);
  if (!kb) return report_error(kb.error());
  std::printf("%s: %s, schema version %d\n", (*kb)->name().c_str(), (*kb)->created() ? "created" : "up to date",
              kSchemaVersion);
  return 0;
}

}  // namespace spark::cli
