#include "formats/redact.h"

#include <gtest/gtest.h>

#include "base/text.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

std::string redacted(std::string text, std::map<std::string, size_t>* counts = nullptr) {
  static const Redactor r = *Redactor::make();
  std::map<std::string, size_t> c;
  r.redact(text, counts ? *counts : c);
  return text;
}

TEST(redact, common_credentials_are_replaced) {
  const std::vector<std::pair<std::string, std::string>> planted = {
      {"aws-access-key", "key = 'AKIAIOSFODNN7EXAMPLE'"},
      {"github-token", "GH=ghp_0123456789abcdefghijABCDEFGHIJ012345"},
      {"gitlab-token", "token glpat-abcdefghij0123456789"},
      {"openai-key", "client = OpenAI(api='sk-proj-abcdefghijklmnopqrstuvwxyz012345')"},
      {"bearer-token", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.0123456789"},
      {"connection-string-password", "url = 'postgresql://app:s3cr3tpass@db.internal:5432/app'"},
      {"secret-assignment-quoted", "password = \"hunter22\""},
      {"secret-assignment", "DB_PASSWORD=hunter22"},
  };
  for (const auto& [rule, line] : planted) {
    std::map<std::string, size_t> counts;
    const std::string out = redacted(line, &counts);
    EXPECT_NE(out.find("[REDACTED:"), std::string::npos) << rule << ": " << out;
    for (const char* secret : {"AKIAIOSFODNN7EXAMPLE", "ghp_0123", "glpat-abc", "sk-proj", "abcdefghijklmnopqrstuvwxyz.01",
                               "s3cr3tpass", "hunter22"})
      EXPECT_EQ(out.find(secret), std::string::npos) << rule << ": " << out;
  }
}

TEST(redact, private_key_blocks_keep_their_line_count) {
  const std::string text = "a = 1\nKEY = '''-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nx9f8s7d6f5g4h3j2\n"
                           "-----END RSA PRIVATE KEY-----'''\nassert a == 2\n";
  std::map<std::string, size_t> counts;
  const std::string out = redacted(text, &counts);
  EXPECT_EQ(split_lines(out).size(), split_lines(text).size());
  EXPECT_EQ(out.find("MIIEowIBAAKCAQEA"), std::string::npos);
  EXPECT_EQ(split_lines(out)[5], "assert a == 2");
  EXPECT_EQ(counts["private-key"], 1u);
}

TEST(redact, code_that_merely_names_secrets_is_left_alone) {
  for (const std::string code : {"password = get_password()", "token = response.json()['token']",
                                 "api_key = settings.api_key", "if token:", "secret = None", "def test_password_reset(self):",
                                 "token: str = make()", "assert user.password == expected"})
    EXPECT_EQ(redacted(code), code);
}

TEST(redact, documentation_hosts_are_examples_not_secrets) {
  // Credentials given for example.com/.net/.org, the reserved names and loopback: test data, left as they are.
  for (const std::string code :
       {"url = 'postgresql://app:s3cr3tpass@localhost:5432/app'", "get('https://user:hunter22@example.com/x')",
        "DSN = 'mysql://root:rootpw@db.example.org/shop'", "'redis://default:letmein@127.0.0.1:6379/0'",
        "u = 'ftp://anon:guest@files.test/pub'", "API_TOKEN=localhost", "password: localhost"})
    EXPECT_EQ(redacted(code), code);
  // The same credentials for a real host are redacted; a host merely named like one is not a documentation host.
  EXPECT_EQ(redacted("url = 'postgresql://app:s3cr3tpass@db.internal:5432/app'"),
            "url = 'postgresql://app:[REDACTED:connection-string-password]@db.internal:5432/app'");
  EXPECT_NE(redacted("get('https://user:hunter22@example.com.evil.io/x')").find("[REDACTED:"), std::string::npos);
  EXPECT_NE(redacted("get('https://user:hunter22@myexample.com/x')").find("[REDACTED:"), std::string::npos);
  EXPECT_TRUE(documentation_host("EXAMPLE.COM."));
  EXPECT_TRUE(documentation_host("api.localhost"));
  EXPECT_FALSE(documentation_host("example.co"));
  EXPECT_FALSE(documentation_host(""));
}

TEST(redact, user_rules_extend_and_bad_ones_are_named) {
  auto r = Redactor::make({{"employee-id", R"(\bEMP-\d{6}\b)"}, {"any-url-password", R"(://[^:/@\s]+:(?<secret>[^@\s]+)@)"}});
  ASSERT_TRUE(r);
  // A user's rule applies also where the built-in ones leave a documentation host's credential alone.
  std::string t = "user EMP-123456 failed at 'postgresql://app:s3cr3tpass@localhost/app'";
  std::map<std::string, size_t> counts;
  EXPECT_EQ(r->redact(t, counts), 2u);
  EXPECT_EQ(t, "user [REDACTED:employee-id] failed at 'postgresql://app:[REDACTED:any-url-password]@localhost/app'");
  auto bad = Redactor::make({{"", "([unclosed"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("redaction rule #1"), std::string::npos);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
