// The audit in a browser, request by request (miner/audit_site.h): who gets in, what each page shows, what each
// decision stores. The real server, clicked in headless Chromium, is tests/audit_browser_check.py.
#include "miner/audit_site.h"

#include <gtest/gtest.h>

#include "store/knowledge_base.h"
#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::fix_history;
using testing::run_spark;
using testing::TempDir;
using testing::write_file;

const std::string kToken = "0123456789abcdef0123456789abcdef";

// Twelve one-line fixes and a thirty-line rewrite, mined: the rewrite is quarantined. Its message holds HTML.
struct Audited {
  TempDir dir;
  std::unique_ptr<KnowledgeBase> kb;
  std::unique_ptr<MiningStore> store;
  std::unique_ptr<AuditSite> site;
  std::string quarantined;  // its case id

  Audited() {
    std::vector<int> sizes(12, 1);
    sizes.push_back(30);
    std::string outcomes;
    for (const auto& o : fix_history(dir, sizes)) outcomes += o;
    const std::string boom = "E boom 12";
    outcomes.replace(outcomes.find(boom), boom.size(), "E <img src=x onerror=alert(1)> & 12");
    write_file(dir / "o.jsonl", outcomes);
    auto r = run_spark({"mine", "--outcomes", "o.jsonl"}, dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    kb = std::move(*KnowledgeBase::open(dir / ".spark", false));
    store = std::make_unique<MiningStore>(*kb);
    auto list = store->failures({FailureStatus::quarantined});
    EXPECT_TRUE(list && list->size() == 1);
    quarantined = list->front().case_id;
    site = std::make_unique<AuditSite>(*store, AuditSiteOptions{kToken, 4711, "Ann <ann@x>", 3.0, "kb"});
  }

  HttpReply get(const std::string& path, const std::string& host = "127.0.0.1:4711") {
    HttpRequest r;
    r.method = "GET";
    r.path = path.substr(0, path.find('?'));
    // "?a=b": the query as the server parses it (no escapes here).
    if (const size_t q = path.find('?'); q != std::string::npos) {
      const std::string query = path.substr(q + 1);
      r.params.emplace_back(query.substr(0, query.find('=')), query.substr(query.find('=') + 1));
    }
    r.headers = {{"host", host}};
    return site->handle(r);
  }
  HttpReply post(const std::string& path, std::vector<std::pair<std::string, std::string>> params,
                 const std::string& origin = "http://127.0.0.1:4711") {
    HttpRequest r;
    r.method = "POST";
    r.path = path;
    r.params = std::move(params);
    r.headers = {{"host", "127.0.0.1:4711"}};
    if (!origin.empty()) r.headers.emplace_back("origin", origin);
    return site->handle(r);
  }
  StoredFailure case_now() { return *store->failure_by_case(quarantined); }
  std::string base() const { return "/" + kToken; }
};

std::string header(const HttpReply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "";
}

TEST(audit_site, only_the_token_holder_on_the_servers_own_address_gets_in) {
  Audited a;
  EXPECT_EQ(a.get(a.base() + "/").status, 200);
  EXPECT_EQ(a.get("/").status, 403);
  EXPECT_EQ(a.get("/" + std::string(32, '0') + "/").status, 403);
  EXPECT_EQ(a.get(a.base() + "x/").status, 403);  // the token's prefix is no token
  EXPECT_EQ(a.get(a.base().substr(0, 20)).status, 403);
  // DNS rebinding: another name for this address.
  EXPECT_EQ(a.get(a.base() + "/", "evil.example:4711").status, 403);
  EXPECT_EQ(a.get(a.base() + "/", "localhost:4711").status, 200);
  EXPECT_EQ(a.get(a.base() + "/", "127.0.0.1:9000").status, 200);  // an SSH tunnel's local port
  EXPECT_EQ(a.get(a.base() + "/", "127.0.0.1.evil.example:4711").status, 403);
  EXPECT_EQ(a.get(a.base() + "/", "").status, 403);
  // The bare token redirects to its folder.
  auto bare = a.get(a.base());
  EXPECT_EQ(bare.status, 303);
  EXPECT_EQ(header(bare, "Location"), a.base() + "/");
  // Every page forbids loading from elsewhere.
  EXPECT_NE(header(a.get(a.base() + "/"), "Content-Security-Policy").find("default-src 'none'"), std::string::npos);
}

TEST(audit_site, a_decision_needs_post_and_the_servers_own_origin) {
  Audited a;
  const std::string accept = a.base() + "/case/" + a.quarantined + "/accept";
  const std::string seen = decision_state(a.case_now());
  auto by_get = a.get(accept);
  EXPECT_EQ(by_get.status, 405);
  EXPECT_EQ(header(by_get, "Allow"), "POST");
  EXPECT_EQ(a.post(accept, {{"seen", seen}}, "http://evil.example").status, 403);
  EXPECT_EQ(a.post(accept, {{"seen", seen}}, "null").status, 403);
  HttpRequest cross;
  cross.method = "POST";
  cross.path = accept;
  cross.params = {{"seen", seen}};
  cross.headers = {{"host", "127.0.0.1:4711"}, {"sec-fetch-site", "cross-site"}};
  EXPECT_EQ(a.site->handle(cross).status, 403);
  EXPECT_EQ(a.post(a.base() + "/", {}).status, 405);  // pages are read, not posted
  EXPECT_EQ(a.case_now().status, FailureStatus::quarantined);
  // A client that sends no Origin (curl) with the token is let in.
  EXPECT_EQ(a.post(accept, {{"seen", seen}}, "").status, 303);
  EXPECT_EQ(a.case_now().status, FailureStatus::accepted);
}

TEST(audit_site, pages_show_the_rule_the_diff_and_html_as_text) {
  Audited a;
  auto index = a.get(a.base() + "/");
  EXPECT_NE(index.body.find("Quarantine: 1 case"), std::string::npos);
  EXPECT_NE(index.body.find("(over 13 mined cases)"), std::string::npos) << index.body;
  EXPECT_NE(index.body.find(a.quarantined), std::string::npos);
  auto page = a.get(a.base() + "/case/" + a.quarantined);
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("why quarantined"), std::string::npos);
  EXPECT_NE(page.body.find("E &lt;img src=x onerror=alert(1)&gt; &amp; 12"), std::string::npos);
  EXPECT_EQ(page.body.find("<img"), std::string::npos);
  EXPECT_EQ(page.body.find("<script"), std::string::npos);
  // A checkbox per mined faulty line, none ticked yet; the forms carry the state shown.
  size_t boxes = 0;
  for (size_t at = 0; (at = page.body.find("type=checkbox name=keep form='trim'", at)) != std::string::npos; ++at)
    ++boxes;
  EXPECT_EQ(boxes, 30u);
  EXPECT_EQ(page.body.find(" checked"), std::string::npos);
  EXPECT_NE(page.body.find("name=seen value='quarantined'"), std::string::npos);
  auto cases = a.get(a.base() + "/cases");
  EXPECT_NE(cases.body.find("labelled (12)"), std::string::npos) << cases.body;
  EXPECT_NE(cases.body.find("Mined cases: 13"), std::string::npos);
  EXPECT_NE(a.get(a.base() + "/cases?status=quarantined").body.find("Mined cases: 1"), std::string::npos);
  EXPECT_EQ(a.get(a.base() + "/failures").status, 200);
  EXPECT_EQ(a.get(a.base() + "/nothing").status, 404);
}

TEST(audit_site, an_unknown_case_is_404_and_changes_nothing) {
  Audited a;
  EXPECT_EQ(a.get(a.base() + "/case/no-such-case").status, 404);
  EXPECT_EQ(a.post(a.base() + "/case/no-such-case/accept", {{"seen", "quarantined"}}).status, 404);
  // A unique prefix names a case on the command line; a decision names it whole.
  EXPECT_EQ(a.post(a.base() + "/case/" + a.quarantined.substr(0, 8) + "/accept", {{"seen", "quarantined"}}).status,
            404);
  EXPECT_EQ(a.case_now().status, FailureStatus::quarantined);
}

TEST(audit_site, trim_keeps_the_ticked_lines_and_refuses_others) {
  Audited a;
  const std::string trim = a.base() + "/case/" + a.quarantined + "/trim";
  const std::string seen = decision_state(a.case_now());
  EXPECT_EQ(a.post(trim, {{"seen", seen}}).status, 400);                                  // nothing ticked
  EXPECT_EQ(a.post(trim, {{"seen", seen}, {"keep", "tests/test_m.py:39"}}).status, 400);  // not a mined line
  EXPECT_EQ(a.post(trim, {{"keep", "tests/test_m.py:1"}}).status, 400);                   // the form lost its state
  EXPECT_EQ(a.case_now().status, FailureStatus::quarantined);
  auto r = a.post(trim, {{"seen", seen},
                         {"keep", "tests/test_m.py:1"},
                         {"keep", "tests/test_m.py:2"},
                         {"reason", "only the first two were the fault"}});
  ASSERT_EQ(r.status, 303) << r.body;
  const auto f = a.case_now();
  EXPECT_EQ(f.status, FailureStatus::trimmed);
  EXPECT_EQ(f.labelled->faulty_lines.size(), 2u);
  EXPECT_EQ(f.mined_lines.size(), 30u);
  EXPECT_EQ(f.decided_by, "Ann <ann@x>");
  EXPECT_EQ(f.reason, "only the first two were the fault");
  // The page after: the decision said, two lines outlined, all thirty still choosable.
  auto page = a.get(header(r, "Location"));
  EXPECT_NE(page.body.find("trimmed by Ann &lt;ann@x&gt;"), std::string::npos);
  EXPECT_NE(page.body.find("with 2 faulty lines"), std::string::npos);
  size_t ticked = 0;
  for (size_t at = 0; (at = page.body.find("' checked title=", at)) != std::string::npos; ++at) ++ticked;
  EXPECT_EQ(ticked, 2u);
}

TEST(audit_site, two_people_deciding_one_case_the_first_wins_the_second_is_told) {
  Audited a;
  const std::string seen = decision_state(a.case_now());  // both pages show this state
  auto first = a.post(a.base() + "/case/" + a.quarantined + "/reject", {{"seen", seen}, {"reason", "a refactoring"}});
  ASSERT_EQ(first.status, 303) << first.body;
  auto second = a.post(a.base() + "/case/" + a.quarantined + "/accept", {{"seen", seen}});
  EXPECT_EQ(second.status, 409);
  EXPECT_NE(second.body.find("rejected by Ann &lt;ann@x&gt;"), std::string::npos) << second.body;
  EXPECT_NE(second.body.find("nothing was changed"), std::string::npos);
  const auto f = a.case_now();
  EXPECT_EQ(f.status, FailureStatus::rejected);
  EXPECT_EQ(f.reason, "a refactoring");
  EXPECT_EQ(*a.kb->count(), 12u);  // a rejected case stays out of the knowledge base
  // Decided again from the page that shows the reject: allowed (a decision can be changed).
  EXPECT_EQ(a.post(a.base() + "/case/" + a.quarantined + "/accept", {{"seen", decision_state(f)}}).status, 303);
  EXPECT_EQ(a.case_now().status, FailureStatus::accepted);
  EXPECT_EQ(*a.kb->count(), 13u);
}

TEST(audit_site, a_spark_without_its_http_plugin_says_where_it_looked) {
  TempDir dir;
  // The binary alone in a folder (a hard link: /proc/self/exe names the link's folder), no spark-http.so beside it.
  std::error_code ec;
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_hard_link(SPARK_BINARY, dir / "bin" / "spark", ec);
  if (ec) std::filesystem::copy_file(SPARK_BINARY, dir / "bin" / "spark");
  ASSERT_EQ(testing::run_program((dir / "bin" / "spark").string(), {"--kb", "kb", "kb", "init"}, dir.path()).exit_code,
            0);
  auto r = testing::run_program((dir / "bin" / "spark").string(), {"--kb", "kb", "audit", "serve"}, dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("spark-http.so) is not installed: looked for " + (dir / "bin" / "spark-http.so").string()),
            std::string::npos)
      << r.err;
}

TEST(audit_site, tokens_are_32_hex_digits_and_differ) {
  const std::string a = new_audit_token(), b = new_audit_token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
