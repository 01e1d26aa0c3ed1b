// Test and benchmark cases for dfuse verify / bench.
//
// A Case is one call of an op: its operands (sizes, strides and the storage behind each view),
// the output, the dtype, what data to fill in, and two runners with the same arguments: the
// fused op and its eager chain. The generic harness (cli_harness.h) knows nothing about any op.
// An op adds its cases with a generator in its own file (cli_cases_<family>.cpp), registered by
// op name with DFUSE_CLI_CASES; the shapes real models use are kept here, in one table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/chains.h"

namespace dfuse::cli {

// One input operand: a view into its own storage buffer.
struct OperandSpec {
  std::string name;  // "x", "scale"
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements from the start of the storage to the view
  int64_t storage_elements = 0;
  std::optional<DType> dtype;    // the operand's dtype when it is not the case's (fp32 / fp64 tables)
  // Index data that an op needs valid (random data cannot be): one value per storage element,
  // stored in the operand's (integer) dtype. Unset: random data as Case::values asks.
  std::optional<std::vector<int64_t>> index_values;

  DType dtype_in(DType case_dtype) const { return dtype.value_or(case_dtype); }

  int64_t numel() const;
  // Elements at distinct addresses: what a kernel has to read at least once.
  int64_t distinct_elements() const;
};

// A dense row-major operand.
OperandSpec dense(std::string name, std::vector<int64_t> sizes);
// A dense 1-D index operand of `dtype` (i32 or i64) holding `values`.
OperandSpec index_list(std::string name, std::vector<int64_t> values, DType dtype);
// Chunk `index` of `chunks` of a [batch, 1, chunks * hidden] tensor: the [batch, 1, hidden] slice
// that `temb.chunk(6, dim=-1)` hands to adaLN ops (last dim contiguous, outer strides chunks *
// hidden).
OperandSpec chunk_slice(std::string name, int64_t batch, int64_t hidden, int chunks, int index);

enum class Values : uint8_t {
  finite,    // nonzero finite values across many binades
  specials,  // finite, plus a sprinkle of NaN, +-inf, +-0, the smallest subnormal and the largest finite
};

// The fused op, and its eager chain (which keeps its intermediates in `workspace`).
using FusedRunner = void (*)(std::span<const TensorView> inputs, const TensorView& out, Stream stream);
using EagerRunner = void (*)(std::span<const TensorView> inputs, const TensorView& out,
                             eager::Workspace& workspace, Stream stream);

struct Case {
  std::string op;     // registry name, "diffusion.modulate_scale_shift"
  std::string label;  // "flux.1 chunk6"
  DType dtype = DType::bf16;
  std::vector<OperandSpec> inputs;
  std::vector<int64_t> out_sizes;  // the output is dense
  std::optional<DType> out_dtype;  // the output's dtype when it is not `dtype` (int64 ids)
  bool out_rows_are_sets = false;  // each output row (last dim) is a set: compared in sorted order
  int in_place_input = -1;         // >= 0: the fused run writes into this (dense) input
  bool eager_on_host = false;      // the eager chain computes on the host whatever the device: not timed
  Values values = Values::finite;
  // The fewest input bytes an implementation reads, when it need not read every input element
  // (a gather reads only the selected rows). Unset: every input element.
  std::optional<int64_t> input_bytes_read;
  FusedRunner fused = nullptr;
  EagerRunner eager = nullptr;

  int64_t out_numel() const;
  DType output_dtype() const { return out_dtype.value_or(dtype); }
  // Fewest bytes an implementation moves: each input element read once (or input_bytes_read), the
  // output written once.
  int64_t min_bytes() const;
};

// The dtypes every floating op is verified in.
inline constexpr DType kCaseDtypes[] = {DType::bf16, DType::f16, DType::f32};

// An op as case generators see it: its registry name and its two runners. make() builds one
// case, marking the label of a case with special values.
struct CaseOp {
  const char* name;
  FusedRunner fused;
  EagerRunner eager;

  Case make(std::string label, DType dtype, std::vector<OperandSpec> inputs, std::vector<int64_t> out_sizes,
            Values values = Values::finite) const;
};

// "[1, 4608, 3072]"
std::string shape_str(const std::vector<int64_t>& sizes);

// Activations [batch, tokens, hidden].
struct TokenShape {
  std::string name;
  int64_t batch, tokens, hidden;
};
// Video activations [batch, frames, frame_tokens, hidden] with per-frame modulation.
struct FrameShape {
  std::string name;
  int64_t batch, frames, frame_tokens, hidden;
};
struct ShapeTable {
  std::vector<TokenShape> models;  // the shapes of real models (also benchmarked)
  std::vector<TokenShape> odd;     // hidden sizes, token counts and batches that break fast paths
  std::vector<FrameShape> frames;
};
// The model shapes, or (quick) the same hidden sizes with few tokens, for a slow host.
const ShapeTable& shape_table(bool quick);

// The layouts in which DiT blocks hand a [B, T, D] activation its scale and shift.
enum class Modulation : uint8_t {
  per_batch,  // dense [B, 1, D]
  per_token,  // dense [B, T, D]
  chunk6,     // [B, 1, D] slices of temb.chunk(6): scale is chunk 1, shift chunk 0
};
// Appends the "scale" and "shift" operands of activations `s` in layout `m` to `inputs`, and the
// layout's name (" per-batch", " per-token", " chunk6") to `label`.
void append_scale_shift(const TokenShape& s, Modulation m, std::vector<OperandSpec>& inputs, std::string& label);

enum class Purpose : uint8_t { verify, bench };

struct CaseRequest {
  Purpose purpose;
  const ShapeTable& shapes;
};

using CaseGenerator = std::vector<Case> (*)(const CaseRequest& request);

// Registers the case generator of a registry op; called from static initializers.
void register_cases(std::string_view op, CaseGenerator generator);
// The generator of `op`, or null when the op has no cases.
CaseGenerator find_cases(std::string_view op);

struct CaseRegistration {
  CaseRegistration(const char* op, CaseGenerator generator) { register_cases(op, generator); }
};

}  // namespace dfuse::cli

#define DFUSE_CLI_CONCAT_INNER(a, b) a##b
#define DFUSE_CLI_CONCAT(a, b) DFUSE_CLI_CONCAT_INNER(a, b)
// Registers `generator` as the case generator of registry op `op`.
#define DFUSE_CLI_CASES(op, generator) \
  static const ::dfuse::cli::CaseRegistration DFUSE_CLI_CONCAT(dfuse_cli_cases_, __COUNTER__)(op, generator)
