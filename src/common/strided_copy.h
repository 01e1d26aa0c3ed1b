// The one copy behind the data-movement ops (usp_merge_heads, joint_qkv_cat,
// pack_qkv_destination_major): up to kCopyMaxPairs copies, each of an N-d strided source view
// into a strided destination view of the same shape, in one launch. Values are moved as bytes,
// never computed, so every result is bitwise identical to aten's copy (NaN payloads included).
//
// Building a copy collapses the views: size-1 dims are dropped and adjacent dims that are
// contiguous with each other on both sides are merged. When the innermost dim is contiguous on
// both sides, both base addresses and all outer strides are 16-byte multiples and the inner
// length fills whole 16-byte vectors, the copy moves 16-byte units; otherwise one element per
// unit. Offsets are 64-bit; the CUDA kernel indexes in 32 bits, dividing by the sizes with multiply and
// shift (common/uint_divider.h), when the total allows.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "common/uint_divider.h"
#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

inline constexpr int kCopyMaxDims = 6;
inline constexpr int kCopyMaxPairs = 6;

// One copy, in units of unit_bytes (16 or the element size); strides in units.
struct CopyPair {
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  int ndim = 0;
  int unit_bytes = 1;
  int64_t units = 0;  // product of sizes
  int64_t sizes[kCopyMaxDims] = {};
  int64_t src_strides[kCopyMaxDims] = {};
  int64_t dst_strides[kCopyMaxDims] = {};
  UintDivider size_dividers[kCopyMaxDims];  // sizes[d] as dividers, where sizes[d] <= 2^31 (32-bit indexing)
};

struct StridedCopyParams {
  int count = 0;
  int device = 0;  // CUDA device index of the views (the kernel launches there)
  CopyPair pairs[kCopyMaxPairs];
  int64_t total_units() const;
};

struct CopyViews {
  const TensorView& src;
  const TensorView& dst;
};

// The copies src -> dst of each pair (same shapes and dtypes, rank <= kCopyMaxDims, the callers'
// guards have checked). Empty copies are left out.
StridedCopyParams strided_copy_params(std::initializer_list<CopyViews> copies);

// Host kernel: every pair in order, the innermost run of each row with one memcpy.
void strided_copy_host(const StridedCopyParams& p, Stream stream);

// Kernel entry of a data-movement op (host: strided_copy_host; CUDA: launch_strided_copy).
using StridedCopyEntry = void (*)(const StridedCopyParams& p, Stream stream);

}  // namespace dfuse::detail
