// The host loop of a row-wise elementwise op (see RowwiseParams): applies `fn(a, b, c)` to
// every element, reading broadcast operands as the geometry says. Shared by host kernels.
#pragma once

#include "common/rows.h"

namespace dfuse::detail {

template <typename T, typename Fn>
void rowwise_host(const RowwiseParams& p, Fn fn) {
  const int64_t rows = p.geom.rows(), cols = p.geom.cols;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* in[3];
    for (int k = 0; k < 3; ++k) in[k] = static_cast<const T*>(p.in[k].data) + p.in[k].offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    const int64_t s0 = p.in[0].col_stride, s1 = p.in[1].col_stride, s2 = p.in[2].col_stride;
    for (int64_t c = 0; c < cols; ++c) out[c] = fn(in[0][c * s0], in[1][c * s1], in[2][c * s2]);
  }
}

}  // namespace dfuse::detail
