// Errors are values in the library (ccache, LevelDB); only the command line turns them into messages and exit codes.
// Contract: plain value types, no shared state; the library returns them instead of throwing.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace spark {

// A failure, with a message that names its object: "cases.jsonl:12: faulty line 40 is blank".
struct Error {
  std::string message;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(std::string message) { return std::unexpected(Error{std::move(message)}); }

// Returns a failed Result's or Status's error from the enclosing function, as ccache's TRY does (util/expected.hpp):
//   auto text = read_file(path);
//   TRY(text);
// or TRY(write_file_atomic(path, bytes)); the expression is evaluated once. The enclosing function returns a Result
// or a Status of any value type. Variadic, so that a lambda's commas need no parentheses:
//   TRY(st->each_row([&] { out.push_back({st->text(0), st->text(1)}); }));
#define TRY(...)                                                                                       \
  do {                                                                                                 \
    if (auto&& try_result_ = (__VA_ARGS__); !try_result_) return std::unexpected(try_result_.error()); \
  } while (false)

// Prefix an error's message with context ("KB .spark/kb.sqlite: ").
inline Error with_context(const std::string& context, Error e) {
  e.message = context + e.message;
  return e;
}

}  // namespace spark
