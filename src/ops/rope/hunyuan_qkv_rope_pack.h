// diffusion.hunyuan_qkv_rope_pack — replaces HunyuanVideo's QK-norm + RoPE + joint-QKV chain of
// HunyuanVideoAttnProcessor2_0 (diffusers transformer_hunyuan_video.py): four RMSNorm module calls
// (norm_q, norm_k on the image stream, norm_added_q, norm_added_k on the text stream; the
// single-stream blocks' norm_q, norm_k over both), apply_rotary_emb(use_real=True,
// use_real_unbind_dim=-1, sequence_dim=1) on the image q and k (about 8 kernels each), and three
// torch.cat([img, txt], dim=1). Contract: bit-exact against that chain (dfuse/ops/rope.h). Per pair
// of an image head, after the row's RMSNorm rounded to T: rope_interleaved_pairs' element
// (ops/rope/rope_interleaved_pairs.h: fp32 products and sum, one rounding); text heads are
// normalized only; v is copied bit for bit. The image stream fills joint tokens [0, S_img), the text
// stream [S_img, S_img + S_txt). The kernel is the joint-QKV epilogue shared with qwen_qkv_epilogue
// (ops/rope/joint_qkv_epilogue.h / .cu).
#pragma once

#include "ops/rope/joint_qkv_epilogue.h"
