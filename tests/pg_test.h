// For tests that need the PostgreSQL test server: skips with the reason when it cannot start, or fails instead when
// SPARK_REQUIRE_POSTGRES is set (scripts/test.sh sets it: CI must run these tests, not skip them).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "pg_cluster.h"

#define SPARK_NEED_POSTGRES()                                                                            \
  do {                                                                                                   \
    if (!::spark::testing::PgCluster::shared()) {                                                        \
      if (std::getenv("SPARK_REQUIRE_POSTGRES"))                                                         \
        FAIL() << "PostgreSQL test server: " << ::spark::testing::PgCluster::unavailable_reason();        \
      GTEST_SKIP() << "no PostgreSQL test server: " << ::spark::testing::PgCluster::unavailable_reason(); \
    }                                                                                                    \
  } while (0)
