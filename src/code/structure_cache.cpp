#include "code/structure_cache.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/files.h"
#include "base/text.h"
#include "code/stamp.inc"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'S', 'P', 'K', 'C', 'O', 'D', '0', '1'};

class Writer {
 public:
  void u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void i32(int v) {
    const int32_t x = v;
    out_.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void str(const std::string& s) {
    u64(s.size());
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Bounds-checked: any read past the end makes ok() false and returns zeros.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  uint64_t u64() {
    uint64_t v = 0;
    if (!take(&v, sizeof v)) return 0;
    return v;
  }
  int i32() {
    int32_t v = 0;
    if (!take(&v, sizeof v)) return 0;
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    if (!ok_ || n > b_.size() - at_) {
      ok_ = false;
      return {};
    }
    std::string s(b_.substr(at_, n));
    at_ += n;
    return s;
  }
  // A count of items each at least `min_bytes` long: refused when the rest cannot hold them.
  size_t count(size_t min_bytes) {
    const uint64_t n = u64();
    if (!ok_ || n > (b_.size() - at_) / std::max<size_t>(1, min_bytes)) {
      ok_ = false;
      return 0;
    }
    return static_cast<size_t>(n);
  }
  bool ok() const { return ok_; }
  bool at_end() const { return at_ == b_.size(); }

 private:
  bool take(void* p, size_t n) {
    if (!ok_ || n > b_.size() - at_) {
      ok_ = false;
      return false;
    }
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::string_view b_;
  size_t at_ = 0;
  bool ok_ = true;
};

// The stamp of the sources that decide a structure (cmake/code_stamp.cmake): structures written by a spark built
// from other sources, whose analysis may differ, are never read.
constexpr uint64_t kCodeStamp = SPARK_CODE_STAMP;

}  // namespace

std::string serialize_structure(const CodeStructure& s, uint64_t stamp) {
  Writer w;
  std::string head(kMagic, sizeof kMagic);
  w.u64(stamp);
  w.i32(static_cast<int>(s.language));
  w.i32(s.line_count);
  w.i32(s.has_syntax_errors ? 1 : 0);
  for (const auto* v : {&s.statement, &s.block, &s.function}) {
    w.u64(v->size());
    for (int x : *v) w.i32(x);
  }
  w.u64(s.kind.size());
  for (const auto& k : s.kind) w.str(k);
  w.u64(s.functions.size());
  for (const auto& f : s.functions) {
    w.str(f.name);
    w.str(f.class_name);
    w.i32(f.start);
    w.i32(f.end);
    w.i32(f.def_line);
    for (const auto* list : {&f.params, &f.decorators}) {
      w.u64(list->size());
      for (const auto& x : *list) w.str(x);
    }
    w.u64(f.calls.size());
    for (const auto& x : f.calls) w.str(x);
    w.i32(f.setup ? 1 : 0);
  }
  w.u64(s.classes.size());
  for (const auto& c : s.classes) {
    w.str(c.name);
    w.i32(c.start);
    w.i32(c.end);
  }
  return head + w.take();
}

std::optional<CodeStructure> deserialize_structure(std::string_view bytes, uint64_t stamp) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader r(bytes.substr(sizeof kMagic));
  if (r.u64() != stamp) return std::nullopt;
  CodeStructure s;
  const int language = r.i32();
  if (language < 0 || language > static_cast<int>(Language::other)) return std::nullopt;
  s.language = static_cast<Language>(language);
  s.line_count = r.i32();
  s.has_syntax_errors = r.i32() != 0;
  for (auto* v : {&s.statement, &s.block, &s.function}) {
    v->resize(r.count(4));
    for (auto& x : *v) x = r.i32();
  }
  s.kind.resize(r.count(8));
  for (auto& k : s.kind) k = r.str();
  s.functions.resize(r.count(8 * 2 + 4 * 4));
  for (auto& f : s.functions) {
    f.name = r.str();
    f.class_name = r.str();
    f.start = r.i32();
    f.end = r.i32();
    f.def_line = r.i32();
    for (auto* list : {&f.params, &f.decorators}) {
      list->resize(r.count(8));
      for (auto& x : *list) x = r.str();
    }
    const size_t calls = r.count(8);
    for (size_t i = 0; i < calls && r.ok(); ++i) f.calls.insert(r.str());
    f.setup = r.i32() != 0;
  }
  s.classes.resize(r.count(8 + 4 * 2));
  for (auto& c : s.classes) {
    c.name = r.str();
    c.start = r.i32();
    c.end = r.i32();
  }
  const auto lines = static_cast<size_t>(std::max(0, s.line_count));
  if (!r.ok() || !r.at_end() || s.statement.size() != lines || s.block.size() != lines || s.function.size() != lines ||
      s.kind.size() != lines)
    return std::nullopt;
  return s;
}

void StructureCache::persist_in(const fs::path& dir, size_t max_files) {
  dir_ = dir;
  max_files_ = std::max<size_t>(1, max_files);
}

fs::path StructureCache::file_for(uint64_t key, size_t bytes) const {
  return dir_ / (hex64(key) + "-" + std::to_string(bytes) + ".struct");
}

std::shared_ptr<const CodeStructure> StructureCache::from_disk(uint64_t key, std::string_view content) {
  if (dir_.empty()) return nullptr;
  auto bytes = read_file(file_for(key, content.size()));
  if (!bytes) return nullptr;
  auto s = deserialize_structure(*bytes, kCodeStamp);
  if (!s) return nullptr;
  ++loaded_;
  return std::make_shared<const CodeStructure>(std::move(*s));
}

void StructureCache::to_disk(uint64_t key, std::string_view content, const CodeStructure& s) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Written whole and renamed into place; a failure (a read-only folder) only means the next process parses again.
  if (ec || !write_file_atomic(file_for(key, content.size()), serialize_structure(s, kCodeStamp))) return;
  // The folder keeps the most recently written max_files_ structures.
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().extension() == ".struct") files.emplace_back(e.last_write_time(ec), e.path());
  if (files.size() > max_files_) {
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i + max_files_ < files.size(); ++i) fs::remove(files[i].second, ec);
  }
}

std::shared_ptr<const CodeStructure> StructureCache::get(std::string_view content, std::string_view path,
                                                         std::string_view case_language) {
  const Language language = language_for(path, case_language);
  // The same text in two languages is two structures (a .ts file and a .js file may hold the same bytes).
  const uint64_t key = (fnv1a64(content) ^ (content.size() * 0x9e3779b97f4a7c15ULL)) +
                       static_cast<uint64_t>(language) * 0xc2b2ae3d27d4eb4fULL;
  if (auto it = map_.find(key); it != map_.end()) {
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }
  auto s = from_disk(key, content);
  if (!s) {
    s = std::make_shared<const CodeStructure>(language == Language::python ? parser_.analyze(content, path)
                                                                           : analyze_code(content, language, path));
    ++parsed_;
    to_disk(key, content, *s);
  }
  order_.push_front(key);
  map_.emplace(key, std::make_pair(s, order_.begin()));
  if (map_.size() > capacity_) {
    map_.erase(order_.back());
    order_.pop_back();
  }
  return s;
}

}  // namespace spark
