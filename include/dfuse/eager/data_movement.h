// dfuse eager replicas of aten's data movement, and the chains of the data-movement ops built
// from them exactly as model code writes them: `dst.copy_(src)` one element per thread (what
// `.contiguous()` and `torch.cat` do with each input). Independent of the fused ops' shared copy.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

// dst.copy_(src): src and dst of one shape and dtype (bf16, f16 or f32), any strides.
void copy(const TensorView& src, const TensorView& dst, Stream stream = {});

// x.permute(2, 1, 0, 3, 4).contiguous(): x [W, S, B, h, D] into out [B, S, W, h, D].
void usp_merge_heads_chain(const TensorView& x, const TensorView& out, Stream stream = {});
// torch.cat([img, txt], dim=1) into out.
void cat_tokens_chain(const TensorView& img, const TensorView& txt, const TensorView& out,
                      Stream stream = {});
// Per destination w of W = out.size(0): out[w] = cat over heads h < L of cat([q, k, v][:, wL + h], dim=-1),
// one copy per (destination, q/k/v).
void pack_qkv_destination_major_chain(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, Stream stream = {});

// The varlen chains, computed on the host whatever the tensors' device (src/eager/varlen.cpp):
// they move rows of bytes, so a host gather reproduces them exactly. Every tensor is contiguous;
// indices are 1-D int32 or int64, and an index out of range throws InvalidArgument.
// x.reshape(B * S, H, D).index_select(0, indices) into out [n, H, D], for x [B, S, H, D].
void index_select_tokens_chain(const TensorView& x, const TensorView& indices, const TensorView& out,
                               Stream stream = {});
// torch.cat([prefix, main], dim=1).reshape(B * (Sp + Sm), H, D).index_select(0, indices) into out.
void cat_index_select_tokens_chain(const TensorView& prefix, const TensorView& main, const TensorView& indices,
                                   const TensorView& out, Stream stream = {});
// torch.zeros(B * S, H, D).index_copy_(0, indices, x) into out [B, S, H, D], given by the inverse
// indices: out token r is x[inv_indices[r]], or zeros where inv_indices[r] < 0.
void scatter_tokens_to_padded_chain(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                                    Stream stream = {});

}  // namespace dfuse::eager
