#include "formats/trust.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/text.h"
#include "formats/case.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// An absolute, normal form of `p` with the symbolic links of its existing part followed.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path out = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) out = fs::absolute(p, ec).lexically_normal();
  return out;
}

std::optional<fs::path> trust_folder() {
  auto folder = user_config_folder();
  if (!folder) return std::nullopt;
  return *folder / "trusted";
}

// One record per trusted path, named by the path's hash: {"path", "content", "trusted_at"}.
fs::path record_of(const fs::path& folder, const fs::path& file) {
  return folder / (hex64(fnv1a64(resolved(file).string())) + ".json");
}

std::optional<nlohmann::json> read_record(const fs::path& record) {
  auto text = read_file(record);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j["path"].is_string() || !j["content"].is_string()) return std::nullopt;
  return j;
}

}  // namespace

std::optional<fs::path> user_config_folder() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && *xdg == '/') return fs::path(xdg) / "spark";
  const char* home = std::getenv("HOME");
  if (home && *home == '/') return fs::path(home) / ".config" / "spark";
  return std::nullopt;
}

std::optional<fs::path> user_config_file() {
  auto folder = user_config_folder();
  std::error_code ec;
  if (folder && fs::is_regular_file(*folder / "config.toml", ec)) return *folder / "config.toml";
  return std::nullopt;
}

std::optional<fs::path> system_config_file() {
  const fs::path file = "/etc/spark/config.toml";
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file;
  return std::nullopt;
}

fs::path repository_top(const fs::path& file) {
  fs::path folder = resolved(file).parent_path();
  std::error_code ec;
  for (fs::path dir = folder;; dir = dir.parent_path()) {
    if (fs::exists(dir / ".git", ec)) return dir;
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
  }
  return folder;
}

bool inside_work_tree(const fs::path& file) {
  std::error_code ec;
  return fs::exists(repository_top(file) / ".git", ec);
}

bool path_inside(const fs::path& top, const fs::path& base, const fs::path& candidate) {
  const fs::path full = resolved(candidate.is_absolute() ? candidate : base / candidate);
  const fs::path root = resolved(top);
  auto [r, f] = std::mismatch(root.begin(), root.end(), full.begin(), full.end());
  return r == root.end();
}

bool is_trusted(const fs::path& file, const std::string& content) {
  auto folder = trust_folder();
  if (!folder) return false;
  auto record = read_record(record_of(*folder, file));
  return record && (*record)["path"] == resolved(file).string() && (*record)["content"] == content;
}

Status trust_file(const fs::path& file) {
  auto folder = trust_folder();
  if (!folder)
    return fail("no folder to record trust in: set HOME or XDG_CONFIG_HOME (trust is recorded outside the repository)");
  auto content = read_file(file);
  TRY(content);
  std::error_code ec;
  fs::create_directories(*folder, ec);
  if (ec) return fail(folder->string() + ": " + ec.message());
  const nlohmann::json record = {{"path", resolved(file).string()},
                                 {"content", *content},
                                 {"trusted_at", format_iso8601(static_cast<int64_t>(std::time(nullptr)))}};
  return write_file_atomic(record_of(*folder, file), json_text(record, 2) + "\n");
}

Result<bool> untrust_file(const fs::path& file) {
  auto folder = trust_folder();
  if (!folder) return false;
  std::error_code ec;
  const bool removed = fs::remove(record_of(*folder, file), ec);
  if (ec) return fail(record_of(*folder, file).string() + ": " + ec.message());
  return removed;
}

std::vector<TrustedFile> trusted_files() {
  std::vector<TrustedFile> out;
  auto folder = trust_folder();
  std::error_code ec;
  if (!folder || !fs::is_directory(*folder, ec)) return out;
  for (const auto& entry : fs::directory_iterator(*folder, ec)) {
    if (entry.path().extension() != ".json") continue;
    auto record = read_record(entry.path());
    if (!record) continue;
    TrustedFile t;
    t.path = (*record)["path"].get<std::string>();
    t.trusted_at = record->value("trusted_at", "");
    auto now = read_file(t.path);
    t.unchanged = now && *now == (*record)["content"].get<std::string>();
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const TrustedFile& a, const TrustedFile& b) { return a.path < b.path; });
  return out;
}

std::vector<Config::File> config_layers(const std::optional<std::filesystem::path>& file, bool named) {
  std::vector<Config::File> layers;
  if (auto system = system_config_file()) layers.push_back({*system, true});
  if (auto user = user_config_file()) layers.push_back({*user, true});
  if (file) {
    bool trusted = named && !inside_work_tree(*file);
    if (!trusted)
      if (auto content = read_file(*file)) trusted = is_trusted(*file, *content);
    layers.push_back({*file, trusted});
  }
  return layers;
}

std::string trusted_files_text() {
  std::string out;
  for (const auto& f : trusted_files())
    out += f.path.string() + "    # trusted " + f.trusted_at +
           (f.unchanged ? "" : path_exists(f.path) ? "; changed since: untrusted until trusted again" : "; missing") +
           "\n";
  return out.empty() ? "no trusted files\n" : out;
}

std::string trusted_now_text(const std::filesystem::path& file, const Config& untrusted) {
  std::string out = "spark: trusted " + file.string() + " as it is now; a change to it makes it untrusted again\n";
  out += untrusted.refused().empty() ? "  (it sets nothing a repository may not set on its own)\n" : "  now used:\n";
  for (const auto& r : untrusted.refused())
    out += "    " + r.key + " = " + (r.text.empty() ? std::string("(hidden)") : r.text) + "    # " + r.source + "\n";
  return out;
}

}  // namespace spark
