#include "git_history.h"

#include <git2.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/shared_library.h"
#include "base/text.h"
#include "base/work_pool.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// libgit2, opened the first time a repository is opened or a diff is made (base/shared_library.h).
// clang-format off
#define SPARK_LIBGIT2_FUNCTIONS(X)                                                                                    \
  X(git_blob_free) X(git_blob_lookup) X(git_blob_rawcontent) X(git_blob_rawsize) X(git_buf_dispose)                   \
  X(git_checkout_options_init) X(git_checkout_tree) X(git_commit_free) X(git_commit_lookup)                           \
  X(git_commit_parent) X(git_commit_parentcount) X(git_commit_summary) X(git_commit_time) X(git_commit_tree)          \
  X(git_config_free) X(git_config_get_string) X(git_diff_buffers) X(git_diff_free) X(git_diff_get_delta)              \
  X(git_diff_num_deltas) X(git_diff_options_init) X(git_diff_to_buf) X(git_diff_tree_to_tree) X(git_error_last)       \
  X(git_libgit2_init) X(git_libgit2_opts) X(git_object_free) X(git_object_id) X(git_object_peel)                      \
  X(git_oid_equal) X(git_oid_fromstr) X(git_oid_tostr) X(git_oid_tostr_s) X(git_patch_free)                           \
  X(git_patch_from_buffers) X(git_patch_to_buf) X(git_repository_config_snapshot) X(git_repository_free)              \
  X(git_repository_is_bare) X(git_repository_is_shallow) X(git_repository_open_bare) X(git_repository_open_ext)       \
  X(git_repository_path) X(git_repository_workdir) X(git_revparse_single) X(git_revwalk_free)                         \
  X(git_revwalk_new) X(git_revwalk_next) X(git_revwalk_push) X(git_revwalk_push_head)                                 \
  X(git_revwalk_simplify_first_parent) X(git_revwalk_sorting) X(git_tree_entry_bypath)                                \
  X(git_tree_entry_filemode) X(git_tree_entry_free) X(git_tree_entry_id) X(git_tree_entry_name)                       \
  X(git_tree_entry_type) X(git_tree_free) X(git_tree_walk)
// clang-format on

struct Git {
  SPARK_LIBGIT2_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

// The table, loaded and initialised once; an error when libgit2 is missing or too old. Every entry point of this
// file (GitRepository::open, unified_diff, removed_or_modified_lines) checks it first.
const Result<Git>& load_libgit2() {
  static const Result<Git> loaded = []() -> Result<Git> {
    auto api =
        load_library_table<Git>(SPARK_LIBGIT2_SONAME, "libgit2, for reading git history",
                                [](SharedLibrary& lib, Git& table) { SPARK_LIBGIT2_FUNCTIONS(SPARK_LIBRARY_BIND) });
    if (!api) return api;
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

}  // namespace

Result<std::unique_ptr<GitRepository>> GitRepository::open(const fs::path& path) {
  if (const auto& loaded = load_libgit2(); !loaded) return fail(path.string() + ": " + loaded.error().message);
  git_repository* repo = nullptr;
  if (git().git_repository_open_ext(&repo, path.c_str(), 0, nullptr) != 0)
    return fail(path.string() + ": not a git repository (" + last_error("open") + ")");
  const char* wd = git().git_repository_workdir(repo);
  return std::unique_ptr<GitRepository>(new GitRepository(repo, wd ? fs::path(wd) : path));
}

void GitRepository::RepositoryFree::operator()(git_repository* repo) const { git().git_repository_free(repo); }

GitRepository::~GitRepository() = default;

bool GitRepository::bare() const { return git().git_repository_is_bare(repo_.get()) == 1; }

bool GitRepository::shallow() const { return git().git_repository_is_shallow(repo_.get()) == 1; }

Result<std::vector<CommitInfo>> GitRepository::history(bool first_parent, std::optional<int64_t> since,
                                                       std::optional<int64_t> until, const std::string& tip) const {
  Owned<git_revwalk, &Git::git_revwalk_free> walk;
  if (git().git_revwalk_new(&walk.p, repo_.get()) != 0) return fail(last_error(workdir_.string()));
  git().git_revwalk_sorting(walk.p, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
  if (tip.empty()) {
    if (git().git_revwalk_push_head(walk.p) != 0) return fail(workdir_.string() + ": " + last_error("HEAD"));
  } else {
    auto sha = resolve(tip);
    if (!sha) return std::unexpected(sha.error());
    git_oid oid;
    git().git_oid_fromstr(&oid, sha->c_str());
    if (git().git_revwalk_push(walk.p, &oid) != 0) return fail(workdir_.string() + ": " + last_error(tip));
  }
  if (first_parent) git().git_revwalk_simplify_first_parent(walk.p);
  std::vector<CommitInfo> out;
  git_oid oid;
  while (git().git_revwalk_next(&oid, walk.p) == 0) {
    Owned<git_commit, &Git::git_commit_free> commit;
    if (git().git_commit_lookup(&commit.p, repo_.get(), &oid) != 0) return fail(last_error(workdir_.string()));
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
  if (git().git_revparse_single(&obj.p, repo_.get(), rev.c_str()) != 0)
    return fail(workdir_.string() + ": no commit \"" + rev + "\" in this repository" +
                (shallow() ? " (it is a shallow clone: fetch more history, e.g. git fetch --unshallow)" : ""));
  Owned<git_object, &Git::git_object_free> commit;
  if (git().git_object_peel(&commit.p, obj.p, GIT_OBJECT_COMMIT) != 0)
    return fail(workdir_.string() + ": \"" + rev + "\" is not a commit");
  char hex[GIT_OID_HEXSZ + 1];
  git().git_oid_tostr(hex, sizeof hex, git().git_object_id(commit.p));
  return std::string(hex);
}

Result<std::optional<std::string>> GitRepository::file_at(const std::string& sha, const std::string& path) const {
  git_oid oid;
  if (git().git_oid_fromstr(&oid, sha.c_str()) != 0) return fail("\"" + sha + "\" is not a commit sha");
  Owned<git_commit, &Git::git_commit_free> commit;
  if (git().git_commit_lookup(&commit.p, repo_.get(), &oid) != 0)
    return fail(workdir_.string() + ": no commit " + sha + " in this repository" +
                (shallow() ? " (shallow clone: the commit may be beyond its depth)" : ""));
  Owned<git_tree, &Git::git_tree_free> tree;
  if (git().git_commit_tree(&tree.p, commit.p) != 0) return fail(last_error(sha));
  Owned<git_tree_entry, &Git::git_tree_entry_free> entry;
  if (git().git_tree_entry_bypath(&entry.p, tree.p, path.c_str()) != 0) return std::optional<std::string>();
  if (git().git_tree_entry_type(entry.p) != GIT_OBJECT_BLOB) return std::optional<std::string>();
  Owned<git_blob, &Git::git_blob_free> blob;
  if (git().git_blob_lookup(&blob.p, repo_.get(), git().git_tree_entry_id(entry.p)) != 0)
    return fail(last_error(path + " at " + sha));
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
  if (git().git_commit_lookup(&commit.p, repo, &oid) != 0)
    return fail(where.string() + ": no commit " + sha + " in this repository");
  git_tree* tree = nullptr;
  if (git().git_commit_tree(&tree, commit.p) != 0) return fail(last_error(sha));
  return tree;
}

}  // namespace

Result<std::vector<std::string>> GitRepository::changed_paths(const std::string& from_sha,
                                                              const std::string& to_sha) const {
  auto a = tree_of(repo_.get(), from_sha, workdir_);
  if (!a) return std::unexpected(a.error());
  Owned<git_tree, &Git::git_tree_free> from{*a};
  auto b = tree_of(repo_.get(), to_sha, workdir_);
  if (!b) return std::unexpected(b.error());
  Owned<git_tree, &Git::git_tree_free> to{*b};
  Owned<git_diff, &Git::git_diff_free> diff;
  if (git().git_diff_tree_to_tree(&diff.p, repo_.get(), from.p, to.p, nullptr) != 0) return fail(last_error("diff"));
  std::set<std::string> paths;
  for (size_t i = 0; i < git().git_diff_num_deltas(diff.p); ++i) {
    const git_diff_delta* d = git().git_diff_get_delta(diff.p, i);
    if (d->old_file.path) paths.insert(d->old_file.path);
    if (d->new_file.path) paths.insert(d->new_file.path);
  }
  return std::vector<std::string>(paths.begin(), paths.end());
}

namespace {

// Whether the trees under every prefix are the same objects in both commits (then nothing changed there).
bool same_under(git_tree* a, git_tree* b, const std::vector<std::string>& prefixes) {
  if (!a || prefixes.empty()) return false;
  for (const auto& prefix : prefixes) {
    std::string p = prefix;
    while (p.ends_with("/")) p.pop_back();
    Owned<git_tree_entry, &Git::git_tree_entry_free> x, y;
    const bool in_a = git().git_tree_entry_bypath(&x.p, a, p.c_str()) == 0;
    const bool in_b = git().git_tree_entry_bypath(&y.p, b, p.c_str()) == 0;
    if (in_a != in_b || (in_a && !git().git_oid_equal(git().git_tree_entry_id(x.p), git().git_tree_entry_id(y.p))))
      return false;
  }
  return true;
}

}  // namespace

Status GitRepository::for_each_patch(const std::vector<std::string>& prefixes,
                                     const std::function<Status(const CommitInfo&, std::string_view)>& fn,
                                     size_t threads) const {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  Owned<git_revwalk, &Git::git_revwalk_free> walk;
  if (git().git_revwalk_new(&walk.p, repo_.get()) != 0) return fail(last_error(workdir_.string()));
  git().git_revwalk_sorting(walk.p, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE);
  if (git().git_revwalk_push_head(walk.p) != 0) return fail(workdir_.string() + ": " + last_error("HEAD"));
  git().git_revwalk_simplify_first_parent(walk.p);

  // The walk (and the cheap check whether a commit touched the prefixes) runs here; the patches are made on a
  // WorkerPool of `threads` workers, each with its own handle on the repository, and handed to `fn` in history order.
  // At most `window` commits are in flight, so memory stays bounded whatever the history's length.
  struct Done {
    CommitInfo info;
    std::string patch;
    std::optional<Error> error;
  };
  const size_t window = 4 * threads;
  std::mutex m;
  std::condition_variable cv;
  std::map<size_t, Done> done;
  const std::string path = git().git_repository_path(repo_.get());
  std::vector<char*> specs;
  specs.reserve(prefixes.size());
  for (const auto& p : prefixes) specs.push_back(const_cast<char*>(p.c_str()));
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.pathspec.strings = specs.data();
  opts.pathspec.count = specs.size();
  // One repository handle per worker, opened by it on its first commit (libgit2 handles are not shared-safe).
  std::vector<Owned<git_repository, &Git::git_repository_free>> handles(threads);
  const auto make_patch = [&](unsigned w, const git_oid& id, Done& out) -> Status {
    git_repository*& own = handles[w].p;
    if (!own && git().git_repository_open_bare(&own, path.c_str()) != 0) return fail(last_error(path));
    Owned<git_commit, &Git::git_commit_free> commit;
    if (git().git_commit_lookup(&commit.p, own, &id) != 0) return fail(last_error(out.info.sha));
    Owned<git_tree, &Git::git_tree_free> tree, parent_tree;
    if (git().git_commit_tree(&tree.p, commit.p) != 0) return fail(last_error("tree"));
    if (git().git_commit_parentcount(commit.p) > 0) {
      Owned<git_commit, &Git::git_commit_free> parent;
      if (git().git_commit_parent(&parent.p, commit.p, 0) != 0) return fail(last_error("parent"));
      if (git().git_commit_tree(&parent_tree.p, parent.p) != 0) return fail(last_error("tree"));
    }
    Owned<git_diff, &Git::git_diff_free> diff;
    if (git().git_diff_tree_to_tree(&diff.p, own, parent_tree.p, tree.p, &opts) != 0) return fail(last_error("diff"));
    if (git().git_diff_num_deltas(diff.p) == 0) return {};
    git_buf buf = GIT_BUF_INIT;
    if (git().git_diff_to_buf(&buf, diff.p, GIT_DIFF_FORMAT_PATCH) != 0) return fail(last_error("patch"));
    out.patch.assign(buf.ptr, buf.size);
    git().git_buf_dispose(&buf);
    return {};
  };
  WorkerPool pool(static_cast<unsigned>(threads));
  size_t submitted = 0, emitted = 0;
  Status status;
  // Hands finished patches to `fn` in order; with `all`, waits for every submitted one.
  const auto emit = [&](bool all) {
    for (;;) {
      Done d;
      {
        std::unique_lock lock(m);
        const bool must_wait = all ? emitted < submitted : submitted - emitted >= window;
        if (!done.count(emitted)) {
          if (!must_wait) return;
          cv.wait(lock, [&] { return done.count(emitted) > 0; });
        }
        d = std::move(done.at(emitted));
        done.erase(emitted);
      }
      ++emitted;
      if (!status) continue;
      if (d.error)
        status = std::unexpected(*d.error);
      else if (!d.patch.empty())
        status = fn(d.info, d.patch);
    }
  };
  git_oid oid;
  while (status && git().git_revwalk_next(&oid, walk.p) == 0) {
    Owned<git_commit, &Git::git_commit_free> commit;
    if (git().git_commit_lookup(&commit.p, repo_.get(), &oid) != 0) {
      status = fail(last_error(workdir_.string()));
      break;
    }
    Owned<git_tree, &Git::git_tree_free> tree, parent_tree;
    if (git().git_commit_tree(&tree.p, commit.p) != 0) {
      status = fail(last_error("tree"));
      break;
    }
    if (git().git_commit_parentcount(commit.p) > 0) {
      Owned<git_commit, &Git::git_commit_free> parent;
      if (git().git_commit_parent(&parent.p, commit.p, 0) == 0) git().git_commit_tree(&parent_tree.p, parent.p);
    }
    // As git does: a commit whose trees under every prefix are its parent's changed nothing there.
    if (same_under(parent_tree.p, tree.p, prefixes)) continue;
    CommitInfo info;
    char hex[GIT_OID_HEXSZ + 1];
    git().git_oid_tostr(hex, sizeof hex, &oid);
    info.sha = hex;
    info.time = static_cast<int64_t>(git().git_commit_time(commit.p));
    const char* summary = git().git_commit_summary(commit.p);
    info.summary = summary ? summary : "";
    pool.submit([&, seq = submitted, id = oid, info = std::move(info)](unsigned w) mutable {
      Done out{std::move(info), {}, {}};
      if (auto s = make_patch(w, id, out); !s) out.error = s.error();
      std::lock_guard lock(m);
      done.emplace(seq, std::move(out));
      cv.notify_all();
    });
    {
      std::lock_guard lock(m);
      ++submitted;
    }
    emit(false);
  }
  emit(true);
  pool.wait();
  return status;
}

Status GitRepository::materialize(const std::string& sha, const fs::path& dir) const {
  auto t = tree_of(repo_.get(), sha, workdir_);
  if (!t) return std::unexpected(t.error());
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
  if (!t) return std::unexpected(t.error());
  Owned<git_tree, &Git::git_tree_free> tree{*t};
  std::vector<std::string> out;
  const auto visit = [](const char* root, const git_tree_entry* entry, void* payload) -> int {
    if (git().git_tree_entry_type(entry) == GIT_OBJECT_BLOB &&
        git().git_tree_entry_filemode(entry) != GIT_FILEMODE_LINK)
      static_cast<std::vector<std::string>*>(payload)->push_back(std::string(root) + git().git_tree_entry_name(entry));
    return 0;
  };
  if (git().git_tree_walk(tree.p, GIT_TREEWALK_PRE, visit, &out) != 0)
    return fail(last_error("the files of commit " + sha.substr(0, 10)));
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
  if (const auto& loaded = load_libgit2(); !loaded) return fail("diff of " + path + ": " + loaded.error().message);
  git_diff_options opts;
  git().git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.context_lines = 0;
  opts.flags |= GIT_DIFF_FORCE_TEXT;
  struct Collect {
    std::set<int> lines;
    const std::vector<std::string_view>* faulty_lines;
  };
  const auto faulty_split = split_lines(faulty);
  Collect c{{}, &faulty_split};
  const auto line_cb = [](const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line,
                          void* payload) -> int {
    auto* col = static_cast<Collect*>(payload);
    if (line->origin == GIT_DIFF_LINE_DELETION && line->old_lineno > 0) {
      const size_t i = static_cast<size_t>(line->old_lineno - 1);
      if (i < col->faulty_lines->size() && !is_blank((*col->faulty_lines)[i])) col->lines.insert(line->old_lineno);
    }
    return 0;
  };
  if (git().git_diff_buffers(faulty.data(), faulty.size(), path.c_str(), fixed.data(), fixed.size(), path.c_str(),
                             &opts, nullptr, nullptr, nullptr, line_cb, &c) != 0)
    return fail(last_error("diff of " + path));
  return std::vector<int>(c.lines.begin(), c.lines.end());
}

}  // namespace spark
