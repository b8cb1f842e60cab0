// Whole-file reads and atomic writes, and the two filesystem questions spark asks without exceptions.
// Contract: every function is thread-safe (no shared state) and never throws; failures come back as Result/Status
// whose message names the path.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace spark {

// Owns a file descriptor: closed once, when the owner goes (or by reset); moved, never copied.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Writes text to `path` atomically: a temporary file beside it, fsync, rename. A path that names a device, a FIFO or a
// socket (/dev/null, /dev/stdout on a pipe) is written to in place, never replaced; a symbolic link to a regular file
// stays a link (its target is replaced); a folder is an error.
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Reads a whole file. Errors name the path.
Result<std::string> read_file(const std::filesystem::path& path);

// Reads a file in pieces of at most 64 KiB, in order, each handed to `consume` (which returns false to stop early),
// so that a file of any size is read in bounded memory. Errors name the path.
Status read_file_in_pieces(const std::filesystem::path& path, const std::function<bool(std::string_view)>& consume);

// Reads a text file line by line: `line` gets each line without its '\n' (a last line without one too) and its
// 1-based number, and returns an error to stop there (that error is the result). One line and one 1 MiB read block
// are held at a time, and `kLinePadding` readable bytes follow every line handed out (what a SIMD parser reads past
// its input's end: simdjson's SIMDJSON_PADDING). A line longer than `max_line` bytes is an error naming the file and
// line, before it is read whole.
inline constexpr size_t kLinePadding = 64;
Status for_each_line(const std::filesystem::path& path, size_t max_line,
                     const std::function<Status(std::string_view line, size_t number)>& line);

// std::filesystem::exists without the throwing form: false when the path is absent or cannot be examined (a folder
// without search permission, a name too long). The throwing forms are not used in spark: an exception escaping a
// command would end it in std::terminate with nothing useful printed.
bool path_exists(const std::filesystem::path& path) noexcept;

// `path` (absolute, or relative to the current folder), links followed, as a path relative to the folder `top` (a
// canonical path; `top` itself is "."); empty when it leads outside `top` or cannot be resolved. What keeps an
// outside path (an agent's, a report's) from reaching files beyond a workspace.
std::filesystem::path path_within(const std::filesystem::path& top, const std::filesystem::path& path) noexcept;

// The folder for temporary files: $TMPDIR when it names a folder, else /tmp (never throws).
std::filesystem::path temp_folder() noexcept;

}  // namespace spark
