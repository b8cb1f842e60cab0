// The number of rows of one of the store's tables (`kb status`, and `kb copy`'s check that every row arrived).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "store/database.h"

namespace spark {

Result<int64_t> count_rows(Database& db, const std::string& table);

}  // namespace spark
