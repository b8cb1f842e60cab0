#include "miner/import_change.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "base/text.h"

namespace spark {

namespace {

struct ImportStatement {
  int first = 0, last = 0;
  std::multiset<std::pair<std::string, std::string>> bindings;  // (name, what it is bound to); ("*", module)
};

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The bindings of one import statement's text (its lines joined, comments dropped).
std::multiset<std::pair<std::string, std::string>> bindings_of(const std::string& text) {
  std::multiset<std::pair<std::string, std::string>> out;
  const auto items = [](std::string_view list) {
    std::vector<std::pair<std::string, std::string>> found;  // (dotted name, alias or "")
    size_t from = 0;
    while (from <= list.size()) {
      size_t comma = list.find(',', from);
      if (comma == std::string_view::npos) comma = list.size();
      const std::string_view item = trim(list.substr(from, comma - from));
      from = comma + 1;
      if (item.empty()) continue;
      const size_t as = item.find(" as ");
      if (as == std::string_view::npos)
        found.emplace_back(std::string(item), "");
      else
        found.emplace_back(std::string(trim(item.substr(0, as))), std::string(trim(item.substr(as + 4))));
    }
    return found;
  };
  const std::string_view t = trim(text);
  if (t.starts_with("import ")) {
    for (const auto& [name, alias] : items(t.substr(7)))
      out.emplace(alias.empty() ? name.substr(0, name.find('.')) : alias, name);
  } else if (t.starts_with("from ")) {
    const size_t imp = t.find(" import ");
    if (imp == std::string_view::npos) return out;
    const std::string module(trim(t.substr(5, imp - 5)));
    for (const auto& [name, alias] : items(t.substr(imp + 8)))
      out.emplace(name == "*" ? "*" : (alias.empty() ? name : alias), module + "." + name);
  }
  return out;
}

// The module-level import statements of a file (lines outside every function).
std::vector<ImportStatement> module_imports(std::string_view text, const CodeStructure& s) {
  std::vector<ImportStatement> out;
  const auto lines = split_lines(text);
  for (int line = 1; line <= s.line_count && static_cast<size_t>(line) <= lines.size(); ++line) {
    const auto at = static_cast<size_t>(line) - 1;
    if (at >= s.function.size() || s.function[at] != 0) continue;
    const std::string_view t = trim(lines[at]);
    if (!t.starts_with("import ") && !(t.starts_with("from ") && t.find(" import") != std::string_view::npos)) continue;
    ImportStatement st;
    st.first = line;
    st.last = std::max(line, s.statement_span(line).second);
    st.last = std::min(st.last, static_cast<int>(lines.size()));
    std::string joined;
    for (int l = st.first; l <= st.last; ++l) {
      std::string_view part = lines[static_cast<size_t>(l) - 1];
      if (const size_t hash = part.find('#'); hash != std::string_view::npos) part = part.substr(0, hash);
      for (char c : part) joined += (c == '(' || c == ')' || c == '\\') ? ' ' : c;
      joined += ' ';
    }
    st.bindings = bindings_of(joined);
    line = st.last;
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace

bool uses_any_name(std::string_view text, int first, int last, const std::set<std::string>& names) {
  if (names.empty()) return false;
  const auto lines = split_lines(text);
  for (int l = std::max(1, first); l <= last && static_cast<size_t>(l) <= lines.size(); ++l) {
    const std::string_view line = lines[static_cast<size_t>(l) - 1];
    for (size_t i = 0; i < line.size();) {
      if (!identifier_char(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && identifier_char(line[j])) ++j;
      if (names.count(std::string(line.substr(i, j - i)))) return true;
      i = j;
    }
  }
  return false;
}

ImportChange python_import_change(std::string_view before, const CodeStructure& sb, std::string_view after,
                                  const CodeStructure& sa, const std::vector<int>& changed) {
  ImportChange out;
  const auto old_imports = module_imports(before, sb);
  const auto new_imports = module_imports(after, sa);
  for (const int line : changed)
    for (const auto& st : old_imports)
      if (line >= st.first && line <= st.last) out.import_lines.insert(line);
  std::multiset<std::pair<std::string, std::string>> was, is;
  for (const auto& st : old_imports) was.insert(st.bindings.begin(), st.bindings.end());
  for (const auto& st : new_imports) is.insert(st.bindings.begin(), st.bindings.end());
  std::vector<std::pair<std::string, std::string>> differ;
  std::set_symmetric_difference(was.begin(), was.end(), is.begin(), is.end(), std::back_inserter(differ));
  for (const auto& [name, what] : differ) {
    if (name == "*")
      out.star = true;
    else
      out.names.insert(name);
  }
  // A changed name used by module-level code other than the imports.
  const auto lines = split_lines(before);
  for (int line = 1; line <= sb.line_count && static_cast<size_t>(line) <= lines.size() && !out.names.empty(); ++line) {
    const auto at = static_cast<size_t>(line) - 1;
    if (at >= sb.function.size() || sb.function[at] != 0) continue;
    const bool in_import = std::any_of(old_imports.begin(), old_imports.end(),
                                       [&](const ImportStatement& st) { return line >= st.first && line <= st.last; });
    if (!in_import && uses_any_name(before, line, line, out.names)) {
      out.used_at_module_level = true;
      break;
    }
  }
  return out;
}

}  // namespace spark
