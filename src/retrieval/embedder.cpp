#include "retrieval/embedder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <ranges>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "formats/case.h"
#include "formats/error_message.h"

namespace spark {
namespace {

constexpr uint64_t kSeedError = 0x51ed270b27a5f1e3ULL;
constexpr uint64_t kSeedBigram = 0x2545f4914f6cdd1dULL;
constexpr uint64_t kSeedGram = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kSeedTestFunction = 0xd6e8feb86659fd93ULL;
constexpr uint64_t kSeedCode = 0xa0761d6478bd642fULL;

// Letters, digits, '_' and non-ASCII bytes (a table: isalnum's locale lookup per byte is measurable here).
constexpr auto kWordChar = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<size_t>(c)] =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
  return t;
}();
bool word_char(unsigned char c) { return kWordChar[c]; }

// Calls fn for each word (run of letters, digits, '_' and non-ASCII bytes).
template <class Fn>
void for_each_word(std::string_view text, Fn&& fn) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !word_char(static_cast<unsigned char>(text[i]))) ++i;
    const size_t start = i;
    while (i < text.size() && word_char(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) fn(text.substr(start, i - start));
  }
}

void add(TermMap& counts, uint64_t h) { counts[h] += 1.0f; }

TermMap hashed_words(std::string_view code, uint64_t seed) {
  TermMap counts;
  for_each_word(code, [&](std::string_view w) {
    if (w.size() >= 2) add(counts, fnv1a64(w, seed));
  });
  return counts;
}

std::string limit_message(std::string_view m, size_t max_bytes) {
  if (m.size() <= max_bytes) return std::string(m);
  return std::string(m.substr(0, max_bytes / 2)) + "\n" + std::string(m.substr(m.size() - max_bytes / 2));
}

void l2_normalize(float* v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  if (sum <= 0) return;
  const auto inv = static_cast<float>(1.0 / std::sqrt(sum));
  for (size_t i = 0; i < n; ++i) v[i] *= inv;
}

}  // namespace

HashedTfidfEmbedder::HashedTfidfEmbedder(HashedTfidfOptions options) : options_(options) {
  options_.dimension = std::max<size_t>(options_.dimension, 16);
}

std::string HashedTfidfEmbedder::identity() const {
  return std::string(kVersion) + "/dim=" + std::to_string(options_.dimension) +
         "/w=" + std::to_string(options_.error_weight).substr(0, 4) + "," +
         std::to_string(options_.test_function_weight).substr(0, 4) + "," +
         std::to_string(options_.code_weight).substr(0, 4) + "/df=" + hex64(df_digest_);
}

TermMap HashedTfidfEmbedder::error_terms(std::string_view error_message) const {
  TermMap t;
  const std::string message =
      normalize_error_message(limit_message(canonical_traceback(error_message), options_.max_error_bytes));
  std::string_view prev;
  for_each_word(message, [&](std::string_view w) {
    add(t, fnv1a64(w, kSeedError));
    if (!prev.empty()) add(t, fnv1a64(w, fnv1a64(prev, kSeedBigram)));
    prev = w;
  });
  // Character 4-grams over the message with white space folded: robust to small edits in messages.
  std::string folded;
  folded.reserve(std::min<size_t>(message.size(), 8192));
  for (char c : message) {
    if (folded.size() >= 8192) break;
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (folded.empty() || folded.back() == ' ')) continue;
    folded.push_back(space ? ' ' : c);
  }
  for (size_t i = 0; i + 4 <= folded.size(); ++i) add(t, fnv1a64(std::string_view(folded).substr(i, 4), kSeedGram));
  return t;
}

TermMap HashedTfidfEmbedder::test_function_terms(std::string_view test_function_code) {
  return hashed_words(test_function_code, kSeedTestFunction);
}
TermMap HashedTfidfEmbedder::code_terms(std::string_view code) { return hashed_words(code, kSeedCode); }

TermCounts HashedTfidfEmbedder::count_terms(const EmbedText& text) {
  TermCounts t;
  t.error = error_terms(text.error_message);
  t.test_function = test_function_terms(text.test_function_code);
  const uint64_t code_hash = fnv1a64(text.code);
  if (auto it = code_cache_.find(code_hash); it != code_cache_.end()) {
    t.code = it->second;
  } else {
    t.code = code_terms(text.code);
    if (code_cache_.size() > 1024) code_cache_.clear();  // ~100 MB at most for large test files
    code_cache_.emplace(code_hash, t.code);
  }
  return t;
}

void HashedTfidfEmbedder::count_documents(const TermMap& part, uint32_t documents, DocumentFrequencies& df) {
  for (const auto& [h, count] : part) df[h] += documents;
}

void HashedTfidfEmbedder::fit_begin() {
  df_.clear();
  loaded_.reset();
  documents_ = 0;
}

namespace {
constexpr size_t kDfHeader = 32, kDfRecord = 12;
size_t df_records(std::string_view bytes) { return (bytes.size() - kDfHeader) / kDfRecord; }  // load checked the size
uint64_t df_term_at(std::string_view bytes, size_t i) {
  uint64_t h = 0;
  std::memcpy(&h, bytes.data() + kDfHeader + i * kDfRecord, 8);
  return h;
}
uint32_t df_count_at(std::string_view bytes, size_t i) {
  uint32_t c = 0;
  std::memcpy(&c, bytes.data() + kDfHeader + i * kDfRecord + 8, 4);
  return c;
}
}  // namespace

void HashedTfidfEmbedder::thaw() {
  if (!loaded_) return;
  const std::string_view b = loaded_->view();
  df_.reserve(df_records(b));
  for (size_t i = 0; i < df_records(b); ++i) df_.emplace(df_term_at(b, i), df_count_at(b, i));
  loaded_.reset();
}

void HashedTfidfEmbedder::fit_add(const TermCounts& doc) {
  thaw();
  ++documents_;
  for (const auto* part : {&doc.error, &doc.test_function, &doc.code})
    for (const auto& [h, count] : *part) ++df_[h];
}

void HashedTfidfEmbedder::fit_merge(const DocumentFrequencies& df, uint64_t documents) {
  thaw();
  documents_ += documents;
  if (df_.empty()) df_.reserve(df.size());
  for (const auto& [h, c] : df) df_[h] += c;
}

void HashedTfidfEmbedder::fit_end() {
  thaw();  // the digest is of the whole table, however it is held
  // Digest of the statistics, so the identity changes when they do.
  std::vector<std::pair<uint64_t, uint32_t>> sorted(df_.begin(), df_.end());
  std::sort(sorted.begin(), sorted.end());
  uint64_t d = fnv1a64(std::to_string(documents_));
  for (const auto& [h, c] : sorted) {
    d ^= h + 0x9e3779b97f4a7c15ULL + (d << 6) + (d >> 2);
    d ^= c + 0x85ebca6b0b3e5d2bULL + (d << 6) + (d >> 2);
  }
  df_digest_ = d;
}

float HashedTfidfEmbedder::idf(uint64_t term) const {
  double df = 0.0;
  if (loaded_) {
    const std::string_view b = loaded_->view();
    const auto records = std::views::iota(size_t{0}, df_records(b));
    const auto at = std::ranges::partition_point(records, [&](size_t i) { return df_term_at(b, i) < term; });
    if (at != records.end() && df_term_at(b, *at) == term) df = df_count_at(b, *at);
  } else if (const auto it = df_.find(term); it != df_.end()) {
    df = it->second;
  }
  return static_cast<float>(std::log((static_cast<double>(documents_) + 1.0) / (df + 1.0)) + 1.0);
}

HashedTfidfEmbedder::Layout HashedTfidfEmbedder::layout() const {
  const size_t dim = options_.dimension;
  return {dim / 2, dim / 4, dim - dim / 2 - dim / 4};
}

void HashedTfidfEmbedder::block(const TermMap& counts, float* out, size_t n) const {
  std::fill(out, out + n, 0.0f);
  for (const auto& [h, count] : counts) {
    const float w = (1.0f + std::log(count)) * idf(h);
    const size_t bucket = static_cast<size_t>((h >> 1) % n);
    out[bucket] += (h & 1) ? -w : w;
  }
  l2_normalize(out, n);
}

std::vector<float> HashedTfidfEmbedder::assemble(const float* error, const float* test_function,
                                                 const float* code) const {
  const Layout l = layout();
  std::vector<float> v(options_.dimension);
  std::copy(error, error + l.error, v.data());
  std::copy(test_function, test_function + l.test_function, v.data() + l.error);
  std::copy(code, code + l.code, v.data() + l.error + l.test_function);
  const auto scale = [&](size_t from, size_t n, double w) {
    const auto s = static_cast<float>(std::sqrt(w));
    for (size_t i = from; i < from + n; ++i) v[i] *= s;
  };
  scale(0, l.error, options_.error_weight);
  scale(l.error, l.test_function, options_.test_function_weight);
  scale(l.error + l.test_function, l.code, options_.code_weight);
  l2_normalize(v.data(), v.size());
  return v;
}

std::vector<float> HashedTfidfEmbedder::vectorize(const TermCounts& t) const {
  const Layout l = layout();
  std::vector<float> blocks(options_.dimension);
  block(t.error, blocks.data(), l.error);
  block(t.test_function, blocks.data() + l.error, l.test_function);
  block(t.code, blocks.data() + l.error + l.test_function, l.code);
  return assemble(blocks.data(), blocks.data() + l.error, blocks.data() + l.error + l.test_function);
}

Result<std::vector<std::vector<float>>> HashedTfidfEmbedder::embed(const std::vector<EmbedText>& inputs) {
  std::vector<std::vector<float>> out;
  out.reserve(inputs.size());
  for (const auto& in : inputs) out.push_back(vectorize(count_terms(in)));
  return out;
}

namespace {
constexpr char kDfMagic[8] = {'S', 'P', 'K', 'D', 'F', '0', '0', '1'};
}

Status HashedTfidfEmbedder::save(const std::filesystem::path& path) const {
  if (loaded_) return write_file_atomic(path, std::string(loaded_->view()));  // unchanged since load: the same bytes
  std::vector<std::pair<uint64_t, uint32_t>> sorted(df_.begin(), df_.end());
  std::sort(sorted.begin(), sorted.end());
  std::string buf(kDfMagic, sizeof kDfMagic);
  const auto put = [&](const void* p, size_t n) { buf.append(static_cast<const char*>(p), n); };
  const uint64_t count = sorted.size();
  put(&documents_, 8);
  put(&df_digest_, 8);
  put(&count, 8);
  for (const auto& [h, c] : sorted) {
    put(&h, 8);
    put(&c, 4);
  }
  return write_file_atomic(path, buf);
}

Status HashedTfidfEmbedder::load(const std::filesystem::path& path, std::shared_ptr<const MappedFile> mapped) {
  if (!mapped) {
    auto map = MappedFile::open(path);
    TRY(map);
    mapped = std::move(*map);
  }
  const std::string_view b = mapped->view();
  if (b.size() < 32 || std::memcmp(b.data(), kDfMagic, 8) != 0)
    return fail(path.string() + ": not a spark document-frequency file (truncated or damaged)");
  uint64_t docs = 0, digest = 0, count = 0;
  std::memcpy(&docs, b.data() + 8, 8);
  std::memcpy(&digest, b.data() + 16, 8);
  std::memcpy(&count, b.data() + 24, 8);
  if (count > b.size() / 12 || b.size() != 32 + count * 12)
    return fail(path.string() + ": truncated (expected " + std::to_string(32 + count * 12) + " bytes, found " +
                std::to_string(b.size()) + ")");
  // Sorted by term and without repeats (as save writes it), or not a file of spark's: the table is searched in place.
  for (uint64_t i = 1; i < count; ++i)
    if (df_term_at(b, i - 1) >= df_term_at(b, i)) return fail(path.string() + ": damaged (its terms are not in order)");
  df_.clear();
  loaded_ = std::move(mapped);
  documents_ = docs;
  df_digest_ = digest;
  return {};
}

// ---------------------------------------------------------------------------------------------------------------

std::vector<std::string> chunk_text(const std::string& text, size_t window, size_t overlap) {
  window = std::max<size_t>(window, 8);
  overlap = std::min(overlap, window / 2);
  // Token start offsets: \w+ runs and single non-space characters.
  std::vector<size_t> starts;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    starts.push_back(i);
    if (word_char(c)) {
      while (i < text.size() && word_char(static_cast<unsigned char>(text[i]))) ++i;
    } else {
      ++i;
    }
  }
  if (starts.size() <= window) return {text};
  std::vector<std::string> chunks;
  size_t first = 0;
  while (first < starts.size()) {
    size_t last = std::min(first + window, starts.size());  // exclusive token index
    size_t end_byte = last == starts.size() ? text.size() : starts[last];
    if (last < starts.size()) {
      // Prefer to end at a line break within the window's last fifth.
      const size_t floor_byte = starts[first + window * 4 / 5];
      const size_t nl = text.rfind('\n', end_byte - 1);
      if (nl != std::string::npos && nl >= floor_byte) {
        end_byte = nl + 1;
        last = static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), end_byte) - starts.begin());
      }
    }
    chunks.push_back(text.substr(starts[first], end_byte - starts[first]));
    if (last >= starts.size()) break;
    first = std::max(first + 1, last - overlap);
  }
  return chunks;
}

OpenAiEmbedder::OpenAiEmbedder(OpenAiEmbedderOptions options) : options_(std::move(options)) {
  while (!options_.base_url.empty() && options_.base_url.back() == '/') options_.base_url.pop_back();
}

std::string OpenAiEmbedder::identity() const {
  return "openai/" + options_.model + "@" + options_.base_url + "/chunk=" + std::to_string(options_.chunk_tokens);
}

Result<std::vector<std::vector<float>>> OpenAiEmbedder::request(const std::vector<std::string>& texts) {
  const std::string url = options_.base_url + "/embeddings";
  nlohmann::json body = {{"model", options_.model}, {"input", texts}};
  std::vector<std::string> headers;
  if (!options_.api_key.empty()) headers.push_back("Authorization: Bearer " + options_.api_key);
  // llama.cpp's server embeds an input in one physical batch (-ub, 512 tokens unless set) and answers a longer one
  // with HTTP 500 "input (N tokens) is too large to process. increase the physical batch size": asking again
  // cannot help, and the fix is the server's flags or a smaller chunk.
  constexpr std::string_view kTooLarge = "too large to process";
  RetryPolicy retry = options_.retry;
  retry.lasting = [&](const HttpResponse& r) { return r.body.find(kTooLarge) != std::string::npos; };
  auto outcome = http_post_json_retrying(url, json_text(body), headers, options_.http, retry);
  TRY(outcome);
  const HttpResponse* resp = &outcome->response;
  if (resp->status != 200 && resp->body.find(kTooLarge) != std::string::npos)
    return fail("POST " + url + ": HTTP " + std::to_string(resp->status) + ": " + clip(resp->body, 300) +
                " (spark's chunks are up to " + std::to_string(options_.chunk_tokens) +
                " of its own tokens, which a model's tokenizer may split further: start llama-server with "
                "-c, -b and -ub of " +
                std::to_string(2 * options_.chunk_tokens) + ")");
  if (resp->status != 200)
    return fail("POST " + url + ": HTTP " + std::to_string(resp->status) + ": " + clip(resp->body, 300));
  if (json_too_deep(resp->body))
    return fail("POST " + url + ": the answer nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  nlohmann::json answer;
  try {
    answer = nlohmann::json::parse(resp->body);
  } catch (const nlohmann::json::exception& e) {
    return fail("POST " + url + ": the answer is not JSON (" + clip(resp->body, 120) + ")");
  }
  if (!answer.contains("data") || !answer["data"].is_array() || answer["data"].size() != texts.size())
    return fail("POST " + url + ": the answer has no \"data\" array with " + std::to_string(texts.size()) +
                " embeddings");
  std::vector<std::vector<float>> out(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& item = answer["data"][i];
    const size_t index = item.contains("index") && item["index"].is_number_unsigned() ? item["index"].get<size_t>() : i;
    if (index >= texts.size() || !item.contains("embedding") || !item["embedding"].is_array())
      return fail("POST " + url + ": data[" + std::to_string(i) + "] has no usable embedding");
    std::vector<float> v;
    v.reserve(item["embedding"].size());
    for (const auto& x : item["embedding"]) {
      if (!x.is_number()) return fail("POST " + url + ": data[" + std::to_string(i) + "] has a non-number");
      v.push_back(x.get<float>());
    }
    if (v.empty()) return fail("POST " + url + ": data[" + std::to_string(i) + "] is empty");
    if (dimension_ == 0) dimension_ = v.size();
    if (v.size() != dimension_)
      return fail("POST " + url + ": embedding dimension changed from " + std::to_string(dimension_) + " to " +
                  std::to_string(v.size()));
    out[index] = std::move(v);
  }
  return out;
}

Result<std::vector<std::vector<float>>> OpenAiEmbedder::embed(const std::vector<EmbedText>& inputs) {
  // The paper's input: error message ‖ test code, chunked; chunk vectors pooled by a length-weighted mean.
  std::vector<std::string> pieces;
  std::vector<std::pair<size_t, double>> owner;  // input index, weight (chunk length)
  const size_t overlap = static_cast<size_t>(static_cast<double>(options_.chunk_tokens) * options_.chunk_overlap);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string text = inputs[i].error_message + "\n" + inputs[i].code;
    if (options_.redactor) {
      std::map<std::string, size_t> counts;
      redacted_ += options_.redactor->redact(text, counts);
    }
    for (auto& chunk : chunk_text(text, options_.chunk_tokens, overlap)) {
      owner.emplace_back(i, static_cast<double>(chunk.size()));
      pieces.push_back(std::move(chunk));
    }
  }
  std::vector<std::vector<float>> chunk_vectors;
  for (size_t start = 0; start < pieces.size(); start += options_.batch) {
    const std::vector<std::string> batch(
        pieces.begin() + static_cast<long>(start),
        pieces.begin() + static_cast<long>(std::min(pieces.size(), start + options_.batch)));
    auto got = request(batch);
    TRY(got);
    for (auto& v : *got) chunk_vectors.push_back(std::move(v));
  }
  std::vector<std::vector<float>> out(inputs.size(), std::vector<float>(dimension_, 0.0f));
  for (size_t c = 0; c < chunk_vectors.size(); ++c) {
    auto& target = out[owner[c].first];
    std::vector<float> unit = chunk_vectors[c];
    l2_normalize(unit.data(), unit.size());
    for (size_t d = 0; d < dimension_; ++d) target[d] += static_cast<float>(owner[c].second) * unit[d];
  }
  for (auto& v : out) l2_normalize(v.data(), v.size());
  return out;
}

}  // namespace spark
