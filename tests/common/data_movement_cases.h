// The data-movement family's test cases, run on any device: the host tests run them on the host,
// the GPU tests on CUDA. Each case builds fresh random inputs (optionally strided, misaligned or
// holding NaN/Inf/-0), runs the op into a poisoned output and compares every output byte with an
// index-computing host loop written here, independent of the kernels' view arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct DataMovementCase {
  std::string name;
  // usp_merge_heads: x [W, S, B, h, D]; joint_qkv_cat: img [B, Si, H, D]; pack_qkv_destination_major:
  // q [rows, G, hs].
  std::vector<int64_t> sizes;
  int64_t text_tokens = 0;  // joint_qkv_cat: St
  int64_t world = 1;        // pack_qkv_destination_major: W
  bool packed = false;      // joint_qkv_cat / pack_qkv: q, k, v are slices of one [..., 3, H, D] projection
  int64_t row_pad = 0;      // inputs are views into rows of pad more elements (strided rows)
  int64_t offset = 0;       // inputs start this many elements into their storage (misaligned)
  bool specials = false;    // NaN / Inf / -0 / tiny values in the inputs
};

// Small shapes covering every layout, odd sizes and strides: fast enough for the host in CI.
std::vector<DataMovementCase> small_usp_merge_heads_cases();
std::vector<DataMovementCase> small_joint_qkv_cat_cases();
std::vector<DataMovementCase> small_pack_qkv_cases();
// Model shapes: MiniMax-H3 768p Ulysses-4 heads (4, 7936, 1, 14, 128); FLUX-like joint attention
// (4096 image + 512 text tokens x 24 heads x 128); Ulysses packs of 4096 rows x 24 heads x 128 for
// 2 and 4 ranks. For GPU runs.
std::vector<DataMovementCase> model_usp_merge_heads_cases();
std::vector<DataMovementCase> model_joint_qkv_cat_cases();
std::vector<DataMovementCase> model_pack_qkv_cases();

// "" when every output byte matches the reference, else what went wrong.
std::string run_usp_merge_heads_case(Device d, DType t, const DataMovementCase& c, uint64_t seed);
std::string run_joint_qkv_cat_case(Device d, DType t, const DataMovementCase& c, uint64_t seed);
std::string run_pack_qkv_case(Device d, DType t, const DataMovementCase& c, uint64_t seed);

// A varlen case: q, k, v (or x) of `batch` sequences of `tokens` tokens (segmented: `prefix`
// prefix tokens then `tokens` main tokens) of heads x head_dim, `valid` of them picked by a
// shuffled index list (int64 when `wide`). Inputs are random bit patterns (NaN payloads, -0).
struct VarlenCase {
  std::string name;
  int64_t batch = 1, tokens = 1, prefix = 0, heads = 1, head_dim = 1;
  int64_t valid = 0;
  bool wide = false;
};

std::vector<VarlenCase> small_varlen_cases();
// Model shapes: 2 x 4096 tokens x 24 heads x 128 (segmented: 512 prefix tokens), about 3/4 valid.
std::vector<VarlenCase> model_varlen_cases();

std::string run_varlen_pack_qkv_case(Device d, DType t, const VarlenCase& c, uint64_t seed);
std::string run_varlen_pack_segmented_qkv_case(Device d, DType t, const VarlenCase& c, uint64_t seed);
std::string run_varlen_scatter_to_padded_case(Device d, DType t, const VarlenCase& c, uint64_t seed);

}  // namespace dfuse::test
