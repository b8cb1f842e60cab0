#include "retrieval/embedder.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "local_server.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {

namespace {

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// An in-process server speaking the OpenAI embeddings protocol; each test scripts its answers.
struct EmbeddingServer : testing::LocalServer {
  explicit EmbeddingServer(std::function<void(const httplib::Request&, httplib::Response&)> handler)
      : LocalServer([&handler](httplib::Server& s) { s.Post("/v1/embeddings", std::move(handler)); }) {}
};

void answer_embeddings(const httplib::Request& req, httplib::Response& res, std::atomic<int>& requests,
                       std::atomic<int>& inputs) {
  ++requests;
  const auto body = nlohmann::json::parse(req.body);
  nlohmann::json data = nlohmann::json::array();
  size_t i = 0;
  for (const auto& input : body.at("input")) {
    ++inputs;
    const std::string t = input.get<std::string>();
    // 4-dimensional: counts of some characters, so related texts point the same way.
    data.push_back({{"object", "embedding"}, {"index", i++},
                    {"embedding", {1.0 + std::count(t.begin(), t.end(), 'a'), std::count(t.begin(), t.end(), 'e') * 1.0,
                                   std::count(t.begin(), t.end(), '\n') * 1.0, 0.5}}});
  }
  res.set_content(nlohmann::json({{"object", "list"}, {"data", data}, {"model", body.at("model")}}).dump(),
                  "application/json");
}

}  // namespace

TEST(HashedTfidfEmbedder, is_deterministic_normalised_and_puts_similar_failures_closer) {
  HashedTfidfEmbedder e;
  const EmbedText a{"E   AssertionError: assert 5 == 4", "def test_add():\n    assert add(2, 2) == 5\n", "def test_add(): ..."};
  const EmbedText b{"E   AssertionError: assert 7 == 6", "def test_add():\n    assert add(3, 3) == 7\n", "def test_add(): ..."};
  const EmbedText c{"E   KeyError: 'missing'", "def test_dict():\n    d = {}\n    d['missing']\n", "def test_dict(): ..."};
  e.fit_begin();
  for (const auto& t : {a, b, c}) e.fit_add(e.count_terms(t));
  e.fit_end();
  auto v = e.embed({a, b, c});
  ASSERT_TRUE(v);
  EXPECT_EQ((*v)[0].size(), 1024u);
  EXPECT_NEAR(dot((*v)[0], (*v)[0]), 1.0, 1e-5);
  EXPECT_GT(dot((*v)[0], (*v)[1]), dot((*v)[0], (*v)[2]));
  auto again = e.embed({a});
  EXPECT_EQ((*again)[0], (*v)[0]);
}

TEST(HashedTfidfEmbedder, saves_and_loads_its_statistics_and_rejects_a_truncated_file) {
  testing::TempDir dir;
  HashedTfidfEmbedder e;
  e.fit_begin();
  e.fit_add(e.count_terms({"E   x", "def f(): pass", ""}));
  e.fit_end();
  ASSERT_TRUE(e.save(dir / "df.bin"));
  HashedTfidfEmbedder f;
  ASSERT_TRUE(f.load(dir / "df.bin"));
  EXPECT_EQ(f.identity(), e.identity());
  const std::string bytes = testing::slurp(dir / "df.bin");
  testing::write_file(dir / "df.bin", bytes.substr(0, bytes.size() - 5));
  auto bad = f.load(dir / "df.bin");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("truncated"), std::string::npos);
}

// A loaded table is searched in place (sorted terms), not rebuilt as a hash map: the vectors must be the fitted
// embedder's bit for bit, a save must write the same bytes, fitting on after a load must count as if never saved,
// and a table out of order (not spark's, or damaged) is refused.
TEST(HashedTfidfEmbedder, a_loaded_table_gives_the_fitted_vectors_and_fits_on) {
  testing::TempDir dir;
  const std::vector<EmbedText> docs = {
      {"AssertionError: assert 3 == 4", "def test_a():\n    assert add(1, 2) == 4\n", "import x\n"},
      {"KeyError: 'name'", "def test_b():\n    d = {}\n    d['name']\n", "import y\n"},
      {"TimeoutError: connect to 10.0.0.1:5432", "def test_c():\n    connect()\n", ""},
  };
  HashedTfidfEmbedder fitted;
  fitted.fit_begin();
  for (const auto& d : docs) fitted.fit_add(fitted.count_terms(d));
  fitted.fit_end();
  ASSERT_TRUE(fitted.save(dir / "df.bin"));
  HashedTfidfEmbedder loaded;
  ASSERT_TRUE(loaded.load(dir / "df.bin"));
  const std::vector<EmbedText> queries = {docs[0], docs[2], {"ValueError: unseen words only", "def test_z(): q()", ""}};
  auto want = fitted.embed(queries), got = loaded.embed(queries);
  ASSERT_TRUE(want && got);
  EXPECT_EQ(*got, *want);  // bit-identical
  ASSERT_TRUE(loaded.save(dir / "again.bin"));
  EXPECT_EQ(testing::slurp(dir / "again.bin"), testing::slurp(dir / "df.bin"));
  // fit_end over a loaded table digests the whole table, not an empty one.
  HashedTfidfEmbedder ended;
  ASSERT_TRUE(ended.load(dir / "df.bin"));
  ended.fit_end();
  EXPECT_EQ(ended.identity(), fitted.identity());
  EXPECT_EQ(*ended.embed(queries), *want);

  // Fitting on after a load: the same statistics as fitting everything in one go.
  const EmbedText more{"IndexError: list index out of range", "def test_d():\n    [][0]\n", ""};
  loaded.fit_add(loaded.count_terms(more));
  loaded.fit_end();
  HashedTfidfEmbedder all;
  all.fit_begin();
  for (const auto& d : docs) all.fit_add(all.count_terms(d));
  all.fit_add(all.count_terms(more));
  all.fit_end();
  EXPECT_EQ(loaded.identity(), all.identity());
  EXPECT_EQ(*loaded.embed(queries), *all.embed(queries));

  // Two records swapped: refused, named.
  std::string bytes = testing::slurp(dir / "df.bin");
  ASSERT_GE(bytes.size(), 32u + 2 * 12);
  std::string first = bytes.substr(32, 12);
  bytes.replace(32, 12, bytes.substr(44, 12));
  bytes.replace(44, 12, first);
  testing::write_file(dir / "swapped.bin", bytes);
  HashedTfidfEmbedder bad;
  auto refused = bad.load(dir / "swapped.bin");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("swapped.bin: damaged"), std::string::npos) << refused.error().message;
  // A count that does not fit the file (and would overflow if multiplied) is refused as truncated, not read.
  std::string huge = testing::slurp(dir / "df.bin");
  const uint64_t count = (uint64_t{1} << 62) + 1;
  std::memcpy(huge.data() + 24, &count, 8);
  testing::write_file(dir / "huge.bin", huge);
  EXPECT_FALSE(bad.load(dir / "huge.bin"));
}

TEST(chunk_text, makes_overlapping_windows_over_long_text) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "word" + std::to_string(i) + "\n";
  const auto chunks = chunk_text(text, 100, 10);
  ASSERT_GT(chunks.size(), 10u);
  for (const auto& c : chunks) EXPECT_LE(std::count(c.begin(), c.end(), '\n'), 100);
  // Consecutive chunks overlap: the last token of one reappears at the start of the next.
  const std::string last_of_first = chunks[0].substr(chunks[0].rfind("word", chunks[0].size() - 2));
  EXPECT_NE(chunks[1].find(last_of_first), std::string::npos);
  EXPECT_EQ(chunk_text("short text", 100, 10).size(), 1u);
}

TEST(OpenAiEmbedder, embeds_through_the_real_protocol_with_chunking_and_pooling) {
  std::atomic<int> requests{0}, inputs{0};
  EmbeddingServer server([&](const httplib::Request& req, httplib::Response& res) {
    EXPECT_EQ(req.get_header_value("Authorization"), "Bearer sk-test");
    answer_embeddings(req, res, requests, inputs);
  });
  OpenAiEmbedderOptions o;
  o.base_url = server.url();
  o.model = "bge-m3";
  o.api_key = "sk-test";
  o.chunk_tokens = 50;
  OpenAiEmbedder e(o);
  std::string long_code;
  for (int i = 0; i < 200; ++i) long_code += "assert value == " + std::to_string(i) + "\n";
  auto v = e.embed({{"E   short", "x = 1\n", ""}, {"E   long", long_code, ""}});
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ(e.dimension(), 4u);
  EXPECT_NEAR(dot((*v)[1], (*v)[1]), 1.0, 1e-5);
  EXPECT_GT(inputs.load(), 2);  // the long input was chunked
}

TEST(OpenAiEmbedder, reports_http_errors_bad_answers_and_unreachable_servers_with_the_endpoint) {
  EmbeddingServer failing([](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content("<html>oops</html>", "text/html");
  });
  OpenAiEmbedderOptions o;
  o.base_url = failing.url();
  o.retry.initial_delay_s = 0.01;  // a 500 is retried (http_client.h); quickly here
  o.retry.max_retries = 2;
  auto err = OpenAiEmbedder(o).embed({{"E", "x", ""}});
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().message.find("POST " + failing.url() + "/embeddings: HTTP 500"), std::string::npos);

  EmbeddingServer garbage([](const httplib::Request&, httplib::Response& res) { res.set_content("{\"data\": [", "application/json"); });
  o.base_url = garbage.url();
  auto bad = OpenAiEmbedder(o).embed({{"E", "x", ""}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not JSON"), std::string::npos);

  o.base_url = "http://127.0.0.1:1/v1";
  o.http.connect_timeout_ms = 2000;
  auto refused = OpenAiEmbedder(o).embed({{"E", "x", ""}});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("POST http://127.0.0.1:1/v1/embeddings"), std::string::npos);
}

TEST(OpenAiEmbedder, secrets_are_redacted_before_texts_leave_and_5xx_is_retried) {
  std::atomic<int> requests{0}, inputs{0};
  std::mutex mu;
  std::string seen;
  EmbeddingServer server([&](const httplib::Request& req, httplib::Response& res) {
    if (requests.load() == 0) {
      ++requests;
      res.status = 503;
      return;
    }
    {
      std::lock_guard lock(mu);
      seen += req.body;
    }
    answer_embeddings(req, res, requests, inputs);
  });
  OpenAiEmbedderOptions o;
  o.base_url = server.url();
  o.retry.initial_delay_s = 0.01;
  o.redactor = std::make_shared<const Redactor>(*Redactor::make());
  OpenAiEmbedder e(o);
  auto v = e.embed({{"E   401 Unauthorized for token ghp_0123456789abcdefghijABCDEFGHIJ012345",
                     "def test_login():\n    login('admin', password='Tr0ub4dor&3')\n", ""}});
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(requests.load(), 2);
  EXPECT_EQ(seen.find("ghp_0123456789"), std::string::npos);
  EXPECT_EQ(seen.find("Tr0ub4dor"), std::string::npos);
  EXPECT_NE(seen.find("REDACTED"), std::string::npos);
  EXPECT_EQ(e.redacted(), 2u);
}

}  // namespace spark::SPARK_TEST_FILE_ID
