#include "miner/project_tests.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/text.h"
#include "code/code_structure.h"

namespace spark {

namespace {

using Values = std::map<std::string, std::string>;  // a section's keys and their raw values

// An INI file's section as pytest's iniconfig reads it: `key = value` or `key: value`, an indented line continuing
// the value above, lines starting with '#' or ';' comments. nullopt when the file has no such section.
std::optional<Values> ini_section(std::string_view text, std::string_view section) {
  std::optional<Values> out;
  bool inside = false;
  std::string key;
  for (std::string_view line : split_lines(text)) {
    const std::string_view t = trim(line);
    if (t.empty() || t.starts_with('#') || t.starts_with(';')) continue;
    if (t.starts_with('[') && line.front() == '[') {
      inside = t.size() >= 2 && t.substr(1, t.find(']') - 1) == section;
      if (inside && !out) out.emplace();
      key.clear();
      continue;
    }
    if (!inside) continue;
    if (line.front() == ' ' || line.front() == '\t') {
      if (!key.empty()) (*out)[key] += "\n" + std::string(t);
      continue;
    }
    const size_t eq = std::min(t.find('='), t.find(':'));
    if (eq == std::string_view::npos) continue;
    key = std::string(trim(t.substr(0, eq)));
    (*out)[key] = std::string(trim(t.substr(eq + 1)));
  }
  return out;
}

// pyproject.toml's [tool.pytest.ini_options]: each key's quoted strings (a string, or an array of them over lines).
std::optional<Values> toml_section(std::string_view text, std::string_view section) {
  std::optional<Values> out;
  bool inside = false;
  std::string key;
  int depth = 0;  // open '[' of a multi-line array
  for (std::string_view line : split_lines(text)) {
    const std::string_view t = trim(line);
    if (t.empty() || t.starts_with('#')) continue;
    if (depth == 0 && t.starts_with('[')) {
      const std::string_view name = trim(t.substr(1, t.find(']') - 1));
      inside = !t.starts_with("[[") && name == section;
      if (inside && !out) out.emplace();
      continue;
    }
    if (!inside) continue;
    std::string_view value = t;
    if (depth == 0) {
      const size_t eq = t.find('=');
      if (eq == std::string_view::npos) continue;
      key = std::string(trim(t.substr(0, eq)));
      value = trim(t.substr(eq + 1));
      (*out)[key].clear();
    }
    // The quoted strings of the value, separated by newlines; brackets outside strings counted.
    std::string& into = (*out)[key];
    for (size_t i = 0; i < value.size(); ++i) {
      const char c = value[i];
      if (c == '#') break;
      if (c == '[') ++depth;
      if (c == ']') depth = std::max(0, depth - 1);
      if (c == '"' || c == '\'') {
        const size_t end = value.find(c, i + 1);
        if (end == std::string_view::npos) break;
        if (!into.empty()) into += "\n";
        into += value.substr(i + 1, end - i - 1);
        i = end;
      }
    }
  }
  return out;
}

// A value's entries, split at white space (pytest's "args" and "linelist" types), at most kMaxConfigEntries.
std::vector<std::string> entries(const Values& values, const std::string& key) {
  std::vector<std::string> out;
  auto it = values.find(key);
  if (it == values.end()) return out;
  std::string cur;
  for (char c : it->second + " ") {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
      if (!cur.empty() && out.size() < kMaxConfigEntries) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

bool inside_repository(const std::string& path) {
  return !path.empty() && !path.starts_with('/') && path != ".." && !path.starts_with("../") &&
         path.find("/../") == std::string::npos && !path.ends_with("/..");
}

}  // namespace

PytestConfig read_pytest_config(const std::function<std::optional<std::string>(const std::string&)>& read) {
  PytestConfig out;
  // pytest's order: the first of these files that is its configuration.
  const struct {
    const char* file;
    const char* section;
    bool toml;
    bool any;  // the file is pytest's even without the section
  } candidates[] = {{"pytest.ini", "pytest", false, true},
                    {".pytest.ini", "pytest", false, true},
                    {"pyproject.toml", "tool.pytest.ini_options", true, false},
                    {"tox.ini", "pytest", false, false},
                    {"setup.cfg", "tool:pytest", false, false}};
  for (const auto& c : candidates) {
    auto text = read(c.file);
    if (!text) continue;
    const std::string_view head = std::string_view(*text).substr(0, kMaxConfigBytes);
    auto values = c.toml ? toml_section(head, c.section) : ini_section(head, c.section);
    if (!values && !c.any) continue;
    out.source = std::string(c.file) + " [" + c.section + "]";
    if (values) {
      out.python_files = entries(*values, "python_files");
      out.testpaths = entries(*values, "testpaths");
    }
    break;
  }
  return out;
}

std::vector<std::string> project_test_globs(const PytestConfig& config) {
  std::vector<std::string> out;
  const auto add = [&](std::string glob) {
    while (glob.starts_with("./")) glob.erase(0, 2);
    while (glob.size() > 1 && glob.ends_with('/')) glob.pop_back();
    if (inside_repository(glob) && glob != "." && std::find(out.begin(), out.end(), glob) == out.end())
      out.push_back(std::move(glob));
  };
  for (const auto& p : config.python_files) add(p);
  for (std::string p : config.testpaths) {
    while (p.size() > 1 && p.ends_with('/')) p.pop_back();
    add(p.ends_with(".py") ? p : p + "/**");
  }
  add("tests.py");
  return out;
}

TestCodeRule project_test_code(const TestCodeRule& setting, const GitRepository& repo,
                               const std::vector<std::string>& shas) {
  std::vector<std::string> globs;
  std::set<std::string> seen;
  for (const auto& sha : shas) {
    if (!seen.insert(sha).second) continue;
    const auto read = [&](const std::string& path) -> std::optional<std::string> {
      auto content = repo.file_at(sha, path);
      return content && *content ? std::move(*content) : std::nullopt;
    };
    for (auto& g : project_test_globs(read_pytest_config(read))) globs.push_back(std::move(g));
  }
  return setting.with_globs(globs);
}

bool refers_to_data(std::string_view code, const std::string& code_path, const std::string& data_path) {
  const size_t slash = data_path.rfind('/');
  const std::string name = data_path.substr(slash == std::string::npos ? 0 : slash + 1);
  if (name.empty()) return false;
  if (code.find(name) != std::string_view::npos) return true;
  // The folders below what the two paths share.
  size_t common = 0;
  for (size_t i = 0; i < std::min(code_path.size(), data_path.size()) && code_path[i] == data_path[i]; ++i)
    if (code_path[i] == '/') common = i + 1;
  for (size_t from = common; slash != std::string::npos && from < slash;) {
    const size_t end = data_path.find('/', from);
    const std::string folder = data_path.substr(from, end - from);
    for (const char* q : {"'", "\"", "/"})
      for (const char* r : {"'", "\"", "/"})
        if (code.find(q + folder + r) != std::string_view::npos) return true;
    from = end + 1;
  }
  return false;
}

std::optional<std::string> doctest_text_file(const std::string& test_id) {
  const size_t sep = test_id.find("::");
  if (sep == std::string::npos) return std::nullopt;
  const std::string path = test_id.substr(0, sep);
  const std::string rest = test_id.substr(sep + 2);
  const std::string name = rest.substr(rest.rfind("::") == std::string::npos ? 0 : rest.rfind("::") + 2);
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return std::nullopt;
  if (name.find('[') != std::string::npos || name.find('/') != std::string::npos) return std::nullopt;
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string file = path.substr(folder.size());
  if (rest == name && file == name && !language_of_path(name)) return path;  // "tests/tests.md::tests.md"
  // "tests/tests.py::md::tests.md": the text file's name read as a module "tests" and a class "md".
  const std::string stem = file.ends_with(".py") ? file.substr(0, file.size() - 3) : "";
  if (!stem.empty() && rest == name.substr(dot + 1) + "::" + name && name.substr(0, dot) == stem &&
      !language_of_path(name))
    return folder + name;
  return std::nullopt;
}

}  // namespace spark
