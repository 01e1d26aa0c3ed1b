// Eager copy replica: checks, the public entry points, the chains and the host loop.
#include "eager/copy.h"

#include <cstring>

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/eager/data_movement.h"

namespace dfuse::eager {

namespace {

void host_copy(const detail::CopyParams& p, Stream) {
  int64_t index[TensorView::kMaxDims] = {};
  for (int64_t i = 0; i < p.numel; ++i) {
    int64_t src_offset = 0, dst_offset = 0;
    for (int d = 0; d < p.ndim; ++d) {
      src_offset += index[d] * p.src_strides[d];
      dst_offset += index[d] * p.dst_strides[d];
    }
    std::memcpy(static_cast<char*>(p.dst) + dst_offset * p.element_bytes,
                static_cast<const char*>(p.src) + src_offset * p.element_bytes, size_t(p.element_bytes));
    for (int d = p.ndim - 1; d >= 0 && ++index[d] == p.sizes[d]; --d) index[d] = 0;
  }
}
DFUSE_REGISTER_ENTRY(host, "eager.copy", &host_copy);

// A view's dims permuted: dim d of the result is dim order[d] of t.
TensorView permuted(const TensorView& t, const int* order) {
  int64_t sizes[TensorView::kMaxDims], strides[TensorView::kMaxDims];
  for (int d = 0; d < t.dim(); ++d) sizes[d] = t.size(order[d]), strides[d] = t.stride(order[d]);
  return t.restrided(sizes, strides, t.dim());
}

}  // namespace

void copy(const TensorView& src, const TensorView& dst, Stream stream) {
  dfuse::detail::GuardList g("eager.copy");
  g.dtype_in("src", src, {DType::bf16, DType::f16, DType::f32});
  g.same_dtype("dst", dst, src, "src");
  g.same_device("dst", dst, src, "src");
  g.same_shape("dst", dst, src, "src");
  g.throw_if_failed();
  detail::CopyParams p{src.data(), dst.data(), int(dtype_size(src.dtype())), src.dim(), src.numel(),
                       {}, {}, {}};
  for (int d = 0; d < src.dim(); ++d)
    p.sizes[d] = src.size(d), p.src_strides[d] = src.stride(d), p.dst_strides[d] = dst.stride(d);
  if (p.numel == 0) return;
  auto entry = reinterpret_cast<detail::CopyEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(src.device()), "eager.copy"));
  entry(p, stream);
}

void usp_merge_heads_chain(const TensorView& x, const TensorView& out, Stream stream) {
  const int order[] = {2, 1, 0, 3, 4};
  copy(permuted(x, order), out, stream);
}

void cat_tokens_chain(const TensorView& img, const TensorView& txt, const TensorView& out, Stream stream) {
  copy(img, out.narrow(1, 0, img.size(1)), stream);
  copy(txt, out.narrow(1, img.size(1), txt.size(1)), stream);
}

void pack_qkv_destination_major_chain(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, Stream stream) {
  const int64_t world = out.size(0), local = out.size(2), head_size = q.size(2);
  const TensorView* sources[] = {&q, &k, &v};
  for (int64_t w = 0; w < world; ++w) {
    const TensorView shard = out.narrow(0, w, 1);  // [1, rows, L, 3hs]
    const int64_t sizes[] = {shard.size(1), shard.size(2), shard.size(3)};
    const int64_t strides[] = {shard.stride(1), shard.stride(2), shard.stride(3)};
    const TensorView destination = shard.restrided(sizes, strides, 3);
    for (int slot = 0; slot < 3; ++slot)
      copy(sources[slot]->narrow(1, w * local, local), destination.narrow(2, slot * head_size, head_size),
           stream);
  }
}

}  // namespace dfuse::eager
