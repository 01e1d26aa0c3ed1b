// The comparison every fused-op test case makes, on any device: run the eager chain into a
// poisoned output and the fused op into another (or in place into an input), check that every
// element was written, and compare every output bit.
#pragma once

#include <string>
#include <vector>

#include "common/tensors.h"
#include "dfuse/eager/chains.h"

namespace dfuse::test {

// All-ones is a negative NaN in bf16, f16 and f32, which no CUDA conversion or arithmetic
// produces (their NaNs are canonical, positive), so an element still holding it was not written.
constexpr uint8_t kOutputPoison = 0xFF;

// `in_place_target`: null, or the input view the fused op writes into (after the eager chain has
// read it). `can_use(out, why)` and `fused(out)` receive the fused op's output view, `eager(out,
// ws)` the eager chain's. f32 NaN payloads are ignored on the host (see compare_bits).
template <typename CanUse, typename Fused, typename Eager>
std::string compare_fused_with_eager(Device d, DType t, const std::vector<int64_t>& out_sizes,
                                     const TensorView* in_place_target, CanUse can_use, Fused fused,
                                     Eager eager_chain) {
  auto eager = poisoned_tensor(d, t, out_sizes, kOutputPoison);
  eager::Workspace ws(d);
  eager_chain(eager.view, ws);
  TestTensor fused_out;
  const TensorView& out =
      in_place_target ? *in_place_target : (fused_out = poisoned_tensor(d, t, out_sizes, kOutputPoison)).view;
  std::string why;
  if (!can_use(out, &why)) return "rejected: " + why;
  fused(out);
  runtime(d).synchronize({});
  if (!fully_written(eager.view, kOutputPoison)) return "eager output has unwritten elements";
  if (!in_place_target && !fully_written(out, kOutputPoison)) return "fused output has unwritten elements";
  return compare_bits(out, eager.view, /*any_nan_f32=*/!d.is_cuda());
}

// The comparison of an op with two outputs (q and k) after both it and its eager chain ran: every
// element of the eager outputs written (and of the fused ones, unless written in place), then every
// bit of each equal.
inline std::string compare_qk_outputs(Device d, const TensorView& eager_q, const TensorView& eager_k,
                                      const TensorView& q_out, const TensorView& k_out, bool in_place) {
  if (!fully_written(eager_q, kOutputPoison) || !fully_written(eager_k, kOutputPoison))
    return "eager output has unwritten elements";
  if (!in_place && (!fully_written(q_out, kOutputPoison) || !fully_written(k_out, kOutputPoison)))
    return "fused output has unwritten elements";
  const bool any_nan_f32 = !d.is_cuda();
  if (auto diff = compare_bits(q_out, eager_q, any_nan_f32); !diff.empty()) return "q: " + diff;
  if (auto diff = compare_bits(k_out, eager_k, any_nan_f32); !diff.empty()) return "k: " + diff;
  return "";
}

}  // namespace dfuse::test
