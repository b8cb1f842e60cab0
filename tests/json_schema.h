// A JSON Schema validator for the tests: the subset our schemas in docs/schemas/ use (draft 2020-12 keywords type,
// properties, required, additionalProperties, items, enum, const, minimum, maximum, anyOf, $ref to "#/$defs/..." or
// "OTHER.schema.json#/$defs/...").
// A keyword outside that subset is itself reported, so a schema cannot silently check less than it says.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark::testing {

// Every way `value` breaks `schema`, as "PATH: reason" (empty when it conforms). A $ref to another schema
// ("localize.schema.json#/$defs/line_ref") is read from docs/schemas/.
std::vector<std::string> validate_json(const nlohmann::json& value, const nlohmann::json& schema);

// The schema file docs/schemas/NAME.
nlohmann::json schema_file(const std::string& name);

// Every way `value` breaks docs/schemas/NAME as a user's validator sees it: Debian's python3-jsonschema
// (/usr/bin/python3) with every schema of docs/schemas/ in its resolver's store under its absolute $id, so $refs
// within and across the schemas resolve as they would for a user; nothing is fetched from the network (a $ref the
// store cannot resolve is a problem). A validator that cannot run, or a schema it rejects, is a problem too.
std::vector<std::string> python_schema_problems(const nlohmann::json& value, const std::string& name);

// Both validators' problems with `value` against docs/schemas/NAME.
std::vector<std::string> schema_problems(const nlohmann::json& value, const std::string& name);

}  // namespace spark::testing
