// Eager RMSNorm replicas: the public entry points (guards, aten's path and Reduce.cuh's
// configuration), the host loops, which emulate aten's thread structure literally, and the chains.
#include "dfuse/eager/rms_norm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rms_norm_arith.h"
#include "common/rowwise_guards.h"
#include "dfuse/eager/binary.h"
#include "eager/rms_norm_params.h"

namespace dfuse::eager {

namespace {

using dfuse::detail::add_rn;
using dfuse::detail::LayerNormPath;
using dfuse::detail::Storage;

// One warp's shuffle-down sum (offsets 16..1), all 32 lanes updated at once as the hardware does.
float warp_shuffle_down_sum(const float* lanes_in) {
  float v[32];
  std::memcpy(v, lanes_in, sizeof v);
  for (int off = 16; off >= 1; off /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = l + off < 32 ? add_rn(v[l], v[l + off]) : v[l];
    std::memcpy(v, next, sizeof v);
  }
  return v[0];
}

template <typename T>
void host_rms_norm_typed(const detail::RmsNormParams& p) {
  using S = Storage<T>;
  const int64_t n = p.geom.cols;
  const auto* weight = static_cast<const T*>(p.weight);
  for (int64_t r = 0; r < p.geom.rows(); ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    float rstd;
    if (p.path == LayerNormPath::vectorized) {
      float thread_sum[128] = {};  // block (32, 4): thread x + 32 y
      for (int t = 0; t < 128; ++t)
        for (int64_t i = t; i < n / 4; i += 128)
          for (int k = 0; k < 4; ++k) {
            const float v = S::load(x[4 * i + k]);
            thread_sum[t] = dfuse::detail::fma_rn(v, v, thread_sum[t]);
          }
      float warp_sum[4];
      for (int w = 0; w < 4; ++w) warp_sum[w] = warp_shuffle_down_sum(thread_sum + 32 * w);
      // shared-memory tree: offset 2 (warp0 += warp2, warp1 += warp3), offset 1 (warp0 += warp1)
      warp_sum[0] = add_rn(warp_sum[0], warp_sum[2]);
      warp_sum[1] = add_rn(warp_sum[1], warp_sum[3]);
      warp_sum[0] = add_rn(warp_sum[0], warp_sum[1]);
      rstd = dfuse::detail::rsqrt_f(add_rn(dfuse::detail::div_rn(warp_sum[0], float(n)), p.eps));
    } else {
      const auto m = dfuse::detail::layer_norm_stats_generic_host([&](int64_t k) { return S::load(x[k]); }, n);
      rstd = dfuse::detail::rsqrt_f(add_rn(dfuse::detail::fma_rn(m.mean, m.mean, m.var), p.eps));
    }
    for (int64_t k = 0; k < n; ++k) {
      const float v = S::load(x[k]);
      float y = p.path == LayerNormPath::vectorized ? dfuse::detail::mul_rn(rstd, v) : dfuse::detail::mul_rn(v, rstd);
      if (weight) y = dfuse::detail::mul_rn(y, S::load(weight[k]));
      out[k] = S::store(y);
    }
  }
}

void host_rms_norm(const detail::RmsNormParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.rms_norm",
                                       [&](auto tag) { host_rms_norm_typed<decltype(tag)>(p); });
}
DFUSE_REGISTER_ENTRY(host, "eager.rms_norm", &host_rms_norm);

// Reduce.cuh for one row: lanes tx = 0..bw-1 of a (bw, bh) block, the row's 16-byte alignment taken
// from its address, vec accumulators per lane, then block_x_reduce.
template <typename T>
float host_mean_row(const T* row, const detail::MeanParams& p) {
  using S = Storage<T>;
  std::vector<float> lane(size_t(p.bw));
  const int64_t n = p.n;
  for (int tx = 0; tx < p.bw; ++tx) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int width = 4;
    if (p.vectorized) {
      width = p.vec;
      const T* data = row;
      int64_t end = n;
      const int shift = int(reinterpret_cast<uintptr_t>(row) % 16 / sizeof(T));
      if (shift > 0) {
        data -= shift;
        end += shift;
        if (tx >= shift && tx < p.vec) acc[0] = add_rn(acc[0], S::load(data[tx]));
        end -= p.vec;
        data += p.vec;
      }
      int64_t idx = tx;
      while (idx * p.vec + p.vec - 1 < end) {
        for (int i = 0; i < p.vec; ++i) acc[i] = add_rn(acc[i], S::load(data[idx * p.vec + i]));
        idx += p.bw;
      }
      const int64_t t = end - end % p.vec + tx;
      if (t < end) acc[0] = add_rn(acc[0], S::load(data[t]));
    } else {
      int64_t idx = tx;
      while (idx + 3 * p.bw < n) {
        for (int i = 0; i < 4; ++i) acc[i] = add_rn(acc[i], S::load(row[idx + i * p.bw]));
        idx += 4 * p.bw;
      }
      for (int i = 0; i < 4; ++i) {
        if (idx >= n) break;
        acc[i] = add_rn(acc[i], S::load(row[idx]));
        idx += p.bw;
      }
    }
    float v = acc[0];
    for (int i = 1; i < width; ++i) v = add_rn(v, acc[i]);
    lane[size_t(tx)] = v;
  }
  int width = p.bw;
  if (width > 32) {  // shared-memory tree, offsets bw/2 .. 32
    for (int off = width / 2; off >= 32; off /= 2)
      for (int tx = 0; tx < off; ++tx) lane[size_t(tx)] = add_rn(lane[size_t(tx)], lane[size_t(tx + off)]);
    width = 32;
  }
  std::vector<float> v(lane.begin(), lane.begin() + width);
  for (int off = width / 2; off >= 1; off /= 2) {
    std::vector<float> next = v;
    for (int l = 0; l + off < width; ++l) next[size_t(l)] = add_rn(v[size_t(l)], v[size_t(l + off)]);
    v = next;
  }
  return dfuse::detail::mul_rn(v[0], p.factor);
}

void host_mean(const detail::MeanParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.mean_last_dim", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < p.rows; ++r)
      static_cast<T*>(p.out)[r] = Storage<T>::store(host_mean_row(static_cast<const T*>(p.x) + r * p.n, p));
  });
}
DFUSE_REGISTER_ENTRY(host, "eager.mean_last_dim", &host_mean);

template <typename In, typename Out>
void host_unary_typed(const detail::UnaryParams& p) {
  const int64_t n = p.layout.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[3];
    p.layout.offsets(i, off);
    const float v = Storage<In>::load(static_cast<const In*>(p.x)[off[1]]);
    const float r = p.op == detail::UnaryOp::rsqrt  ? dfuse::detail::rsqrt_f(v)
                    : p.op == detail::UnaryOp::tanh ? dfuse::detail::tanh_f(v)
                                                    : v;
    static_cast<Out*>(p.out)[off[0]] = Storage<Out>::store(r);
  }
}

void host_unary(const detail::UnaryParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.in_dtype, "eager.unary", [&](auto in) {
    dfuse::detail::dispatch_bf16_f16_f32(p.out_dtype, "eager.unary", [&](auto out) {
      host_unary_typed<decltype(in), decltype(out)>(p);
    });
  });
}
DFUSE_REGISTER_ENTRY(host, "eager.unary", &host_unary);

template <typename Entry>
Entry entry_for(Device d, const char* symbol) {
  return reinterpret_cast<Entry>(dfuse::detail::find_entry(dfuse::detail::backend_for(d), symbol));
}

void check_weight(dfuse::detail::GuardList& g, const TensorView* w, const TensorView& x) {
  if (!w) return;
  g.same_dtype("weight", *w, x, "x");
  g.same_device("weight", *w, x, "x");
  g.not_null("weight", *w);
  if (g.ok() && (w->dim() != 1 || w->size(0) != x.size(-1) || (w->stride(0) != 1 && w->size(0) > 1)))
    g.fail("shape", "weight must be a contiguous [" + std::to_string(x.size(-1)) + "], got " +
                        dfuse::detail::shape_str(*w));
}

void unary(detail::UnaryOp op, const TensorView& x, const TensorView& out, Stream stream) {
  if (x.device() != out.device()) throw InvalidArgument("eager unary: x and out on different devices");
  if (op != detail::UnaryOp::to_dtype && x.dtype() != out.dtype())
    throw InvalidArgument("eager rsqrt/tanh: x and out must have one dtype");
  detail::UnaryParams p;
  p.op = op;
  p.in_dtype = x.dtype();
  p.out_dtype = out.dtype();
  p.layout = detail::make_layout(out, x, nullptr);
  p.out = out.data();
  p.x = x.data();
  if (out.numel() == 0) return;
  entry_for<detail::UnaryEntry>(x.device(), "eager.unary")(p, stream);
}

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Bytes of scratch the decomposed chain takes from a workspace for x.
size_t decomposed_scratch_bytes(const TensorView& x) {
  const size_t elems = size_t(x.numel()), rows = elems / size_t(x.size(-1));
  return 3 * aligned(elems * 4) + 3 * aligned(rows * 4) + aligned(elems * dtype_size(x.dtype()));
}

// The decomposed chain's ops, taking their intermediates from `ws` (already reset).
void decomposed_steps(const TensorView& x, const TensorView* weight, double eps, const TensorView& out,
                      Workspace& ws, Stream stream) {
  const int nd = x.dim();
  std::vector<int64_t> sizes(x.sizes(), x.sizes() + nd), row_sizes = sizes;
  row_sizes[size_t(nd - 1)] = 1;
  const size_t elems = size_t(x.numel()), rows = elems / size_t(x.size(-1));
  const Device d = x.device();
  auto f32 = [&](const std::vector<int64_t>& s, size_t n) {
    return TensorView::contiguous(ws.take(aligned(n * 4)), DType::f32, s.data(), int(s.size()), d);
  };
  const TensorView xf = f32(sizes, elems), sq = f32(sizes, elems), v = f32(row_sizes, rows),
                   v_eps = f32(row_sizes, rows), r = f32(row_sizes, rows), h = f32(sizes, elems);
  to_dtype(x, xf, stream);                                   // x.float()
  binary(BinaryOp::mul, xf, xf, sq, 1.0, stream);            // .pow(2)
  mean_last_dim(sq, v, stream);                              // .mean(-1, keepdim=True)
  binary_scalar(BinaryOp::add, v, eps, v_eps, stream);       // v + eps
  rsqrt(v_eps, r, stream);                                   // torch.rsqrt
  binary(BinaryOp::mul, xf, r, h, 1.0, stream);              // x.float() * r
  if (!weight) {
    to_dtype(h, out, stream);  // .to(input dtype)
    return;
  }
  const TensorView hT = TensorView::contiguous(ws.take(aligned(elems * dtype_size(x.dtype()))), x.dtype(),
                                               sizes.data(), nd, d);
  to_dtype(h, hT, stream);                                   // .to(weight.dtype)
  binary(BinaryOp::mul, hT, *weight, out, 1.0, stream);      // * weight
}

// Bytes of scratch the storage-dtype chain takes for x.
size_t storage_scratch_bytes(const TensorView& x) {
  const size_t elems = size_t(x.numel()), rows = elems / size_t(x.size(-1)), es = dtype_size(x.dtype());
  return 2 * aligned(elems * es) + 3 * aligned(rows * es);
}

// x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight, every op in x's dtype, its
// intermediates from `ws` (already reset).
void storage_steps(const TensorView& x, const TensorView* weight, double eps, const TensorView& out, Workspace& ws,
                   Stream stream) {
  const int nd = x.dim();
  std::vector<int64_t> sizes(x.sizes(), x.sizes() + nd), row_sizes = sizes;
  row_sizes[size_t(nd - 1)] = 1;
  const size_t elems = size_t(x.numel()), rows = elems / size_t(x.size(-1)), es = dtype_size(x.dtype());
  auto tensor = [&](const std::vector<int64_t>& s, size_t n) {
    return TensorView::contiguous(ws.take(aligned(n * es)), x.dtype(), s.data(), int(s.size()), x.device());
  };
  const TensorView sq = tensor(sizes, elems), ms = tensor(row_sizes, rows), ms_eps = tensor(row_sizes, rows),
                   rstd = tensor(row_sizes, rows);
  binary(BinaryOp::mul, x, x, sq, 1.0, stream);             // x.pow(2)
  mean_last_dim(sq, ms, stream);                            // .mean(-1, keepdim=True)
  binary_scalar(BinaryOp::add, ms, eps, ms_eps, stream);    // + eps
  rsqrt(ms_eps, rstd, stream);                              // torch.rsqrt
  if (!weight) {
    binary(BinaryOp::mul, x, rstd, out, 1.0, stream);       // x * rstd
    return;
  }
  const TensorView h = tensor(sizes, elems);
  binary(BinaryOp::mul, x, rstd, h, 1.0, stream);           // x * rstd
  binary(BinaryOp::mul, h, *weight, out, 1.0, stream);      // * weight
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView* weight, double eps, const TensorView& out, Stream stream) {
  dfuse::detail::GuardList g("eager.rms_norm");
  dfuse::detail::check_rowwise_input(g, "x", x);
  check_weight(g, weight, x);
  dfuse::detail::check_rowwise_output(g, out, x, {{"x", &x, false}});
  g.throw_if_failed();
  if (x.numel() == 0) return;
  detail::RmsNormParams p;
  p.dtype = x.dtype();
  p.device = x.device().index;
  p.geom = dfuse::detail::row_geometry(x);
  p.x = dfuse::detail::row_operand(x, x);
  p.out = dfuse::detail::row_operand(out, x);
  p.weight = weight ? weight->data() : nullptr;
  p.eps = float(eps);
  p.path = dfuse::detail::layer_norm_path(x, weight, nullptr);
  entry_for<detail::RmsNormEntry>(x.device(), "eager.rms_norm")(p, stream);
}

void mean_last_dim(const TensorView& x, const TensorView& out, Stream stream) {
  if (x.dtype() != out.dtype() || !x.is_contiguous() || !out.is_contiguous() || x.dim() < 1)
    throw InvalidArgument("eager.mean_last_dim: contiguous x and out of one dtype only");
  detail::MeanParams p;
  p.dtype = x.dtype();
  p.device = x.device().index;
  p.x = x.data();
  p.out = out.data();
  p.n = x.size(-1);
  p.rows = p.n ? x.numel() / p.n : 0;
  if (out.numel() != p.rows) throw InvalidArgument("eager.mean_last_dim: out must hold one value per row");
  if (p.rows == 0 || p.n == 0) return;
  p.vec = int(16 / dtype_size(x.dtype()));
  const dfuse::detail::MeanReduceConfig c = dfuse::detail::mean_reduce_config(p.rows, p.n, p.vec);
  if (c.split)
    throw Unsupported("eager.mean_last_dim", "extent",
                      "eager.mean_last_dim: rows of " + std::to_string(p.n) +
                          " split across warps in Reduce.cuh; that order is not replicated");
  p.bw = c.lanes;
  const int64_t d1 = p.rows < 512 ? dfuse::detail::last_pow2(p.rows) : 512;
  p.bh = int(std::min<int64_t>(d1, 512 / std::min<int64_t>(c.lanes, 32)));
  p.vectorized = c.vectorized;
  p.factor = dfuse::detail::mean_factor(p.rows, p.n);
  entry_for<detail::MeanEntry>(x.device(), "eager.mean_last_dim")(p, stream);
}

void to_dtype(const TensorView& x, const TensorView& out, Stream stream) { unary(detail::UnaryOp::to_dtype, x, out, stream); }
void rsqrt(const TensorView& x, const TensorView& out, Stream stream) { unary(detail::UnaryOp::rsqrt, x, out, stream); }
void tanh(const TensorView& x, const TensorView& out, Stream stream) { unary(detail::UnaryOp::tanh, x, out, stream); }

void rms_norm_decomposed_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& out,
                               Workspace& ws, Stream stream) {
  ws.reset(decomposed_scratch_bytes(x));
  decomposed_steps(x, weight, eps, out, ws, stream);
}

void rmsnorm_scale_shift_chain(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                               const TensorView& scale, const TensorView& shift, const TensorView& out, Workspace& ws,
                               Stream stream) {
  const int nd = x.dim();
  const size_t elem = dtype_size(x.dtype());
  ws.reset(decomposed_scratch_bytes(x) + 2 * aligned(size_t(x.numel()) * elem) + aligned(size_t(scale.numel()) * elem));
  const TensorView normed =
      TensorView::contiguous(ws.take(aligned(size_t(x.numel()) * elem)), x.dtype(), x.sizes(), nd, x.device());
  const TensorView scaled =
      TensorView::contiguous(ws.take(aligned(size_t(x.numel()) * elem)), x.dtype(), x.sizes(), nd, x.device());
  const TensorView one_plus_scale = TensorView::contiguous(ws.take(aligned(size_t(scale.numel()) * elem)),
                                                           scale.dtype(), scale.sizes(), scale.dim(), scale.device());
  if (chain == RmsNormChain::torch_rms_norm)
    rms_norm(x, weight, eps, normed, stream);  // F.rms_norm(x, (D,), weight, eps)
  else
    decomposed_steps(x, weight, eps, normed, ws, stream);  // diffusers RMSNorm(x)
  scalar_binary(BinaryOp::add, 1.0, scale, one_plus_scale, stream);  // 1 + scale
  binary(BinaryOp::mul, normed, one_plus_scale, scaled, 1.0, stream);  // normed * (1 + scale)
  binary(BinaryOp::add, scaled, shift, out, 1.0, stream);             // ... + shift
}

void rms_norm_storage_dtype_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& out,
                                  Workspace& ws, Stream stream) {
  ws.reset(storage_scratch_bytes(x));
  storage_steps(x, weight, eps, out, ws, stream);
}

void rmsnorm_scale_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                         const TensorView& out, Workspace& ws, Stream stream) {
  const size_t es = dtype_size(x.dtype());
  ws.reset(storage_scratch_bytes(x) + aligned(size_t(x.numel()) * es));
  const TensorView normed =
      TensorView::contiguous(ws.take(aligned(size_t(x.numel()) * es)), x.dtype(), x.sizes(), x.dim(), x.device());
  storage_steps(x, weight, eps, normed, ws, stream);  // RMSNorm(x)
  binary(BinaryOp::mul, normed, scale, out, 1.0, stream);  // ... * scale
}

void rmsnorm_tanh_residual_chain(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                 const TensorView* weight, double eps, const TensorView& out, Workspace& ws,
                                 Stream stream) {
  const size_t es = dtype_size(y.dtype());
  ws.reset(storage_scratch_bytes(y) + 2 * aligned(size_t(y.numel()) * es) + aligned(size_t(gate.numel()) * es));
  const TensorView normed =
      TensorView::contiguous(ws.take(aligned(size_t(y.numel()) * es)), y.dtype(), y.sizes(), y.dim(), y.device());
  const TensorView gated =
      TensorView::contiguous(ws.take(aligned(size_t(y.numel()) * es)), y.dtype(), y.sizes(), y.dim(), y.device());
  const TensorView tanh_gate = TensorView::contiguous(ws.take(aligned(size_t(gate.numel()) * es)), gate.dtype(),
                                                      gate.sizes(), gate.dim(), gate.device());
  storage_steps(y, weight, eps, normed, ws, stream);         // RMSNorm(y)
  tanh(gate, tanh_gate, stream);                             // torch.tanh(gate)
  binary(BinaryOp::mul, tanh_gate, normed, gated, 1.0, stream);  // tanh(gate) * RMSNorm(y)
  binary(BinaryOp::add, residual, gated, out, 1.0, stream);      // residual + ...
}

}  // namespace dfuse::eager
