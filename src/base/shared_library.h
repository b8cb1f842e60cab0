// A shared library opened when a process first needs it, not when the process starts.
//
// libcurl (HTTP: an LLM or an embeddings server), libpq (a PostgreSQL knowledge base) and libgit2 (history: mine,
// record, hooks) and what they need (TLS, Kerberos, LDAP, SSH, IDN, ...) are 37 of the 52 shared libraries a spark
// process loaded at start; loading and relocating them was most of the ~25 ms a `spark --version` took
// (docs/PERFORMANCE.md), and every `spark localize` on the embedded store paid it without calling any of them. The
// three are no longer linked: each is opened with dlopen the first time one of its functions is needed, and its
// functions are resolved into a table of pointers whose types come from the library's own header, so a call still
// reads as a call and the compiler still checks its arguments against the declaration (not the values of a variadic
// function: curl_easy_setopt's value is no longer checked by curl's GCC type-check macros, which wrap the name):
//
//   #define SPARK_LIBGIT2_FUNCTIONS(X) X(git_libgit2_init) X(git_commit_lookup) ...
//   struct Git { SPARK_LIBGIT2_FUNCTIONS(SPARK_LIBRARY_FIELD) };
//   ...  lib.bind(table.git_commit_lookup, "git_commit_lookup") for each, by SPARK_LIBRARY_BIND ...
//   git().git_commit_lookup(&commit, repo, &oid);
//
// The file to open is the library's soname as the build found it (CMakeLists.txt reads it from the library it
// would have linked: "libcurl.so.4"), so the loaded library is the ABI the headers describe. A library that is
// missing, or lacks a function the build uses (an older version), is an error that names the library, what it is
// for and what the loader said; the command that needed it fails with that message, the others never notice.
//
// Thread safety: open() and bind() are for one thread (callers wrap them in a function-local static, which C++
// initialises once); a complete table is immutable. Libraries stay loaded until the process exits (no dlclose:
// their functions are in use until then).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace spark {

class SharedLibrary {
 public:
  // Opens `soname`. `purpose` completes the error message: "libpq.so.5 (the PostgreSQL client library, for a
  // postgresql:// knowledge base) cannot be loaded: libpq.so.5: cannot open shared object file: ...".
  static Result<SharedLibrary> open(const std::string& soname, const std::string& purpose);

  // Points `function` at the library's `name`; a name the library lacks is remembered for complete().
  template <class F>
  void bind(F& function, const char* name) {
    function = reinterpret_cast<F>(symbol(name));
    if (!function) missing_.push_back(name);
  }

  // After every bind(): an error naming the functions the library lacks, or success.
  Status complete() const;

  const std::string& soname() const { return soname_; }

 private:
  SharedLibrary(void* handle, std::string soname, std::string purpose)
      : handle_(handle), soname_(std::move(soname)), purpose_(std::move(purpose)) {}
  void* symbol(const char* name) const;

  void* handle_ = nullptr;
  std::string soname_;
  std::string purpose_;
  std::vector<std::string> missing_;
};

// Opens `soname` and fills a table of its functions: `bind(lib, table)` binds each member (SPARK_LIBRARY_BIND). An
// error when the library cannot be loaded or lacks one of them.
template <class Table, class Bind>
Result<Table> load_library_table(const std::string& soname, const std::string& purpose, Bind bind) {
  auto opened = SharedLibrary::open(soname, purpose);
  TRY(opened);
  Table table;
  bind(*opened, table);
  TRY(opened->complete());
  return table;
}

// A table member typed from the function's declaration in the library's header. (`function` is a name here, the
// member's and the declaration's: it cannot be parenthesised.)
#define SPARK_LIBRARY_FIELD(function) decltype(&::function) function = nullptr;  // NOLINT(bugprone-macro-parentheses)
// Binds a table member (inside a function with a `SharedLibrary& lib` and a `table`: load_library_table's `bind`).
#define SPARK_LIBRARY_BIND(function) lib.bind(table.function, #function);

}  // namespace spark
