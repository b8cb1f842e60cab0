#include "structure_cache.h"

#include "text.h"

namespace spark {

std::shared_ptr<const PythonStructure> StructureCache::get(std::string_view content, std::string_view path) {
  const uint64_t key = fnv1a64(content) ^ (content.size() * 0x9e3779b97f4a7c15ULL);
  if (auto it = map_.find(key); it != map_.end()) {
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }
  auto s = std::make_shared<const PythonStructure>(parser_.analyze(content, path));
  order_.push_front(key);
  map_.emplace(key, std::make_pair(s, order_.begin()));
  if (map_.size() > capacity_) {
    map_.erase(order_.back());
    order_.pop_back();
  }
  return s;
}

}  // namespace spark
