// The row-wise kernels' operand geometry (common/rows.h): which operands the flat form of the CUDA row-wise
// kernel may address by an element's position in the output alone (rowwise_flat_layout), and which it must
// leave to the row blocks.
#include <gtest/gtest.h>

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
