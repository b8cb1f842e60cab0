// Output of `spark localize`: human text, JSON (stable schema "spark.localize/1", docs/FORMATS.md), SARIF 2.1.0 and
// GitHub Actions workflow commands.
#pragma once

#include <string>

#include "localizer.h"

namespace spark {

struct ReportContext {
  std::string policy;
  Level level = Level::line;
  size_t k = 0;
  double epsilon = 0;
  std::string version;
};

std::string report_text(const Localization& loc, const ReportContext& ctx, bool color);
std::string report_json(const Localization& loc, const ReportContext& ctx);
std::string report_sarif(const Localization& loc, const ReportContext& ctx);
// At most 10 annotations (GitHub's limit per type and step): the first 9 ranked, then one summary of the rest.
std::string report_github(const Localization& loc, const ReportContext& ctx);

}  // namespace spark
