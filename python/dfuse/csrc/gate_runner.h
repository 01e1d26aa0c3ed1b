// The torch binding's one way to run a bit-exact op through the first-sight Gate
// (dfuse/policy/gate.h), shared by every op family that has such ops.
//
//   run_gated(op, sig, outs, fused, chain[, prepare_verification])
//
// `outs` are the op's outputs (one or more; an in-place op's are the tensors it writes), `sig` the
// Signature of the operands' views and scalars, to which the device's SM is added here.
//   fused(dfuse::Stream)          runs the kernel into `outs` (on the current stream of their device)
//   chain(std::span<at::Tensor>)  runs the eager chain into the given tensors: `outs` themselves
//                                 when the Gate sends the call to the chain (fallback, kill switch,
//                                 an unverified signature during CUDA graph capture), or scratch
//                                 tensors like them (at::empty_like) on first sight
//   prepare_verification()        optional; runs on first sight before the kernel, so that an
//                                 in-place op can keep its inputs for the chain (see torch_rope.cpp)
// On first sight the kernel's outputs are compared with the chain's bit for bit through integer
// views (-0/+0 and NaN payloads count); a mismatch or an exception sends the signature to the chain
// for good, and the chain rewrites `outs` for this call. dfuse errors surface as torch errors
// naming `op`.
//
// CPU outputs always take the chain. One matching input proves a signature only when the kernel
// reproduces the chain's arithmetic, and the host kernels reproduce aten's CUDA arithmetic (its
// reduction orders, libdevice-like exp/rsqrt), not its CPU kernels': a norm or SiLU could match on
// the first input and differ on the next.
//
// Host-call cost: the callbacks are taken by reference and each of the Gate's std::function
// callbacks captures one reference (stored in place), so outside the first-sight verification the
// runner adds no allocation to the call.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/util/Exception.h>

#include <span>
#include <string>
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/policy/gate.h"
#include "tensor_views.h"

namespace dfuse::torch_binding {

// The integer type of t's element size, for bitwise comparisons through integer views.
inline at::ScalarType same_size_integer(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    default: return at::kLong;
  }
}

// "" when `fused` and `reference` (same dtype and shape) hold the same bits, else where they differ.
inline std::string bitwise_mismatch(const at::Tensor& fused, const at::Tensor& reference) {
  const at::ScalarType bits = same_size_integer(fused);
  if (at::equal(fused.view(bits), reference.view(bits))) return "";
  const at::Tensor fused_host = fused.contiguous().cpu(), eager_host = reference.contiguous().cpu();
  return dfuse::describe_bitwise_mismatch(fused_host.const_data_ptr(), eager_host.const_data_ptr(),
                                          *dfuse_dtype(fused.scalar_type()), fused_host.numel());
}

// Copies the results of an eager chain that returns new tensors into `dst`, one per output.
inline void copy_results(std::span<at::Tensor> dst, std::span<const at::Tensor> results) {
  TORCH_INTERNAL_ASSERT(results.size() == dst.size(), "the eager chain returned ", results.size(),
                        " results for ", dst.size(), " outputs");
  for (size_t k = 0; k < dst.size(); ++k) dst[k].copy_(results[k]);
}

struct NoPreparation {
  void operator()() const {}
};

namespace detail {

// One gated call: what the Gate's callbacks need, behind a single reference.
template <typename Fused, typename Chain, typename Prepare>
struct GatedCall {
  std::span<at::Tensor> outs;
  const Fused& fused;
  const Chain& chain;
  const Prepare& prepare_verification;
  dfuse::Stream stream;

  // The kernel into `outs`, the chain into scratch tensors like them; "" when every bit matches.
  std::string verify() const {
    prepare_verification();
    fused(stream);
    std::vector<at::Tensor> reference;
    reference.reserve(outs.size());
    for (const at::Tensor& out : outs) reference.push_back(at::empty_like(out));
    chain(std::span<at::Tensor>(reference));
    for (size_t k = 0; k < outs.size(); ++k) {
      std::string diff = bitwise_mismatch(outs[k], reference[k]);
      if (diff.empty()) continue;
      return outs.size() > 1 ? "output " + std::to_string(k) + ": " + diff : diff;
    }
    return "";
  }
};

}  // namespace detail

template <typename Fused, typename Chain, typename Prepare = NoPreparation>
void run_gated(const char* op, dfuse::Signature& sig, std::span<at::Tensor> outs, const Fused& fused,
               const Chain& chain, const Prepare& prepare_verification = {}) {
  if (!outs.front().is_cuda()) return chain(outs);
  detail::GatedCall<Fused, Chain, Prepare> call{outs, fused, chain, prepare_verification, {}};
  const c10::DeviceIndex device = outs.front().get_device();
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(device);
  sig.set_sm(props->major, props->minor);
  // The c10 query: the outputs already live on this device, so its context exists.
  const bool capturing = c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
  call.stream.handle = at::cuda::getCurrentCUDAStream(device).stream();
  try {
    dfuse::Gate::global().run(
        sig, capturing, [&call] { call.fused(call.stream); }, [&call] { call.chain(call.outs); },
        [&call] { return call.verify(); });
  } catch (const dfuse::Error& e) {
    TORCH_CHECK(false, "dfuse ", op, ": ", e.what());
  }
}

}  // namespace dfuse::torch_binding
