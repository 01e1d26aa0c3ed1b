// Test tensors on any device: random data (never zeros; optional NaN/Inf), poisoned outputs,
// strided views into larger storage, and gathering a view's elements back to the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/runtime.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::test {

struct TestTensor {
  DeviceBuffer storage;
  TensorView view;
};

struct RandomSpec {
  uint64_t seed = 1;
  double amplitude = 1.0;  // values uniform in (-2a, 2a), zeros replaced
  bool specials = false;   // sprinkle NaN, +-Inf, -0 and denormal-ish values
  // 16-bit dtypes: storage element i holds the bit pattern i % 65536 instead (every value of the
  // dtype, NaNs, infinities and both zeros included); other dtypes are filled at random.
  bool every_bit_pattern = false;
};

// Storage of `storage_elems` elements, filled at random; the view has `sizes`/`strides` from
// element `offset`. Pass empty strides for a contiguous view.
TestTensor random_tensor(Device d, DType t, std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                         int64_t offset = 0, RandomSpec r = {}, int64_t storage_elems = -1);
// Contiguous tensor whose bytes are all `pattern`, so unwritten elements are visible.
TestTensor poisoned_tensor(Device d, DType t, std::vector<int64_t> sizes, uint8_t pattern);
// The view's elements in row-major order, as raw bytes.
std::vector<uint8_t> gather_bytes(const TensorView& v);
// "" when equal bit for bit, else a description with the count and first differing element.
// With `any_nan_f32`, f32 NaNs compare equal whatever their payload: on the host, x86
// propagates operand payloads and its own negative default NaN, and which operand's payload
// wins depends on the operation (add vs fma), so payloads are not part of the host f32 contract.
std::string compare_bits(const TensorView& fused, const TensorView& eager, bool any_nan_f32 = false);
// The view's elements in row-major order, as doubles (for bounds of close contracts).
std::vector<double> element_values(const TensorView& v);
// The unit roundoff of a storage dtype: 2^-8 (bf16), 2^-11 (f16), 2^-24 (f32).
double unit_roundoff(DType t);
// Half the smallest subnormal of a storage dtype, the largest error of rounding a value below the
// normal range to it: 2^-134 (bf16), 2^-25 (f16), 2^-150 (f32).
double half_min_subnormal(DType t);
// True when no element of `v` still has every byte equal to `pattern`.
bool fully_written(const TensorView& v, uint8_t pattern);
// Set by DFUSE_GPU_TEST_SMALL=1 (compute-sanitizer runs): skip model-size shapes.
bool small_shapes_only();

}  // namespace dfuse::test
