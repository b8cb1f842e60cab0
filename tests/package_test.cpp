// scripts/package.sh: the Debian package of the binary under test, read back with dpkg-deb and installed with dpkg
// into a private root (over an older version of itself); the fresh-root install with apt-get is
// scripts/check_fresh_debian.sh's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_util.h"

namespace spark::SPARK_TEST_FILE_ID {
namespace {

using testing::git;
using testing::RunResult;
using testing::TempDir;
using testing::write_file;

RunResult run(const std::string& program, const std::vector<std::string>& args, const TempDir& dir) {
  return testing::run_program(program, args, dir.path());
}

// dpkg with its own database and root under `dir` (no maintainer scripts: none is needed by the package).
RunResult private_dpkg(const TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> all = {"--admindir=" + (dir / "admin").string(), "--instdir=" + (dir / "root").string(),
                                  "--force-not-root", "--force-depends", "--log=/dev/null"};
  all.insert(all.end(), args.begin(), args.end());
  return run("/usr/bin/dpkg", all, dir);
}

TEST(package, the_deb_holds_the_binary_man_page_hooks_and_plugin_and_installs_over_an_older_version) {
  TempDir dir;
  const std::string build = std::filesystem::path(SPARK_BINARY).parent_path().string();
  auto made =
      run("/bin/bash", {std::string(SPARK_SOURCE_DIR) + "/scripts/package.sh", (dir / "out").string(), build}, dir);
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err << "(scripts/setup.sh --tests installs dpkg-dev and help2man)";
  const std::string version = testing::run_spark({"--version"}, dir.path()).out.substr(6, 5);  // "spark 0.1.0"
  std::string deb;
  for (const auto& e : std::filesystem::directory_iterator(dir / "out")) deb = e.path().string();
  ASSERT_TRUE(deb.ends_with("_amd64.deb") || deb.ends_with(".deb")) << deb;
  EXPECT_NE(deb.find("spark_" + version + "_"), std::string::npos) << deb;
  // Its fields: the version the binary says, and Depends from the libraries the binary links (libc6 at least).
  auto fields = run("/usr/bin/dpkg-deb", {"-f", deb, "Package", "Version", "Depends"}, dir);
  ASSERT_EQ(fields.exit_code, 0) << fields.err;
  EXPECT_NE(fields.out.find("Package: spark\n"), std::string::npos) << fields.out;
  EXPECT_NE(fields.out.find("Version: " + version + "\n"), std::string::npos) << fields.out;
  EXPECT_NE(fields.out.find("Depends: "), std::string::npos) << fields.out;
  EXPECT_NE(fields.out.find("libc6 (>= "), std::string::npos) << fields.out;      // a sanitizer build links more
  EXPECT_NE(fields.out.find("libcpp-httplib"), std::string::npos) << fields.out;  // the plugin's
  for (const char* opened : {"libgit2", "libcurl", "libpq", "libsimdjson"})  // opened with dlopen: no linker names them
    EXPECT_NE(fields.out.find(opened), std::string::npos) << opened << "\n" << fields.out;
  // Its files, and a binary that runs from them.
  auto extracted = run("/usr/bin/dpkg-deb", {"-x", deb, (dir / "x").string()}, dir);
  ASSERT_EQ(extracted.exit_code, 0) << extracted.err;
  for (const char* f :
       {"usr/bin/spark", "usr/share/man/man1/spark.1.gz", "usr/share/spark/hooks/ci-post-failure.sh",
        "usr/share/spark/integrations/pytest/pytest_spark.py", "usr/share/spark/schemas/localize.schema.json",
        "usr/share/doc/spark/README.md", "usr/share/doc/spark/docs/MINER.md", "usr/lib/spark/spark-http.so",
        "usr/lib/python3/dist-packages/pytest_spark.py"})
    EXPECT_TRUE(std::filesystem::exists(dir / "x" / f)) << f;
  EXPECT_TRUE((std::filesystem::status(dir / "x/usr/share/spark/hooks/ci-post-failure.sh").permissions() &
               std::filesystem::perms::others_exec) != std::filesystem::perms::none);
  // Debian's pytest loads the plugin from the package's dist-packages by its pytest11 entry point (no -p, no pip):
  // `pytest --spark` as docs/PYTEST_PLUGIN.md says for Debian 12.
  {
    TempDir project;
    git(project, "init");
    write_file(project / "tests" / "test_a.py", "def test_add():\n    total = 2 + 2\n    assert total == 5\n");
    git(project, "add -A");
    git(project, "commit -m a");
    auto session = testing::run_program("/usr/bin/env",
                                        {"PYTHONPATH=" + (dir / "x/usr/lib/python3/dist-packages").string(),
                                         "SPARK=" + (dir / "x/usr/bin/spark").string(), "SPARK_KB=", "/usr/bin/python3",
                                         "-B", "-m", "pytest", "-p", "no:cacheprovider", "--spark"},
                                        project.path());
    EXPECT_EQ(session.exit_code, 1) << session.out << session.err;
    EXPECT_NE(session.out.find("1. tests/test_a.py:3  assert total == 5"), std::string::npos)
        << session.out << session.err;
  }
  // The man page is the binary's own help: the main page and every subcommand's.
  auto man = run("/bin/sh", {"-c", "zcat '" + (dir / "x/usr/share/man/man1/spark.1.gz").string() + "'"}, dir);
  for (const char* sub : {"import", "export", "index", "localize", "config", "mine", "record", "audit", "failures",
                          "kb", "hooks", "eval"})
    EXPECT_NE(man.out.find(std::string(".SS spark ") + sub + "\n"), std::string::npos) << sub;
  EXPECT_NE(man.out.find("--junit TEXT:FILE REQUIRED"), std::string::npos);  // record's own help
  EXPECT_EQ(man.out.find(build), std::string::npos) << "the build folder's path leaked into the man page";
  write_file(dir / "tests" / "test_a.py", "def test_add():\n    total = 2 + 2\n    assert total == 5\n");
  write_file(dir / "error.txt", "tests/test_a.py:3: in test_add\n    assert total == 5\nE   assert 4 == 5\n");
  auto localized =
      run((dir / "x/usr/bin/spark").string(),
          {"--kb", (dir / "kb").string(), "localize", "--test", "tests/test_a.py", "--error", "error.txt"}, dir);
  EXPECT_EQ(localized.exit_code, 0) << localized.err;
  EXPECT_NE(localized.out.find("tests/test_a.py:3"), std::string::npos) << localized.out;
  // The installed binary finds its HTTP server plugin in ../lib/spark: `audit serve` prints its address, and stops
  // on Ctrl-C (SIGINT) with exit 0.
  const std::string installed_spark =
      "'" + (dir / "x/usr/bin/spark").string() + "' --kb '" + (dir / "kb").string() + "'";
  auto served = run("/bin/sh",
                    {"-c", installed_spark + " kb init >/dev/null && timeout --preserve-status -s INT 3 " +
                               installed_spark + " audit serve --port 0"},
                    dir);
  EXPECT_EQ(served.exit_code, 0) << served.err;
  EXPECT_TRUE(served.out.starts_with("http://127.0.0.1:")) << served.out << served.err;
  // Installed over an older version of itself: the newer one's files and version win.
  std::filesystem::create_directories(dir / "admin" / "updates");
  std::filesystem::create_directories(dir / "admin" / "info");
  std::filesystem::create_directories(dir / "root");
  write_file(dir / "admin" / "status", "");
  write_file(dir / "admin" / "available", "");
  ASSERT_EQ(run("/usr/bin/dpkg-deb", {"-R", deb, (dir / "old").string()}, dir).exit_code, 0);
  auto control = testing::slurp(dir / "old/DEBIAN/control");
  control.replace(control.find("Version: " + version), 9 + version.size(), "Version: 0.0.1");
  write_file(dir / "old/DEBIAN/control", control);
  write_file(dir / "old/usr/share/doc/spark/OLD-ONLY", "a file only the old version had\n");
  ASSERT_EQ(
      run("/usr/bin/dpkg-deb", {"--root-owner-group", "-b", (dir / "old").string(), (dir / "old.deb").string()}, dir)
          .exit_code,
      0);
  auto old_install = private_dpkg(dir, {"-i", (dir / "old.deb").string()});
  ASSERT_EQ(old_install.exit_code, 0) << old_install.out << old_install.err;
  auto upgrade = private_dpkg(dir, {"-i", deb});
  ASSERT_EQ(upgrade.exit_code, 0) << upgrade.out << upgrade.err;
  auto installed = run("/usr/bin/dpkg-query", {"--admindir=" + (dir / "admin").string(), "-W", "spark"}, dir);
  EXPECT_EQ(installed.out, "spark\t" + version + "\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "root/usr/share/doc/spark/OLD-ONLY"));
  EXPECT_EQ(run((dir / "root/usr/bin/spark").string(), {"--version"}, dir).out, "spark " + version + "\n");
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
