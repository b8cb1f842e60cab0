#include "miner/git_history.h"

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>

#include "base/files.h"
#include "base/shared_library.h"
#include "base/text.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// libgit2, opened the first time a repository is opened or a diff is made (base/shared_library.h).
// clang-format off
#define SPARK_LIBGIT2_FUNCTIONS(X)                                                                                    \
  X(git_blob_free) X(git_blob_lookup) X(git_blob_rawcontent) X(git_blob_rawsize) X(git_buf_dispose)                   \
  X(git_checkout_options_init) X(git_checkout_tree) X(git_commit_free) X(git_commit_lookup)                           \
  X(git_commit_parent) X(git_commit_parent_id) X(git_commit_parentcount) X(git_commit_summary) X(git_commit_time) X(git_commit_tree)          \
  X(git_config_free) X(git_config_get_string) X(git_diff_buffers) X(git_diff_free) X(git_diff_get_delta)              \
  X(git_diff_num_deltas) X(git_diff_options_init) X(git_diff_tree_to_tree) X(git_diff_tree_to_workdir_with_index)   \
  X(git_error_last) X(git_error_set_str) X(git_graph_descendant_of) X(git_libgit2_init) X(git_libgit2_opts) X(git_object_free) X(git_object_id) \
  X(git_object_peel) X(git_odb_add_backend) X(git_odb_backend_data_alloc) X(git_odb_backend_data_free) X(git_odb_free) \
  X(git_odb_init_backend) X(git_oid_cpy) X(git_oid_fromstr) X(git_oid_tostr) X(git_oid_tostr_s)      \
  X(git_patch_free) X(git_patch_from_buffers) X(git_patch_to_buf) X(git_repository_commondir) X(git_repository_config_snapshot)\
  X(git_repository_free) X(git_repository_item_path) X(git_repository_odb)                                            \
  X(git_repository_is_bare) X(git_repository_is_shallow) X(git_repository_open_ext)       \
  X(git_repository_path) X(git_repository_workdir) X(git_revparse_single) X(git_revwalk_free)                         \
  X(git_revwalk_new) X(git_revwalk_next) X(git_revwalk_push) X(git_revwalk_push_head)                                 \
  X(git_revwalk_simplify_first_parent) X(git_revwalk_sorting) X(git_tree_entry_bypath)                                \
  X(git_tree_entry_filemode) X(git_tree_entry_free) X(git_tree_entry_id) X(git_tree_entry_name)                       \
  X(git_tree_entry_type) X(git_tree_free) X(git_tree_walk)
// clang-format on

struct Git {
  SPARK_LIBGIT2_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

// zlib, for reading loose objects (LooseGuard below); opened with libgit2, which has loaded it already.
#define SPARK_ZLIB_FUNCTIONS(X) X(inflateInit_) X(inflate) X(inflateEnd)

struct Zlib {
  SPARK_ZLIB_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

const Result<Zlib>& load_zlib() {
  static const Result<Zlib> loaded =
      load_library_table<Zlib>(SPARK_ZLIB_SONAME, "zlib, for reading git's loose objects",
                               [](SharedLibrary& lib, Zlib& table) { SPARK_ZLIB_FUNCTIONS(SPARK_LIBRARY_BIND) });
  return loaded;
}

const Zlib& zlib() { return *load_zlib(); }

// The table, loaded and initialised once; an error when libgit2 is missing or too old. Every entry point of this
// file (GitRepository::open, unified_diff, removed_or_modified_lines) checks it first.
const Result<Git>& load_libgit2() {
  static const Result<Git> loaded = []() -> Result<Git> {
    auto api =
        load_library_table<Git>(SPARK_LIBGIT2_SONAME, "libgit2, for reading git history",
                                [](SharedLibrary& lib, Git& table) { SPARK_LIBGIT2_FUNCTIONS(SPARK_LIBRARY_BIND) });
    if (!api) return api;
    if (const auto& z = load_zlib(); !z) return std::unexpected(z.error());
    api->git_libgit2_init();
    // As git itself: objects are not re-hashed on every read (they were checked when fetched). Halves the time of
    // reading history.
    api->git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
    return api;
  }();
  return loaded;
}

// The table, after an entry point has loaded it.
const Git& git() { return *load_libgit2(); }

std::string last_error(const std::string& what) {
  const git_error* e = git().git_error_last();
  return what + ": " + (e && e->message ? e->message : "libgit2 error");
}

// Owns one libgit2 object: freed once, when the owner goes; never copied (a copy would free it twice).
template <class T, void (*Git::*Free)(T*)>
struct Owned {
  T* p = nullptr;
  Owned() = default;
  explicit Owned(T* owned) : p(owned) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (p) (git().*Free)(p);
  }
};

// What to do about an object that cannot be read, for every message that names one.
constexpr const char* kFsckAdvice =
    "`git fsck` names every damaged or missing object; restore them from another clone (copy its objects, or fetch "
    "again)";

// A git object that should be there and could not be read (damaged, missing, not readable by this user): libgit2's
// message with the way out, which also marks it as a read error (is_read_error).
Error read_error(const std::string& what) {
  std::string message = last_error(what);
  if (message.find(kFsckAdvice) == std::string::npos) message += "; " + std::string(kFsckAdvice);
  return Error{std::move(message)};
}

// --- Loose objects, read in bounded work ---------------------------------------------------------------------------
//
// libgit2 1.5 (Debian 12's) inflates a loose object in a loop that never ends when the file is truncated: zlib asks
// for more input, none comes, and the loop calls it again (fixed upstream by libgit2 PR 7346, in no Debian 12
// package). One damaged file in .git/objects made `spark mine` and `spark record` spin at 100 % CPU for ever.
// LooseGuard is an object database backend that libgit2 asks after its packs and before its own loose backend,
// for the same files: it reads and inflates a loose object itself, where every call of zlib either consumes input or
// fills output and a call that does neither ends the read, so the work is bounded by the file's size and the size its
// header declares. A damaged object is an error naming its file and `git fsck`; a sound one is handed to libgit2 as
// its loose backend would have (each object is inflated once, as before). Objects in packs never reach it.

enum class Inflated { filled, ended };

// Inflates from `zs` into [out, out + n) until that is full or the stream ends. What is wrong otherwise.
std::expected<Inflated, std::string> inflate_into(z_stream& zs, unsigned char* out, size_t n) {
  zs.next_out = out;
  zs.avail_out = static_cast<uInt>(n);
  for (;;) {
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int rc = zlib().inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) return Inflated::ended;
    if (rc != Z_OK && rc != Z_BUF_ERROR) return std::unexpected(std::string("zlib: ") + (zs.msg ? zs.msg : "bad data"));
    if (zs.avail_out == 0) return Inflated::filled;
    if (zs.avail_in == in_before && zs.avail_out == out_before)
      return std::unexpected(std::string("the compressed data ends before the object does: the file is truncated"));
  }
}

// git's test for a zlib stream's first two bytes (a loose object that fails it has the early, pack-like form).
bool zlib_header(std::string_view b) {
  if (b.size() < 2) return false;
  const unsigned c0 = static_cast<unsigned char>(b[0]), c1 = static_cast<unsigned char>(b[1]);
  return (c0 & 0x8F) == 0x08 && ((c0 << 8) + c1) % 31 == 0;
}

git_object_t loose_type(std::string_view name) {
  if (name == "commit") return GIT_OBJECT_COMMIT;
  if (name == "tree") return GIT_OBJECT_TREE;
  if (name == "blob") return GIT_OBJECT_BLOB;
  if (name == "tag") return GIT_OBJECT_TAG;
  return GIT_OBJECT_INVALID;
}

// A loose object's content, in a buffer of libgit2's (`backend`'s allocator), from its file's bytes: git's form (zlib
// of "TYPE SIZE\0" and the content) or the early pack-like one (a pack entry's header, then zlib of the content).
struct LooseObject {
  void* data = nullptr;  // size + 1 bytes, NUL-terminated, for libgit2 to free
  size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
};
std::expected<LooseObject, std::string> inflate_loose(std::string_view file, git_odb_backend* backend) {
  if (file.size() >= UINT_MAX)
    return std::unexpected(std::string("a file of 4 GiB or more, which spark does not read"));
  LooseObject out;
  uint64_t declared = 0;
  size_t at = 0;  // where the zlib stream starts
  const bool standard = zlib_header(file);
  if (!standard) {
    // type in bits 4-6 of the first byte, the size in its low 4 bits and 7 more bits per following byte
    if (file.empty()) return std::unexpected(std::string("an empty file"));
    auto c = static_cast<unsigned char>(file[at++]);
    const int type = (c >> 4) & 7;
    declared = c & 15;
    for (int shift = 4; c & 0x80; shift += 7) {
      if (at == file.size() || shift > 56) return std::unexpected(std::string("no object header"));
      c = static_cast<unsigned char>(file[at++]);
      declared += static_cast<uint64_t>(c & 0x7f) << shift;
    }
    if (type < GIT_OBJECT_COMMIT || type > GIT_OBJECT_TAG) return std::unexpected(std::string("no object header"));
    out.type = static_cast<git_object_t>(type);
  }
  z_stream zs{};
  if (zlib().inflateInit_(&zs, ZLIB_VERSION, static_cast<int>(sizeof zs)) != Z_OK)
    return std::unexpected(std::string("zlib could not start"));
  struct End {
    z_stream& zs;
    ~End() { zlib().inflateEnd(&zs); }
  } end{zs};
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(file.data() + at));
  zs.avail_in = static_cast<uInt>(file.size() - at);
  unsigned char head[64];
  std::string_view early;  // content inflated with the header
  bool ended = false;
  if (standard) {
    auto step = inflate_into(zs, head, sizeof head);
    TRY(step);
    ended = *step == Inflated::ended;
    const std::string_view h(reinterpret_cast<const char*>(head), sizeof head - zs.avail_out);
    const size_t space = h.find(' '), nul = h.find('\0');
    if (nul == std::string_view::npos || space > nul) return std::unexpected(std::string("no object header"));
    out.type = loose_type(h.substr(0, space));
    if (out.type == GIT_OBJECT_INVALID)
      return std::unexpected("an unknown object type \"" + std::string(h.substr(0, space)) + "\"");
    const auto [end_of_size, ec] = std::from_chars(h.data() + space + 1, h.data() + nul, declared);
    if (ec != std::errc() || end_of_size != h.data() + nul || nul == space + 1)
      return std::unexpected(std::string("no object size in its header"));
    early = h.substr(nul + 1);
  }
  // deflate makes at most ~1032 bytes of 1: a size beyond that is a damaged header, not memory to ask for
  if (declared > uint64_t{file.size()} * 1032 + 64)
    return std::unexpected("its header says " + std::to_string(declared) + " bytes, more than its " +
                           std::to_string(file.size()) + " compressed bytes can hold");
  if (declared >= UINT_MAX)
    return std::unexpected(std::string("an object of 4 GiB or more, which spark does not read"));
  out.size = static_cast<size_t>(declared);
  if (early.size() > out.size) return std::unexpected(std::string("more content than its header says"));
  auto* body = static_cast<unsigned char*>(git().git_odb_backend_data_alloc(backend, out.size + 1));
  if (!body) return std::unexpected("no memory for " + std::to_string(out.size) + " bytes");
  const auto failed = [&](const std::string& why) {
    git().git_odb_backend_data_free(backend, body);
    return std::unexpected(why);
  };
  std::memcpy(body, early.data(), early.size());
  size_t have = early.size();
  if (!ended) {
    auto step = inflate_into(zs, body + have, out.size - have);
    if (!step) return failed(step.error());
    have = out.size - zs.avail_out;
    if (*step == Inflated::filled) {
      // the content is complete: the stream must end here
      unsigned char extra = 0;
      auto last = inflate_into(zs, &extra, 1);
      if (!last) return failed(last.error());
      if (*last != Inflated::ended || zs.avail_out == 0) return failed("more content than its header says");
    }
  }
  if (have != out.size)
    return failed("its content ends after " + std::to_string(have) + " of the " + std::to_string(out.size) +
                  " bytes its header says");
  body[out.size] = '\0';
  out.data = body;
  return out;
}

struct LooseGuard {
  git_odb_backend backend;           // first: libgit2 hands &backend to the callbacks
  std::vector<std::string> folders;  // the objects folder, then its alternates
};
static_assert(std::is_standard_layout_v<LooseGuard>);

const std::vector<std::string>& guarded_folders(git_odb_backend* backend) {
  return reinterpret_cast<LooseGuard*>(backend)->folders;
}

// The loose object `hex` names in one of `folders`: read and inflated, nullopt when no folder has it, or an error
// (set as libgit2's last error) naming its file and the way out.
std::expected<std::optional<LooseObject>, int> read_guarded(git_odb_backend* backend, const char* hex) {
  for (const auto& folder : guarded_folders(backend)) {
    const fs::path file = fs::path(folder) / std::string(hex, 2) / (hex + 2);
    if (!path_exists(file)) continue;
    auto bytes = read_file(file);
    std::expected<LooseObject, std::string> object =
        bytes ? inflate_loose(*bytes, backend) : std::unexpected(bytes.error().message);
    if (object) return std::optional<LooseObject>(*object);
    const std::string message =
        "git object " + std::string(hex) +
        " cannot be read: " + (bytes ? file.string() + " is damaged (" + object.error() + ")" : object.error()) + "; " +
        kFsckAdvice;
    git().git_error_set_str(GIT_ERROR_ODB, message.c_str());
    return std::unexpected(GIT_ERROR);
  }
  return std::optional<LooseObject>();
}

int guarded_read(void** data, size_t* size, git_object_t* type, git_odb_backend* backend, const git_oid* oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git().git_oid_tostr(hex, sizeof hex, oid);
  auto object = read_guarded(backend, hex);
  if (!object) return object.error();
  if (!*object)
    return GIT_PASSTHROUGH;  // in no loose file: libgit2's other backends say where it is, or that it is not
  *data = (*object)->data;
  *size = (*object)->size;
  *type = (*object)->type;
  return 0;
}

// A short id (`--commit 1a2b3c`): every loose object it may name is read first, so a damaged one is an error; then
// libgit2's backends resolve it (and read it once more: short ids are few).
int guarded_read_prefix(git_oid* full, void** data, size_t* size, git_object_t* type, git_odb_backend* backend,
                        const git_oid* prefix, size_t length) {
  if (length >= GIT_OID_HEXSZ) {
    const int rc = guarded_read(data, size, type, backend, prefix);
    if (rc == 0) git().git_oid_cpy(full, prefix);
    return rc;
  }
  char hex[GIT_OID_HEXSZ + 1];
  git().git_oid_tostr(hex, sizeof hex, prefix);
  const std::string head(hex, 2), tail(hex + 2, length - 2);
  for (const auto& folder : guarded_folders(backend)) {
    std::error_code ec;
    for (fs::directory_iterator it(fs::path(folder) / head, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() != GIT_OID_HEXSZ - 2 || !name.starts_with(tail)) continue;
      auto object = read_guarded(backend, (head + name).c_str());
      if (!object) return object.error();
      if (*object) git().git_odb_backend_data_free(backend, (*object)->data);
    }
  }
  return GIT_PASSTHROUGH;
}

// After libgit2's packs (priority 2; it sorts its backends stably, so a backend added later with the same priority
// comes after them), before its loose backend (priority 1).
constexpr int kLooseGuardPriority = 2;

// Puts a LooseGuard over the loose objects of `repo` (its objects folder and the alternates it lists).
Status guard_loose_objects(git_repository* repo) {
  git_buf buf = GIT_BUF_INIT;
  if (git().git_repository_item_path(&buf, repo, GIT_REPOSITORY_ITEM_OBJECTS) != 0)
    return fail(last_error("the objects folder"));
  const std::string objects(buf.ptr, buf.size);
  git().git_buf_dispose(&buf);
  auto guard = std::make_unique<LooseGuard>();
  guard->folders.push_back(objects);
  if (auto alternates = read_file(fs::path(objects) / "info" / "alternates"); alternates)
    for (auto line : split_lines(*alternates)) {
      line = trim(line);
      if (line.empty() || line.starts_with("#")) continue;
      const fs::path p(line);
      guard->folders.push_back((p.is_absolute() ? p : fs::path(objects) / p).string());
    }
  Owned<git_odb, &Git::git_odb_free> odb;
  if (git().git_repository_odb(&odb.p, repo) != 0) return fail(last_error(objects));
  git().git_odb_init_backend(&guard->backend, GIT_ODB_BACKEND_VERSION);
  guard->backend.read = guarded_read;
  guard->backend.read_prefix = guarded_read_prefix;
  guard->backend.free = [](git_odb_backend* backend) { delete reinterpret_cast<LooseGuard*>(backend); };
  if (git().git_odb_add_backend(odb.p, &guard->backend, kLooseGuardPriority) != 0) return fail(last_error(objects));
  static_cast<void>(guard.release());  // the object database owns it now, and frees it with the repository
  return {};
}

}  // namespace

bool is_read_error(const Error& e) { return e.message.find(kFsckAdvice) != std::string::npos; }

Result<std::unique_ptr<GitRepository>> GitRepository::open(const fs::path& path) {
  if (const auto& loaded = load_libgit2(); !loaded) return fail(path.string() + ": " + loaded.error().message);
  git_repository* repo = nullptr;
  if (git().git_repository_open_ext(&repo, path.c_str(), 0, nullptr) != 0)
    return fail(path.string() + ": not a git repository (" + last_error("open") + ")");
  const char* wd = git().git_repository_workdir(repo);
  auto opened = std::unique_ptr<GitRepository>(new GitRepository(repo, wd ? fs::path(wd) : path));
  if (auto guarded = guard_loose_objects(repo); !guarded) return fail(path.string() + ": " + guarded.error().message);
  return opened;
}

void GitRepository::RepositoryFree::operator()(git_repository* repo) const { git().git_repository_free(repo); }

GitRepository::~GitRepository() = default;

bool GitRepository::bare() const { return git().git_repository_is_bare(repo_.get()) == 1; }

bool GitRepository::shallow() const { return git().git_repository_is_shallow(repo_.get()) == 1; }

namespace {

// The commits reachable from `tip` without going past the `boundary` commits (whose parents are not followed), parents
// before children: depth first, each commit's parents in order (`first_parent`: the first only).
Result<std::vector<git_oid>> walk_to_boundary(git_repository* repo, const git_oid& tip, bool first_parent,
                                              const std::set<std::string>& boundary, const fs::path& where) {
  struct Frame {
    git_oid id;
    std::vector<git_oid> parents;
    size_t next = 0;
  };
  std::vector<git_oid> out;
  std::set<std::string> seen;
  std::vector<Frame> stack;
  const auto enter = [&](const git_oid& id) -> Status {
    char hex[GIT_OID_HEXSZ + 1];
    git().git_oid_tostr(hex, sizeof hex, &id);
    if (!seen.insert(hex).second) return {};
    Owned<git_commit, &Git::git_commit_free> commit;
    if (git().git_commit_lookup(&commit.p, repo, &id) != 0)
      return std::unexpected(read_error(where.string() + ": the history"));
    Frame frame{id, {}, 0};
    if (!boundary.contains(hex)) {
      const unsigned n = git().git_commit_parentcount(commit.p);
      for (unsigned i = 0; i < (first_parent ? std::min(n, 1u) : n); ++i)
        frame.parents.push_back(*git().git_commit_parent_id(commit.p, i));
    }
    stack.push_back(std::move(frame));
    return {};
  };
  TRY(enter(tip));
  while (!stack.empty()) {
    if (Frame& top = stack.back(); top.next < top.parents.size()) {
      const git_oid parent = top.parents[top.next++];
      TRY(enter(parent));
      continue;
    }
    out.push_back(stack.back().id);
    stack.pop_back();
  }
  return out;
}

}  // namespace

std::vector<std::string> GitRepository::shallow_boundary() const {
  std::vector<std::string> out;
  if (!shallow()) return out;
  auto text = read_file(fs::path(git().git_repository_commondir(repo_.get())) / "shallow");
  if (!text) return out;
  for (auto line : split_lines(*text))
    if (line = trim(line); line.size() == GIT_OID_HEXSZ) out.emplace_back(line);
  return out;
}

Result<std::vector<CommitInfo>> GitRepository::history(bool first_parent, std::optional<int64_t> since,
                                                       std::optional<int64_t> until, const std::string& tip) const {
  // libgit2 1.5 knows no shallow clones: its walk reads the parents of the clone's boundary commits, which the clone
  // does not have, and fails there. A shallow clone's history is walked here instead, and ends at the boundary (as
  // git's own does).
  if (const auto boundary = shallow_boundary(); !boundary.empty()) {
    auto start = resolve(tip.empty() ? "HEAD" : tip);
    TRY(start);
    git_oid oid;
    git().git_oid_fromstr(&oid, start->c_str());
    auto walked = walk_to_boundary(repo_.get(), oid, first_parent, {boundary.begin(), boundary.end()}, workdir_);
    TRY(walked);
    return commit_infos(*walked, since, until);
  }
  Owned<git_revwalk, &Git::git_revwalk_free> walk;
  if (git().git_revwalk_new(&walk.p, repo_.get()) != 0) return fail(last_error(workdir_.string()));
  git().git_revwalk_sorting(walk.p, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
  if (tip.empty()) {
    if (git().git_revwalk_push_head(walk.p) != 0) return fail(workdir_.string() + ": " + last_error("HEAD"));
  } else {
    auto sha = resolve(tip);
    TRY(sha);
    git_oid oid;
    git().git_oid_fromstr(&oid, sha->c_str());
    if (git().git_revwalk_push(walk.p, &oid) != 0) return fail(workdir_.string() + ": " + last_error(tip));
  }
  if (first_parent) git().git_revwalk_simplify_first_parent(walk.p);
  std::vector<git_oid> walked;
  git_oid oid;
  int next = 0;
  while ((next = git().git_revwalk_next(&oid, walk.p)) == 0) walked.push_back(oid);
  if (next != GIT_ITEROVER) return std::unexpected(read_error(workdir_.string() + ": the history"));
  return commit_infos(walked, since, until);
}

Result<std::vector<CommitInfo>> GitRepository::commit_infos(const std::vector<git_oid>& commits,
                                                            std::optional<int64_t> since,
                                                            std::optional<int64_t> until) const {
  std::vector<CommitInfo> out;
  for (const git_oid& oid : commits) {
    Owned<git_commit, &Git::git_commit_free> commit;
    if (git().git_commit_lookup(&commit.p, repo_.get(), &oid) != 0)
      return std::unexpected(read_error(workdir_.string() + ": the history"));
    CommitInfo c;
    char hex[GIT_OID_HEXSZ + 1];
    git().git_oid_tostr(hex, sizeof hex, &oid);
    c.sha = hex;
    c.time = static_cast<int64_t>(git().git_commit_time(commit.p));
    const char* summary = git().git_commit_summary(commit.p);
    c.summary = summary ? summary : "";
    if (since && c.time < *since) continue;
    if (until && c.time > *until) continue;
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::string> GitRepository::resolve(const std::string& rev) const {
  Owned<git_object, &Git::git_object_free> obj;
  // An object that cannot be read is libgit2's plain error (a name that names nothing has its own codes).
  if (const int rc = git().git_revparse_single(&obj.p, repo_.get(), rev.c_str()); rc == GIT_ERROR)
    return std::unexpected(read_error(workdir_.string()));
  else if (rc != 0)
    return fail(workdir_.string() + ": no commit \"" + rev + "\" in this repository" +
                (shallow() ? " (it is a shallow clone: fetch more history, e.g. git fetch --unshallow)" : ""));
  Owned<git_object, &Git::git_object_free> commit;
  if (git().git_object_peel(&commit.p, obj.p, GIT_OBJECT_COMMIT) != 0)
    return fail(workdir_.string() + ": \"" + rev + "\" is not a commit");
  char hex[GIT_OID_HEXSZ + 1];
  git().git_oid_tostr(hex, sizeof hex, git().git_object_id(commit.p));
  return std::string(hex);
}

namespace {

// Commit `sha` (a full sha) of `repo` into `out`: an error naming it when it is no sha, is not there (`hint` said
// after), or cannot be read (a read error).
Status lookup_commit(git_repository* repo, const fs::path& workdir, const std::string& sha, git_commit** out,
                     const std::string& hint = "") {
  git_oid oid;
  if (git().git_oid_fromstr(&oid, sha.c_str()) != 0) return fail("\"" + sha + "\" is not a commit sha");
  if (const int rc = git().git_commit_lookup(out, repo, &oid); rc == GIT_ENOTFOUND)
    return fail(workdir.string() + ": no commit " + sha + " in this repository" + hint);
  else if (rc != 0)
    return std::unexpected(read_error(workdir.string() + ": commit " + sha));
  return {};
}

}  // namespace

Result<std::vector<std::string>> GitRepository::parents(const std::string& sha) const {
  Owned<git_commit, &Git::git_commit_free> commit;
  TRY(lookup_commit(repo_.get(), workdir_, sha, &commit.p));
  std::vector<std::string> out;
  char hex[GIT_OID_HEXSZ + 1];
  for (unsigned i = 0; i < git().git_commit_parentcount(commit.p); ++i) {
    git().git_oid_tostr(hex, sizeof hex, git().git_commit_parent_id(commit.p, i));
    out.emplace_back(hex);
  }
  return out;
}

Result<bool> GitRepository::descends_from(const std::string& sha, const std::string& ancestor) const {
  git_oid a, b;
  if (git().git_oid_fromstr(&a, sha.c_str()) != 0 || git().git_oid_fromstr(&b, ancestor.c_str()) != 0)
    return fail(workdir_.string() + ": not a full commit sha: " + (sha.size() == 40 ? ancestor : sha));
  if (sha == ancestor) return true;
  const int rc = git().git_graph_descendant_of(repo_.get(), &a, &b);
  if (rc < 0)
    return fail(
        last_error(workdir_.string() + ": is " + ancestor.substr(0, 10) + " an ancestor of " + sha.substr(0, 10)));
  return rc == 1;
}

Result<int64_t> GitRepository::commit_time(const std::string& sha) const {
  Owned<git_commit, &Git::git_commit_free> commit;
  TRY(lookup_commit(repo_.get(), workdir_, sha, &commit.p));
  return static_cast<int64_t>(git().git_commit_time(commit.p));
}

Result<std::optional<std::string>> GitRepository::file_at(const std::string& sha, const std::string& path) const {
  Owned<git_commit, &Git::git_commit_free> commit;
  TRY(lookup_commit(repo_.get(), workdir_, sha, &commit.p,
                    shallow() ? " (shallow clone: the commit may be beyond its depth)" : ""));
  Owned<git_tree, &Git::git_tree_free> tree;
  if (git().git_commit_tree(&tree.p, commit.p) != 0) return std::unexpected(read_error("the files of " + sha));
  Owned<git_tree_entry, &Git::git_tree_entry_free> entry;
  // Not found: no such path at that commit. Any other failure is a tree on the way that cannot be read.
  if (const int rc = git().git_tree_entry_bypath(&entry.p, tree.p, path.c_str()); rc == GIT_ENOTFOUND)
    return std::optional<std::string>();
  else if (rc != 0)
    return std::unexpected(read_error(path + " at " + sha));
  if (git().git_tree_entry_type(entry.p) != GIT_OBJECT_BLOB) return std::optional<std::string>();
  Owned<git_blob, &Git::git_blob_free> blob;
  if (git().git_blob_lookup(&blob.p, repo_.get(), git().git_tree_entry_id(entry.p)) != 0)
    return std::unexpected(read_error(path + " at " + sha));
  const auto* data = static_cast<const char*>(git().git_blob_rawcontent(blob.p));
  std::string content(data, static_cast<size_t>(git().git_blob_rawsize(blob.p)));
  if (content.find('\0') != std::string::npos)
    return fail(path + " at " + sha.substr(0, 10) + ": a binary file, not test code");
  end_lone_carriage_returns(content);  // lines as the test runner counted them (base/text.h)
  return std::optional<std::string>(std::move(content));
}

namespace {

Result<git_tree*> tree_of(git_repository* repo, const std::string& sha, const fs::path& where) {
  git_oid oid;
  if (git().git_oid_fromstr(&oid, sha.c_str()) != 0) return fail("\"" + sha + "\" is not a commit sha");
  Owned<git_commit, &Git::git_commit_free> commit;
  if (const int rc = git().git_commit_lookup(&commit.p, repo, &oid); rc == GIT_ENOTFOUND)
    return fail(where.string() + ": no commit " + sha + " in this repository");
  else if (rc != 0)
    return std::unexpected(read_error(where.string() + ": commit " + sha));
  git_tree* tree = nullptr;
  if (git().git_commit_tree(&tree, commit.p) != 0) return std::unexpected(read_error("the files of " + sha));
  return tree;
}

// Every path a diff names, before or after, sorted and once each.
std::vector<std::string> paths_of(git_diff* diff) {
  std::set<std::string> paths;
  for (size_t i = 0; i < git().git_diff_num_deltas(diff); ++i) {
    const git_diff_delta* d = git().git_diff_get_delta(diff, i);
    if (d->old_file.path) paths.insert(d->old_file.path);
    if (d->new_file.path) paths.insert(d->new_file.path);
  }
  return {paths.begin(), paths.end()};
}

}  // namespace

Result<std::vector<std::string>> GitRepository::changed_paths(const std::string& from_sha,
                                                              const std::string& to_sha) const {
  auto a = tree_of(repo_.get(), from_sha, workdir_);
  TRY(a);
  Owned<git_tree, &Git::git_tree_free> from{*a};
  auto b = tree_of(repo_.get(), to_sha, workdir_);
  TRY(b);
  Owned<git_tree, &Git::git_tree_free> to{*b};
  Owned<git_diff, &Git::git_diff_free> diff;
  if (git().git_diff_tree_to_tree(&diff.p, repo_.get(), from.p, to.p, nullptr) != 0)
    return std::unexpected(read_error("the changes from " + from_sha + " to " + to_sha));
  return paths_of(diff.p);
}

Result<std::vector<std::string>> GitRepository::changed_in_work_tree(const std::string& sha) const {
  if (bare()) return std::vector<std::string>();
  auto t = tree_of(repo_.get(), sha, workdir_);
  TRY(t);
  Owned<git_tree, &Git::git_tree_free> tree{*t};
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.ignore_submodules = GIT_SUBMODULE_IGNORE_ALL;
  Owned<git_diff, &Git::git_diff_free> diff;
  if (git().git_diff_tree_to_workdir_with_index(&diff.p, repo_.get(), tree.p, &opts) != 0)
    return fail(last_error(workdir_.string() + ": the work tree against " + sha.substr(0, 10)));
  return paths_of(diff.p);
}

Status GitRepository::materialize(const std::string& sha, const fs::path& dir) const {
  auto t = tree_of(repo_.get(), sha, workdir_);
  TRY(t);
  Owned<git_tree, &Git::git_tree_free> tree{*t};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  const std::string target = dir.string();
  git_checkout_options opts;
  git().git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION);
  opts.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX | GIT_CHECKOUT_DONT_WRITE_INDEX;
  opts.target_directory = target.c_str();
  if (git().git_checkout_tree(repo_.get(), reinterpret_cast<git_object*>(tree.p), &opts) != 0)
    return fail(last_error("checkout of " + sha.substr(0, 10) + " into " + target));
  return {};
}

Result<std::vector<std::string>> GitRepository::paths_at(const std::string& sha) const {
  auto t = tree_of(repo_.get(), sha, workdir_);
  TRY(t);
  Owned<git_tree, &Git::git_tree_free> tree{*t};
  std::vector<std::string> out;
  const auto visit = [](const char* root, const git_tree_entry* entry, void* payload) -> int {
    if (git().git_tree_entry_type(entry) == GIT_OBJECT_BLOB &&
        git().git_tree_entry_filemode(entry) != GIT_FILEMODE_LINK)
      static_cast<std::vector<std::string>*>(payload)->push_back(std::string(root) + git().git_tree_entry_name(entry));
    return 0;
  };
  if (git().git_tree_walk(tree.p, GIT_TREEWALK_PRE, visit, &out) != 0)
    return std::unexpected(read_error("the files of commit " + sha.substr(0, 10)));
  return out;
}

fs::path GitRepository::hooks_dir() const {
  Owned<git_config, &Git::git_config_free> config;
  if (git().git_repository_config_snapshot(&config.p, repo_.get()) == 0) {
    const char* path = nullptr;
    if (git().git_config_get_string(&path, config.p, "core.hooksPath") == 0 && path && *path) {
      fs::path p(path);
      return p.is_absolute() ? p : workdir_ / p;
    }
  }
  return fs::path(git().git_repository_path(repo_.get())) / "hooks";
}

std::string GitRepository::configured_author() const {
  Owned<git_config, &Git::git_config_free> config;
  if (git().git_repository_config_snapshot(&config.p, repo_.get()) != 0) return "";
  const char* name = nullptr;
  const char* email = nullptr;
  git().git_config_get_string(&name, config.p, "user.name");
  git().git_config_get_string(&email, config.p, "user.email");
  std::string out = name ? name : "";
  if (email && *email) out += (out.empty() ? "<" : " <") + std::string(email) + ">";
  return out;
}

std::string GitRepository::config_string(const std::string& key) const {
  Owned<git_config, &Git::git_config_free> config;
  if (git().git_repository_config_snapshot(&config.p, repo_.get()) != 0) return "";
  const char* value = nullptr;
  if (git().git_config_get_string(&value, config.p, key.c_str()) != 0 || !value) return "";
  return value;
}

std::string GitRepository::root_commit() const {
  Owned<git_revwalk, &Git::git_revwalk_free> walk;
  if (git().git_revwalk_new(&walk.p, repo_.get()) != 0 || git().git_revwalk_push_head(walk.p) != 0) return "";
  git().git_revwalk_simplify_first_parent(walk.p);
  git_oid oid, last;
  bool any = false;
  while (git().git_revwalk_next(&oid, walk.p) == 0) {
    last = oid;
    any = true;
  }
  return any ? git().git_oid_tostr_s(&last) : "";
}

Result<std::string> unified_diff(const std::string& before, const std::string& after, const std::string& path,
                                 int context) {
  if (const auto& loaded = load_libgit2(); !loaded) return fail("diff of " + path + ": " + loaded.error().message);
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.context_lines = static_cast<uint32_t>(context);
  opts.flags |= GIT_DIFF_FORCE_TEXT;
  Owned<git_patch, &Git::git_patch_free> patch;
  if (git().git_patch_from_buffers(&patch.p, before.data(), before.size(), path.c_str(), after.data(), after.size(),
                                   path.c_str(), &opts) != 0)
    return fail(last_error("diff of " + path));
  git_buf buf = GIT_BUF_INIT;
  if (git().git_patch_to_buf(&buf, patch.p) != 0) return fail(last_error("diff of " + path));
  std::string out(buf.ptr, buf.size);
  git().git_buf_dispose(&buf);
  return out;
}

Result<std::vector<int>> removed_or_modified_lines(const std::string& faulty, const std::string& fixed,
                                                   const std::string& path) {
  auto fixes = line_fixes(faulty, fixed, path);
  TRY(fixes);
  std::vector<int> out;
  out.reserve(fixes->size());
  for (const auto& [line, replacement] : *fixes) out.push_back(line);
  return out;
}

Result<std::map<int, std::vector<std::string>>> line_fixes(const std::string& faulty, const std::string& fixed,
                                                           const std::string& path) {
  if (const auto& loaded = load_libgit2(); !loaded) return fail("diff of " + path + ": " + loaded.error().message);
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.context_lines = 0;
  opts.flags |= GIT_DIFF_FORCE_TEXT;
  struct Hunk {
    std::vector<int> removed;
    std::vector<std::string> added;
  };
  std::vector<Hunk> hunks;
  const auto hunk_cb = [](const git_diff_delta*, const git_diff_hunk*, void* payload) -> int {
    static_cast<std::vector<Hunk>*>(payload)->emplace_back();
    return 0;
  };
  const auto line_cb = [](const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line,
                          void* payload) -> int {
    auto* all = static_cast<std::vector<Hunk>*>(payload);
    if (all->empty()) all->emplace_back();
    if (line->origin == GIT_DIFF_LINE_DELETION && line->old_lineno > 0) {
      all->back().removed.push_back(line->old_lineno);
    } else if (line->origin == GIT_DIFF_LINE_ADDITION) {
      std::string text(line->content, line->content_len);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      all->back().added.push_back(std::move(text));
    }
    return 0;
  };
  if (git().git_diff_buffers(faulty.data(), faulty.size(), path.c_str(), fixed.data(), fixed.size(), path.c_str(),
                             &opts, nullptr, nullptr, hunk_cb, line_cb, &hunks) != 0)
    return fail(last_error("diff of " + path));
  const auto faulty_split = split_lines(faulty);
  std::map<int, std::vector<std::string>> out;
  for (const auto& h : hunks)
    for (size_t i = 0; i < h.removed.size(); ++i) {
      const auto at = static_cast<size_t>(h.removed[i] - 1);
      if (at >= faulty_split.size() || is_blank(faulty_split[at])) continue;
      out[h.removed[i]] = h.removed.size() == h.added.size() ? std::vector<std::string>{h.added[i]} : h.added;
    }
  return out;
}

Result<std::vector<LineHunk>> line_hunks(const std::string& before, const std::string& after, const std::string& path) {
  if (const auto& loaded = load_libgit2(); !loaded) return fail("diff of " + path + ": " + loaded.error().message);
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.context_lines = 0;
  opts.flags |= GIT_DIFF_FORCE_TEXT;
  std::vector<LineHunk> hunks;
  const auto hunk_cb = [](const git_diff_delta*, const git_diff_hunk* hunk, void* payload) -> int {
    auto& all = *static_cast<std::vector<LineHunk>*>(payload);
    all.emplace_back();
    all.back().old_start = hunk->old_start;
    all.back().new_start = hunk->new_start;
    return 0;
  };
  const auto line_cb = [](const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line,
                          void* payload) -> int {
    auto& all = *static_cast<std::vector<LineHunk>*>(payload);
    if (all.empty()) all.emplace_back();
    if (line->origin != GIT_DIFF_LINE_DELETION && line->origin != GIT_DIFF_LINE_ADDITION) return 0;
    std::string text(line->content, line->content_len);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    (line->origin == GIT_DIFF_LINE_DELETION ? all.back().removed : all.back().added).push_back(std::move(text));
    return 0;
  };
  if (git().git_diff_buffers(before.data(), before.size(), path.c_str(), after.data(), after.size(), path.c_str(),
                             &opts, nullptr, nullptr, hunk_cb, line_cb, &hunks) != 0)
    return fail(last_error("diff of " + path));
  return hunks;
}

std::string author_or_default(const std::string& given, const std::string& repo_path) {
  if (!given.empty()) return given;
  if (auto repo = GitRepository::open(repo_path)) {
    std::string a = (*repo)->configured_author();
    if (!a.empty()) return a;
  }
  const char* user = std::getenv("USER");
  return user && *user ? user : "unknown";
}

}  // namespace spark
