// The op-independent part of dfuse verify and bench: choosing ops, random operands on a device,
// poisoned outputs, and bitwise comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dfuse/cli_cases.h"
#include "dfuse/core/runtime.h"

namespace dfuse::cli {

// Every registered op, or the one named (full name "diffusion.x" or short name "x"). Throws
// InvalidArgument listing the registered ops when the name is unknown.
std::vector<std::string> select_ops(const std::optional<std::string>& name);
// True when some spec of `op` runs on `device`.
bool op_runs_on(const std::string& op, Device device);
// The cases of every selected op that has a spec for `device`; each op passed over (no cases, no
// spec for the device) adds a line to `notes`.
std::vector<Case> collect_cases(const std::optional<std::string>& name, Device device, const CaseRequest& request,
                                std::vector<std::string>& notes);
// "modulate_scale_shift" for "diffusion.modulate_scale_shift".
std::string short_op_name(const std::string& op);

// Fills `elements` values of `dtype` at `host` with reproducible pseudo-random data: never zero,
// sign and binade (2^-12 .. 2^4) random, full mantissas; with Values::specials about 1.5% are
// NaN, +-inf, +-0, the smallest subnormal or the largest finite value of the dtype instead.
void fill_random(void* host, DType dtype, int64_t elements, uint64_t seed, Values values);

// Every byte of an output is set to this before a run, so that elements a kernel did not write
// stay recognizable (all-ones is a NaN in every float type, which no kernel here produces).
constexpr unsigned char kPoisonByte = 0xFF;

struct BitComparison {
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;  // element index, -1 when equal
};
// Compares element by element as raw bytes, so -0/+0 and NaN payloads count. With
// `any_nan_f32` (f32 outputs of the host backend), f32 NaNs compare equal whatever their payload:
// x86 propagates an operand's payload or its own negative default NaN, and which operand wins
// depends on the order the compiler gives a commutative operation, so host f32 NaN payloads are
// not part of the contract.
BitComparison compare_bits(const void* actual, const void* expected, int64_t elements, size_t element_bytes,
                           bool any_nan_f32 = false);
// Sorts the elements of each row of `row_elements` by their bytes, so that rows holding the same
// set of elements (in any order) compare equal bit for bit.
void sort_rows(void* data, int64_t elements, int64_t row_elements, size_t element_bytes);
// Elements whose every byte is still kPoisonByte.
int64_t count_poisoned(const void* data, int64_t elements, size_t element_bytes);
// Element `index` of a buffer as hex of its little-endian bytes: "0x7fc0".
std::string element_hex(const void* data, int64_t index, size_t element_bytes);

// A case's inputs on a device: one buffer per operand, and the views the op takes.
struct DeviceInputs {
  std::vector<DeviceBuffer> storage;
  std::vector<TensorView> views;
};
// Host data per operand (random, seeded by `seed` and the operand's position, or the operand's
// index_values), uploaded to `device`.
DeviceInputs upload_inputs(const Case& c, Device device, uint64_t seed);
// The views of `c`'s operands over existing storage (one buffer per operand).
std::vector<TensorView> input_views(const Case& c, const std::vector<DeviceBuffer>& storage);
// A dense view of `c`'s output in `buffer`.
TensorView output_view(const Case& c, const DeviceBuffer& buffer);

}  // namespace dfuse::cli
