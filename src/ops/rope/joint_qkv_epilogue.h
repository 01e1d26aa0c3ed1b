// The joint-QKV epilogue shared by qwen_qkv_epilogue and hunyuan_qkv_rope_pack: the six projections
// of a joint-attention block (q, k, v of the image and the text stream, heads [B, S, H, 128]) are
// written into the joint q, k, v [B, S_txt + S_img, H, 128] in one pass, q and k normalized by
// diffusers' RMSNorm (the decomposed chain, common/rms_norm_arith.h) and rotated in pairs
// (x[2p], x[2p + 1]) by the model's RoPE, v copied. Each of the six is a part: its input rows, its
// output rows (its token range of the joint tensor), its norm and its rotation.
//
// Per row (one head): the row's inverse RMS in Reduce.cuh's 32-lane order, every element normalized
// and rounded to T, then each pair rotated from the rounded values and rounded once more to T.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/arith.h"
#include "common/guards.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_interleaved_pairs.h"

namespace dfuse::detail {

constexpr int64_t kJointQkvHeadDim = 128;
constexpr int kJointQkvParts = 6;

// The rotation a part's pairs get.
enum class PairRotation : uint8_t {
  none,          // v, and HunyuanVideo's text tokens
  complex_mul,   // Qwen-Image: view_as_complex(x.float()) * freqs, table = (re, im) pairs
  real_pairs,    // diffusers apply_rotary_emb(use_real_unbind_dim=-1): separate cos and sin tables
};

// Qwen-Image's pair: (xr + i xi) * (c + i s) as torch 2.11's CUDA complex<float> multiply computes
// it (c10::complex's a*c - b*d and a*d + b*c, contracted by nvcc into one fma each, the other
// product rounded first), then .type_as(x): one rounding to T. xr, xi, c, s are the exact float
// values of the stored operands.
template <typename T>
DFUSE_HD RotatedPair<T> qwen_complex_pair(float xr, float xi, float c, float s) {
  using St = Storage<T>;
  return {St::store(fma_rn(xr, c, -mul_rn(xi, s))), St::store(fma_rn(xr, s, mul_rn(xi, c)))};
}

struct JointQkvPart {
  RowGeometry geom;  // the input's rows (B, S, H), cols = 128
  RowOperand x, out;  // out: the part's rows in its token range of the joint tensor
  bool normalize = false;
  const void* weight = nullptr;  // [128] of x's dtype, or null
  float mean_factor = 0.0f;      // float(M) / float(M * 128), M = the input's rows
  PairRotation rotation = PairRotation::none;
  RowOperand cos, sin;  // f32 table rows of the part's tokens (complex_mul: cos = the (re, im) table)
};

struct JointQkvParams {
  DType dtype = DType::bf16;
  int device = 0;
  float eps = 0.0f;  // the Python double cast to float
  int parts = 0;
  JointQkvPart part[kJointQkvParts];
};

using JointQkvEntry = void (*)(const JointQkvParams& p, Stream stream);

// The guards of a joint epilogue `op`: the six inputs, the weights and eps, the joint outputs (token
// counts `first` then `second`: the joint order), and no overlap between outputs and anything read.
// The rotation tables are the op's own to check; `tables` lists them for the overlap checks.
void check_joint_qkv(GuardList& g, const QkvStream& first, const char* first_name, const QkvStream& second,
                     const char* second_name, double eps, const TensorView& joint_q, const TensorView& joint_k,
                     const TensorView& joint_v, std::initializer_list<const TensorView*> tables);
// An f32 table [S, 128] for the `S` tokens of `stream_name`, last dim contiguous, on x's device.
void check_joint_qkv_table(GuardList& g, const char* name, const TensorView& table, int64_t tokens,
                           const TensorView& x, const char* stream_name);

// Adds the q, k, v parts of `stream` (rows of the joint tensors from token `token_start`): q and k
// normalized and rotated by `rotation` with tables `cos` (and `sin`, real_pairs) [S, 128], v copied.
void add_joint_qkv_stream(JointQkvParams& p, const QkvStream& stream, PairRotation rotation, const TensorView* cos,
                          const TensorView* sin, int64_t token_start, const TensorView& joint_q,
                          const TensorView& joint_k, const TensorView& joint_v);
JointQkvParams joint_qkv_params(const QkvStream& any, double eps);

// The host kernel and the CUDA kernel (joint_qkv_epilogue.cu, in the CUDA library): the entries of
// both ops.
void joint_qkv_host(const JointQkvParams& p, Stream stream);
void joint_qkv_cuda(const JointQkvParams& p, Stream stream);

}  // namespace dfuse::detail
