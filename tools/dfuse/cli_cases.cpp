#include "dfuse/cli_cases.h"

#include <map>
#include <mutex>

#include "dfuse/core/error.h"

namespace dfuse::cli {

int64_t OperandSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t OperandSpec::distinct_elements() const {
  int64_t n = 1;
  for (size_t d = 0; d < sizes.size(); ++d) n *= strides[d] == 0 ? 1 : sizes[d];
  return n;
}

OperandSpec dense(std::string name, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return {std::move(name), std::move(sizes), std::move(strides), 0, stride};
}

OperandSpec index_list(std::string name, std::vector<int64_t> values, DType dtype) {
  OperandSpec operand = dense(std::move(name), {int64_t(values.size())});
  operand.dtype = dtype;
  operand.index_values = std::move(values);
  return operand;
}

OperandSpec chunk_slice(std::string name, int64_t batch, int64_t hidden, int chunks, int index) {
  const int64_t row = chunks * hidden;
  return {std::move(name), {batch, 1, hidden}, {row, row, 1}, index * hidden, batch * row};
}

void append_scale_shift(const TokenShape& s, Modulation m, std::vector<OperandSpec>& inputs, std::string& label) {
  // temb.chunk(6): shift, scale, gate of the attention branch, then of the MLP branch.
  constexpr int kChunks = 6;
  constexpr int kShiftChunk = 0;
  constexpr int kScaleChunk = 1;
  switch (m) {
    case Modulation::per_batch:
      inputs.push_back(dense("scale", {s.batch, 1, s.hidden}));
      inputs.push_back(dense("shift", {s.batch, 1, s.hidden}));
      label += " per-batch";
      break;
    case Modulation::per_token:
      inputs.push_back(dense("scale", {s.batch, s.tokens, s.hidden}));
      inputs.push_back(dense("shift", {s.batch, s.tokens, s.hidden}));
      label += " per-token";
      break;
    case Modulation::chunk6:
      inputs.push_back(chunk_slice("scale", s.batch, s.hidden, kChunks, kScaleChunk));
      inputs.push_back(chunk_slice("shift", s.batch, s.hidden, kChunks, kShiftChunk));
      label += " chunk6";
      break;
  }
}

int64_t Case::out_numel() const {
  int64_t n = 1;
  for (int64_t s : out_sizes) n *= s;
  return n;
}

int64_t Case::min_bytes() const {
  int64_t input_bytes = 0;
  for (const auto& input : inputs)
    input_bytes += input.distinct_elements() * int64_t(dtype_size(input.dtype_in(dtype)));
  return input_bytes_read.value_or(input_bytes) + out_numel() * int64_t(dtype_size(output_dtype()));
}

std::string shape_str(const std::vector<int64_t>& sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

const ShapeTable& shape_table(bool quick) {
  // FLUX.1 at 1024x1024 (4096 image + 512 text tokens) and Wan 2.1 14B at 720p, 81 frames
  // (21 x 45 x 80 tokens); per-frame modulation as Wan 2.1 1.3B hands it over at 21 frames.
  static const ShapeTable full{
      .models = {{"flux.1", 1, 4608, 3072}, {"wan2.1-14b", 1, 75600, 5120}},
      .odd = {{"odd", 3, 7, 1536}, {"odd", 3, 1, 2560}, {"odd", 3, 4097, 3840}},
      .frames = {{"wan2.1-1.3b frames", 1, 21, 360, 1536}, {"odd frames", 3, 5, 7, 2560}},
  };
  // The same hidden sizes (they pick the kernels' specializations) with few, still odd, tokens.
  static const ShapeTable quick_table{
      .models = {{"flux.1", 1, 64, 3072}, {"wan2.1-14b", 1, 75, 5120}},
      .odd = {{"odd", 3, 7, 1536}, {"odd", 3, 1, 2560}, {"odd", 3, 65, 3840}},
      .frames = {{"wan2.1-1.3b frames", 1, 21, 6, 1536}, {"odd frames", 3, 5, 7, 2560}},
  };
  return quick ? quick_table : full;
}

namespace {

struct Generators {
  std::mutex mu;
  std::map<std::string, CaseGenerator, std::less<>> by_op;
};

Generators& generators() {
  static Generators g;
  return g;
}

}  // namespace

void register_cases(std::string_view op, CaseGenerator generator) {
  auto& g = generators();
  std::lock_guard lock(g.mu);
  if (!g.by_op.emplace(std::string(op), generator).second) {
    throw InvalidArgument("cases for " + std::string(op) + " are registered twice");
  }
}

CaseGenerator find_cases(std::string_view op) {
  auto& g = generators();
  std::lock_guard lock(g.mu);
  auto it = g.by_op.find(op);
  return it == g.by_op.end() ? nullptr : it->second;
}

Case CaseOp::make(std::string label, DType dtype, std::vector<OperandSpec> inputs, std::vector<int64_t> out_sizes,
                  Values values) const {
  if (values == Values::specials) label += " nan/inf";
  return Case{.op = name,
              .label = std::move(label),
              .dtype = dtype,
              .inputs = std::move(inputs),
              .out_sizes = std::move(out_sizes),
              .values = values,
              .fused = fused,
              .eager = eager};
}

}  // namespace dfuse::cli
