// An enum's names in one table: value → name, name → value and the list of names all read it, where each enum had a
// switch, a parse loop and a names() of its own. A table lists every value once, in the enum's order (the order
// names_of gives); `static_assert(std::size(table) == ...)` beside it keeps it whole as the enum grows.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

template <class E>
struct Named {
  E value;
  std::string_view name;
};

// The value's name; the first entry's for a value the table lacks.
template <class E, size_t N>
constexpr std::string_view name_of(const Named<E> (&table)[N], E value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return table[0].name;
}

// The value named exactly `name`, or nullopt.
template <class E, size_t N>
constexpr std::optional<E> value_named(const Named<E> (&table)[N], std::string_view name) {
  for (const auto& entry : table)
    if (entry.name == name) return entry.value;
  return std::nullopt;
}

// Every name, in the table's order.
template <class E, size_t N>
std::vector<std::string> names_of(const Named<E> (&table)[N]) {
  std::vector<std::string> out;
  out.reserve(N);
  for (const auto& entry : table) out.emplace_back(entry.name);
  return out;
}

// "a, b or c": the names for a message.
template <class E, size_t N>
std::string names_text(const Named<E> (&table)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) out.append(i == 0 ? "" : i + 1 == N ? " or " : ", ").append(table[i].name);
  return out;
}

}  // namespace spark
