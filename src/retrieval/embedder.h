// Embedders: encode(m ‖ L) of the paper's similarity search (Definition 2), behind one interface.
//
// - HashedTfidfEmbedder (default, built in, no model, deterministic): hashed tokens of the normalised error message
//   (words, word bigrams, character 4-grams), of the failing test's own function and of the whole test code
//   (identifiers, literals), TF-IDF weighted with document frequencies learnt from the knowledge base, each part
//   L2-normalised into its own block of the vector, blocks weighted, the whole L2-normalised. Cosine similarity of two
//   such vectors is a weighted sum of the parts' cosines, so a 5,000-line file cannot drown a two-line message.
// - OpenAiEmbedder: any OpenAI-compatible /v1/embeddings endpoint (e.g. bge-m3 under vLLM or Ollama), with the
//   paper's chunking of long inputs and length-weighted mean pooling (docs/EMBEDDERS.md).
// Contract: an Embedder is owned by its caller. HashedTfidfEmbedder is thread-safe for encoding once fitted (fit_*
// from one thread); OpenAiEmbedder's requests may run concurrently. Failures (an endpoint down, a wrong dimension)
// come back as Result naming the endpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/http_client.h"
#include "base/mapped_file.h"
#include "base/result.h"
#include "formats/defaults.h"
#include "formats/redact.h"

namespace spark {

// What a case contributes to its embedding.
struct EmbedText {
  std::string error_message;
  std::string code;                // all test files, concatenated
  std::string test_function_code;  // the failing test's own function ("" when unknown)
};

class Embedder {
 public:
  virtual ~Embedder() = default;
  // Changes whenever the vectors would change (kind, model, dimension, fitted statistics).
  virtual std::string identity() const = 0;
  virtual size_t dimension() const = 0;
  // One L2-normalised vector per input, in order.
  virtual Result<std::vector<std::vector<float>>> embed(const std::vector<EmbedText>& inputs) = 0;
};

struct HashedTfidfOptions {
  size_t dimension = 1024;    // total; split 1/2 error, 1/4 test function, 1/4 code
  double error_weight = 0.5;  // share of the cosine each part carries
  double test_function_weight = 0.3;
  double code_weight = 0.2;
  size_t max_error_bytes = 65536;  // longer messages: first and last half of this (the head and the final error)
};

// Sparse term counts of one document, per part.
using TermMap = std::unordered_map<uint64_t, float>;
struct TermCounts {
  TermMap error, test_function, code;
};
// Document frequencies: term -> number of documents holding it.
using DocumentFrequencies = std::unordered_map<uint64_t, uint32_t>;

class HashedTfidfEmbedder final : public Embedder {
 public:
  // The first part of identity(): it changes when the text the embedder reads of a case does (v2: error messages in
  // canonical_traceback's form, so pytest's long and short forms embed alike). An index whose embedder starts with
  // "builtin-tfidf-" and another version is outdated (is_outdated).
  static constexpr std::string_view kVersion = "builtin-tfidf-v2";
  static bool is_outdated(std::string_view index_embedder) {
    return index_embedder.starts_with("builtin-tfidf-") && !index_embedder.starts_with(std::string(kVersion) + "/");
  }
  explicit HashedTfidfEmbedder(HashedTfidfOptions options = {});
  std::string identity() const override;
  size_t dimension() const override { return options_.dimension; }
  Result<std::vector<std::vector<float>>> embed(const std::vector<EmbedText>& inputs) override;
  // The similarity two failures of one test in one test-file version reach from their code alone (the test-function
  // and code blocks' shares): a query whose nearest stored failure is less similar shares its test code with none.
  double same_test_code_similarity() const { return options_.test_function_weight + options_.code_weight; }

  TermCounts count_terms(const EmbedText& text);
  // The parts counted one at a time, so a knowledge base counts each test-file version (code) and each failing test
  // in it (its test function) once, however many cases share them. Thread-safe (no state is touched).
  TermMap error_terms(std::string_view message) const;
  static TermMap test_function_terms(std::string_view test_function_code);
  static TermMap code_terms(std::string_view code);
  // Adds the terms of one part to `df` as if `documents` documents held it.
  static void count_documents(const TermMap& part, uint32_t documents, DocumentFrequencies& df);

  // Learns document frequencies, one document at a time: fit_begin, fit_add for each (or fit_merge of frequencies
  // counted elsewhere, e.g. by worker threads), fit_end.
  void fit_begin();
  void fit_add(const TermCounts& doc);
  void fit_merge(const DocumentFrequencies& df, uint64_t documents);
  void fit_end();
  std::vector<float> vectorize(const TermCounts& terms) const;
  size_t fitted_documents() const { return documents_; }

  // The vector's three blocks (error message, the failing test's own function, the whole code), in that order.
  struct Layout {
    size_t error = 0, test_function = 0, code = 0;
  };
  Layout layout() const;
  // One block: TF-IDF weights hashed into `n` buckets, L2-normalised. Thread-safe after fit_end.
  void block(const TermMap& terms, float* out, size_t n) const;
  // The whole vector from its three blocks (as block() made them): weighted and L2-normalised. vectorize() is
  // block() three times and assemble(), so vectors put together from cached blocks are bit-identical.
  std::vector<float> assemble(const float* error, const float* test_function, const float* code) const;

  // Document frequencies persist beside the vector index (binary, little-endian, with a header).
  Status save(const std::filesystem::path& path) const;
  // `mapped`, when given, is the file already mapped (and verified) by its caller; errors still name `path`.
  Status load(const std::filesystem::path& path, std::shared_ptr<const MappedFile> mapped = nullptr);

 private:
  float idf(uint64_t term) const;
  void thaw();  // the loaded table into df_, before fitting changes it
  HashedTfidfOptions options_;
  DocumentFrequencies df_;
  // As loaded (until fitting changes it): the file mapped, its records (term hash u64, count u32) sorted by hash and
  // searched in place. A new `spark localize` process maps 2 MB at 100k cases instead of building a hash map of 170k
  // terms. Null when df_ holds the table.
  std::shared_ptr<const MappedFile> loaded_;
  uint64_t documents_ = 0;
  uint64_t df_digest_ = 0;
  std::unordered_map<uint64_t, TermMap> code_cache_;  // by code hash
};

struct OpenAiEmbedderOptions {
  std::string base_url;  // e.g. http://localhost:8000/v1
  std::string model = defaults::kEmbedModel;
  std::string api_key;          // never logged
  size_t chunk_tokens = 8192;   // the model's context window
  double chunk_overlap = 0.10;  // the paper: 10 % of the window
  size_t batch = 16;            // inputs per request
  HttpOptions http;
  RetryPolicy retry;
  std::shared_ptr<const Redactor> redactor;  // secrets are redacted before texts leave the machine; null = off
};

class OpenAiEmbedder final : public Embedder {
 public:
  explicit OpenAiEmbedder(OpenAiEmbedderOptions options);
  std::string identity() const override;
  size_t dimension() const override { return dimension_; }
  Result<std::vector<std::vector<float>>> embed(const std::vector<EmbedText>& inputs) override;
  size_t redacted() const { return redacted_; }  // secrets redacted from the texts sent so far

 private:
  Result<std::vector<std::vector<float>>> request(const std::vector<std::string>& texts);
  OpenAiEmbedderOptions options_;
  size_t dimension_ = 0;
  size_t redacted_ = 0;
};

// Splits text into windows of at most `window` tokens overlapping by `overlap` tokens. Tokens are approximated as
// the pieces \w+ and single non-space characters (documented in docs/EMBEDDERS.md); windows end at a line break
// where one lies in the last fifth of the window (the spirit of a recursive character splitter).
std::vector<std::string> chunk_text(const std::string& text, size_t window, size_t overlap);

}  // namespace spark
