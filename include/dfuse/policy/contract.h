// dfuse policy: numerical contracts. What an op's output promises relative to its eager chain.
#pragma once

#include <cstdint>
#include <string_view>

namespace dfuse {

enum class Contract : uint8_t {
  // Every output bit equals the eager chain the spec names (PyTorch 2.11 CUDA on a GPU).
  bit_exact,
  // Bit-exact against a dispatch that can change underneath (shape/alignment-dependent
  // kernels); every new signature is checked by the first-sight Gate.
  bit_exact_verified,
  // Within a stated, tested bound (max ulp or relative error).
  close,
  // The same selected set (e.g. expert ids); order unspecified.
  selection_equivalent,
  // Matches the quantized producer contract of the reference quantizer (FP8/NVFP4).
  producer,
};

std::string_view contract_name(Contract c);  // "bit-exact", "bit-exact-verified", ...
Contract parse_contract(std::string_view s);  // throws InvalidArgument listing valid names
// Bit-exact contracts are mounted unconditionally; the others only at a tier that asks.
bool is_bit_exact(Contract c);

}  // namespace dfuse
