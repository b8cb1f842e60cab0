// The knowledge base: labelled cases, the miner's outcomes and failures, and index metadata, in one of two engines
// (database.h): an embedded SQLite file (the default) or a PostgreSQL server shared by many CI runners.
//
// SQLite layout: DIR/kb.sqlite (this store) and DIR/index/ (the vector index, see vector_index.h).
// PostgreSQL: the tables live in the database's schema `spark`; the vector index stays local to each runner, in
// LOCAL_DIR/index-<store id>/, a cache the localizer brings up to date with the cases added since it was built.
// Thread safety: one KnowledgeBase per thread. Several processes (and machines, with PostgreSQL) may use one store at
// once: readers never block, a writer waits for another writer. Every change is one transaction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/case.h"
#include "formats/redact.h"
#include "store/database.h"

namespace spark {

// 1: cases, files, embeddings. 2: the miner's outcomes and failures (their labelling and audit state). 3: each
// failure's fault key (one case per fault). 4: each case's `language` field beside its record (the sketches carry it).
// 5: fault keys without the test. 6: no `embeddings` table (the vectors live in the local index). 7: blobs, outcomes
// and failures are rowid tables (SQLite reads a WITHOUT ROWID row whole to compare its key: slow for large rows).
// 8: fault keys without a labelled failure's fix commit.
inline constexpr int kSchemaVersion = 8;

// Where a case came from, for error messages ("cases.jsonl:12").
struct CaseOrigin {
  std::string where;
};

// Every case of these JSON Lines files, in order, with "file:line" origins; the first bad file is the error.
Status read_corpora(const std::vector<std::string>& files, std::vector<Case>& cases, std::vector<CaseOrigin>& origins);
// The same cases handed to `take` one at a time as they are read (formats/case.h: for_each_case_jsonl), with their
// "file:line" origins; the first bad line, or `take`'s first error, ends it.
Status stream_corpora(const std::vector<std::string>& files, const std::function<Status(Case&&, std::string)>& take);

struct ImportSummary {
  size_t added = 0;
  size_t unchanged = 0;  // same id, same record: re-importing a file is harmless
  size_t replaced = 0;   // same id, different record, with replace = true
};

// The lightweight view of a stored case that filtering policies and search need.
struct CaseEntry {
  int64_t rowid = 0;
  std::string id;
  std::string test_id;
  int64_t failure_epoch = 0;
  std::string content_key;
  bool labelled = false;
};

// What filtering a query needs of a stored case, in fixed size (the id and the content key as 64-bit hashes): kept
// beside the vector index, so a new process does not read every case's row (docs/FORMATS.md, "cases file"). Five
// 64-bit fields and nothing else: a row of the cases file is one CaseFacts as it lies in memory, so a query uses the
// mapped file in place.
struct CaseFacts {
  int64_t rowid = 0;
  int64_t failure_epoch = 0;
  uint64_t id_hash = 0;
  uint64_t key_hash = 0;
  uint64_t labelled = 0;  // 1 when the case has faulty lines, else 0
};
CaseFacts facts_of(const CaseEntry& e);
std::vector<CaseFacts> facts_of(const std::vector<CaseEntry>& entries);
// The hash CaseFacts keeps of an id or a content key.
uint64_t fact_hash(std::string_view text);

class KnowledgeBase {
 public:
  // Opens the store at `location`: a folder (default .spark) holding an SQLite store, or a postgresql:// URL. With
  // `create`, makes an empty store (folder and file, or the schema on the server) when absent. Fails with a message
  // naming the store when it is not a spark store, is corrupt, has a newer schema, or the server cannot be reached
  // (host and port named; never the password). `local_dir` holds a server store's local index (default .spark).
  //
  // Upgrading a store from before schema 5 recomputes every failure's fault key (failures.fault_key), so failures
  // that were apart may now share one: `fault_keys_recomputed`, when given, runs then, inside the upgrade's
  // transaction (the miner's rule for one fault, miner/mining_store.h: open_knowledge_base). The store knows no rule
  // about its failures.
  using UpgradeStep = std::function<Status(KnowledgeBase&)>;
  static Result<std::unique_ptr<KnowledgeBase>> open(const std::filesystem::path& location, bool create,
                                                     int busy_timeout_ms = 30000,
                                                     const std::filesystem::path& local_dir = {},
                                                     const UpgradeStep& fault_keys_recomputed = {});
  ~KnowledgeBase();

  // The folder of an SQLite store; a server store's local folder.
  const std::filesystem::path& dir() const { return dir_; }
  // The store in messages: the SQLite file, or the URL without its password.
  const std::string& name() const;
  Engine engine() const;
  // The SQLite file (meaningful for SQLite stores only).
  std::filesystem::path db_path() const { return dir_ / "kb.sqlite"; }
  std::filesystem::path index_dir() const;
  // True when this open made the store (an empty one).
  bool created() const { return created_; }
  // True when the last failure lost the server's connection: the step may be retried on a new KnowledgeBase.
  bool connection_lost() const;

  // Adds cases in one transaction: all or nothing. A case whose id is stored already is left alone when its record
  // is the same, replaced when `replace`, and otherwise an error naming its origin.
  Result<ImportSummary> import_cases(const std::vector<Case>& cases, const std::vector<CaseOrigin>& origins,
                                     bool replace);
  // The same, streamed: `source` hands each case to its sink in order, with its origin ("cases.jsonl:12", for
  // messages), on a thread of its own while this one writes, a few cases behind (the import holds a few cases, not
  // the corpus). The source's error, or the sink's (a write that failed: the sink then returns an error and the
  // source should stop), rolls everything back.
  using CaseSink = std::function<Status(Case&&, std::string origin)>;
  using CaseSource = std::function<Status(const CaseSink&)>;
  Result<ImportSummary> import_stream(const CaseSource& source, bool replace);

  // From now on this connection reads the SQLite file through a memory map of up to kMappedReadBytes (SQLite's
  // mmap_size) instead of a system call per page: what the few random reads of a localization want (one retrieved
  // case's contents, ~10 pages). Not for passes over the store: every mapped page read counts in the process's
  // resident memory (the import and the index keep SQLite's cache). Nothing for a server store.
  static constexpr int64_t kMappedReadBytes = int64_t{1} << 30;
  void map_reads();
  Result<std::vector<CaseEntry>> entries();
  Result<Case> load(int64_t rowid);
  Result<std::optional<int64_t>> find(const std::string& id);
  Result<size_t> count();
  // Whether the store holds any case (one row read, where count() visits every row).
  Result<bool> has_cases();
  // The count of cases and the last one's rowid and id (0 and "" when there is none), without reading the rows: what
  // an index saved at the store's generation checks before it trusts its own list of the cases (the store may have
  // lost some since: a write lost in a power cut, an older backup restored, a row deleted on the server).
  struct Tail {
    size_t count = 0;
    int64_t last_rowid = 0;
    std::string last_id;
  };
  Result<Tail> tail();
  // Calls `fn` for every case in insertion order (streaming: one case in memory at a time).
  Status for_each(const std::function<Status(int64_t rowid, const Case&)>& fn);

  // Bumped by every change to the cases; the vector index records the generation it was built from.
  Result<int64_t> generation();

  // What embedding a case needs besides its error message, without reading its record or file contents: the files
  // are named by their content's key (cases that share a test-file version share the key). In rowid order, from
  // `min_rowid` on.
  struct CaseSketch {
    int64_t rowid = 0;
    std::string test_id;
    std::string language;  // the case's `language` field as given (a required field of the corpus format)
    bool labelled = false;
    std::vector<std::pair<std::string, std::string>> files;  // path, content key (see blob())
  };
  Status for_each_sketch(int64_t min_rowid, const std::function<Status(CaseSketch&&)>& fn);
  // File contents by their keys, and error messages by rowids, in the order asked; an error naming the store when
  // one is absent.
  Result<std::vector<std::string>> blobs(const std::vector<std::string>& keys);
  Result<std::vector<std::string>> error_messages(const std::vector<int64_t>& rowids);
  // The cases' stored records (JSON: a case without `files` and `error_message`, case_from_stored_record reads it).
  Result<std::vector<std::string>> records(const std::vector<int64_t>& rowids);

  // Removes the cases with these ids (absent ids are ignored), in one transaction. Returns how many were removed.
  Result<size_t> remove_cases(const std::vector<std::string>& ids);

  // The store's connection, for stores layered on the same tables and transactions (the miner's outcomes and
  // failures, miner/mining_store.h). Tables are created here, by the schema migration.
  Database& database() { return *db_; }

  Result<std::optional<std::string>> setting(const std::string& key);
  Status set_setting(const std::string& key, const std::string& value);

 private:
  KnowledgeBase(std::filesystem::path dir, std::unique_ptr<Database> db);
  Status migrate(const UpgradeStep& fault_keys_recomputed);
  Status rebuild_as_rowid_tables();
  Status migrate_postgres(bool create, const UpgradeStep& fault_keys_recomputed);
  // Schema 3 → 4: fills cases.language from each case's record (a record that does not parse keeps "").
  Status fill_case_languages();
  // Schema 2 → 3 and 4 → 5: every failure with a record gets fault_key(record) (a damaged record keeps its key).
  Status recompute_fault_keys();
  Result<int64_t> postgres_version();
  Result<std::vector<std::string>> column_of(const char* column, const std::vector<int64_t>& rowids);
  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  std::string store_id_;
  bool created_ = false;
};

// A table of the store as its own schema defines it (knowledge_base.cpp), for copying it: its columns, each an
// integer or not (text), and its primary key (the order rows are copied in).
struct StoreTable {
  std::string name;
  std::vector<std::string> columns;
  std::vector<bool> integer;
  std::string key;
};
// The tables a copy carries, parents before children: every table of the schema but `settings` (the store's own
// identity lives there; copy_store carries the other settings).
const std::vector<StoreTable>& copied_tables();

// What copy_store carried.
struct StoreCopy {
  std::map<std::string, int64_t> rows;  // by table
};
// `spark kb copy`: every row of copied_tables() and the settings other than the store's own (schema version,
// identity, generation) from `from` into `to`, which must be empty (a copy never merges), in one transaction of `to`
// checked table by table before it commits; `to`'s generation moves on. The vector index is not copied.
Result<StoreCopy> copy_store(KnowledgeBase& from, KnowledgeBase& to);

// What export_cases wrote.
struct CasesExport {
  size_t cases = 0, redacted = 0;
  std::map<std::string, size_t> by_rule;  // secrets redacted, by rule
};
// `spark export`: every stored case as a JSON Lines record (case_to_json: lossless), redacted with `redactor` when one
// is given. `sink` takes the text in pieces of at least 1 MiB (the last one smaller); its error ends the export.
Result<CasesExport> export_cases(KnowledgeBase& kb, const Redactor* redactor,
                                 const std::function<Status(const std::string&)>& sink);

}  // namespace spark
