// diffusion.interleaved_rope_fp64 — replaces SANA-Video's paired Q/K RoPE with fp64 tables
// (about 14 eager kernels for q and k: the fp64 products x1*cos, x2*sin, x1*sin, x2*cos, the
// sub and add, and the two strided copy_ stores per tensor; dfuse/ops/rope.h spells out the
// chain). Contract: bit-exact against that chain. Pair p of a head, with x1 = x[2p],
// x2 = x[2p+1], c = freqs_cos[2p], s = freqs_sin[2p+1] (fp64):
//   out[2p]   = T(float(x1 * c - x2 * s))      every op an IEEE double op (aten's fp64 opmath;
//   out[2p+1] = T(float(x1 * s + x2 * c))      a - b and a + b are aten's fma(b, -1, a) and fma(b, 1, a),
//                                               so that where both terms are NaNs a's survives, as in torch)
// The store rounds double -> float -> T (aten's copy_ casts through float: two roundings, which
// differ from one double -> bf16 rounding at bf16 ties).
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

// One pair; x1, x2 are the exact values of the stored elements.
template <typename T>
struct InterleavedPair {
  T even, odd;
};

template <typename T>
DFUSE_HD InterleavedPair<T> interleaved_rope_fp64_pair(double x1, double x2, double c, double s) {
  const double even = dadd_alpha_rn(dmul_rn(x1, c), dmul_rn(x2, s), -1.0);
  const double odd = dadd_alpha_rn(dmul_rn(x1, s), dmul_rn(x2, c), 1.0);
  return {Storage<T>::store(double_to_float_rn(even)), Storage<T>::store(double_to_float_rn(odd))};
}

struct InterleavedRopeFp64Params {
  DType dtype = DType::bf16;  // q, k and the outputs
  int device = 0;
  RowGeometry geom;  // rows are heads of q (and k): cols = D
  RowOperand q, k, cos, sin, q_out, k_out;
};

using InterleavedRopeFp64Entry = void (*)(const InterleavedRopeFp64Params& p, Stream stream);

}  // namespace dfuse::detail
