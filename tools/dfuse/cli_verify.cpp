#include "dfuse/cli_verify.h"

#include <cstring>
#include <memory>

#include "dfuse/cli_harness.h"
#include "common/text_table.h"

namespace dfuse::cli {

namespace {

std::unique_ptr<unsigned char[]> to_host(const DeviceBuffer& buffer) {
  auto host = std::make_unique_for_overwrite<unsigned char[]>(buffer.bytes());
  runtime(buffer.device()).copy_to_host(host.get(), buffer.data(), buffer.bytes());
  return host;
}

// "[0, 17, 3]": the position of a flat index in a dense tensor.
std::string index_str(const std::vector<int64_t>& sizes, int64_t flat) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return shape_str(index);
}

}  // namespace

VerifyResult verify_case(const Case& c, Device device, eager::Workspace& workspace, uint64_t seed) {
  Runtime& rt = runtime(device);
  const Stream stream{};
  const size_t element_bytes = dtype_size(c.output_dtype());
  const size_t out_bytes = size_t(c.out_numel()) * element_bytes;

  DeviceInputs inputs = upload_inputs(c, device, seed);
  DeviceBuffer fused_out(device, out_bytes), eager_out(device, out_bytes);
  {
    auto poison = std::make_unique_for_overwrite<unsigned char[]>(out_bytes);
    std::memset(poison.get(), kPoisonByte, out_bytes);
    rt.copy_to_device(eager_out.data(), poison.get(), out_bytes);
    rt.copy_to_device(fused_out.data(), poison.get(), out_bytes);
  }
  std::vector<TensorView> fused_inputs = inputs.views;
  if (c.in_place_input >= 0) {
    rt.copy_on_device(fused_out.data(), inputs.storage[c.in_place_input].data(), out_bytes, stream);
    fused_inputs[c.in_place_input] = output_view(c, fused_out);
  }

  c.fused(fused_inputs, output_view(c, fused_out), stream);
  c.eager(inputs.views, output_view(c, eager_out), workspace, stream);
  rt.synchronize(stream);

  auto fused = to_host(fused_out);
  auto expected = to_host(eager_out);
  VerifyResult result;
  result.elements = c.out_numel();
  if (c.out_rows_are_sets) {
    for (auto* buffer : {fused.get(), expected.get()})
      sort_rows(buffer, result.elements, c.out_sizes.back(), element_bytes);
  }
  const BitComparison cmp = compare_bits(fused.get(), expected.get(), result.elements, element_bytes,
                                         /*any_nan_f32=*/c.output_dtype() == DType::f32 && !device.is_cuda());
  result.mismatches = cmp.mismatches;
  const int64_t fused_unwritten =
      c.in_place_input >= 0 ? 0 : count_poisoned(fused.get(), result.elements, element_bytes);
  const int64_t eager_unwritten = count_poisoned(expected.get(), result.elements, element_bytes);
  result.unwritten = fused_unwritten + eager_unwritten;
  if (cmp.mismatches > 0) {
    result.detail = "first mismatch at " + index_str(c.out_sizes, cmp.first_mismatch) + ": fused " +
                    element_hex(fused.get(), cmp.first_mismatch, element_bytes) + ", eager " +
                    element_hex(expected.get(), cmp.first_mismatch, element_bytes);
  } else if (result.unwritten > 0) {
    result.detail = std::to_string(fused_unwritten) + " elements unwritten by the fused op, " +
                    std::to_string(eager_unwritten) + " by the eager chain";
  }
  return result;
}

int run_verify(const VerifyOptions& options, std::ostream& out, std::ostream& progress) {
  std::vector<std::string> notes;
  std::vector<Case> cases =
      collect_cases(options.op, options.device, {Purpose::verify, shape_table(options.quick)}, notes);

  eager::Workspace workspace(options.device);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> failures;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string name = short_op_name(c.op) + " " + c.label + " " + std::string(dtype_name(c.dtype));
    progress << "[" << i + 1 << "/" << cases.size() << "] " << name << " ...\n" << std::flush;
    VerifyResult result;
    std::string verdict;
    try {
      result = verify_case(c, options.device, workspace, options.seed + i * 0x100000001B3ull);
      verdict = result.passed() ? "pass" : "FAIL";
    } catch (const std::exception& e) {
      result.detail = e.what();
      verdict = "ERROR";
    }
    if (!result.passed()) failures.push_back(name + ": " + result.detail);
    rows.push_back({short_op_name(c.op), c.label, shape_str(c.out_sizes), std::string(dtype_name(c.dtype)),
                    std::to_string(c.out_numel()), std::to_string(result.mismatches),
                    std::to_string(result.unwritten), verdict});
  }

  out << "dfuse verify on " << options.device.str() << " (" << runtime(options.device).info().name
      << "), seed " << options.seed << (options.quick ? ", quick shapes" : "") << "\n\n";
  out << detail::format_table(
      {"op", "case", "shape", "dtype", "elements", "mismatches", "unwritten", "result"}, rows);
  for (const auto& note : notes) out << note << "\n";
  if (!failures.empty()) {
    out << "\nfailures:\n";
    for (const auto& f : failures) out << "  " << f << "\n";
  }
  out << "\n" << cases.size() - failures.size() << " of " << cases.size() << " cases passed\n";
  return failures.empty() ? 0 : 1;
}

}  // namespace dfuse::cli
