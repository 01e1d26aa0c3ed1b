// The overlap guards shared by every op: views of one packed buffer that interleave without sharing
// an element (q, k and v of a packed QKV projection) pass; views that share one fail.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/guards.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {
namespace {

// Head `which` (0 = q, 1 = k, 2 = v) of a packed [B, S, 3, H, D] buffer, as [B, S, H, D] with the
// projection's strides, optionally shifted by `shift` elements.
TensorView packed_head(std::vector<uint16_t>& buf, int64_t b, int64_t s, int64_t h, int64_t d, int which,
                       int64_t shift = 0) {
  const int64_t sizes[] = {b, s, h, d};
  const int64_t strides[] = {s * 3 * h * d, 3 * h * d, d, 1};
  return TensorView(buf.data() + which * h * d + shift, DType::bf16, sizes, strides, 4);
}

std::string overlap_guard(const TensorView& out, const TensorView& t) {
  GuardList g("test");
  g.no_partial_overlap("out", out, "t", t, false);
  std::string why;
  g.answer(&why);
  return why;
}

TEST(OverlapGuard, PackedQkvHeadsInterleaveDisjointly) {
  std::vector<uint16_t> buf(2 * 7 * 3 * 5 * 64 + 64);
  for (int which : {1, 2}) EXPECT_EQ(overlap_guard(packed_head(buf, 2, 7, 5, 64, 0), packed_head(buf, 2, 7, 5, 64, which)), "");
  EXPECT_EQ(overlap_guard(packed_head(buf, 2, 7, 5, 64, 2), packed_head(buf, 2, 7, 5, 64, 1)), "");
}

TEST(OverlapGuard, SharedElementsFail) {
  std::vector<uint16_t> buf(2 * 7 * 3 * 5 * 64 + 64);
  const TensorView q = packed_head(buf, 2, 7, 5, 64, 0);
  EXPECT_NE(overlap_guard(q, q), "");                                          // the same view, not in place
  EXPECT_NE(overlap_guard(q, packed_head(buf, 2, 7, 5, 64, 0, 32)), "");       // half a head further
  EXPECT_NE(overlap_guard(q, packed_head(buf, 2, 7, 5, 64, 1, -1)), "");       // k one element early
  // Two heads' worth of k starting inside q's last head: k's rows reach into v and q's next row.
  const int64_t sizes[] = {2, 7, 6, 64}, strides[] = {7 * 3 * 5 * 64, 3 * 5 * 64, 64, 1};
  EXPECT_NE(overlap_guard(q, TensorView(buf.data() + 4 * 64, DType::bf16, sizes, strides, 4)), "");
}

TEST(OverlapGuard, DifferentStridesUseTheByteRanges) {
  std::vector<uint16_t> buf(4096);
  const int64_t sizes[] = {8, 64}, rows[] = {128, 1}, cols[] = {1, 8};
  const TensorView a(buf.data(), DType::bf16, sizes, rows, 2), b(buf.data() + 64, DType::bf16, sizes, cols, 2);
  EXPECT_NE(overlap_guard(a, b), "");
  EXPECT_EQ(overlap_guard(a, TensorView(buf.data() + 2048, DType::bf16, sizes, cols, 2)), "");
}

}  // namespace
}  // namespace dfuse::detail
