// base/shared_library.h: a library opened when first needed, its functions bound into a typed table.
#include "base/shared_library.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

namespace spark::SPARK_TEST_FILE_ID {
namespace {

#define TEST_SQLITE_FUNCTIONS(X) X(sqlite3_libversion) X(sqlite3_complete)

struct Sqlite {
  TEST_SQLITE_FUNCTIONS(SPARK_LIBRARY_FIELD)
};

TEST(shared_library, a_library_is_opened_and_its_functions_called_through_the_table) {
  auto opened = SharedLibrary::open("libsqlite3.so.0", "SQL");
  ASSERT_TRUE(opened) << opened.error().message;
  SharedLibrary& lib = *opened;
  Sqlite table;
  TEST_SQLITE_FUNCTIONS(SPARK_LIBRARY_BIND)
  ASSERT_TRUE(lib.complete()) << lib.complete().error().message;
  EXPECT_STREQ(table.sqlite3_libversion(), SQLITE_VERSION);
  EXPECT_EQ(table.sqlite3_complete("SELECT 1;"), 1);
  EXPECT_EQ(table.sqlite3_complete("SELECT 'unclosed"), 0);
}

TEST(shared_library, a_missing_library_is_an_error_that_names_it_and_what_it_is_for) {
  auto opened = SharedLibrary::open("libspark-no-such-library.so.7", "the test's imaginary feature");
  ASSERT_FALSE(opened);
  const std::string& m = opened.error().message;
  EXPECT_NE(m.find("libspark-no-such-library.so.7 (the test's imaginary feature) cannot be loaded"), std::string::npos)
      << m;
  EXPECT_NE(m.find("install the package"), std::string::npos) << m;
}

TEST(shared_library, functions_an_older_library_lacks_are_named) {
  auto opened = SharedLibrary::open("libsqlite3.so.0", "SQL");
  ASSERT_TRUE(opened) << opened.error().message;
  void (*absent)() = nullptr;
  void (*also_absent)() = nullptr;
  opened->bind(absent, "spark_no_such_function");
  opened->bind(also_absent, "spark_nor_this_one");
  auto ok = opened->complete();
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.error().message,
            "libsqlite3.so.0 (SQL) lacks spark_no_such_function, spark_nor_this_one: an older version than spark "
            "was built against");
  EXPECT_EQ(absent, nullptr);
}

TEST(shared_library, load_library_table_fills_a_table_or_says_what_is_missing) {
  auto api = load_library_table<Sqlite>("libsqlite3.so.0", "SQL", [](SharedLibrary& lib, Sqlite& table) {
    TEST_SQLITE_FUNCTIONS(SPARK_LIBRARY_BIND)
  });
  ASSERT_TRUE(api) << api.error().message;
  EXPECT_EQ(api->sqlite3_complete("SELECT 1;"), 1);
  auto missing = load_library_table<Sqlite>("libspark-no-such-library.so.7", "nothing",
                                            [](SharedLibrary&, Sqlite&) { ADD_FAILURE() << "bound without a library"; });
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("libspark-no-such-library.so.7 (nothing) cannot be loaded"),
            std::string::npos);
}

}  // namespace
}  // namespace spark::SPARK_TEST_FILE_ID
