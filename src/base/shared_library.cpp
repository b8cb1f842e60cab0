#include "base/shared_library.h"

#include <dlfcn.h>

namespace spark {

Result<SharedLibrary> SharedLibrary::open(const std::string& soname, const std::string& purpose) {
  // RTLD_LOCAL: its symbols serve only the table, nothing else in the process binds to them by name.
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return fail(soname + " (" + purpose + ") cannot be loaded: " + (why ? why : "unknown reason") +
                "; install the package that provides it");
  }
  return SharedLibrary(handle, soname, purpose);
}

void* SharedLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

Status SharedLibrary::complete() const {
  if (missing_.empty()) return {};
  std::string names;
  for (const auto& m : missing_) names += (names.empty() ? "" : ", ") + m;
  return fail(soname_ + " (" + purpose_ + ") lacks " + names + ": an older version than spark was built against");
}

}  // namespace spark
