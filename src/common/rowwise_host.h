// The host loop of a row-wise elementwise op (see RowwiseParams): applies the functor `fn` to
// every element, with as many inputs as it takes, reading broadcast operands as the geometry
// says. Shared by host kernels.
#pragma once

#include <utility>

#include "common/dispatch.h"
#include "common/rows.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

template <typename T, typename Fn, size_t... K>
void rowwise_host_inputs(const RowwiseParams& p, Fn fn, std::index_sequence<K...>) {
  const int64_t rows = p.geom.rows(), cols = p.geom.cols;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* in[] = {static_cast<const T*>(p.in[K].data) + p.in[K].offset(idx)...};
    const int64_t step[] = {p.in[K].col_stride...};
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    for (int64_t c = 0; c < cols; ++c) out[c] = fn(in[K][c * step[K]]...);
  }
}

template <typename T, typename Fn>
void rowwise_host(const RowwiseParams& p, Fn fn) {
  rowwise_host_inputs<T>(p, fn, std::make_index_sequence<rowwise_arity<T, Fn>()>{});
}

// The host entry of a row-wise op whose element functor is Op<T>: dtype dispatch, then the loop.
template <template <typename> class Op>
void rowwise_host_entry(const RowwiseParams& p, Stream) {
  dispatch_bf16_f16_f32(p.dtype, "row-wise host kernel", [&](auto tag) {
    using T = decltype(tag);
    rowwise_host<T>(p, Op<T>{});
  });
}

}  // namespace dfuse::detail
