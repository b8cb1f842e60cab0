#include "formats/json_line.h"

#include <simdjson.h>

#include "base/files.h"
#include "base/shared_library.h"
#include "base/text.h"

static_assert(spark::kLinePadding >= simdjson::SIMDJSON_PADDING, "for_each_line pads lines as simdjson reads them");

namespace spark {

namespace {

using json = nlohmann::json;

// The one function of libsimdjson the header's inline code calls (its implementations, chosen for this CPU at load,
// are reached through their virtual functions from there): resolved with dlopen, by its mangled name, the first time
// a line is parsed.
using ActiveImplementation = simdjson::internal::atomic_ptr<const simdjson::implementation>& (*)();
constexpr const char* kActiveImplementation = "_ZN8simdjson25get_active_implementationEv";

ActiveImplementation loaded_implementation() {
  static const ActiveImplementation active = [] {
    ActiveImplementation fn = nullptr;
    auto lib = SharedLibrary::open(SPARK_SIMDJSON_SONAME, "simdjson, to read JSON Lines fast");
    if (!lib) return fn;
    lib->bind(fn, kActiveImplementation);
    return lib->complete() ? fn : nullptr;
  }();
  return active;
}

// simdjson's value as nlohmann's, as nlohmann's parser would have made it from the same text.
json to_json(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::OBJECT: {
      json out = json::object();
      simdjson::dom::object fields;
      if (e.get_object().get(fields) != simdjson::SUCCESS) break;
      for (const auto field : fields) out[std::string(field.key)] = to_json(field.value);
      return out;
    }
    case element_type::ARRAY: {
      json out = json::array();
      auto& items = out.get_ref<json::array_t&>();
      simdjson::dom::array array;
      if (e.get_array().get(array) != simdjson::SUCCESS) break;
      for (const auto item : array) items.push_back(to_json(item));
      return out;
    }
    case element_type::STRING: {
      std::string_view text;
      if (e.get_string().get(text) != simdjson::SUCCESS) break;
      return json(std::string(text));
    }
    case element_type::INT64: {
      int64_t v = 0;
      if (e.get_int64().get(v) != simdjson::SUCCESS) break;
      if (v >= 0) return json(static_cast<uint64_t>(v));  // nlohmann keeps a number without '-' unsigned
      return json(v);
    }
    case element_type::UINT64: {
      uint64_t v = 0;
      if (e.get_uint64().get(v) != simdjson::SUCCESS) break;
      return json(v);
    }
    case element_type::DOUBLE: {
      double v = 0;
      if (e.get_double().get(v) != simdjson::SUCCESS) break;
      return json(v);
    }
    case element_type::BOOL: {
      bool v = false;
      if (e.get_bool().get(v) != simdjson::SUCCESS) break;
      return json(v);
    }
    case element_type::NULL_VALUE:
      break;
  }
  return json(nullptr);
}

}  // namespace

}  // namespace spark

// The definition the header declares, forwarding to the library's; called only once loaded_implementation() has
// answered (JsonLineParser::Impl checks).
namespace simdjson {
internal::atomic_ptr<const implementation>& get_active_implementation() { return spark::loaded_implementation()(); }
}  // namespace simdjson

namespace spark {

Result<json> parse_json_line_slowly(std::string_view line) {
  if (auto bad = find_invalid_utf8(line)) return fail("invalid UTF-8 at byte " + std::to_string(*bad));
  if (auto deep = json_too_deep(line)) return fail(json_too_deep_message(*deep));
  try {
    return json::parse(line);
  } catch (const json::exception& e) {
    return fail(std::string("not valid JSON (") + e.what() + ")");
  }
}

struct JsonLineParser::Impl {
  simdjson::dom::parser parser;
  bool ready = false;
};

JsonLineParser::JsonLineParser() : impl_(std::make_unique<Impl>()) {
  // simdjson's depth limit is spark's (a deeper line takes the slow path, which names where it went too deep).
  impl_->ready = fast() && impl_->parser.allocate(size_t{1} << 16, kMaxJsonDepth) == simdjson::SUCCESS;
}

JsonLineParser::~JsonLineParser() = default;

bool JsonLineParser::fast() { return loaded_implementation() != nullptr; }

Result<json> JsonLineParser::parse(std::string_view line, bool padded) {
  if (impl_->ready) {
    simdjson::dom::element root;
    if (impl_->parser.parse(line.data(), line.size(), !padded).get(root) == simdjson::SUCCESS) return to_json(root);
  }
  return parse_json_line_slowly(line);
}

}  // namespace spark
