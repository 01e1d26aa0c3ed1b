// The one row gather behind the varlen data-movement ops (varlen_pack_qkv,
// varlen_pack_segmented_qkv, varlen_scatter_to_padded): up to kGatherMaxJobs gathers sharing one
// index list, in one launch. Output row r of a job (row_elems contiguous elements) is the source
// row that index[r] names, or zeros (+0.0 bits) when index[r] < 0 and padding is allowed. Values
// are moved as bytes, never computed, so results are bitwise identical to aten's index_select /
// index_copy_ (NaN payloads and -0 included).
//
// Rows move in 16-byte units when the row bytes fill whole vectors and every base address is
// 16-byte aligned, else in elements. Offsets are 64-bit; indices are int32 or int64. The CUDA
// kernel does not check index values (out of range is undefined behaviour, like an unchecked
// gather); the host loop throws InvalidArgument on one.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

inline constexpr int kGatherMaxJobs = 3;

// One gather: rows of `sources[0]` (and, for a segmented layout, `sources[1]`) into `dst`.
struct RowGatherJob {
  const uint8_t* sources[2] = {};
  uint8_t* dst = nullptr;
};

// Where index i reads. Plain (segment == 0): row i of source 0. Segmented (the segmented op
// sets segment and prefix): token t = i % segment of batch b = i / segment of the virtual
// cat([source 0 [B, prefix], source 1 [B, segment - prefix]], dim=1), i.e. row b * prefix + t of
// source 0 when t < prefix, else row b * (segment - prefix) + t - prefix of source 1.
struct RowGatherParams {
  int count = 0;
  int device = 0;  // CUDA device index of the views (the kernel launches there)
  const void* indices = nullptr;
  bool wide_indices = false;  // int64 indices, else int32
  bool padding = false;       // a negative index writes a row of zeros
  int64_t rows = 0;           // output rows per job (= index count)
  int64_t index_limit = 0;    // indices must be < this (the host loop checks)
  int64_t segment = 0;
  int64_t prefix = 0;
  int unit_bytes = 1;
  int64_t row_units = 0;  // units per row
  RowGatherJob jobs[kGatherMaxJobs];

  // Source and row that index `at` names (at >= 0); the one formula of both backends.
  DFUSE_HD void source_row(int64_t at, int& source, int64_t& row) const {
    if (segment == 0) {
      source = 0, row = at;
      return;
    }
    const int64_t batch = at / segment, token = at % segment;
    if (token < prefix)
      source = 0, row = batch * prefix + token;
    else
      source = 1, row = batch * (segment - prefix) + token - prefix;
  }
  DFUSE_HD int64_t index_at(int64_t r) const {
    return wide_indices ? static_cast<const int64_t*>(indices)[r] : static_cast<const int32_t*>(indices)[r];
  }
};

struct RowGatherViews {
  const TensorView* first;
  const TensorView* second;  // null unless segmented
  const TensorView& dst;
};

// The gathers of `jobs` (contiguous views of one dtype, the callers' guards have checked) by the
// index list `indices` [rows] into rows of `row_elems` elements.
RowGatherParams row_gather_params(const TensorView& indices, int64_t row_elems, int64_t index_limit,
                                  bool padding, std::initializer_list<RowGatherViews> jobs);

// Host kernel: every job's rows in order, one memcpy (or memset) per row.
void row_gather_host(const RowGatherParams& p, Stream stream);

// Kernel entry of a varlen op (host: row_gather_host; CUDA: launch_row_gather).
using RowGatherEntry = void (*)(const RowGatherParams& p, Stream stream);

}  // namespace dfuse::detail
