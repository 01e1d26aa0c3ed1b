// ATen RoPE chains shared by the torch binding's rope-family files (the chains the Gate verifies
// against and falls back to), written as the model code writes them.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace dfuse::torch_binding {

// diffusers' apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1) with cos/sin
// already broadcastable to x (flatten(-2) is its flatten(3) for any rank):
//   x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
//   x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//   (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
inline at::Tensor rope_interleaved_pairs_eager(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  std::vector<int64_t> pair_shape(x.sizes().begin(), x.sizes().end() - 1);
  pair_shape.insert(pair_shape.end(), {-1, 2});
  const auto parts = x.reshape(pair_shape).unbind(-1);
  const at::Tensor x_rotated = at::stack({at::neg(parts[1]), parts[0]}, -1).flatten(-2);
  return (x.to(at::kFloat) * cos + x_rotated.to(at::kFloat) * sin).to(x.scalar_type());
}

}  // namespace dfuse::torch_binding
