// Eager chains of the norm + epilogue ops with fp32 internals (dfuse/eager/norm_fp32.h), composed
// from the layer_norm, rms_norm, binary, mean and cast replicas.
#include "dfuse/eager/norm_fp32.h"

#include <initializer_list>
#include <vector>

#include "dfuse/eager/binary.h"
#include "dfuse/eager/layer_norm.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/eager/rope.h"

namespace dfuse::eager {

namespace {

constexpr size_t kScratchAlign = 256;

size_t aligned_bytes(int64_t numel, DType t) {
  const size_t b = size_t(numel) * dtype_size(t);
  return (b + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// Intermediates of a chain, all of one dtype: each a contiguous tensor in the workspace, the
// workspace sized up front from the element counts.
class Scratch {
 public:
  Scratch(Workspace& ws, DType t, std::initializer_list<int64_t> numels) : ws_(ws), t_(t) {
    size_t total = 0;
    for (int64_t n : numels) total += aligned_bytes(n, t);
    ws_.reset(total);
  }
  TensorView take(const TensorView& like) { return take(like.sizes(), like.dim(), like.device()); }
  TensorView take(const int64_t* sizes, int nd, Device d) {
    int64_t numel = 1;
    for (int i = 0; i < nd; ++i) numel *= sizes[i];
    return TensorView::contiguous(ws_.take(aligned_bytes(numel, t_)), t_, sizes, nd, d);
  }

 private:
  Workspace& ws_;
  DType t_;
};

void normalize(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
               const TensorView& out, Stream stream) {
  if (norm == NormKind::layer_norm)
    layer_norm(x, weight, bias, eps, out, stream);  // F.layer_norm(x, (D,), weight, bias, eps)
  else
    rms_norm(x, weight, eps, out, stream);  // F.rms_norm(x, (D,), weight, eps)
}

// n * (1 + scale) + shift, each op rounded to out's dtype.
void modulate(const TensorView& n, const TensorView& scale, const TensorView& shift, const TensorView& one_plus_scale,
              const TensorView& scaled, const TensorView& out, Stream stream) {
  scalar_binary(BinaryOp::add, 1.0, scale, one_plus_scale, stream);  // 1 + scale
  binary(BinaryOp::mul, n, one_plus_scale, scaled, 1.0, stream);     // n * (1 + scale)
  binary(BinaryOp::add, scaled, shift, out, 1.0, stream);            // ... + shift
}

}  // namespace

void norm_scale_shift_chain(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                            double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                            Workspace& ws, Stream stream) {
  Scratch s(ws, x.dtype(), {x.numel(), scale.numel(), x.numel()});
  const TensorView n = s.take(x), one_plus_scale = s.take(scale), scaled = s.take(x);
  normalize(norm, x, weight, bias, eps, n, stream);
  modulate(n, scale, shift, one_plus_scale, scaled, out, stream);
}

void norm_scale_shift_fp32_chain(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                                 double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                                 Workspace& ws, Stream stream) {
  const int64_t nx = x.numel(), ns = scale.numel();
  Scratch s(ws, DType::f32,
            {nx, weight ? weight->numel() : 0, bias ? bias->numel() : 0, ns, shift.numel(), nx, ns, nx, nx});
  const TensorView xf = s.take(x);
  const TensorView wf = weight ? s.take(*weight) : TensorView{}, bf = bias ? s.take(*bias) : TensorView{};
  const TensorView scale_f = s.take(scale), shift_f = s.take(shift), n = s.take(x), one_plus_scale = s.take(scale),
                   scaled = s.take(x), result = s.take(x);
  cast(x, xf, stream);  // x.float()
  if (weight) cast(*weight, wf, stream);
  if (bias) cast(*bias, bf, stream);
  cast(scale, scale_f, stream);
  cast(shift, shift_f, stream);
  normalize(norm, xf, weight ? &wf : nullptr, bias ? &bf : nullptr, eps, n, stream);
  modulate(n, scale_f, shift_f, one_plus_scale, scaled, result, stream);
  cast(result, out, stream);  // .to(x.dtype)
}

namespace {

// v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight on a float v (weight float or
// null) into `out`, its intermediates taken from `s`.
void float_rms_norm(const TensorView& v, const TensorView* weight, double eps, const TensorView& out, Scratch& s,
                    Stream stream) {
  std::vector<int64_t> row_sizes(v.sizes(), v.sizes() + v.dim());
  row_sizes.back() = 1;
  const auto per_row = [&] { return s.take(row_sizes.data(), v.dim(), v.device()); };
  const TensorView sq = s.take(v), mean = per_row(), mean_eps = per_row(), r = per_row();
  const TensorView h = weight ? s.take(v) : out;
  binary(BinaryOp::mul, v, v, sq, 1.0, stream);                  // v.pow(2)
  mean_last_dim(sq, mean, stream);                               // .mean(-1, keepdim=True)
  binary_scalar(BinaryOp::add, mean, eps, mean_eps, stream);     // + eps
  rsqrt(mean_eps, r, stream);                                    // torch.rsqrt
  binary(BinaryOp::mul, v, r, h, 1.0, stream);                   // v * rsqrt(...)
  if (weight) binary(BinaryOp::mul, h, *weight, out, 1.0, stream);  // * weight
}

}  // namespace

void rmsnorm_modulate_fp32_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                                 const TensorView& shift, const TensorView& out, Workspace& ws, Stream stream) {
  const int64_t nx = x.numel(), ns = scale.numel(), rows = nx / x.size(-1);
  Scratch s(ws, DType::f32,
            {nx, weight ? weight->numel() : 0, ns, shift.numel(), nx, ns, nx, nx,  // then float_rms_norm's:
             nx, rows, rows, rows, weight ? nx : 0});
  const TensorView xf = s.take(x), wf = weight ? s.take(*weight) : TensorView{}, scale_f = s.take(scale),
                   shift_f = s.take(shift), n = s.take(x), one_plus_scale = s.take(scale), scaled = s.take(x),
                   result = s.take(x);
  cast(x, xf, stream);  // .float() of every operand
  if (weight) cast(*weight, wf, stream);
  cast(scale, scale_f, stream);
  cast(shift, shift_f, stream);
  float_rms_norm(xf, weight ? &wf : nullptr, eps, n, s, stream);  // RMSNorm(x.float())
  modulate(n, scale_f, shift_f, one_plus_scale, scaled, result, stream);
  cast(result, out, stream);  // .to(x.dtype)
}

void rmsnorm_tanh_residual_fp32_chain(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                      const TensorView* weight, double eps, const TensorView& out, Workspace& ws,
                                      Stream stream) {
  const int64_t ny = y.numel(), ng = gate.numel(), rows = ny / y.size(-1);
  Scratch s(ws, DType::f32,
            {ny, weight ? weight->numel() : 0, residual.numel(), ng, ny, ng, ny, ny,  // then float_rms_norm's:
             ny, rows, rows, rows, weight ? ny : 0});
  const TensorView yf = s.take(y), wf = weight ? s.take(*weight) : TensorView{}, rf = s.take(residual),
                   gf = s.take(gate), n = s.take(y), tanh_gate = s.take(gate), gated = s.take(y), result = s.take(y);
  cast(y, yf, stream);  // .float() of every operand
  if (weight) cast(*weight, wf, stream);
  cast(residual, rf, stream);
  cast(gate, gf, stream);
  float_rms_norm(yf, weight ? &wf : nullptr, eps, n, s, stream);  // RMSNorm(y.float())
  tanh(gf, tanh_gate, stream);                                     // torch.tanh(gate)
  binary(BinaryOp::mul, tanh_gate, n, gated, 1.0, stream);         // tanh(gate) * RMSNorm(y)
  binary(BinaryOp::add, rf, gated, result, 1.0, stream);           // residual + ...
  cast(result, out, stream);                                       // .to(y.dtype)
}

}  // namespace dfuse::eager
