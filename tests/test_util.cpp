#include "test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "formats/case.h"

extern char** environ;

namespace spark::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device rd;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "spark";
  for (auto& c : name)
    if (c == '/') c = '_';
  path_ = fs::temp_directory_path() / ("spark-test-" + name + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info && info->result()->Failed()) {
    std::fprintf(stderr, "kept test folder %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replace_in_file(const fs::path& file, const std::string& from, const std::string& to) {
  std::string text = slurp(file);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << file;
  text.replace(at, from.size(), to);
  write_file(file, text);
}

RunResult run_spark(const std::vector<std::string>& args, const fs::path& cwd, const std::string& input) {
  return run_program(SPARK_BINARY, args, cwd, input);
}

RunResult run_pytest(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> all = {"-B", "-m", "pytest", "-p", "no:cacheprovider"};
  all.insert(all.end(), args.begin(), args.end());
  return run_program("/usr/bin/python3", all, cwd);
}

RunResult run_program(const std::string& program, const std::vector<std::string>& args, const fs::path& cwd,
                      const std::string& input) {
  TempDir io;
  const fs::path in = io / "stdin", out = io / "stdout", err = io / "stderr";
  write_file(in, input);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> argv_s = {program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  RunResult r;
  if (posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    r.err = "cannot start " + program;
    return r;
  }
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  r.peak_rss_kib = usage.ru_maxrss;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> unsafe_log_lines(const std::string& text, bool own_annotations) {
  // A JSON document (--format json, sarif) is data, kept exact (docs/FORMATS.md): "##[" inside its strings stays.
  const size_t first = text.find_first_not_of(" \n");
  const bool json = first != std::string::npos && (text[first] == '{' || text[first] == '[');
  std::vector<std::string> unsafe;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::string opening = line.substr(std::min(line.size(), line.find_first_not_of(" \t")));
    const bool own = own_annotations && (opening.starts_with("::warning file=") || opening.starts_with("::warning title="));
    bool control = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      control = control || (c < 0x20 && c != '\t') || c == 0x7f ||
                (c == 0xc2 && i + 1 < line.size() && static_cast<unsigned char>(line[i + 1]) >= 0x80 &&
                 static_cast<unsigned char>(line[i + 1]) <= 0x9f);
    }
    if (control || (opening.starts_with("::") && !own) || (!json && line.find("##[") != std::string::npos))
      unsafe.push_back(line);
  }
  return unsafe;
}

nlohmann::json sample_case(const std::string& id, const std::string& content, int faulty_line, const std::string& error,
                           const std::string& time) {
  return {{"id", id},
          {"project", "demo/project"},
          {"test_id", "tests/test_x.py::test_a"},
          {"language", "python"},
          {"failure_time", time},
          {"error_message", error},
          {"files", {{{"path", "tests/test_x.py"}, {"content", content}}}},
          {"faulty_lines", {{{"path", "tests/test_x.py"}, {"line", faulty_line}}}},
          {"source", "seeded"}};
}

nlohmann::json numbered_case(int i) {
  const std::string n = std::to_string(i);
  const std::string expected = std::to_string(2 * i + 1);
  const std::string code =
      "import shapes\n\n\ndef test_area_" + n + "():\n    w = " + n +
      "\n    shape = {'w': w, 'h': 2}\n    result = shapes.area(shape)\n    assert result == " + expected + "\n";
  nlohmann::json j = sample_case("area-" + n, code, i % 2 == 0 ? 8 : 5,
                                 "tests/test_x.py:8: in test_area_" + n + "\n    assert result == " + expected +
                                     "\nE   assert " + std::to_string(2 * i) + " == " + expected,
                                 format_iso8601(1767225600 + int64_t{i} * 60));
  j["test_id"] = "tests/test_x.py::test_area_" + n;
  return j;
}

fs::path dev_data() {
  const fs::path p = SPARK_DEV_DATA;
  std::error_code ec;
  return fs::exists(p / "MANIFEST.md", ec) ? fs::canonical(p) : fs::path();
}

void git(const TempDir& dir, const std::string& args, const std::string& date) {
  const std::string cmd = "cd '" + dir.path().string() + "' && GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x GIT_COMMITTER_NAME=t " +
                          "GIT_COMMITTER_EMAIL=t@x GIT_AUTHOR_DATE=" + date + " GIT_COMMITTER_DATE=" + date +
                          " git -c init.defaultBranch=main -c commit.gpgsign=false " + args + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::string head_sha(const TempDir& dir) {
  const std::string cmd = "git -C '" + dir.path().string() + "' rev-parse HEAD";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[64] = {0};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  std::string sha(buf, n);
  while (!sha.empty() && (sha.back() == '\n' || sha.back() == '\r')) sha.pop_back();
  return sha;
}

std::string day(int d) { return format_iso8601(1769904000 + int64_t{d} * 86400); }

void commit(const TempDir& dir, const std::string& message, int d) {
  git(dir, "add -A");
  git(dir, "commit -q -m '" + message + "'", day(d));
}

std::vector<std::string> fix_history(const TempDir& dir, const std::vector<int>& sizes) {
  git(dir, "init");
  std::string content;
  for (int i = 0; i < 40; ++i) content += "x" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  write_file(dir / "tests" / "test_m.py", content);
  git(dir, "add -A");
  git(dir, "commit -m base", day(1));
  std::vector<std::string> out;
  for (size_t n = 0; n < sizes.size(); ++n) {
    const std::string test = "tests/test_m.py::test_" + std::to_string(n);
    std::string lines = "{\"commit\": \"" + head_sha(dir) + "\", \"test_id\": \"" + test +
                        "\", \"outcome\": \"failed\", \"message\": \"E boom " + std::to_string(n) + "\"}\n";
    for (int l = 0; l < sizes[n]; ++l) {
      const std::string from = "x" + std::to_string(l) + " = ";
      content.insert(content.find(from) + from.size(), "1 + ");
    }
    write_file(dir / "tests" / "test_m.py", content);
    git(dir, "commit -am fix" + std::to_string(n), day(static_cast<int>(n) + 2));
    lines += "{\"commit\": \"" + head_sha(dir) + "\", \"test_id\": \"" + test + "\", \"outcome\": \"passed\"}\n";
    out.push_back(lines);
  }
  return out;
}

void run_sql(const fs::path& db_file, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_file.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message << "\n" << statements;
}

}  // namespace spark::testing
