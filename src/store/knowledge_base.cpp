#include "store/knowledge_base.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/text.h"
#include "store/postgres_db.h"
#include "store/sqlite_db.h"

namespace spark {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Takes an exclusive flock on `fd`, trying until `wait` has passed (at once, then every 10 ms, growing to 200 ms).
// False when it is still held by another open file then.
bool lock_within(int fd, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (auto pause = std::chrono::milliseconds(10);; pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return true;  // a file system without flock: no lock, as before
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, until - now));
  }
}

// Who holds the lock on the file `fd` is open on: "pid 1234 (spark record --junit r.xml)", from the kernel's table
// of file locks (/proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 fe:00:10954090 0 EOF", a waiter's line marked "->")
// and the process's command line; "another process (its pid not found in /proc/locks)" when the table does not
// say. The device is matched too when the table's matches it (an overlay file system shows another device).
std::string lock_holder(int fd) {
  struct stat st {};
  std::string pid;
  if (::fstat(fd, &st) == 0) {
    std::ifstream locks("/proc/locks");
    const std::string inode = ":" + std::to_string(st.st_ino);
    char device[32];
    std::snprintf(device, sizeof device, "%02x:%02x", major(st.st_dev), minor(st.st_dev));
    bool exact = false;
    for (std::string line; std::getline(locks, line) && !exact;) {
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      if (f.size() < 6 || f[1] == "->") continue;
      const std::string& where = f[5];  // MAJOR:MINOR:INODE, after "ID: TYPE ADVISORY WRITE PID"
      if (!where.ends_with(inode) || std::count(where.begin(), where.end(), ':') != 2) continue;
      exact = where == device + inode;
      if (exact || pid.empty()) pid = f[4];
    }
  }
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos)
    return "another process (its pid not found in /proc/locks)";
  std::ifstream cmdline("/proc/" + pid + "/cmdline", std::ios::binary);
  std::string command((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  while (!command.empty() && command.back() == '\0') command.pop_back();
  std::replace(command.begin(), command.end(), '\0', ' ');
  return "pid " + pid + (command.empty() ? "" : " (" + terminal_line(clip(command, 200)) + ")");
}

// Tables whose rows hold large values (file contents, mined records, messages) are rowid tables: SQLite compares an
// index key against a WITHOUT ROWID row by reading the whole row, overflow pages included, so a lookup in such a table
// read tens of kilobytes per comparison (schema 6 and before; 77 % of an import's writes into a 40k-case store).
const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS settings(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs(sha TEXT PRIMARY KEY, content TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases(
  rowid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  test_id TEXT NOT NULL,
  failure_epoch INTEGER NOT NULL,
  labelled INTEGER NOT NULL,
  content_key TEXT NOT NULL,
  error_message TEXT NOT NULL,
  record TEXT NOT NULL,
  record_hash TEXT NOT NULL,
  language TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS cases_time ON cases(failure_epoch);
CREATE TABLE IF NOT EXISTS case_files(
  case_rowid INTEGER NOT NULL REFERENCES cases(rowid) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  path TEXT NOT NULL,
  blob_sha TEXT NOT NULL REFERENCES blobs(sha),
  PRIMARY KEY(case_rowid, ord)) WITHOUT ROWID;
INSERT OR IGNORE INTO settings(key, value) VALUES ('generation', '0');
CREATE TABLE IF NOT EXISTS outcomes(
  commit_sha TEXT NOT NULL,
  test_id TEXT NOT NULL,
  outcome TEXT NOT NULL,
  time INTEGER,
  message TEXT NOT NULL,
  origin TEXT NOT NULL,
  recorded_at INTEGER NOT NULL,
  PRIMARY KEY(commit_sha, test_id));
CREATE INDEX IF NOT EXISTS outcomes_test ON outcomes(test_id);
CREATE TABLE IF NOT EXISTS failures(
  commit_sha TEXT NOT NULL,
  test_id TEXT NOT NULL,
  status TEXT NOT NULL,
  time INTEGER,
  message TEXT NOT NULL,
  origin TEXT NOT NULL,
  snapshot TEXT,
  fixed_commit TEXT,
  case_id TEXT,
  faulty_count INTEGER,
  record TEXT,
  fixed_files TEXT,
  decided_by TEXT,
  decided_at INTEGER,
  reason TEXT,
  kept TEXT,
  updated_at INTEGER NOT NULL,
  fault_key TEXT,
  duplicate_of TEXT,
  PRIMARY KEY(commit_sha, test_id));
CREATE INDEX IF NOT EXISTS failures_status ON failures(status);
)sql";

// The same tables on PostgreSQL, in the schema `spark` (so they never meet another application's tables). Text that
// comes from files and test runs is BYTEA (any bytes, NUL included); keys compare byte-wise (COLLATE "C"), as SQLite's
// do.
const char* kPostgresSchema = R"sql(
CREATE TABLE IF NOT EXISTS settings(key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(sha TEXT COLLATE "C" PRIMARY KEY, content BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS cases(
  rowid BIGSERIAL PRIMARY KEY,
  id TEXT COLLATE "C" NOT NULL UNIQUE,
  test_id TEXT COLLATE "C" NOT NULL,
  failure_epoch BIGINT NOT NULL,
  labelled INTEGER NOT NULL,
  content_key TEXT COLLATE "C" NOT NULL,
  error_message BYTEA NOT NULL,
  record TEXT NOT NULL,
  record_hash TEXT NOT NULL,
  language TEXT COLLATE "C" NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS cases_time ON cases(failure_epoch);
CREATE TABLE IF NOT EXISTS case_files(
  case_rowid BIGINT NOT NULL REFERENCES cases(rowid) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  path TEXT COLLATE "C" NOT NULL,
  blob_sha TEXT COLLATE "C" NOT NULL REFERENCES blobs(sha),
  PRIMARY KEY(case_rowid, ord));
CREATE INDEX IF NOT EXISTS case_files_blob ON case_files(blob_sha);
INSERT INTO settings(key, value) VALUES ('generation', '0') ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS outcomes(
  commit_sha TEXT COLLATE "C" NOT NULL,
  test_id TEXT COLLATE "C" NOT NULL,
  outcome TEXT COLLATE "C" NOT NULL,
  time BIGINT,
  message BYTEA NOT NULL,
  origin TEXT NOT NULL,
  recorded_at BIGINT NOT NULL,
  PRIMARY KEY(commit_sha, test_id));
CREATE INDEX IF NOT EXISTS outcomes_test ON outcomes(test_id);
CREATE TABLE IF NOT EXISTS failures(
  commit_sha TEXT COLLATE "C" NOT NULL,
  test_id TEXT COLLATE "C" NOT NULL,
  status TEXT COLLATE "C" NOT NULL,
  time BIGINT,
  message BYTEA NOT NULL,
  origin TEXT NOT NULL,
  snapshot TEXT,
  fixed_commit TEXT COLLATE "C",
  case_id TEXT COLLATE "C",
  faulty_count BIGINT,
  record TEXT,
  fixed_files TEXT,
  decided_by TEXT,
  decided_at BIGINT,
  reason TEXT,
  kept TEXT,
  updated_at BIGINT NOT NULL,
  fault_key TEXT COLLATE "C",
  duplicate_of TEXT COLLATE "C",
  PRIMARY KEY(commit_sha, test_id));
CREATE INDEX IF NOT EXISTS failures_status ON failures(status);
CREATE INDEX IF NOT EXISTS failures_fault ON failures(fault_key);
CREATE INDEX IF NOT EXISTS failures_case ON failures(case_id);
)sql";

// Schema 3 (after the tables exist): the fault key and the duplicate link of a failure.
const char* kSchema3 = R"sql(
CREATE INDEX IF NOT EXISTS failures_fault ON failures(fault_key);
)sql";

// content_key(c) (case.h) and each file's blob key in one pass over the bytes: the three FNV streams run side by
// side, so a 70 KB test file costs one multiply chain's latency instead of two. A blob key is two FNV-1a hashes of the
// content with different seeds and its length: "<16 hex><16 hex>-<bytes>" (stable: stored stores use it).
struct CaseKeys {
  std::string content_key;
  std::vector<std::string> file_keys;
};
CaseKeys case_keys(const Case& c) {
  CaseKeys out;
  uint64_t h = fnv1a64(c.error_message);
  for (const auto& f : c.files) {
    h = fnv1a64(f.path, h ^ 0x9e3779b97f4a7c15ULL);
    h ^= 0x85ebca6b0b3e5d2bULL;
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
    for (char ch : f.content) {
      const auto byte = static_cast<unsigned char>(ch);
      h = (h ^ byte) * 0x100000001b3ULL;
      a = (a ^ byte) * 0x100000001b3ULL;
      b = (b ^ byte) * 0x100000001b3ULL;
    }
    out.file_keys.push_back(hex64(a) + hex64(b) + "-" + std::to_string(f.content.size()));
  }
  out.content_key = hex64(h);
  return out;
}

// Whether an SQLite table has a column (an upgrade adds it only once).
Result<bool> has_column(Database& db, const std::string& table, const std::string& column) {
  auto st = db.prepare("SELECT count(*) FROM pragma_table_info('" + table + "') WHERE name = '" + column + "'");
  TRY(st);
  TRY(st->step());
  return st->int64(0) > 0;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    const auto b = rd() & 0xffu;
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string record_hash(const std::string& record, const std::string& key) {
  uint64_t h = fnv1a64(record);
  h = fnv1a64(key, h);
  return hex64(h);
}

}  // namespace

Status read_corpora(const std::vector<std::string>& files, std::vector<Case>& cases, std::vector<CaseOrigin>& origins) {
  for (const auto& file : files) {
    auto read = read_cases_jsonl(file);
    TRY(read);
    for (size_t i = 0; i < read->cases.size(); ++i) {
      origins.push_back({file + ":" + std::to_string(read->lines[i])});
      cases.push_back(std::move(read->cases[i]));
    }
  }
  return {};
}

Status stream_corpora(const std::vector<std::string>& files, const std::function<Status(Case&&, std::string)>& take) {
  for (const auto& file : files)
    TRY(for_each_case_jsonl(
        file, [&](Case&& c, size_t line) { return take(std::move(c), file + ":" + std::to_string(line)); }));
  return {};
}

KnowledgeBase::KnowledgeBase(fs::path dir, std::unique_ptr<Database> db) : dir_(std::move(dir)), db_(std::move(db)) {}
KnowledgeBase::~KnowledgeBase() = default;

const std::string& KnowledgeBase::name() const { return db_->name(); }
Engine KnowledgeBase::engine() const { return db_->engine(); }
bool KnowledgeBase::connection_lost() const { return db_->connection_lost(); }

fs::path KnowledgeBase::index_dir() const {
  if (db_->engine() == Engine::sqlite) return dir_ / "index";
  // A server store's index is this runner's cache, one per store.
  return dir_ / ("index-" + store_id_);
}

Result<std::unique_ptr<KnowledgeBase>> KnowledgeBase::open(const fs::path& location, bool create, int busy_timeout_ms,
                                                           const fs::path& local_dir,
                                                           const UpgradeStep& fault_keys_recomputed) {
  if (is_postgres_url(location.string())) {
    auto db = PostgresDb::connect(location.string());
    TRY(db);
    std::unique_ptr<KnowledgeBase> kb(
        new KnowledgeBase(local_dir.empty() ? fs::path(".spark") : local_dir, std::move(*db)));
    TRY(kb->migrate_postgres(create, fault_keys_recomputed));
    return kb;
  }
  const fs::path& dir = location;
  const fs::path db_file = dir / "kb.sqlite";
  std::error_code ec;
  if (!fs::exists(db_file, ec)) {
    if (!create)
      return fail("no knowledge base at " + dir.string() +
                  " (make one with `spark import`, `spark mine` or `spark record`, or pass --kb DIR)");
    fs::create_directories(dir, ec);
    if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  }
  // Creating the file and its schema is serialized between processes (two CI jobs recording into a new store at
  // once): SQLite's switch to WAL and the first schema write can fail with "database is locked" otherwise. The lock
  // is waited for as long as SQLite waits for a busy store, then given up, naming its holder.
  struct CreationLock {
    int fd = -1;
    ~CreationLock() {
      if (fd >= 0) ::close(fd);  // closing releases the flock
    }
  } lock;
  if (create) {
    const fs::path lock_file = dir / "kb.lock";
    lock.fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd >= 0 && !lock_within(lock.fd, std::chrono::milliseconds(std::max(0, busy_timeout_ms))))
      return fail(lock_file.string() + ": held by " + lock_holder(lock.fd) + " for over " +
                  seconds_text(busy_timeout_ms / 1000.0) +
                  ", as long as spark waits for it; the knowledge base is not opened (if that process is stuck, "
                  "stop it; its lock goes with it)");
  }
  auto db = SqliteDb::open(db_file, create, busy_timeout_ms);
  if (!db && db.error().message.starts_with("no space left on device")) return std::unexpected(db.error());
  if (!db) return std::unexpected(with_context("knowledge base ", db.error()));
  std::unique_ptr<KnowledgeBase> kb(new KnowledgeBase(dir, std::move(*db)));
  TRY(kb->migrate(fault_keys_recomputed));
  return kb;
}

Result<int64_t> KnowledgeBase::postgres_version() {
  // to_regclass, not information_schema: the catalog view costs ~10 ms a query, paid by every command.
  auto exists = db_->prepare("SELECT CASE WHEN to_regclass('spark.settings') IS NULL THEN 0 ELSE 1 END");
  TRY(exists);
  TRY(exists->step());
  if (exists->int64(0) == 0) return 0;
  auto v = setting("schema_version");
  TRY(v);
  if (!*v)
    return fail("knowledge base " + name() +
                ": the schema spark has a settings table but no schema version: it is "
                "not a spark knowledge base");
  return std::strtoll((*v)->c_str(), nullptr, 10);
}

Status KnowledgeBase::migrate_postgres(bool create, const UpgradeStep& fault_keys_recomputed) {
  if (auto s = db_->exec("SET search_path = spark"); !s) return s;
  auto version = postgres_version();
  TRY(version);
  if (*version > kSchemaVersion)
    return fail("knowledge base " + name() + " has schema version " + std::to_string(*version) +
                ", newer than this spark understands (" + std::to_string(kSchemaVersion) + "); upgrade spark");
  if (*version < kSchemaVersion) {
    if (!create)
      return fail("knowledge base " + name() + (*version == 0 ? " has no spark schema" : " has an older schema") +
                  ": run `spark kb init` first");
    // Two runners creating the schema at once: the write lock makes one wait, and it then finds the schema made
    // (CREATE SCHEMA IF NOT EXISTS itself is not safe against a concurrent one).
    auto tx = Transaction::begin(*db_);
    TRY(tx);
    if (auto s = db_->exec("CREATE SCHEMA IF NOT EXISTS spark"); !s) return s;
    version = postgres_version();
    TRY(version);
    if (*version < kSchemaVersion) {
      if (auto s = db_->exec(kPostgresSchema); !s) return s;
      if (*version > 0) {
        // Schema 3 → 4 (the server store began at 3): each case's language beside its record.
        if (auto s = db_->exec("ALTER TABLE cases ADD COLUMN IF NOT EXISTS language TEXT COLLATE \"C\" NOT NULL "
                               "DEFAULT ''");
            !s)
          return s;
        if (auto s = fill_case_languages(); !s) return s;
      }
      if (*version > 0 && *version < 8) {
        // Schema 4 → 5: fault keys without the test; 7 → 8: without a labelled failure's fix commit. The caller's step
        // then (the miner merges the failures that are one fault into one case).
        if (auto s = recompute_fault_keys(); !s) return s;
        if (fault_keys_recomputed)
          if (auto s = fault_keys_recomputed(*this); !s) return s;
      }
      // Schema 5 → 6: the table `embeddings` (never read) goes.
      if (*version > 0 && *version < 6)
        if (auto s = db_->exec("DROP TABLE IF EXISTS embeddings"); !s) return s;
      if (auto s = set_setting("schema_version", std::to_string(kSchemaVersion)); !s) return s;
      if (*version == 0) {
        if (auto s = set_setting("store_id", random_hex(16)); !s) return s;
        created_ = true;
      }
    }
    if (auto s = tx->commit(); !s) return s;
  }
  auto id = setting("store_id");
  TRY(id);
  if (!*id || (*id)->empty() || (*id)->find_first_not_of("0123456789abcdef") != std::string::npos)
    return fail("knowledge base " + name() + ": damaged settings: no valid store_id");
  store_id_ = **id;
  return {};
}

Status KnowledgeBase::rebuild_as_rowid_tables() {
  // The tables still WITHOUT ROWID that the schema now makes rowid tables: each made again as the schema says and its
  // rows copied (SQLite's way to change a table's kind: create, copy, drop, rename). The caller turned foreign keys
  // off (case_files refers to blobs) and holds the transaction; the dropped tables' indexes are made again by the
  // schema that runs next.
  for (const StoreTable& t : copied_tables()) {
    auto sql = db_->prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?");
    TRY(sql);
    sql->bind(1, t.name);
    auto row = sql->step();
    TRY(row);
    const bool without_rowid = *row && sql->text(0).find("WITHOUT ROWID") != std::string::npos;
    sql->reset();
    const std::string_view schema = kSchema;
    const std::string create = "CREATE TABLE IF NOT EXISTS " + t.name + "(";
    const size_t at = schema.find(create);
    if (!without_rowid || at == std::string_view::npos) continue;
    const size_t end = schema.find(';', at);
    if (schema.substr(at, end - at).find("WITHOUT ROWID") != std::string_view::npos) continue;
    const std::string fresh = t.name + "_rowid";
    std::string columns;
    for (const auto& c : t.columns) columns += (columns.empty() ? "" : ", ") + c;
    TRY(db_->exec("CREATE TABLE " + fresh + "(" +
                  std::string(schema.substr(at + create.size(), end - at - create.size())) + ";\nINSERT INTO " + fresh +
                  "(" + columns + ") SELECT " + columns + " FROM " + t.name + ";\nDROP TABLE " + t.name +
                  ";\nALTER TABLE " + fresh + " RENAME TO " + t.name + ";"));
  }
  return {};
}

Status KnowledgeBase::migrate(const UpgradeStep& fault_keys_recomputed) {
  // Read, then the statement finished: a statement still open keeps a table from being dropped ("table is locked").
  const auto read_version = [&]() -> Result<int64_t> {
    auto st = db_->prepare("PRAGMA user_version");
    TRY(st);
    auto row = st->step();
    if (!row) return std::unexpected(with_context("knowledge base ", row.error()));
    return st->int64(0);
  };
  auto read = read_version();
  TRY(read);
  const int64_t version = *read;
  if (version > kSchemaVersion)
    return fail("knowledge base " + db_path().string() + " has schema version " + std::to_string(version) +
                ", newer than this spark understands (" + std::to_string(kSchemaVersion) + "); upgrade spark");
  if (version == kSchemaVersion) return {};
  if (version == 0) {
    // A new file, or an SQLite file that is not ours.
    auto tables = db_->prepare(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name NOT IN "
        "('settings','blobs','cases','case_files','outcomes','failures')");
    TRY(tables);
    TRY(tables->step());
    if (tables->int64(0) > 0)
      return fail("knowledge base " + db_path().string() + " is an SQLite file but not a spark knowledge base");
    created_ = true;
  }
  const bool remake = version > 0 && version < 7;  // the step to 7 comes after, in a transaction of its own
  auto tx = Transaction::begin(*db_);
  TRY(tx);
  if (auto s = db_->exec(kSchema); !s) return s;
  if (version > 0 && version < 4) {
    // Schema 3 → 4 (first: the merge below imports cases): each case's language beside its record.
    auto has = has_column(*db_, "cases", "language");
    TRY(has);
    if (!*has)
      if (auto s = db_->exec("ALTER TABLE cases ADD COLUMN language TEXT NOT NULL DEFAULT ''"); !s) return s;
    if (auto s = fill_case_languages(); !s) return s;
  }
  if (version > 0 && version < 3) {
    // Schema 2 → 3: failures get a fault key.
    auto has = has_column(*db_, "failures", "fault_key");
    TRY(has);
    if (!*has)
      if (auto s = db_->exec("ALTER TABLE failures ADD COLUMN fault_key TEXT; "
                             "ALTER TABLE failures ADD COLUMN duplicate_of TEXT;");
          !s)
        return s;
  }
  if (version > 0 && version < 8)
    // Schema 2 → 3: failures get their fault key. 4 → 5: the key no longer holds the test (one fault broke several
    // tests); 7 → 8: nor a labelled failure's fix commit (a merge and the side-branch commit it brought in fixed one
    // fault): every key again. The caller's step then (the miner merges the failures that are one fault into one
    // case).
    if (auto s = recompute_fault_keys(); !s) return s;
  if (auto s = db_->exec(kSchema3); !s) return s;
  if (version > 0 && version < 8 && fault_keys_recomputed)
    if (auto s = fault_keys_recomputed(*this); !s) return s;
  // Schema 5 → 6: the table `embeddings` (a copy of every vector before the vector index; never read) goes.
  if (version > 0 && version < 6)
    if (auto s = db_->exec("DROP TABLE IF EXISTS embeddings"); !s) return s;
  if (auto s = db_->exec("PRAGMA user_version=" + std::to_string(remake ? 6 : kSchemaVersion)); !s) return s;
  TRY(tx->commit());
  if (!remake) return {};
  // Schema 6 → 7: tables made again as rowid tables (rebuild_as_rowid_tables), which SQLite does with foreign keys off
  // (they can be switched only outside a transaction; the steps above need them on: a merged case's files go with it).
  // A store left between the two transactions is a schema-6 store, and its next opening takes this step.
  TRY(db_->exec("PRAGMA foreign_keys=OFF"));
  struct ForeignKeysBack {
    Database& db;
    ~ForeignKeysBack() { (void)db.exec("PRAGMA foreign_keys=ON"); }
  } foreign_keys_back{*db_};
  auto remaking = Transaction::begin(*db_);
  TRY(remaking);
  TRY(rebuild_as_rowid_tables());
  TRY(db_->exec(kSchema));  // the indexes of the tables made again
  TRY(db_->exec(kSchema3));
  // Nothing dangles: every case file's blob and case, as before the copy.
  auto check = db_->prepare("PRAGMA foreign_key_check");
  TRY(check);
  auto bad = check->step();
  TRY(bad);
  if (*bad)
    return fail("knowledge base " + db_path().string() + ": upgrading to schema " + std::to_string(kSchemaVersion) +
                ": table " + check->text(0) + " refers to a missing row of " + check->text(2) +
                " (the store is left at schema 6, unchanged)");
  check->reset();
  if (auto s = db_->exec("PRAGMA user_version=" + std::to_string(kSchemaVersion)); !s) return s;
  return remaking->commit();
}

Status KnowledgeBase::recompute_fault_keys() {
  // Read first, then write: a statement still stepping over `failures` never sees its own updates.
  std::vector<std::array<std::string, 3>> keys;  // key, commit, test id
  {
    auto rows = db_->prepare("SELECT commit_sha, test_id, record FROM failures WHERE record IS NOT NULL");
    TRY(rows);
    TRY(rows->each_row([&] {
      auto c = case_from_json(json::parse(rows->text(2), nullptr, false));
      if (!c) return;  // a damaged record is reported where it is read; it cannot be merged
      keys.push_back({fault_key(*c), rows->text(0), rows->text(1)});
    }));
  }
  auto set = db_->prepare("UPDATE failures SET fault_key = ? WHERE commit_sha = ? AND test_id = ?");
  TRY(set);
  for (const auto& [key, commit, test_id] : keys)
    if (auto done = set->bind(1, key).bind(2, commit).bind(3, test_id).run(); !done) return done;
  return {};
}

Status KnowledgeBase::fill_case_languages() {
  // Read first, then write: a statement still stepping over `cases` never sees its own updates.
  std::vector<std::pair<int64_t, std::string>> languages;
  {
    auto rows = db_->prepare("SELECT rowid, record FROM cases ORDER BY rowid");
    TRY(rows);
    TRY(rows->each_row([&] {
      // A damaged record is reported where it is loaded; its case keeps "" (the files' extensions then tell).
      const json record = json::parse(rows->text(1), nullptr, false);
      if (!record.is_object()) return;
      const auto it = record.find("language");
      if (it == record.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) return;
      languages.emplace_back(rows->int64(0), it->get<std::string>());
    }));
  }
  auto set = db_->prepare("UPDATE cases SET language = ? WHERE rowid = ?");
  TRY(set);
  for (const auto& [rowid, language] : languages)
    if (auto s = set->bind(1, language).bind(2, rowid).run(); !s) return s;
  return {};
}

namespace {

// What a case's write needs besides the case, made off the writing thread: the keys of its content and files, and its
// record's text and hash.
struct PreparedCase {
  Case c;
  std::string origin;
  CaseKeys keys;
  std::string record, hash;
};

// Cases from the reading thread to the writing one, at most `kAhead` in between: the import holds a few cases, never
// a whole file. Either side may close it with an error (a bad line read, a write that failed); the other sees it.
class CaseChannel {
 public:
  static constexpr size_t kAhead = 8;
  // The reader's side: false when the writer has stopped (nothing more is wanted).
  bool push(PreparedCase&& p) {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return queue_.size() < kAhead || stopped_; });
    if (stopped_) return false;
    queue_.push_back(std::move(p));
    ready_.notify_one();
    return true;
  }
  // The reader is done: `end` is its status (an error ends the import).
  void finish(Status end) {
    std::lock_guard lock(mu_);
    finished_ = true;
    end_ = std::move(end);
    ready_.notify_one();
  }
  // The writer's side: the next case, or nullopt at the end (then end() says how the reading went).
  std::optional<PreparedCase> pop() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (queue_.empty()) return std::nullopt;
    PreparedCase p = std::move(queue_.front());
    queue_.pop_front();
    room_.notify_one();
    return p;
  }
  void stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    room_.notify_all();
  }
  Status end() {
    std::lock_guard lock(mu_);
    return end_;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<PreparedCase> queue_;
  bool finished_ = false, stopped_ = false;
  Status end_;
};

}  // namespace

Result<ImportSummary> KnowledgeBase::import_cases(const std::vector<Case>& cases,
                                                  const std::vector<CaseOrigin>& origins, bool replace) {
  return import_stream(
      [&](const CaseSink& take) -> Status {
        for (size_t i = 0; i < cases.size(); ++i)
          TRY(take(Case(cases[i]), i < origins.size() ? origins[i].where : std::string()));
        return {};
      },
      replace);
}

Result<ImportSummary> KnowledgeBase::import_stream(const CaseSource& source, bool replace) {
  ImportSummary summary;
  // A bulk write touches far more pages than SQLite's default 2 MB cache holds (each new test-file version is ~20
  // pages): with it, pages are read back from the WAL over and over (measured: 2.4x slower at 10k cases). 64 MB for
  // the import, the default again after.
  const bool sqlite = db_->engine() == Engine::sqlite;
  if (sqlite) (void)db_->exec("PRAGMA cache_size=-65536");
  struct CacheBack {
    Database& db;
    bool sqlite;
    ~CacheBack() {
      if (sqlite) (void)db.exec("PRAGMA cache_size=-2000");
    }
  } cache_back{*db_, sqlite};
  auto tx = Transaction::begin(*db_);
  TRY(tx);
  auto find = db_->prepare("SELECT rowid, record_hash FROM cases WHERE id = ?");
  auto del = db_->prepare("DELETE FROM cases WHERE rowid = ?");
  auto ins = db_->prepare(
      "INSERT INTO cases(id, test_id, failure_epoch, labelled, content_key, error_message, record, record_hash, "
      "language) VALUES (?,?,?,?,?,?,?,?,?) RETURNING rowid");
  auto ins_blob = db_->prepare("INSERT INTO blobs(sha, content) VALUES (?, ?) ON CONFLICT DO NOTHING");
  auto has_blob = db_->prepare("SELECT 1 FROM blobs WHERE sha = ?");
  auto ins_file = db_->prepare("INSERT INTO case_files(case_rowid, ord, path, blob_sha) VALUES (?,?,?,?)");
  for (auto* st : {&find, &del, &ins, &ins_blob, &has_blob, &ins_file})
    if (!*st) return std::unexpected(st->error());

  // Reading, parsing, checking and hashing (FNV over every file's bytes) run on a second thread a few cases ahead of
  // the writes, which are the engine's and stay on this one.
  CaseChannel channel;
  std::thread reader([&] {
    channel.finish(source([&](Case&& c, std::string origin) -> Status {
      PreparedCase p{std::move(c), std::move(origin), {}, {}, {}};
      p.keys = case_keys(p.c);
      p.record = json_text(p.c.record);
      p.hash = record_hash(p.record, p.keys.content_key);
      if (!channel.push(std::move(p))) return fail("the import stopped");
      return {};
    }));
  });
  struct Join {
    CaseChannel& channel;
    std::thread& reader;
    ~Join() {
      channel.stop();
      reader.join();
    }
  } join{channel, reader};

  auto write = [&](const PreparedCase& p) -> Status {
    const Case& c = p.c;
    const std::string where = p.origin.empty() ? std::string() : p.origin + ": ";
    const std::string& key = p.keys.content_key;
    find->bind(1, c.id);
    auto found = find->step();
    TRY(found);
    if (*found) {
      const int64_t old_rowid = find->int64(0);
      const bool same = find->text(1) == p.hash;
      find->reset();
      if (same) {
        ++summary.unchanged;
        return {};
      }
      if (!replace)
        return fail(where + "id \"" + c.id + "\" is already in the knowledge base with a different record " +
                    "(use --replace to overwrite it)");
      TRY(del->bind(1, old_rowid).run());
      ++summary.replaced;
    } else {
      find->reset();
      ++summary.added;
    }
    ins->bind(1, c.id).bind(2, c.test_id).bind(3, c.failure_epoch).bind(4, int64_t{c.labelled() ? 1 : 0});
    ins->bind(5, key).bind(6, c.error_message).bind_static(7, p.record).bind(8, p.hash).bind(9, c.language);
    auto inserted = ins->step();
    if (!inserted || !*inserted) {
      ins->reset();
      return inserted ? fail(name() + ": inserting case " + c.id + " returned no rowid")
                      : std::unexpected(inserted.error());
    }
    const int64_t rowid = ins->int64(0);
    ins->reset();
    for (size_t ord = 0; ord < c.files.size(); ++ord) {
      const std::string& sha = p.keys.file_keys[ord];
      // Most cases share a stored version: look before binding its content.
      has_blob->bind(1, sha);
      auto present = has_blob->step();
      TRY(present);
      has_blob->reset();
      if (!*present)
        TRY(ins_blob->bind(1, sha).bind_static(2, c.files[ord].content).run());
      ins_file->bind(1, rowid).bind(2, static_cast<int64_t>(ord)).bind(3, c.files[ord].path).bind(4, sha);
      TRY(ins_file->run());
    }
    return {};
  };
  while (auto p = channel.pop()) TRY(write(*p));
  TRY(channel.end());
  if (summary.added + summary.replaced > 0)
    if (auto s =
            db_->exec("UPDATE settings SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'generation'");
        !s)
      return std::unexpected(s.error());
  TRY(tx->commit());
  return summary;
}

Result<size_t> KnowledgeBase::remove_cases(const std::vector<std::string>& ids) {
  auto tx = Transaction::begin(*db_);
  TRY(tx);
  auto del = db_->prepare("DELETE FROM cases WHERE id = ?");
  TRY(del);
  size_t removed = 0;
  for (const auto& id : ids) {
    TRY(del->bind(1, id).run());
    removed += static_cast<size_t>(del->changes());
  }
  if (removed > 0) {
    // Blobs no case refers to any more go too.
    TRY(db_->exec("DELETE FROM blobs WHERE sha NOT IN (SELECT blob_sha FROM case_files)"));
    if (auto s =
            db_->exec("UPDATE settings SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'generation'");
        !s)
      return std::unexpected(s.error());
  }
  TRY(tx->commit());
  return removed;
}

Result<std::vector<CaseEntry>> KnowledgeBase::entries() {
  auto st = db_->prepare("SELECT rowid, id, test_id, failure_epoch, content_key, labelled FROM cases ORDER BY rowid");
  TRY(st);
  std::vector<CaseEntry> out;
  TRY(st->each_row([&] {
    out.push_back({st->int64(0), st->text(1), st->text(2), st->int64(3), st->text(4), st->int64(5) != 0});
  }));
  return out;
}

uint64_t fact_hash(std::string_view text) { return fnv1a64(text) ^ (static_cast<uint64_t>(text.size()) << 56); }

CaseFacts facts_of(const CaseEntry& e) {
  return {e.rowid, e.failure_epoch, fact_hash(e.id), fact_hash(e.content_key), e.labelled ? 1u : 0u};
}

std::vector<CaseFacts> facts_of(const std::vector<CaseEntry>& entries) {
  std::vector<CaseFacts> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(facts_of(e));
  return out;
}

void KnowledgeBase::map_reads() {
  // A failure (an SQLite built without memory maps) only means reads as before.
  if (db_->engine() == Engine::sqlite) (void)db_->exec("PRAGMA mmap_size=" + std::to_string(kMappedReadBytes));
}

Result<Case> KnowledgeBase::load(int64_t rowid) {
  auto st = db_->prepare("SELECT error_message, record FROM cases WHERE rowid = ?");
  TRY(st);
  st->bind(1, rowid);
  auto r = st->step();
  TRY(r);
  if (!*r) return fail(name() + ": no case with rowid " + std::to_string(rowid));
  json record;
  try {
    record = json::parse(st->text(1));
  } catch (const json::exception& e) {
    return fail(name() + ": case " + std::to_string(rowid) + " has a damaged record: " + e.what());
  }
  record["error_message"] = st->text(0);
  auto files = db_->prepare(
      "SELECT f.path, b.content FROM case_files f JOIN blobs b ON b.sha = f.blob_sha "
      "WHERE f.case_rowid = ? ORDER BY f.ord");
  TRY(files);
  files->bind(1, rowid);
  json arr = json::array();
  TRY(files->each_row([&] { arr.push_back({{"path", files->text(0)}, {"content", files->text(1)}}); }));
  record["files"] = std::move(arr);
  auto c = case_from_json(std::move(record));
  if (!c) return fail(name() + ": case " + std::to_string(rowid) + ": " + c.error().message);
  return c;
}

Result<std::optional<int64_t>> KnowledgeBase::find(const std::string& id) {
  auto st = db_->prepare("SELECT rowid FROM cases WHERE id = ?");
  TRY(st);
  st->bind(1, id);
  auto r = st->step();
  TRY(r);
  if (!*r) return std::optional<int64_t>{};
  return std::optional<int64_t>{st->int64(0)};
}

Result<size_t> KnowledgeBase::count() {
  auto st = db_->prepare("SELECT count(*) FROM cases");
  TRY(st);
  auto r = st->step();
  TRY(r);
  return static_cast<size_t>(st->int64(0));
}

Result<bool> KnowledgeBase::has_cases() {
  auto st = db_->prepare("SELECT CASE WHEN EXISTS (SELECT 1 FROM cases) THEN 1 ELSE 0 END");
  TRY(st);
  auto r = st->step();
  TRY(r);
  return st->int64(0) != 0;
}

Result<KnowledgeBase::Tail> KnowledgeBase::tail() {
  auto st = db_->prepare("SELECT (SELECT count(*) FROM cases), rowid, id FROM cases ORDER BY rowid DESC LIMIT 1");
  TRY(st);
  auto r = st->step();
  TRY(r);
  if (!*r) return Tail{};
  return Tail{static_cast<size_t>(st->int64(0)), st->int64(1), st->text(2)};
}

Status KnowledgeBase::for_each(const std::function<Status(int64_t, const Case&)>& fn) {
  auto st = db_->prepare("SELECT rowid FROM cases ORDER BY rowid");
  TRY(st);
  std::vector<int64_t> rowids;
  TRY(st->each_row([&] { rowids.push_back(st->int64(0)); }));
  for (int64_t rowid : rowids) {
    auto c = load(rowid);
    TRY(c);
    if (auto s = fn(rowid, *c); !s) return s;
  }
  return {};
}

Result<int64_t> KnowledgeBase::generation() {
  auto v = setting("generation");
  TRY(v);
  return *v ? std::stoll(**v) : 0;
}

Status KnowledgeBase::for_each_sketch(int64_t min_rowid, const std::function<Status(CaseSketch&&)>& fn) {
  auto st = db_->prepare(
      "SELECT c.rowid, c.test_id, c.labelled, f.path, f.blob_sha, c.language FROM cases c JOIN case_files f ON "
      "f.case_rowid = c.rowid WHERE c.rowid >= ? ORDER BY c.rowid, f.ord");
  TRY(st);
  st->bind(1, min_rowid);
  CaseSketch current;
  TRY(st->each_row([&]() -> Status {
    const int64_t rowid = st->int64(0);
    if (rowid != current.rowid && current.rowid != 0) {
      if (auto s = fn(std::move(current)); !s) return s;
      current = CaseSketch{};
    }
    if (current.rowid == 0) {
      current.rowid = rowid;
      current.test_id = st->text(1);
      current.labelled = st->int64(2) != 0;
      current.language = st->text(5);
    }
    current.files.emplace_back(st->text(3), st->text(4));
    return {};
  }));
  if (current.rowid != 0)
    if (auto s = fn(std::move(current)); !s) return s;
  return {};
}

Result<std::vector<std::string>> KnowledgeBase::blobs(const std::vector<std::string>& keys) {
  auto st = db_->prepare("SELECT content FROM blobs WHERE sha = ?");
  TRY(st);
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    st->bind(1, key);
    auto r = st->step();
    TRY(r);
    if (!*r) return fail(name() + ": no file content with key " + key);
    out.push_back(st->text(0));
    st->reset();
  }
  return out;
}

Result<std::vector<std::string>> KnowledgeBase::error_messages(const std::vector<int64_t>& rowids) {
  return column_of("error_message", rowids);
}

Result<std::vector<std::string>> KnowledgeBase::records(const std::vector<int64_t>& rowids) {
  return column_of("record", rowids);
}

Result<std::vector<std::string>> KnowledgeBase::column_of(const char* column, const std::vector<int64_t>& rowids) {
  auto st = db_->prepare(std::string("SELECT ") + column + " FROM cases WHERE rowid = ?");
  TRY(st);
  std::vector<std::string> out;
  out.reserve(rowids.size());
  for (int64_t rowid : rowids) {
    st->bind(1, rowid);
    auto r = st->step();
    TRY(r);
    if (!*r) return fail(name() + ": no case with rowid " + std::to_string(rowid));
    out.push_back(st->text(0));
    st->reset();
  }
  return out;
}

Result<std::optional<std::string>> KnowledgeBase::setting(const std::string& key) {
  auto st = db_->prepare("SELECT value FROM settings WHERE key = ?");
  TRY(st);
  st->bind(1, key);
  auto r = st->step();
  TRY(r);
  if (!*r) return std::optional<std::string>{};
  return std::optional<std::string>{st->text(0)};
}

Status KnowledgeBase::set_setting(const std::string& key, const std::string& value) {
  auto st = db_->prepare(
      "INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  TRY(st);
  return st->bind(1, key).bind(2, value).run();
}

const std::vector<StoreTable>& copied_tables() {
  // Read off the SQLite schema: "CREATE TABLE IF NOT EXISTS name(column TYPE …, …, PRIMARY KEY(a, b))".
  static const std::vector<StoreTable> tables = [] {
    std::vector<StoreTable> out;
    const std::string_view schema = kSchema;
    constexpr std::string_view kCreate = "CREATE TABLE IF NOT EXISTS ";
    for (size_t at = schema.find(kCreate); at != std::string_view::npos; at = schema.find(kCreate, at)) {
      at += kCreate.size();
      const size_t open = schema.find('(', at);
      StoreTable t;
      t.name = std::string(schema.substr(at, open - at));
      // The definitions between the parentheses, split at the commas outside parentheses.
      int depth = 0;
      size_t start = open + 1, i = open + 1;
      std::vector<std::string_view> parts;
      for (; i < schema.size() && depth >= 0; ++i) {
        if (schema[i] == '(') ++depth;
        if (schema[i] == ')') --depth;
        if ((schema[i] == ',' && depth == 0) || depth < 0) {
          parts.push_back(trim(schema.substr(start, i - start)));
          start = i + 1;
        }
      }
      at = i;
      for (const auto part : parts) {
        if (part.starts_with("PRIMARY KEY(")) {
          t.key = std::string(part.substr(12, part.find(')') - 12));
          continue;
        }
        const size_t space = part.find(' ');
        const std::string column(part.substr(0, space));
        const std::string_view rest = part.substr(space + 1);
        t.columns.push_back(column);
        t.integer.push_back(rest.starts_with("INTEGER"));
        if (rest.find("PRIMARY KEY") != std::string_view::npos) t.key = column;
      }
      if (t.name != "settings") out.push_back(std::move(t));
    }
    return out;
  }();
  return tables;
}

}  // namespace spark
