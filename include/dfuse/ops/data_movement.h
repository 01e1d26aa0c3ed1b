// dfuse ops, data-movement family: permutes, concatenations and packs that move values without
// computing any. Contract of every op: bitwise identical to the aten chain by construction (bytes
// are copied, NaN payloads and -0 included), in bf16, f16 and f32, on host and CUDA alike.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts (and,
// given `why`, says which guard failed), and <op>(...) re-checks and throws dfuse::Unsupported
// naming the failed guard. The backend is chosen by the device of the tensors. Inputs may be
// strided views (any non-negative outer strides, last dim contiguous); outputs are caller-owned,
// contiguous and never overlap an input or each other.
#pragma once

#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.usp_merge_heads: out = x.permute(2, 1, 0, 3, 4).contiguous(), the head merge after
// the Ulysses all-to-all.
//   x:    [W, S, B, h, D]
//   out:  [B, S, W, h, D], contiguous
bool can_use_usp_merge_heads(const TensorView& x, const TensorView& out, std::string* why = nullptr);
void usp_merge_heads(const TensorView& x, const TensorView& out, Stream stream = {});

// Three views of one attention's query, key and value.
struct QkvViews {
  TensorView q, k, v;
};

// diffusion.joint_qkv_cat: out.q = torch.cat([img.q, txt.q], dim=1), the same for k and v, in
// one launch (image tokens first).
//   img:  q, k, v [B, Si, H, D] (e.g. strided views of a packed projection)
//   txt:  q, k, v [B, St, H, D]
//   out:  q, k, v [B, Si + St, H, D], contiguous
bool can_use_joint_qkv_cat(const QkvViews& img, const QkvViews& txt, const QkvViews& out,
                           std::string* why = nullptr);
void joint_qkv_cat(const QkvViews& img, const QkvViews& txt, const QkvViews& out, Stream stream = {});

// diffusion.pack_qkv_destination_major: the per-destination head shards of q, k and v for a
// Ulysses all-to-all over W ranks. With L = G / W,
//   out[w, r, h, 0:hs] = q[r, w * L + h], out[w, r, h, hs:2hs] = k[...], out[w, r, h, 2hs:] = v[...]
//   q, k, v: [rows, G, hs] (any row and head strides)
//   out:     [W, rows, L, 3 * hs], contiguous; W = out.size(0) divides G
bool can_use_pack_qkv_destination_major(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& out, std::string* why = nullptr);
void pack_qkv_destination_major(const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView& out, Stream stream = {});

// The varlen ops (packing the valid tokens of masked attention and scattering them back) take
// contiguous inputs and an index list, int32 or int64. Index values are not checked on CUDA: an
// index out of range is undefined behaviour, as in an unchecked gather. The host backend throws
// dfuse::InvalidArgument on one.

// diffusion.varlen_pack_qkv: out.x = x.reshape(B * S, H, D).index_select(0, indices) for x in q,
// k, v, in one launch.
//   x:        q, k, v [B, S, H, D], contiguous
//   indices:  [n], int32 or int64, values in [0, B * S)
//   out:      q, k, v [n, H, D], contiguous
bool can_use_varlen_pack_qkv(const QkvViews& x, const TensorView& indices, const QkvViews& out,
                             std::string* why = nullptr);
void varlen_pack_qkv(const QkvViews& x, const TensorView& indices, const QkvViews& out, Stream stream = {});

// diffusion.varlen_pack_segmented_qkv: varlen_pack_qkv on torch.cat([prefix, main], dim=1) without
// the cat: index i is token i % (Sp + Sm) of batch i / (Sp + Sm), from prefix when that token is
// < Sp, else from main. Bits are copied exactly (-0 stays -0).
//   prefix:   q, k, v [B, Sp, H, D], contiguous
//   main:     q, k, v [B, Sm, H, D], contiguous
//   indices:  [n], int32 or int64, values in [0, B * (Sp + Sm))
//   out:      q, k, v [n, H, D], contiguous
bool can_use_varlen_pack_segmented_qkv(const QkvViews& prefix, const QkvViews& main, const TensorView& indices,
                                       const QkvViews& out, std::string* why = nullptr);
void varlen_pack_segmented_qkv(const QkvViews& prefix, const QkvViews& main, const TensorView& indices,
                               const QkvViews& out, Stream stream = {});

// diffusion.varlen_scatter_to_padded: out.view(B * S, H, D)[r] = x[inv_indices[r]], or exact
// zeros (+0.0) where inv_indices[r] < 0 (padding); the padded layout back from a packed one
// (zeros.index_copy_(0, indices, x)).
//   x:            [n, H, D], contiguous
//   inv_indices:  [B * S], int32 or int64, values in [-1, n)
//   out:          [B, S, H, D], contiguous
bool can_use_varlen_scatter_to_padded(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                                      std::string* why = nullptr);
void varlen_scatter_to_padded(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                              Stream stream = {});

}  // namespace dfuse
