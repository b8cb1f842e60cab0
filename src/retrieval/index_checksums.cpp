#include "retrieval/index_checksums.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "base/files.h"
#include "base/text.h"

namespace spark {

namespace fs = std::filesystem;

namespace {
constexpr uint64_t kPrime = 0x100000001b3ULL;
constexpr std::string_view kVerifiedHeader = "spark verified files 1";
}  // namespace

void StreamChecksum::update(const char* p, size_t n) {
  total_ += n;
  if (!partial_.empty()) {  // a partial stride from the last call
    const size_t take = std::min(n, kStride - partial_.size());
    partial_.append(p, take);
    p += take;
    n -= take;
    if (partial_.size() < kStride) return;
    strides(partial_.data(), 1);
    partial_.clear();
  }
  strides(p, n / kStride);
  partial_.append(p + n / kStride * kStride, n % kStride);
}

std::string StreamChecksum::finish() const {
  uint64_t h = lane_[0];
  for (char c : partial_) h = (h ^ static_cast<unsigned char>(c)) * kPrime;
  for (int i = 1; i < 4; ++i) {
    h = (h ^ lane_[i]) * kPrime;
    h ^= h >> 29;
  }
  return hex64(h ^ total_);
}

void StreamChecksum::strides(const char* p, size_t count) {
  uint64_t a = lane_[0], b = lane_[1], c = lane_[2], d = lane_[3];
  for (size_t i = 0; i < count; ++i, p += kStride) {
    uint64_t w[4];
    std::memcpy(w, p, sizeof w);
    a = (a ^ w[0]) * kPrime;
    b = (b ^ w[1]) * kPrime;
    c = (c ^ w[2]) * kPrime;
    d = (d ^ w[3]) * kPrime;
    a ^= a >> 29;
    b ^= b >> 29;
    c ^= c >> 29;
    d ^= d >> 29;
  }
  lane_[0] = a;
  lane_[1] = b;
  lane_[2] = c;
  lane_[3] = d;
}

std::string checksum_of(std::string_view bytes) {
  StreamChecksum sum;
  sum.update(bytes.data(), bytes.size());
  return sum.finish();
}

Result<std::string> file_checksum(const fs::path& path) {
  // Through a mapping: the page cache's pages are hashed where they are, with no copy into a buffer.
  auto map = MappedFile::open(path);
  TRY(map);
  return checksum_of((*map)->view());
}

FileVerifier::FileVerifier(const fs::path& dir, bool trust, int min_age_ms)
    : dir_(dir), trust_(trust), known_(read_list(dir)) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  listable_before_ns_ =
      static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec - static_cast<int64_t>(min_age_ms) * 1'000'000;
}

FileVerifier::Listing FileVerifier::read_list(const fs::path& dir) {
  auto text = read_file(dir / kVerifiedList);
  if (!text) return {};
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kVerifiedHeader) return {};
  Listing out;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string name, rest;
    Listed v;
    MappedFile::Identity& id = v.identity;
    if (!(f >> name >> v.checksum >> id.device >> id.inode >> id.size >> id.mtime_ns >> id.ctime_ns) || f >> rest)
      return {};
    out[name] = v;
  }
  return out;
}

bool FileVerifier::vouched(const std::string& file, const std::string& checksum, const MappedFile& map) {
  if (!trust_) return false;
  const auto it = known_.find(file);
  if (it == known_.end() || it->second.checksum != checksum || !(it->second.identity == map.identity())) return false;
  seen_[file] = it->second;
  return true;
}

bool FileVerifier::hashed(const std::string& file, const std::string& checksum, const MappedFile& map,
                          const std::string& sum) {
  ++hashed_;
  if (sum != checksum) return false;
  const MappedFile::Identity& id = map.identity();
  if (std::max(id.mtime_ns, id.ctime_ns) <= listable_before_ns_) {
    seen_[file] = {checksum, id};
    listed_new_ = true;
  }
  return true;
}

bool FileVerifier::verify(const std::string& file, const std::string& checksum, const MappedFile& map) {
  return vouched(file, checksum, map) || hashed(file, checksum, map, checksum_of(map.view()));
}

void FileVerifier::update_list(const std::set<std::string>& current) {
  if (!listed_new_) return;
  Listing out = seen_;
  for (const auto& [name, v] : known_)
    if (current.contains(name)) out.emplace(name, v);
  // Written whole and renamed into place.
  std::string text(kVerifiedHeader);
  text += '\n';
  for (const auto& [name, v] : out) {
    const MappedFile::Identity& id = v.identity;
    text += name + ' ' + v.checksum + ' ' + std::to_string(id.device) + ' ' + std::to_string(id.inode) + ' ' +
            std::to_string(id.size) + ' ' + std::to_string(id.mtime_ns) + ' ' + std::to_string(id.ctime_ns) + '\n';
  }
  (void)write_file_atomic(dir_ / kVerifiedList, text);
}

}  // namespace spark
