// .spark.toml: a file loads or fails with an error naming the file; a loaded file's values are readable by type.
#include "formats/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace spark;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto path = fuzz::scratch(text, ".toml");
  auto c = Config::load(path);
  if (!c) {
    SPARK_FUZZ_CHECK(c.error().message.find(path.string()) != std::string::npos, "an error names the file");
    return 0;
  }
  for (const auto& key : config_keys()) {
    if (!c->is_set(key.key)) continue;
    switch (key.type) {
      case ConfigType::integer: (void)c->integer(key.key); break;
      case ConfigType::number: (void)c->number(key.key); break;
      case ConfigType::boolean: (void)c->boolean(key.key); break;
      case ConfigType::string: (void)c->str(key.key); break;
    }
  }
  SPARK_FUZZ_CHECK(!c->describe().empty(), "the configuration can be shown");
  return 0;
}
