#include "dfuse/policy/quality.h"

#include <array>
#include <string>
#include <vector>

#include "dfuse/core/error.h"
#include "common/text_table.h"

namespace dfuse {
namespace {

constexpr std::array kQualities = {Quality::lossless, Quality::extra_high, Quality::high};

}  // namespace

std::string_view quality_name(Quality q) {
  switch (q) {
    case Quality::lossless: return "lossless";
    case Quality::extra_high: return "extra-high";
    case Quality::high: return "high";
  }
  return "invalid";
}

// Strict on purpose: a misspelt tier silently running lossless would hide a request error.
Quality parse_quality(std::string_view s) {
  std::vector<std::string_view> valid;
  for (Quality q : kQualities) {
    if (quality_name(q) == s) return q;
    valid.push_back(quality_name(q));
  }
  throw InvalidArgument("unknown quality \"" + std::string(s) + "\"; valid: " + detail::join_names(valid));
}

}  // namespace dfuse
