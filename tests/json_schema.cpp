#include "json_schema.h"

#include <set>

#include "base/process.h"
#include "base/text.h"

#include "test_util.h"

namespace spark::testing {

using nlohmann::json;

namespace {

bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

void check(const json& v, const json& schema, const json& root, const std::string& path, std::vector<std::string>& out) {
  static const std::set<std::string> known = {"$schema", "$id", "$defs", "$ref", "title", "description", "type",
                                              "properties", "required", "additionalProperties", "items", "enum",
                                              "const", "minimum", "maximum", "anyOf", "examples"};
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) out.push_back(path + ": not allowed here");
    return;
  }
  for (const auto& [key, _] : schema.items())
    if (!known.count(key)) out.push_back(path + ": the validator does not know the keyword \"" + key + "\"");
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const size_t hash = ref.find('#');
    const std::string file = ref.substr(0, hash), prefix = "#/$defs/";
    const std::string fragment = hash == std::string::npos ? "" : ref.substr(hash);
    const bool readable = file.empty() || std::filesystem::exists(std::filesystem::path(SPARK_SOURCE_DIR) / "docs" /
                                                                  "schemas" / file);
    const json target = file.empty() ? root : readable ? schema_file(file) : json::object();
    if (fragment.rfind(prefix, 0) != 0 || !target.contains("$defs") ||
        !target["$defs"].contains(fragment.substr(prefix.size()))) {
      out.push_back(path + ": unresolvable $ref " + ref);
      return;
    }
    check(v, target["$defs"][fragment.substr(prefix.size())], target, path, out);
  }
  if (schema.contains("type")) {
    bool ok = false;
    if (schema["type"].is_array()) {
      for (const auto& t : schema["type"]) ok = ok || has_type(v, t.get<std::string>());
    } else {
      ok = has_type(v, schema["type"].get<std::string>());
    }
    if (!ok) {
      out.push_back(path + ": " + v.dump().substr(0, 80) + " is not of type " + schema["type"].dump());
      return;
    }
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == v;
    if (!found) out.push_back(path + ": " + v.dump() + " is not one of " + schema["enum"].dump());
  }
  if (schema.contains("const") && schema["const"] != v)
    out.push_back(path + ": " + v.dump() + " is not " + schema["const"].dump());
  if (v.is_number()) {
    if (schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>())
      out.push_back(path + ": " + v.dump() + " is below " + schema["minimum"].dump());
    if (schema.contains("maximum") && v.get<double>() > schema["maximum"].get<double>())
      out.push_back(path + ": " + v.dump() + " is above " + schema["maximum"].dump());
  }
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const auto& alternative : schema["anyOf"]) {
      std::vector<std::string> errors;
      check(v, alternative, root, path, errors);
      any = any || errors.empty();
    }
    if (!any) out.push_back(path + ": matches none of anyOf");
  }
  if (v.is_object()) {
    if (schema.contains("required"))
      for (const auto& r : schema["required"])
        if (!v.contains(r.get<std::string>())) out.push_back(path + ": missing \"" + r.get<std::string>() + "\"");
    const json properties = schema.value("properties", json::object());
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) check(value, properties[key], root, path + "." + key, out);
      else if (schema.contains("additionalProperties")) check(value, schema["additionalProperties"], root, path + "." + key, out);
    }
  }
  if (v.is_array() && schema.contains("items"))
    for (size_t i = 0; i < v.size(); ++i) check(v[i], schema["items"], root, path + "[" + std::to_string(i) + "]", out);
}

}  // namespace

std::vector<std::string> validate_json(const json& value, const json& schema) {
  std::vector<std::string> out;
  check(value, schema, schema, "$", out);
  return out;
}

json schema_file(const std::string& name) {
  return json::parse(slurp(std::filesystem::path(SPARK_SOURCE_DIR) / "docs" / "schemas" / name));
}

std::vector<std::string> python_schema_problems(const json& value, const std::string& name) {
  // Written for python3-jsonschema 4.10 (Debian 12): RefResolver with a store; later releases still accept it.
  static const char* const kScript = R"(
import json, pathlib, sys
import jsonschema
folder, name, doc = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
store = {}
for p in sorted(folder.glob("*.schema.json")):
    s = json.loads(p.read_text())
    store[s["$id"]] = s
schema = json.loads((folder / name).read_text())
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
def offline(uri):
    raise jsonschema.RefResolutionError("not a schema of docs/schemas (nothing is fetched): " + uri)
resolver = jsonschema.RefResolver.from_schema(schema, store=store, handlers={"http": offline, "https": offline})
for e in cls(schema, resolver=resolver).iter_errors(json.loads(pathlib.Path(doc).read_text())):
    print("$" + "".join("[%d]" % p if isinstance(p, int) else "." + p for p in e.absolute_path) + ": " + e.message)
)";
  TempDir dir;
  write_file(dir / "doc.json", value.dump());
  const auto folder = std::filesystem::path(SPARK_SOURCE_DIR) / "docs" / "schemas";
  auto r = run_command("/usr/bin/python3 -c " + shell_quote(kScript) + " " + shell_quote(folder.string()) + " " +
                           shell_quote(name) + " " + shell_quote((dir / "doc.json").string()),
                       dir.path(), 60);
  if (!r) return {"python3-jsonschema: " + r.error().message};
  if (!r->passed())
    return {"python3-jsonschema (" + r->describe() + ", scripts/setup.sh --tests installs it): " + r->output};
  std::vector<std::string> out;
  for (const auto& line : split_lines(r->output))
    if (!line.empty()) out.emplace_back("python3-jsonschema: " + std::string(line));
  return out;
}

std::vector<std::string> schema_problems(const json& value, const std::string& name) {
  auto out = validate_json(value, schema_file(name));
  for (auto& p : python_schema_problems(value, name)) out.push_back(std::move(p));
  return out;
}

}  // namespace spark::testing
