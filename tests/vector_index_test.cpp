#include "vector_index.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace spark {

namespace {
std::vector<float> random_unit_vectors(size_t n, size_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(n * dim);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t d = 0; d < dim; ++d) s += std::pow(v[i * dim + d] = g(rng), 2);
    for (size_t d = 0; d < dim; ++d) v[i * dim + d] /= static_cast<float>(std::sqrt(s));
  }
  return v;
}

std::vector<int64_t> ids(size_t n) {
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(i) * 10 + 7;
  return out;
}
}  // namespace

TEST(VectorIndex, finds_the_nearest_and_never_returns_excluded_ids) {
  const size_t n = 200, dim = 32;
  auto v = random_unit_vectors(n, dim, 1);
  VectorIndex index(dim, {});
  index.add(ids(n), v);
  const float* q = &v[5 * dim];
  auto hits = index.search(q, 3, std::nullopt, {});
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].rowid, 57);
  EXPECT_NEAR(hits[0].similarity, 1.0f, 1e-5);
  auto without = index.search(q, 3, std::nullopt, {57});
  for (const auto& h : without) EXPECT_NE(h.rowid, 57);
  EXPECT_EQ(without[0].rowid, hits[1].rowid);
}

TEST(VectorIndex, restricts_search_to_a_policy_subset_exactly_even_with_hnsw) {
  const size_t n = 3000, dim = 16;
  auto v = random_unit_vectors(n, dim, 2);
  VectorIndexOptions o;
  o.hnsw_threshold = 1000;
  VectorIndex index(dim, o);
  index.add(ids(n), v);
  ASSERT_TRUE(index.is_hnsw());
  const std::vector<int64_t> allowed = {17, 27, 2997};
  const float* q = &v[0];
  auto hits = index.search(q, 5, allowed, {});
  ASSERT_EQ(hits.size(), 3u);  // only three allowed
  for (const auto& h : hits) EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), h.rowid) != allowed.end());
  EXPECT_EQ(index.search(q, 1, std::nullopt, {})[0].rowid, 7);
}

TEST(VectorIndex, round_trips_through_disk_and_refuses_damaged_files) {
  testing::TempDir dir;
  const size_t n = 50, dim = 8;
  auto v = random_unit_vectors(n, dim, 3);
  VectorIndex index(dim, {});
  index.add(ids(n), v);
  ASSERT_TRUE(index.save(dir / "index", "emb-1", 4));
  auto loaded = VectorIndex::load(dir / "index", {});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->second.generation, 4);
  EXPECT_EQ(loaded->second.embedder, "emb-1");
  EXPECT_EQ(loaded->first.search(&v[dim], 1, std::nullopt, {})[0].rowid, 17);

  const std::string bytes = testing::slurp(dir / "index" / "vectors.faiss");
  testing::write_file(dir / "index" / "vectors.faiss", bytes.substr(0, bytes.size() / 2));
  auto truncated = VectorIndex::load(dir / "index", {});
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().message.find("vectors.faiss: checksum mismatch"), std::string::npos);

  std::filesystem::remove(dir / "index" / "manifest.json");
  auto no_manifest = VectorIndex::load(dir / "index", {});
  ASSERT_FALSE(no_manifest);
  EXPECT_NE(no_manifest.error().message.find("manifest.json"), std::string::npos);
}

}  // namespace spark
