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

// Prefix an error's message with context ("KB .spark/kb.sqlite: ").
inline Error with_context(const std::string& context, Error e) {
  e.message = context + e.message;
  return e;
}

}  // namespace spark
