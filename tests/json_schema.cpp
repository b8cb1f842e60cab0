#include "json_schema.h"

#include <set>

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
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root["$defs"].contains(ref.substr(prefix.size()))) {
      out.push_back(path + ": unresolvable $ref " + ref);
      return;
    }
    check(v, root["$defs"][ref.substr(prefix.size())], root, path, out);
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

}  // namespace spark::testing
