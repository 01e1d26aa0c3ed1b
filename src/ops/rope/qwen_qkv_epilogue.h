// diffusion.qwen_qkv_epilogue — replaces Qwen-Image's QK-norm + RoPE + joint-QKV chain of
// QwenDoubleStreamAttnProcessor2_0 (diffusers transformer_qwenimage.py): four RMSNorm module calls
// (about 7 kernels each: .float(), pow, mean, + eps, rsqrt, *, .to, * weight), four
// apply_rotary_emb_qwen(use_real=False) calls (x.float(), the complex multiply with the broadcast
// freqs, .type_as), and three torch.cat([txt, img], dim=1), about 50 kernels and their
// intermediates. Contract: bit-exact against that chain (dfuse/ops/rope.h). Per pair of a head,
// after the row's RMSNorm rounded to T: qwen_complex_pair (ops/rope/joint_qkv_epilogue.h), the
// product of view_as_complex(x.float()) with the frequency (c, s) exactly as torch 2.11's CUDA
// complex<float> multiply rounds it (read from its SASS: re = fma(xr, c, -(xi * s)),
// im = fma(xr, s, xi * c)). The text stream fills joint tokens [0, S_txt), the image stream
// [S_txt, S_txt + S_img); v is copied bit for bit. The kernel is the joint-QKV epilogue shared with
// hunyuan_qkv_rope_pack (ops/rope/joint_qkv_epilogue.h / .cu).
#pragma once

#include "ops/rope/joint_qkv_epilogue.h"
