#include "common/activation_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/activation.h"

namespace dfuse::test {

namespace {

// `sizes` with the last dim scaled by `factor`.
std::vector<int64_t> widened(std::vector<int64_t> sizes, int64_t factor) {
  sizes.back() *= factor;
  return sizes;
}

// A view of `sizes` into rows of sizes.back() + c.row_pad elements, from element c.offset; with
// `every_value`, c.every_value's bit patterns instead of random data.
TestTensor make_input(Device d, DType t, const ActivationCase& c, const std::vector<int64_t>& sizes, uint64_t seed,
                      bool every_value) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= (i + 1 == sizes.size()) ? sizes[i] + c.row_pad : sizes[i];
  }
  const RandomSpec spec{
      .seed = seed, .amplitude = c.amplitude, .specials = c.specials, .every_bit_pattern = every_value};
  return random_tensor(d, t, sizes, strides, c.offset, spec);
}

TestTensor make_bias(Device d, DType t, const ActivationCase& c, std::vector<int64_t> sizes, uint64_t seed) {
  return random_tensor(d, t, std::move(sizes), {}, 0, {seed, 0.5, c.specials});
}

}  // namespace

std::vector<ActivationCase> small_activation_cases() {
  return {
      {.name = "rows", .sizes = {2, 37, 64}},
      {.name = "odd_d", .sizes = {2, 5, 77}},
      {.name = "rank1", .sizes = {45}},
      {.name = "rank4", .sizes = {2, 3, 5, 48}},
      {.name = "single_row", .sizes = {1, 1, 320}},
      {.name = "packed", .sizes = {2, 9, 96}, .packed = true},
      {.name = "packed_odd", .sizes = {3, 7, 41}, .packed = true},
      {.name = "channel_first", .sizes = {2, 12, 5, 7}, .channel_first = true},
      {.name = "channel_first_rows", .sizes = {2, 24, 35}, .channel_first = true},
      {.name = "no_bias", .sizes = {2, 11, 40}, .no_bias = true},
      {.name = "strided", .sizes = {2, 6, 64}, .row_pad = 24},
      {.name = "misaligned", .sizes = {1, 9, 64}, .offset = 1},
      {.name = "specials", .sizes = {2, 33, 128}, .specials = true},
      {.name = "specials_packed", .sizes = {2, 17, 72}, .packed = true, .specials = true},
      {.name = "in_place", .sizes = {2, 17, 72}, .in_place = true},
      {.name = "large_amplitude", .sizes = {1, 13, 256}, .amplitude = 60.0},
      // One row of 65536: silu_mul's a, bias_silu's x and both halves of bias_glu's x hold every bit
      // pattern once; without a bias, bias_glu's SiLU sees every value too.
      {.name = "every_value", .sizes = {1, 65536}, .every_value = true},
      {.name = "every_value_no_bias", .sizes = {1, 65536}, .no_bias = true, .every_value = true},
  };
}

std::vector<ActivationCase> model_activation_cases() {
  return {
      {.name = "flux2_mlp", .sizes = {1, 4608, 3072}},
      {.name = "flux2_mlp_packed", .sizes = {1, 4608, 3072}, .packed = true},
      {.name = "sana_glumb", .sizes = {1, 1024, 5600}},
      {.name = "sana_glumb_channel_first", .sizes = {1, 5600, 32, 32}, .channel_first = true},
      {.name = "sana_glumb_no_bias", .sizes = {1, 1024, 5600}, .no_bias = true},
      {.name = "odd_rows", .sizes = {3, 4097, 2560}},
      {.name = "odd_d", .sizes = {2, 4097, 1539}},
      {.name = "strided", .sizes = {2, 4097, 3072}, .row_pad = 3072},
      {.name = "misaligned", .sizes = {1, 4097, 3072}, .offset = 3},
      {.name = "specials", .sizes = {1, 4608, 3072}, .packed = true, .specials = true},
      {.name = "in_place", .sizes = {1, 4608, 3072}, .in_place = true},
      {.name = "large_amplitude", .sizes = {1, 4608, 3072}, .amplitude = 100.0},
  };
}

std::string run_silu_mul_case(Device d, DType t, const ActivationCase& c, uint64_t seed) {
  TestTensor packed, a, b;
  TensorView av, bv;
  if (c.packed) {  // p = proj(x); a, b = p[..., :D], p[..., D:]
    packed = make_input(d, t, c, widened(c.sizes, 2), seed, c.every_value);
    const int64_t dim = c.sizes.back();
    av = packed.view.narrow(-1, 0, dim);
    bv = packed.view.narrow(-1, dim, dim);
  } else {
    a = make_input(d, t, c, c.sizes, seed, c.every_value);
    b = make_input(d, t, c, c.sizes, seed + 1, false);
    av = a.view;
    bv = b.view;
  }
  return compare_fused_with_eager(
      d, t, c.sizes, c.in_place ? &av : nullptr,
      [&](const TensorView& out, std::string* why) { return can_use_silu_mul(av, bv, out, why); },
      [&](const TensorView& out) { silu_mul(av, bv, out); },
      [&](const TensorView& out, eager::Workspace& ws) { eager::silu_mul_chain(av, bv, out, ws); });
}

std::string run_bias_silu_case(Device d, DType t, const ActivationCase& c, uint64_t seed) {
  auto x = make_input(d, t, c, c.sizes, seed, c.every_value);
  // Per channel: the last dim channels last, dim 1 channel first ([C, 1, ...] right-aligned).
  std::vector<int64_t> bias_sizes = {c.sizes.back()};
  if (c.channel_first) {
    bias_sizes.assign(c.sizes.size() - 1, 1);
    bias_sizes[0] = c.sizes[1];
  }
  auto bias = make_bias(d, t, c, bias_sizes, seed + 1);
  return compare_fused_with_eager(
      d, t, c.sizes, c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) { return can_use_bias_silu(x.view, bias.view, out, why); },
      [&](const TensorView& out) { bias_silu(x.view, bias.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::bias_silu_chain(x.view, bias.view, out, ws);
      });
}

std::string run_bias_glu_case(Device d, DType t, const ActivationCase& c, uint64_t seed) {
  if (c.channel_first || c.in_place) return "";  // channels-last rows only; out is half of x
  auto x = make_input(d, t, c, widened(c.sizes, 2), seed, c.every_value);
  auto bias = make_bias(d, t, c, {2 * c.sizes.back()}, seed + 1);
  const TensorView* bias_view = c.no_bias ? nullptr : &bias.view;
  return compare_fused_with_eager(
      d, t, c.sizes, nullptr,
      [&](const TensorView& out, std::string* why) { return can_use_bias_glu(x.view, bias_view, out, why); },
      [&](const TensorView& out) { bias_glu(x.view, bias_view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::bias_glu_chain(x.view, bias_view, out, ws);
      });
}

}  // namespace dfuse::test
