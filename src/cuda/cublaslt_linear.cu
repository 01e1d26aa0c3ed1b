// The CUDA entry of the GEMM-epilogue ops (ops/gemm/linear.h): one cuBLASLt matmul with the BIAS
// or GELU_BIAS epilogue.
//
// Row-major out[M, N] = x[M, K] . weight[N, K]^T is column-major out^T[N, M] = weight . x^T:
// A = weight seen as a K x N column-major matrix (ld = weight's row stride) with op(A) = A^T,
// B = x as K x M (ld = x's row stride), D = out^T, N x M (ld = out's row stride). A batch of
// x [B, S, K] uses strided batches of B and D and the same A. cuBLASLt adds the bias per row of
// D, which is per column n of out. fp32 accumulation and scale; no workspace, so that
// calls on different streams never share scratch memory. The layouts and the algorithm cuBLASLt's
// heuristic picks are cached per problem, the problem including the operands' alignment (the
// heuristic otherwise assumes 256-byte aligned matrices, and takes the bias pointer's alignment
// from its value): a cached algorithm never meets a less aligned operand than it was chosen for.
// The matmul descriptor (it holds the bias pointer) is made per call.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/error.h"
#include "ops/gemm/linear.h"

namespace dfuse::detail {

namespace {

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(int(status), call, "cuBLAS status " + std::to_string(int(status)));
}

// Owns one cuBLASLt object and destroys it with the given function.
template <typename Handle, cublasStatus_t (*Destroy)(Handle)>
class Owned {
 public:
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle_) Destroy(handle_);
  }
  Handle* out() { return &handle_; }
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// The problem as cuBLASLt sees it: everything that shapes the descriptors, and the alignments of
// weight, x, out and bias (Alignments).
using ProblemKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                              int64_t, bool, uint32_t, uint32_t, uint32_t, uint32_t>;

// The alignment in bytes, up to 256, of every matrix start of an operand: its pointer and, for a
// batch, its batch stride (the guards make it at least 16).
uint32_t alignment(const void* p, int64_t batch_stride, int64_t batch, DType t) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u;
  if (batch > 1) bits |= uint64_t(batch_stride) * dtype_size(t);
  return uint32_t(bits & (~bits + 1));  // the lowest set bit
}

struct Alignments {
  uint32_t a, b, d, bias;
};

Alignments alignments(const LinearParams& p) {
  return {alignment(p.weight, 0, 1, p.dtype), alignment(p.x, p.x_batch_stride, p.batch, p.dtype),
          alignment(p.out, p.out_batch_stride, p.batch, p.dtype), p.bias ? alignment(p.bias, 0, 1, p.dtype) : 0u};
}

// Matrix layouts and the chosen algorithm of one problem.
struct Plan {
  MatrixLayout a, b, d;
  cublasLtMatmulAlgo_t algo{};
};

// The cuBLASLt handle of `device`, made on the device's first call with the device current (a
// handle belongs to the device current at its creation). Handles live for the process: cuBLASLt
// may be torn down before static destructors run.
cublasLtHandle_t lt_handle(int device) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  const std::lock_guard lock(mutex);
  cublasLtHandle_t& handle = handles[device];
  if (!handle) check_cublas(cublasLtCreate(&handle), "cublasLtCreate");
  return handle;
}

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F; }

// The matmul descriptor of a call: transposes, the GELU(_BIAS) epilogue and the bias pointer.
void describe_matmul(MatmulDesc& matmul, const LinearParams& p) {
  check_cublas(cublasLtMatmulDescCreate(matmul.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void* value, size_t size) {
    check_cublas(cublasLtMatmulDescSetAttribute(matmul.get(), attribute, value, size), "MatmulDescSetAttribute");
  };
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  set(CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose);
  set(CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep);
  const bool gelu = p.epilogue == LinearEpilogue::gelu_tanh;
  const cublasLtEpilogue_t epilogue = gelu ? (p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                           : (p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  if (p.bias) {
    const cudaDataType_t type = cuda_type(p.dtype);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof p.bias);
  }
}

// A column-major rows x cols layout with leading dimension ld, `batch` of them `batch_stride` apart.
void describe_layout(MatrixLayout& layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                     int64_t batch, int64_t batch_stride) {
  check_cublas(cublasLtMatrixLayoutCreate(layout.out(), type, uint64_t(rows), uint64_t(cols), ld),
               "cublasLtMatrixLayoutCreate");
  if (batch == 1) return;
  const int32_t count = int32_t(batch);
  check_cublas(cublasLtMatrixLayoutSetAttribute(layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "cublasLtMatrixLayoutSetAttribute(batch count)");
  check_cublas(cublasLtMatrixLayoutSetAttribute(layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &batch_stride, sizeof batch_stride),
               "cublasLtMatrixLayoutSetAttribute(batch stride)");
}

std::unique_ptr<Plan> make_plan(const LinearParams& p) {
  const cudaDataType_t type = cuda_type(p.dtype);
  auto plan = std::make_unique<Plan>();
  describe_layout(plan->a, type, p.k, p.n, p.weight_row_stride, p.batch, 0);
  describe_layout(plan->b, type, p.k, p.m, p.x_row_stride, p.batch, p.x_batch_stride);
  describe_layout(plan->d, type, p.n, p.m, p.out_row_stride, p.batch, p.out_batch_stride);

  MatmulDesc matmul;
  describe_matmul(matmul, p);
  Preference preference;
  check_cublas(cublasLtMatmulPreferenceCreate(preference.out()), "MatmulPreferenceCreate");
  const size_t no_workspace = 0;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &no_workspace, sizeof no_workspace),
               "MatmulPreferenceSetAttribute");
  // Split-K partial sums stay in fp32: the in-place and output-type schemes would add them up in bf16/f16
  // (measured on the H200: 0.004 off the exact product at M = 1, K = 3072); with no workspace this leaves
  // the algorithms without split-K.
  const uint32_t fp32_reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                    &fp32_reductions, sizeof fp32_reductions),
               "MatmulPreferenceSetAttribute(reduction scheme)");
  const Alignments align = alignments(p);  // C is D
  for (const auto& [attribute, bytes] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.a},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.b},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.d},
                                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.d}})
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &bytes, sizeof bytes),
                 "MatmulPreferenceSetAttribute(alignment)");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(lt_handle(p.device), matmul.get(), plan->a.get(), plan->b.get(),
                                              plan->d.get(), plan->d.get(), preference.get(), 1, &result, &found),
               "MatmulAlgoGetHeuristic");
  if (found == 0)
    throw CudaError(int(CUBLAS_STATUS_NOT_SUPPORTED), "cublasLtMatmulAlgoGetHeuristic",
                    "cuBLASLt has no algorithm for this problem");
  plan->algo = result.algo;
  return plan;
}

// The plan of p's problem, made on first use and kept for the process (layouts and algorithm
// hold no pointers, so one plan serves every call of the same shapes and alignments).
const Plan& plan_for(const LinearParams& p) {
  static std::mutex mutex;
  static std::map<ProblemKey, std::unique_ptr<Plan>> plans;
  const Alignments align = alignments(p);
  const ProblemKey key{p.device,         int(p.dtype),      int(p.epilogue),     p.batch,
                       p.m,              p.n,               p.k,                 p.x_row_stride,
                       p.x_batch_stride, p.weight_row_stride, p.out_row_stride, p.out_batch_stride,
                       p.bias != nullptr, align.a,          align.b,             align.d,
                       align.bias};
  const std::lock_guard lock(mutex);
  auto& plan = plans[key];
  if (!plan) plan = make_plan(p);
  return *plan;
}

}  // namespace

void cublaslt_linear(const LinearParams& p, Stream stream) {
  const DeviceGuard device(p.device);
  const Plan& plan = plan_for(p);
  MatmulDesc matmul;
  describe_matmul(matmul, p);
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasLtMatmul(lt_handle(p.device), matmul.get(), &one, p.weight, plan.a.get(), p.x, plan.b.get(),
                              &zero, p.out, plan.d.get(), p.out, plan.d.get(), &plan.algo, nullptr, 0,
                              static_cast<cudaStream_t>(stream.handle)),
               "cublasLtMatmul");
}

}  // namespace dfuse::detail
