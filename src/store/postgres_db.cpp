#include "store/postgres_db.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/shared_library.h"

namespace spark {

namespace {

// libpq, opened when the first postgresql:// knowledge base is connected (base/shared_library.h).
// clang-format off
#define SPARK_LIBPQ_FUNCTIONS(X)                                                                                 \
  X(PQconnectdbParams) X(PQpingParams) X(PQstatus) X(PQfinish) X(PQerrorMessage) X(PQsetNoticeProcessor)         \
  X(PQexec) X(PQexecParams) X(PQresultStatus) X(PQresultErrorMessage) X(PQresultErrorField) X(PQcmdTuples)       \
  X(PQntuples) X(PQgetvalue) X(PQgetlength) X(PQgetisnull) X(PQftype) X(PQclear) X(PQtransactionStatus)
// clang-format on

struct Pq {
  SPARK_LIBPQ_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

const Result<Pq>& load_libpq() {
  static const Result<Pq> loaded =
      load_library_table<Pq>(SPARK_LIBPQ_SONAME, "the PostgreSQL client library, for a postgresql:// knowledge base",
                             [](SharedLibrary& lib, Pq& table) { SPARK_LIBPQ_FUNCTIONS(SPARK_LIBRARY_BIND) });
  return loaded;
}

// The table, once PostgresDb::connect has loaded it: every other use is on a connection it made.
const Pq& pq() { return *load_libpq(); }

constexpr Oid kByteaOid = 17;
// The advisory lock every writer takes (pg_advisory_xact_lock): "spark" in ASCII.
constexpr const char* kWriteLock = "SELECT pg_advisory_xact_lock(474213282411)";

// `?` placeholders (outside quotes) as PostgreSQL's $1, $2, …
std::string numbered_placeholders(std::string_view sql, int& count) {
  std::string out;
  out.reserve(sql.size() + 16);
  char quote = 0;
  count = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += "$" + std::to_string(++count);
    } else {
      out += c;
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class PostgresStatement final : public StatementImpl {
 public:
  PostgresStatement(PostgresDb& db, std::string sql, int params)
      : db_(&db),
        sql_(std::move(sql)),
        values_(static_cast<size_t>(params)),
        views_(static_cast<size_t>(params)),
        kinds_(static_cast<size_t>(params), Kind::null) {}
  ~PostgresStatement() override { pq().PQclear(result_); }
  PostgresStatement(const PostgresStatement&) = delete;
  PostgresStatement& operator=(const PostgresStatement&) = delete;

  void bind_text(int i, std::string_view v, bool copy) override {
    if (!slot(i)) return;
    const auto k = static_cast<size_t>(i - 1);
    if (copy) {
      values_[k].assign(v);
      views_[k] = values_[k];
    } else {
      views_[k] = v;
    }
    kinds_[k] = Kind::bytes;
  }
  void bind_int(int i, int64_t v) override {
    if (!slot(i)) return;
    const auto k = static_cast<size_t>(i - 1);
    values_[k] = std::to_string(v);
    views_[k] = values_[k];
    kinds_[k] = Kind::number;
  }
  void bind_null(int i) override {
    if (slot(i)) kinds_[static_cast<size_t>(i - 1)] = Kind::null;
  }

  Result<bool> step() override {
    if (!result_) {
      TRY(execute());
    }
    if (row_ + 1 < pq().PQntuples(result_)) {
      ++row_;
      return true;
    }
    return false;
  }
  void reset() override {
    pq().PQclear(result_);
    result_ = nullptr;
    row_ = -1;
    std::fill(kinds_.begin(), kinds_.end(), Kind::null);
  }
  int64_t int64(int col) const override { return std::strtoll(pq().PQgetvalue(result_, row_, col), nullptr, 10); }
  std::string text(int col) const override {
    if (pq().PQgetisnull(result_, row_, col)) return {};
    const char* v = pq().PQgetvalue(result_, row_, col);
    const size_t n = static_cast<size_t>(pq().PQgetlength(result_, row_, col));
    if (pq().PQftype(result_, col) != kByteaOid) return std::string(v, n);
    // bytea in text form: \x and two hex digits a byte.
    std::string out;
    if (n < 2 || v[0] != '\\' || v[1] != 'x') return std::string(v, n);
    out.reserve((n - 2) / 2);
    for (size_t i = 2; i + 1 < n; i += 2) out += static_cast<char>(hex_value(v[i]) * 16 + hex_value(v[i + 1]));
    return out;
  }
  bool is_null(int col) const override { return pq().PQgetisnull(result_, row_, col) != 0; }
  int64_t changes() const override { return changes_; }

 private:
  enum class Kind { null, number, bytes };
  bool slot(int i) { return i >= 1 && static_cast<size_t>(i) <= kinds_.size(); }

  Status execute() {
    const size_t n = kinds_.size();
    std::vector<const char*> values(n);
    std::vector<int> lengths(n), formats(n);
    for (size_t i = 0; i < n; ++i) {
      if (kinds_[i] == Kind::null) continue;
      values[i] = views_[i].data() ? views_[i].data() : "";
      lengths[i] = static_cast<int>(views_[i].size());
      // Text and bytes go as raw bytes (binary format: no escaping, and a bytea column takes them as they are);
      // numbers as decimal text, which every integer type parses.
      formats[i] = kinds_[i] == Kind::bytes ? 1 : 0;
    }
    result_ = pq().PQexecParams(db_->handle(), sql_.c_str(), static_cast<int>(n), nullptr, values.data(),
                                lengths.data(), formats.data(), 0);
    const auto status = pq().PQresultStatus(result_);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      Error e = db_->error("query failed (" + sql_.substr(0, 60) + ")", result_);
      pq().PQclear(result_);
      result_ = nullptr;
      return std::unexpected(e);
    }
    const char* tuples = pq().PQcmdTuples(result_);
    changes_ = tuples && *tuples ? std::strtoll(tuples, nullptr, 10) : 0;
    row_ = -1;
    return {};
  }

  PostgresDb* db_;
  std::string sql_;
  std::vector<std::string> values_;
  std::vector<std::string_view> views_;
  std::vector<Kind> kinds_;
  PGresult* result_ = nullptr;
  int row_ = -1;
  int64_t changes_ = 0;
};

}  // namespace

namespace {
// The endings connect() gives a failure by libpq's own judgement (PQpingParams), not by its (translated) messages.
constexpr const char* kNoAnswer = " (the server did not answer)";
constexpr const char* kNotAccepting = " (the server is not accepting connections now)";
}  // namespace

bool is_transient_connect_error(std::string_view m) {
  return m.find("cannot connect: ") != std::string_view::npos && (m.ends_with(kNoAnswer) || m.ends_with(kNotAccepting));
}

std::string note_connect_failure(std::string message, bool no_answer, bool rejected) {
  // PostgreSQL's "cannot connect now" (SQLSTATE 57P03) messages.
  constexpr std::string_view kNotReady[] = {
      "the database system is starting up", "the database system is shutting down",
      "the database system is in recovery mode", "the database system is not yet accepting connections",
      "the database system is not accepting connections"};
  bool not_ready = rejected;
  for (std::string_view m : kNotReady) not_ready = not_ready || message.find(m) != std::string::npos;
  if (no_answer)
    message += kNoAnswer;
  else if (not_ready)
    message += kNotAccepting;
  return message;
}

Result<std::unique_ptr<PostgresDb>> PostgresDb::connect(const std::string& url, int connect_timeout_s) {
  const std::string name = redact_postgres_url(url);
  TRY(check_postgres_url(url));
  if (const auto& loaded = load_libpq(); !loaded) return fail("knowledge base " + name + ": " + loaded.error().message);
  const std::string timeout = std::to_string(connect_timeout_s);
  std::vector<const char*> keys, values;
  if (!std::getenv("PGCONNECT_TIMEOUT")) {
    keys.push_back("connect_timeout");
    values.push_back(timeout.c_str());
  }
  keys.push_back("application_name");
  values.push_back("spark");
  keys.push_back("dbname");  // expanded: the URL's own settings win over the ones above
  values.push_back(url.c_str());
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = pq().PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn && pq().PQstatus(conn) != CONNECTION_OK && pq().PQpingParams(keys.data(), values.data(), 1) == PQPING_OK) {
    // The server accepts connections now: it was starting up a moment ago, or it refuses us. One more attempt
    // tells which, so that the verdict below is about the same state of the server.
    pq().PQfinish(conn);
    conn = pq().PQconnectdbParams(keys.data(), values.data(), 1);
  }
  if (!conn) return fail(name + ": out of memory");
  std::unique_ptr<PostgresDb> db(new PostgresDb(conn, name));
  if (pq().PQstatus(conn) != CONNECTION_OK) {
    // libpq quotes what it read as a host, port or database: a password it misread would show (masked here).
    std::string msg = mask_postgres_password(pq().PQerrorMessage(conn), url);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (size_t i; (i = msg.find("\n\t")) != std::string::npos;) msg.replace(i, 2, " ");
    for (size_t i; (i = msg.find('\n')) != std::string::npos;) msg.replace(i, 1, "; ");
    // Whether trying later may help: no answer at all, or a server starting or shutting down. A server that answers
    // and refuses (a wrong password, an unknown database) will say the same next time.
    // The ping comes a moment after the failure: a server that was starting up may be up by then, so the failure's
    // own words count too.
    const PGPing ping = pq().PQpingParams(keys.data(), values.data(), 1);
    msg = note_connect_failure(std::move(msg), ping == PQPING_NO_RESPONSE, ping == PQPING_REJECT);
    return fail("knowledge base " + name + ": cannot connect: " + msg);
  }
  // "relation already exists, skipping" and other notices are not the user's business.
  pq().PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  TRY(db->exec("SET client_min_messages = warning; SET TIME ZONE 'UTC'"));
  return db;
}

PostgresDb::~PostgresDb() { pq().PQfinish(conn_); }

Error PostgresDb::error(std::string_view what, const void* result) {
  const auto* r = static_cast<const PGresult*>(result);
  std::string msg = r ? pq().PQresultErrorMessage(r) : "";
  if (msg.empty()) msg = pq().PQerrorMessage(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  for (size_t i; (i = msg.find('\n')) != std::string::npos;) msg.replace(i, 1, " ");
  const char* state = r ? pq().PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  // Class 08: connection exceptions; 57P01-57P03: the server shut down or is starting.
  const bool lost = pq().PQstatus(conn_) == CONNECTION_BAD ||
                    (state && (std::strncmp(state, "08", 2) == 0 || std::strncmp(state, "57P0", 4) == 0));
  if (lost) lost_ = true;
  return Error{name_ + ": " + std::string(what) + ": " + (msg.empty() ? "unknown error" : msg) +
               (lost ? " (the connection to the server was lost)" : "")};
}

Result<Statement> PostgresDb::prepare(std::string_view sql) {
  int params = 0;
  std::string translated = numbered_placeholders(sql, params);
  return Statement(std::make_unique<PostgresStatement>(*this, std::move(translated), params));
}

Status PostgresDb::exec(const std::string& sql) {
  PGresult* r = pq().PQexec(conn_, sql.c_str());
  const auto status = pq().PQresultStatus(r);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Error e = error("\"" + sql.substr(0, 60) + "\" failed", r);
    pq().PQclear(r);
    return std::unexpected(e);
  }
  pq().PQclear(r);
  return {};
}

bool PostgresDb::in_transaction() { return pq().PQtransactionStatus(conn_) != PQTRANS_IDLE; }

Status PostgresDb::begin_write() { return exec(std::string("BEGIN; ") + kWriteLock); }

}  // namespace spark
