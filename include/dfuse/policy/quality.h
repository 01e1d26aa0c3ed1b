// dfuse policy: quality tiers. lossless < extra-high < high, cumulative.
#pragma once

#include <cstdint>
#include <string_view>

namespace dfuse {

enum class Quality : uint8_t {
  // The reference path plus every unconditional bit-exact replacement. The default.
  lossless = 0,
  // lossless plus the request-gated (not bit-exact) DiT and VAE fusions.
  extra_high = 1,
  // extra-high plus model-owned approximations.
  high = 2,
};

std::string_view quality_name(Quality q);  // "lossless", "extra-high", "high"
// Parses "lossless" | "extra-high" | "high". Anything else throws InvalidArgument naming the
// input and listing the valid tiers.
Quality parse_quality(std::string_view s);
// True when a request at `requested` includes optimizations registered at `tier`.
inline bool quality_allows(Quality requested, Quality tier) { return tier <= requested; }

}  // namespace dfuse
