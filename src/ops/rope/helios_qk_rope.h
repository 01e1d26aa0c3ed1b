// diffusion.helios_qk_rope — replaces Helios' paired Q/K RoPE (diffusers 0.42.1
// transformer_helios.py, HeliosAttnProcessor: apply_rotary_emb_transposed on query and key), whose
// frequency table holds each token's cos and sin halves side by side ([B, S, 2D], each frequency
// repeated twice by HeliosRotaryPosEmbed), for x in (q, k):
//   x_1, x_2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//   cos, sin = freqs_cis.unsqueeze(-2).chunk(2, dim=-1)
//   out = torch.empty_like(x)
//   out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
//   out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
// About 12 eager kernels per tensor (four mixed bf16 x fp32 muls, sub, add, two strided copies into
// out). Contract: bit-exact against that chain. Pair j of a head, e = x[2j], o = x[2j+1],
// c = freqs[.., 2j], s = freqs[.., D + 2j + 1]: out = rope_pair_rounded_each(e, o, c, s) (each fp32
// product, the difference and the sum rounded, then the copy into out rounds to x's dtype), the
// arithmetic of ltx25_decoder_rope.
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "ops/rope/ltx25_decoder_rope.h"

namespace dfuse::detail {

struct HeliosQkRopeParams {
  DType dtype = DType::bf16;
  int device = 0;
  int64_t sizes[3] = {1, 1, 1};  // B, S, H
  int64_t head_dim = 0;          // D
  const void* x[2] = {nullptr, nullptr};  // q, k
  void* out[2] = {nullptr, nullptr};      // q_out, k_out
  int64_t x_strides[2][3] = {}, out_strides[2][3] = {};  // elements, dims 0..2 (the last dim is contiguous)
  const float* freqs = nullptr;
  int64_t freqs_strides[3] = {};  // b (0 when broadcast), s, channel

  DFUSE_HD float cos(const uint32_t idx[3], int64_t j) const {
    return freqs[idx[0] * freqs_strides[0] + idx[1] * freqs_strides[1] + 2 * j * freqs_strides[2]];
  }
  DFUSE_HD float sin(const uint32_t idx[3], int64_t j) const {
    return freqs[idx[0] * freqs_strides[0] + idx[1] * freqs_strides[1] + (head_dim + 2 * j + 1) * freqs_strides[2]];
  }
};

using HeliosQkRopeEntry = void (*)(const HeliosQkRopeParams& p, Stream stream);

}  // namespace dfuse::detail
