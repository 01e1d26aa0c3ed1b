// The activation family's test cases, run on any device: the host tests run them on the host,
// the GPU tests on CUDA. Each case builds fresh random inputs, runs the fused op and its eager
// chain into differently placed, poisoned outputs, and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct ActivationCase {
  std::string name;
  std::vector<int64_t> sizes;  // the output's shape, rank 1..4; bias_glu's x has twice its last dim
  bool packed = false;         // silu_mul: a and b are the halves of one [..., 2D] projection
  bool channel_first = false;  // bias_silu: sizes are [B, C, H, W] (or [B, C, HW]), bias [C, 1, 1]
  bool no_bias = false;        // bias_glu: x is already biased
  int64_t row_pad = 0;         // inputs are views into rows of pad more elements (strided rows)
  int64_t offset = 0;          // inputs start this many elements into their storage (misaligned)
  bool specials = false;       // NaN / Inf / -0 / tiny values in the inputs
  bool in_place = false;       // out is a (silu_mul) or x (bias_silu); bias_glu never runs in place
  // 16-bit dtypes: silu_mul's a (or its packed projection), bias_silu's x and bias_glu's x hold the bit
  // pattern of their storage index (RandomSpec): with one contiguous row of 65536 elements in a, every
  // value of the dtype reaches silu_mul's SiLU (and bias_glu's, without a bias)
  bool every_value = false;
  double amplitude = 1.0;
};

// Small shapes covering every layout, odd sizes and strides: fast enough for the host in CI.
std::vector<ActivationCase> small_activation_cases();
// Model shapes: FLUX.2-like [1, 4608, 3072] MLP rows, Sana's GLUMBConv channels at 1024px
// ([1, 1024, 5600] with 2C = 11200), odd sizes. For GPU runs.
std::vector<ActivationCase> model_activation_cases();

// "" on a bitwise match with every element written, else what went wrong.
std::string run_silu_mul_case(Device d, DType t, const ActivationCase& c, uint64_t seed);
std::string run_bias_silu_case(Device d, DType t, const ActivationCase& c, uint64_t seed);
std::string run_bias_glu_case(Device d, DType t, const ActivationCase& c, uint64_t seed);

}  // namespace dfuse::test
