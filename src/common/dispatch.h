// dtype dispatch for kernels instantiated for the floating storage types.
#pragma once

#include <string>

#include "dfuse/core/dtype.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

[[noreturn]] inline void no_kernel_for(DType t, const char* op) {
  throw Unsupported(op, "dtype", std::string(op) + ": no kernel for dtype " + std::string(dtype_name(t)));
}

// Calls f(T{}) with T = bf16_t, f16_t or float for `t`; guards have already rejected others.
template <typename F>
void dispatch_bf16_f16_f32(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::bf16:
      return f(bf16_t{});
    case DType::f16:
      return f(f16_t{});
    case DType::f32:
      return f(float{});
    default:
      no_kernel_for(t, op);
  }
}

// Calls f(T{}) with T = bf16_t or f16_t for `t`.
template <typename F>
void dispatch_bf16_f16(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::bf16:
      return f(bf16_t{});
    case DType::f16:
      return f(f16_t{});
    default:
      no_kernel_for(t, op);
  }
}

}  // namespace dfuse::detail
