#include "dfuse/cli_list.h"

#include "dfuse/cli_json.h"
#include "common/text_table.h"

namespace dfuse::cli {

namespace {

std::vector<std::string> dtype_names(const KernelSpec& spec) {
  std::vector<std::string> names;
  for (DType t : spec.capabilities.dtypes) names.emplace_back(dtype_name(t));
  return names;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(separator, begin);
    if (end == std::string::npos) end = text.size();
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::string sm_name(const SmVersion& v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

// "9.0", "8.0-9.0", ">=8.0", "<=9.0", or "any" when unconstrained.
std::string sm_window(const Capabilities& c) {
  if (c.min_sm && c.max_sm) {
    return *c.min_sm == *c.max_sm ? sm_name(*c.min_sm) : sm_name(*c.min_sm) + "-" + sm_name(*c.max_sm);
  }
  if (c.min_sm) return ">=" + sm_name(*c.min_sm);
  if (c.max_sm) return "<=" + sm_name(*c.max_sm);
  return "any";
}

}  // namespace

std::string list_table(const std::vector<KernelSpec>& specs, const Platform& here) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& spec : specs) {
    rows.push_back({spec.op, std::string(backend_name(spec.backend)), spec.family,
                    std::string(contract_name(spec.contract)), std::string(quality_name(spec.tier)),
                    join(dtype_names(spec), ","), layout_names(spec.capabilities.layouts),
                    sm_window(spec.capabilities), spec.supports(here) ? "yes" : "no", join(spec.models, ", "),
                    spec.replaces});
  }
  return detail::format_table({"op", "backend", "family", "contract", "tier", "dtypes", "layouts", "sm",
                               "available", "models", "replaces"},
                              rows);
}

std::string list_json(const std::vector<KernelSpec>& specs, const Platform& here) {
  JsonWriter json;
  json.begin_array();
  for (const auto& spec : specs) {
    const Capabilities& c = spec.capabilities;
    json.begin_object()
        .field("op", spec.op)
        .field("backend", backend_name(spec.backend))
        .field("family", spec.family)
        .field("contract", contract_name(spec.contract))
        .field("tier", quality_name(spec.tier))
        .field("dtypes", dtype_names(spec))
        .field("layouts", split(layout_names(c.layouts), '|'));
    json.key("sm_min");
    c.min_sm ? json.value(sm_name(*c.min_sm)) : json.null();
    json.key("sm_max");
    c.max_sm ? json.value(sm_name(*c.max_sm)) : json.null();
    json.field("available_here", spec.supports(here))
        .field("models", spec.models)
        .field("replaces", spec.replaces)
        .end_object();
  }
  json.end_array();
  return json.str();
}

}  // namespace dfuse::cli
