#include "localizer/case_embedding.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <unordered_set>

#include "base/clock.h"
#include "base/text.h"
#include "base/work_pool.h"
#include "code/scope.h"
#include "formats/config.h"
#include "formats/error_message.h"

namespace spark {

namespace {

// The language a case's test id is written in: its first file's, else its `language` field's.
Language test_id_language(const Case& c) {
  return language_for(c.files.empty() ? std::string_view() : std::string_view(c.files.front().path), c.language);
}

const SourceFile& test_file_of(const Case& c) {
  const TestIdParts parts = parse_test_id(c.test_id, test_id_language(c));
  for (const auto& f : c.files)
    if (!parts.path.empty() && same_file(parts.path, f.path)) return f;
  return c.files.front();
}

// The failing test's own function: for Python by the light lookup (a scan of the lines, PythonParser::function_span);
// the full structure when that finds nothing, and for the other languages.
std::string test_function_code_of(const std::string& test_id, const std::string& path, const std::string& content,
                                  const std::string& case_language, StructureCache& cache) {
  const Language language = language_for(path, case_language);
  if (language == Language::python) {
    const TestIdParts parts = parse_test_id(test_id, language);
    const auto span =
        cache.function_span(content, path, parts.classes.empty() ? "" : parts.classes.back(), parts.function);
    if (span) return lines_text(content, span->first, span->second);
  }
  return test_function_text(content, estimate_scope(*cache.get(content, path, case_language), test_id));
}

// Which of a case's files is its test file: the one its test id names, else the first.
template <class Files, class PathOf>
size_t test_file_index(const std::string& test_id, const std::string& case_language, const Files& files,
                       PathOf&& path_of) {
  const TestIdParts parts = parse_test_id(
      test_id, language_for(files.empty() ? std::string() : std::string(path_of(files.front())), case_language));
  for (size_t i = 0; i < files.size(); ++i)
    if (!parts.path.empty() && same_file(parts.path, path_of(files[i]))) return i;
  return 0;
}

// The built-in embedder over a whole knowledge base, each test-file version tokenised once per pass and each failing
// test's own function once, however many cases share them; the cases' vectors are put together from cached blocks
// (HashedTfidfEmbedder::assemble), bit-identical to embedding each case alone. Work is spread over worker threads
// by version. Memory: one block per distinct version and per distinct (test, version) (1 KB each at the default
// dimension), plus the contents of one chunk of versions.
class VersionEmbedding {
 public:
  VersionEmbedding(KnowledgeBase& kb, HashedTfidfEmbedder& embedder, unsigned threads,
                   const decltype(StoredEmbeddingOptions::each_labelled)& each_labelled)
      : kb_(kb), embedder_(embedder), threads_(threads), caches_(threads), each_labelled_(each_labelled) {}

  // The cases to embed: all, or only those of `only` (all of whose rowids are at least `min_rowid`).
  Status collect(const std::unordered_set<int64_t>* only = nullptr, int64_t min_rowid = 0) {
    std::unordered_map<std::string, size_t> version_of, function_of;
    auto s = kb_.for_each_sketch(min_rowid, [&](KnowledgeBase::CaseSketch&& c) -> Status {
      if (only && !only->contains(c.rowid)) return {};
      // The case's language is part of its version: it decides how a file of no known extension is read.
      std::string vkey = c.language + "\n";
      for (const auto& [path, key] : c.files) vkey += key + "\n";
      auto [vit, vnew] = version_of.emplace(vkey, versions_.size());
      if (vnew) {
        Version v;
        v.language = c.language;
        for (auto& [path, key] : c.files) {
          v.paths.push_back(path);
          v.keys.push_back(key);
        }
        versions_.push_back(std::move(v));
      }
      Version& v = versions_[vit->second];
      const size_t file = test_file_index(c.test_id, v.language, v.paths, [](const std::string& p) { return p; });
      auto [sit, snew] = function_of.emplace(
          std::to_string(vit->second) + "\n" + std::to_string(file) + "\n" + c.test_id, functions_.size());
      if (snew) {
        functions_.push_back({vit->second, file, c.test_id, 0});
        v.functions.push_back(sit->second);
      }
      ++functions_[sit->second].cases;
      v.cases.push_back(cases_.size());
      cases_.push_back({c.rowid, vit->second, sit->second, c.labelled});
      return {};
    });
    if (!s) return s;
    // Versions of the same test file one after another: each is then parsed incrementally from the one before.
    order_.resize(versions_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    const auto path_of = [&](size_t vi) -> const std::string& {
      const Version& v = versions_[vi];
      return v.paths[functions_[v.functions.front()].file];
    };
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return path_of(a) < path_of(b); });
    return {};
  }

  size_t cases() const { return cases_.size(); }
  size_t versions() const { return versions_.size(); }
  size_t test_functions() const { return functions_.size(); }

  // Pass 1: the failing tests' own functions and, with `fit`, document frequencies (else the embedder's are used).
  Status fit(bool fit = true) {
    std::vector<DocumentFrequencies> df(threads_);
    test_function_text_.assign(functions_.size(), {});
    auto s = for_each_version_chunk(
        [&](unsigned w, size_t vi, const std::string& code, const std::vector<std::string>& contents,
            const std::vector<std::string>& messages, const std::vector<std::string>& records) {
          const Version& v = versions_[vi];
          if (each_labelled_ && !records.empty()) {
            std::vector<int64_t> rowids;
            for (size_t ci : v.cases)
              if (cases_[ci].labelled) rowids.push_back(cases_[ci].rowid);
            each_labelled_(w, rowids, records, v.paths, contents);
          }
          if (fit)
            HashedTfidfEmbedder::count_documents(HashedTfidfEmbedder::code_terms(code),
                                                 static_cast<uint32_t>(v.cases.size()), df[w]);
          for (size_t si : v.functions) {
            const TestFunction& sc = functions_[si];
            test_function_text_[si] =
                test_function_code_of(sc.test_id, v.paths[sc.file], contents[sc.file], v.language, caches_[w]);
            if (fit)
              HashedTfidfEmbedder::count_documents(HashedTfidfEmbedder::test_function_terms(test_function_text_[si]),
                                                   sc.cases, df[w]);
          }
          if (fit)
            for (const auto& m : messages) HashedTfidfEmbedder::count_documents(embedder_.error_terms(m), 1, df[w]);
        },
        /*messages=*/fit, /*records=*/static_cast<bool>(each_labelled_));
    if (!s) return s;
    if (!fit) return {};
    embedder_.fit_begin();
    for (size_t w = 0; w < df.size(); ++w) {
      embedder_.fit_merge(df[w], w == 0 ? cases_.size() : 0);
      DocumentFrequencies().swap(df[w]);
    }
    embedder_.fit_end();
    return {};
  }

  // Pass 2: the code block of each version and the test-function block of each failing test in it; then the cases'
  // vectors in rowid order, `sink` called with batches of (rowids, row-major vectors).
  Status vectors(const std::function<Status(const std::vector<int64_t>&, const std::vector<float>&)>& sink) {
    const auto l = embedder_.layout();
    std::vector<float> code_blocks(versions_.size() * l.code), function_blocks(functions_.size() * l.test_function);
    auto s = for_each_version_chunk(
        [&](unsigned, size_t vi, const std::string& code, const std::vector<std::string>&,
            const std::vector<std::string>&, const std::vector<std::string>&) {
          const Version& v = versions_[vi];
          embedder_.block(HashedTfidfEmbedder::code_terms(code), code_blocks.data() + vi * l.code, l.code);
          for (size_t si : v.functions) {
            embedder_.block(HashedTfidfEmbedder::test_function_terms(test_function_text_[si]),
                            function_blocks.data() + si * l.test_function, l.test_function);
            std::string().swap(test_function_text_[si]);
          }
        },
        /*messages=*/false);
    if (!s) return s;
    const size_t dim = embedder_.dimension();
    constexpr size_t kBatch = 1024;
    std::vector<int64_t> rowids;
    std::vector<float> out;
    std::vector<std::vector<float>> error_blocks(threads_, std::vector<float>(l.error));
    for (size_t start = 0; start < cases_.size(); start += kBatch) {
      const size_t end = std::min(cases_.size(), start + kBatch);
      rowids.clear();
      for (size_t i = start; i < end; ++i) rowids.push_back(cases_[i].rowid);
      auto messages = kb_.error_messages(rowids);
      TRY(messages);
      out.assign(rowids.size() * dim, 0.0f);
      parallel_for(rowids.size(), threads_, [&](unsigned w, size_t j) {
        const CaseRef& c = cases_[start + j];
        float* err = error_blocks[w].data();
        embedder_.block(embedder_.error_terms((*messages)[j]), err, l.error);
        const auto v = embedder_.assemble(err, function_blocks.data() + c.function * l.test_function,
                                          code_blocks.data() + c.version * l.code);
        std::copy(v.begin(), v.end(), out.begin() + static_cast<std::ptrdiff_t>(j * dim));
      });
      if (auto st = sink(rowids, out); !st) return st;
    }
    return {};
  }

 private:
  struct Version {
    std::string language;  // the cases' `language` field
    std::vector<std::string> paths, keys;
    std::vector<size_t> cases;      // indices into cases_
    std::vector<size_t> functions;  // indices into functions_
  };
  struct TestFunction {
    size_t version = 0, file = 0;
    std::string test_id;
    uint32_t cases = 0;
  };
  struct CaseRef {
    int64_t rowid = 0;
    size_t version = 0, function = 0;
    bool labelled = false;
  };

  // Loads versions in chunks (their contents, and when asked the error messages of their cases and the records of
  // their labelled cases, in the order of Version::cases) and calls fn(worker, version, code, contents, messages,
  // records) for each on the worker threads. The next chunk is read from the store (on this thread: the store's
  // connection is this thread's) while the workers take the current one.
  template <class Fn>
  Status for_each_version_chunk(Fn&& fn, bool messages = true, bool records = false) {
    constexpr size_t kChunk = 64;
    struct Chunk {
      size_t start = 0, end = 0;
      std::vector<std::vector<std::string>> contents, texts, records;
      std::vector<std::string> codes;
    };
    const auto load = [&](size_t start) -> Result<Chunk> {
      Chunk c;
      c.start = start;
      c.end = std::min(order_.size(), start + kChunk);
      c.contents.resize(c.end - start);
      c.texts.resize(c.end - start);
      c.records.resize(c.end - start);
      c.codes.resize(c.end - start);
      for (size_t p = start; p < c.end; ++p) {
        const Version& v = versions_[order_[p]];
        auto got = kb_.blobs(v.keys);
        TRY(got);
        c.contents[p - start] = std::move(*got);
        for (const auto& content : c.contents[p - start]) {
          c.codes[p - start] += content;
          c.codes[p - start] += '\n';
        }
        if (messages) {
          std::vector<int64_t> rowids;
          rowids.reserve(v.cases.size());
          for (size_t ci : v.cases) rowids.push_back(cases_[ci].rowid);
          auto m = kb_.error_messages(rowids);
          TRY(m);
          c.texts[p - start] = std::move(*m);
        }
        if (records) {
          std::vector<int64_t> labelled;
          for (size_t ci : v.cases)
            if (cases_[ci].labelled) labelled.push_back(cases_[ci].rowid);
          auto r = kb_.records(labelled);
          TRY(r);
          c.records[p - start] = std::move(*r);
        }
      }
      return c;
    };
    const auto work = [&](const Chunk& c) {
      // Each worker takes a contiguous run of the chunk, so consecutive versions of a file stay on one parser.
      const size_t n = c.end - c.start;
      const auto workers = static_cast<unsigned>(std::min<size_t>(threads_, n));
      parallel_for(workers, workers, [&](unsigned w, size_t part) {
        for (size_t j = part * n / workers; j < (part + 1) * n / workers; ++j)
          fn(w, order_[c.start + j], c.codes[j], c.contents[j], c.texts[j], c.records[j]);
      });
    };
    if (order_.empty()) return {};
    auto current = load(0);
    while (true) {
      TRY(current);
      const size_t next_start = current->end;
      if (next_start >= order_.size()) {
        work(*current);
        return {};
      }
      auto working = std::async(std::launch::async, [&] { work(*current); });
      auto next = load(next_start);
      working.get();
      current = std::move(next);
    }
  }

  KnowledgeBase& kb_;
  HashedTfidfEmbedder& embedder_;
  unsigned threads_;
  std::vector<StructureCache> caches_;  // one per worker
  const decltype(StoredEmbeddingOptions::each_labelled)& each_labelled_;
  std::vector<Version> versions_;
  std::vector<TestFunction> functions_;
  std::vector<CaseRef> cases_;
  std::vector<size_t> order_;  // versions in processing order
  std::vector<std::string> test_function_text_;
};

}  // namespace

std::unique_ptr<Embedder> make_embedder(const EmbedderConfig& config) {
  if (config.kind == "openai") return std::make_unique<OpenAiEmbedder>(config.openai);
  return std::make_unique<HashedTfidfEmbedder>(config.builtin);
}

Status check_embedder_kind(const EmbedderConfig& config) {
  if (config.kind != "builtin" && config.kind != "openai")
    return fail("unknown embedder \"" + config.kind + "\" (known: builtin, openai)");
  if (config.kind == "openai" && config.openai.base_url.empty())
    return fail("the openai embedder needs a base URL (SPARK_EMBED_BASE_URL or --embed-url)");
  return {};
}

const std::string* TestFunctionCache::find(uint64_t key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void TestFunctionCache::put(uint64_t key, std::string text) {
  if (bytes_ + text.size() > max_bytes_) {
    map_.clear();
    bytes_ = 0;
  }
  bytes_ += text.size();
  map_.emplace(key, std::move(text));
}

EmbedText embed_text(const Case& c, StructureCache& cache, TestFunctionCache* functions) {
  EmbedText t;
  t.error_message = c.error_message;
  for (const auto& f : c.files) {
    t.code += f.content;
    t.code += '\n';
  }
  const SourceFile& tf = test_file_of(c);
  const uint64_t key = fnv1a64(c.language, fnv1a64(c.test_id, fnv1a64(tf.content))) ^ tf.content.size();
  if (functions)
    if (const std::string* hit = functions->find(key)) {
      t.test_function_code = *hit;
      return t;
    }
  t.test_function_code = test_function_code_of(c.test_id, tf.path, tf.content, c.language, cache);
  if (functions) functions->put(key, t.test_function_code);
  return t;
}

unsigned index_threads(unsigned asked) {
  if (asked == 0)
    asked = static_cast<unsigned>(std::strtoul(environment_setting("SPARK_THREADS").c_str(), nullptr, 10));
  if (asked == 0) asked = std::thread::hardware_concurrency();
  return std::clamp(asked, 1u, 16u);
}

Result<StoredEmbedding> embed_stored_cases(KnowledgeBase& kb, HashedTfidfEmbedder& embedder,
                                           const StoredEmbeddingOptions& options, const VectorSink& sink) {
  StoredEmbedding out;
  if (options.only && options.only->empty()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  VersionEmbedding pass(kb, embedder, std::max(1u, options.threads), options.each_labelled);
  if (options.only) {
    const std::unordered_set<int64_t> only(options.only->begin(), options.only->end());
    TRY(pass.collect(&only, *std::min_element(options.only->begin(), options.only->end())));
  } else if (auto s = pass.collect(); !s) {
    return std::unexpected(s.error());
  }
  const size_t expected = options.only ? options.only->size() : options.expected;
  if (pass.cases() < expected)
    return fail(kb.name() + ": " + std::to_string(expected - pass.cases()) +
                " case(s) have no files (a damaged store)");
  if (pass.cases() > expected)
    return fail(kb.name() + ": the knowledge base changed while it was read (another writer?): run again");
  out = {pass.cases(), pass.versions(), pass.test_functions()};
  const auto t1 = std::chrono::steady_clock::now();
  TRY(pass.fit(options.fit));
  const auto t2 = std::chrono::steady_clock::now();
  TRY(pass.vectors(sink));
  if (!environment_setting("SPARK_DEBUG_TIMES").empty())
    std::fprintf(stderr,
                 "embedding %zu case(s), %zu versions, %zu test functions: collect %.2f s, %s %.2f s, vectors %.2f s\n",
                 out.cases, out.versions, out.test_functions, std::chrono::duration<double>(t1 - t0).count(),
                 options.fit ? "test functions and fit" : "test functions",
                 std::chrono::duration<double>(t2 - t1).count(), seconds_since(t2));
  return out;
}

}  // namespace spark
