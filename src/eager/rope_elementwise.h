// Internal: the eager replicas of the rope family's extra aten primitives (cast across dtypes,
// neg, binary ops under type promotion, f32 addcmul_), shared by the host loop and the CUDA kernel.
// Operand layout as in eager/elementwise.h: 0 is the output, 1 and 2 the inputs (addcmul_ also
// reads the output, its self).
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "eager/elementwise.h"

namespace dfuse::eager::detail {

enum class MixedOp : uint8_t { cast, neg, add, sub, mul, addcmul_inplace };

struct MixedParams {
  MixedOp op = MixedOp::cast;
  int device = 0;  // CUDA device index of the operands (the kernel launches there)
  DType out_dtype = DType::f32, a_dtype = DType::f32, b_dtype = DType::f32;
  ElementwiseLayout layout;
  void* out = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;  // binary ops only
};

// The exact value of element `i` of a bf16/f16/f32/f64 buffer.
DFUSE_HD double load_exact(const void* p, DType t, int64_t i) {
  using dfuse::detail::Storage;
  switch (t) {
    case DType::bf16: return Storage<bf16_t>::load(static_cast<const bf16_t*>(p)[i]);
    case DType::f16: return Storage<f16_t>::load(static_cast<const f16_t*>(p)[i]);
    case DType::f32: return static_cast<const float*>(p)[i];
    default: return static_cast<const double*>(p)[i];
  }
}

// Stores v as aten's cast does: f64 as is, f32 rounded once, bf16/f16 through float (two
// roundings, c10's conversions take a float).
DFUSE_HD void store_cast(void* p, DType t, int64_t i, double v) {
  using dfuse::detail::double_to_float_rn;
  using dfuse::detail::Storage;
  switch (t) {
    case DType::bf16: static_cast<bf16_t*>(p)[i] = Storage<bf16_t>::store(double_to_float_rn(v)); return;
    case DType::f16: static_cast<f16_t*>(p)[i] = Storage<f16_t>::store(double_to_float_rn(v)); return;
    case DType::f32: static_cast<float*>(p)[i] = double_to_float_rn(v); return;
    default: static_cast<double*>(p)[i] = v; return;
  }
}

// One output element at offsets `off` (out, a, b).
DFUSE_HD void mixed_apply(const MixedParams& p, const int64_t off[3]) {
  using namespace dfuse::detail;
  const double a = load_exact(p.a, p.a_dtype, off[1]);
  switch (p.op) {
    case MixedOp::cast: return store_cast(p.out, p.out_dtype, off[0], a);
    case MixedOp::neg: return store_cast(p.out, p.out_dtype, off[0], -a);  // exact in any dtype
    default: break;
  }
  const double b = load_exact(p.b, p.b_dtype, off[2]);
  if (p.op == MixedOp::addcmul_inplace) {  // self.addcmul_(a, b) in f32: torch 2.11's fma(a, b, self)
    float* self = static_cast<float*>(p.out) + off[0];
    *self = fma_rn(float(a), float(b), *self);
    return;
  }
  if (p.out_dtype == DType::f64) {
    const double r = p.op == MixedOp::add   ? dadd_alpha_rn(a, b, 1.0)
                     : p.op == MixedOp::sub ? dadd_alpha_rn(a, b, -1.0)
                                            : dmul_rn(a, b);
    static_cast<double*>(p.out)[off[0]] = r;
  } else {  // f32: a and b are exact floats
    const float fa = float(a), fb = float(b);
    const float r = p.op == MixedOp::add ? add_rn(fa, fb) : p.op == MixedOp::sub ? sub_rn(fa, fb) : mul_rn(fa, fb);
    static_cast<float*>(p.out)[off[0]] = r;
  }
}

using MixedEntry = void (*)(const MixedParams& p, Stream stream);

}  // namespace dfuse::eager::detail
