// A JSON Schema validator for the tests: the subset our schemas in docs/schemas/ use (draft 2020-12 keywords type,
// properties, required, additionalProperties, items, enum, const, minimum, maximum, anyOf, $ref to "#/$defs/...").
// A keyword outside that subset is itself reported, so a schema cannot silently check less than it says.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark::testing {

// Every way `value` breaks `schema`, as "PATH: reason" (empty when it conforms).
std::vector<std::string> validate_json(const nlohmann::json& value, const nlohmann::json& schema);

// The schema file docs/schemas/NAME.
nlohmann::json schema_file(const std::string& name);

}  // namespace spark::testing
