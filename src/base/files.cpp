#include "base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace spark {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<std::string> read_file(const std::filesystem::path& path) {
  // One read into a string of the file's size (a regular file), else reads until the end (a pipe, a device).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t got;
    if (out.capacity() > out.size()) {
      // Straight into the string's reserved room.
      const size_t room = out.capacity() - out.size(), at = out.size();
      out.resize(out.capacity());
      got = ::read(fd, out.data() + at, room);
      out.resize(at + static_cast<size_t>(std::max<ssize_t>(got, 0)));
    } else {
      got = ::read(fd, buf, sizeof buf);
      if (got > 0) out.append(buf, static_cast<size_t>(got));
    }
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return fail(path.string() + ": read error: " + std::strerror(e));
    }
  }
  ::close(fd);
  return out;
}

Status read_file_in_pieces(const std::filesystem::path& path, const std::function<bool(std::string_view)>& consume) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(path.string() + ": cannot open: " + std::strerror(errno));
  std::string buf(1 << 16, '\0');
  for (;;) {
    const ssize_t got = ::read(fd.get(), buf.data(), buf.size());
    if (got == 0) return {};
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(path.string() + ": read error: " + std::strerror(errno));
    }
    if (!consume(std::string_view(buf.data(), static_cast<size_t>(got)))) return {};
  }
}

Status for_each_line(const std::filesystem::path& path, size_t max_line,
                     const std::function<Status(std::string_view, size_t)>& line) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(path.string() + ": cannot open: " + std::strerror(errno));
  constexpr size_t kBlock = size_t{1} << 20;
  // [begin, end) is read and not yet handed out; `scan` is where the search for the next '\n' goes on. The buffer
  // always has kLinePadding bytes of room past `end`.
  std::vector<char> buf(kBlock + kLinePadding);
  size_t begin = 0, end = 0, scan = 0, number = 0;
  bool eof = false;
  for (;;) {
    const void* nl = std::memchr(buf.data() + scan, '\n', end - scan);
    if (nl != nullptr || (eof && begin < end)) {
      const size_t stop = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - buf.data()) : end;
      ++number;
      if (stop - begin > max_line)
        return fail(path.string() + ":" + std::to_string(number) + ": a line of over " + std::to_string(max_line) +
                    " bytes (spark reads lines of up to that)");
      TRY(line(std::string_view(buf.data() + begin, stop - begin), number));
      begin = scan = std::min(stop + 1, end);
      continue;
    }
    if (eof) return {};
    if (end - begin > max_line)  // the line is already too long without its end
      return fail(path.string() + ":" + std::to_string(number + 1) + ": a line of over " + std::to_string(max_line) +
                  " bytes (spark reads lines of up to that)");
    // Keep the unfinished line at the front, and room for one more block behind it.
    if (begin > 0) {
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    scan = end;
    if (buf.size() - end < kBlock + kLinePadding) buf.resize(std::max(buf.size() * 2, end + kBlock + kLinePadding));
    const ssize_t got = ::read(fd.get(), buf.data() + end, kBlock);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(path.string() + ": read error: " + std::strerror(errno));
    }
    if (got == 0) eof = true;
    end += static_cast<size_t>(got);
  }
}

bool path_exists(const std::filesystem::path& path) noexcept {
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !ec;
}

std::filesystem::path path_within(const std::filesystem::path& top, const std::filesystem::path& path) noexcept {
  try {
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
    if (ec) return {};
    std::filesystem::path relative = resolved.lexically_relative(top);
    if (relative.empty() || *relative.begin() == "..") return {};
    return relative;
  } catch (...) {  // an allocation that failed: resolved as nothing
    return {};
  }
}

std::filesystem::path temp_folder() noexcept {
  std::error_code ec;
  auto p = std::filesystem::temp_directory_path(ec);
  return ec ? std::filesystem::path("/tmp") : p;
}

namespace {

Status write_all(int fd, std::string_view content, const std::string& name) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail(name + ": write failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

Status write_file_atomic(const std::filesystem::path& given, std::string_view content) {
  // Only a regular file (or a new one) is replaced. A device, a FIFO or a socket (`-o /dev/null`, `-o /dev/stdout` on
  // a pipe) is written to as it is: renaming over it would put a regular file in its place. A symbolic link to a
  // regular file is kept: its target is replaced.
  std::filesystem::path path = given;
  struct stat st {};
  if (::lstat(given.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fail(given.string() + ": is a folder, not a file");
    const bool link = S_ISLNK(st.st_mode);
    struct stat target {};
    const bool regular = link ? ::stat(given.c_str(), &target) == 0 && S_ISREG(target.st_mode) : S_ISREG(st.st_mode);
    if (!regular) {  // a device, a FIFO, a socket, or a link to one of them (or to nothing yet)
      const int fd = ::open(given.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return fail(given.string() + ": cannot open: " + std::strerror(errno));
      UniqueFd owned(fd);
      return write_all(fd, content, given.string());
    }
    if (link) {
      std::error_code ec;
      path = std::filesystem::canonical(given, ec);
      if (ec) return fail(given.string() + ": cannot resolve the link: " + ec.message());
    }
  }
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(tmp.string() + ": cannot create: " + std::strerror(errno));
  if (auto w = write_all(fd, content, tmp.string()); !w) {
    ::close(fd);
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return w;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return fail(tmp.string() + ": cannot flush to disk");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return fail(path.string() + ": cannot replace: " + ec.message());
  }
  return {};
}

}  // namespace spark
