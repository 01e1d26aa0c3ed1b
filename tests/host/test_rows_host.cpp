// The row-wise kernels' operand geometry (common/rows.h): which operands the flat form of the CUDA row-wise
// kernel may address by an element's position in the output alone (rowwise_flat_layout), and which it must
// leave to the row blocks; RowSplit's outer indices against RowGeometry::split's.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "common/rows.h"

namespace dfuse::detail {
namespace {

// A row-wise op of `x`'s geometry over the given inputs, output contiguous unless `out` is given.
RowwiseParams params(const TensorView& x, std::initializer_list<TensorView> inputs, const TensorView* out = nullptr) {
  RowwiseParams p;
  p.dtype = x.dtype();
  p.geom = row_geometry(x);
  int k = 0;
  for (const TensorView& t : inputs) p.in[k++] = row_operand(t, x);
  p.out = row_operand(out ? *out : x, x);
  return p;
}

// RowSplit (multiply-high) gives RowGeometry::split's (division) outer indices: every row of small geometries,
// and sampled rows up to 2^31 - 1 of models' and odd ones (FLUX.1's 24 heads of 4608 tokens, Wan 2.1's 40 of
// 75600, a divisor of 2^31).
TEST(RowSplit, MatchesTheDivisions) {
  const auto check = [](int64_t o0, int64_t o1, int64_t o2, uint32_t r) {
    RowGeometry g;
    g.outer[0] = o0, g.outer[1] = o1, g.outer[2] = o2, g.cols = 128;
    uint32_t want[3], got[3];
    g.split(r, want);
    RowSplit(g).split(r, got);
    EXPECT_EQ(std::vector<uint32_t>(got, got + 3), std::vector<uint32_t>(want, want + 3))
        << "outer " << o0 << " x " << o1 << " x " << o2 << ", row " << r;
  };
  for (int64_t o1 : {1, 2, 3, 7})
    for (int64_t o2 : {1, 3, 24, 30})
      for (uint32_t r = 0; r < uint32_t(5 * o1 * o2); ++r) check(5, o1, o2, r);
  uint32_t state = 7;
  const int64_t shapes[][3] = {
      {1, 4608, 24}, {2, 75600, 40}, {3, 4097, 30}, {1, 1, int64_t(1) << 31}, {1, 65537, 32767}};
  for (const auto& s : shapes)
    for (int i = 0; i < 2000; ++i) {
      state = state * 1664525u + 1013904223u;
      check(s[0], s[1], s[2], uint32_t(int64_t(state >> 1) % (s[0] * s[1] * s[2])));
    }
}

// An empty tensor beside a non-empty one (qk_head_layernorm's q or k) may have any outer dims: its split is built
// (and never used) without the divider's range error.
TEST(RowSplit, BuildsForGeometriesWithoutRows) {
  const std::array<int64_t, 3> empty[] = {{0, int64_t(1) << 31 | 1, 128}, {int64_t(1) << 32, 0, 1}, {3, 5, 0}};
  for (const auto& outer : empty) {
    RowGeometry g;
    g.outer[0] = outer[0], g.outer[1] = outer[1], g.outer[2] = outer[2], g.cols = 128;
    EXPECT_NO_THROW(RowSplit{g}) << outer[0] << " x " << outer[1] << " x " << outer[2];
  }
}

struct RowsFlatLayout : ::testing::Test {
  std::vector<uint16_t> storage = std::vector<uint16_t>(4 * 6 * 8 * 2);
  void* data = storage.data();
  TensorView x{data, DType::bf16, {3, 5, 8}};
};

TEST_F(RowsFlatLayout, ContiguousInputsAreFlat) {
  const RowwiseFlatLayout l = rowwise_flat_layout(params(x, {x, x}));
  ASSERT_TRUE(l.applies);
  EXPECT_EQ(l.in[0], FlatAccess::flat);
  EXPECT_EQ(l.in[1], FlatAccess::flat);
}

TEST_F(RowsFlatLayout, SharedRowsAndValues) {
  const TensorView row(data, DType::bf16, {1, 1, 8}), vector(data, DType::bf16, {8}), scalar(data, DType::bf16, {1});
  const RowwiseFlatLayout l = rowwise_flat_layout(params(x, {x, row, vector, scalar}));
  ASSERT_TRUE(l.applies);
  EXPECT_EQ(l.in[0], FlatAccess::flat);
  EXPECT_EQ(l.in[1], FlatAccess::column);
  EXPECT_EQ(l.in[2], FlatAccess::column);
  EXPECT_EQ(l.in[3], FlatAccess::value);
}

TEST_F(RowsFlatLayout, SizeOneDimsDoNotMatter) {
  // [1, 5, 8] with a [1, 1, 8] row: one batch, so the per-batch row is shared by every row.
  const TensorView one_batch(data, DType::bf16, {1, 5, 8}), row(data, DType::bf16, {1, 1, 8});
  const RowwiseFlatLayout l = rowwise_flat_layout(params(one_batch, {one_batch, row}));
  ASSERT_TRUE(l.applies);
  EXPECT_EQ(l.in[1], FlatAccess::column);
}

TEST_F(RowsFlatLayout, RowsTheFlatFormCannotPlace) {
  const TensorView per_batch(data, DType::bf16, {3, 1, 8});      // a row per batch of 5 rows
  const TensorView per_row(data, DType::bf16, {3, 5, 1});        // one value per row
  const int64_t sizes[3] = {3, 5, 8}, chunk_strides[3] = {80, 16, 1};  // a chunk(2) view of [3, 5, 16]
  const TensorView chunked(data, DType::bf16, sizes, chunk_strides, 3);
  EXPECT_FALSE(rowwise_flat_layout(params(x, {x, per_batch})).applies);
  EXPECT_FALSE(rowwise_flat_layout(params(x, {x, per_row})).applies);
  EXPECT_FALSE(rowwise_flat_layout(params(x, {chunked})).applies);
  EXPECT_FALSE(rowwise_flat_layout(params(x, {x}, &chunked)).applies);  // a strided output
}

TEST_F(RowsFlatLayout, SingleRowIsSharedByItself) {
  const TensorView one(data, DType::bf16, {1, 1, 8});
  const RowwiseFlatLayout l = rowwise_flat_layout(params(one, {one}));
  ASSERT_TRUE(l.applies);
  EXPECT_EQ(l.in[0], FlatAccess::column);  // element c of the one row: the same address either way
}

}  // namespace
}  // namespace dfuse::detail
