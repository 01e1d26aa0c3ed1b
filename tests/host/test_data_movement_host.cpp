// Data-movement ops on the host backend: every output byte equal to an independent index loop
// over every case, raw bit patterns (NaN payloads, -0) moved unchanged, and every guard's error.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "common/data_movement_cases.h"
#include "common/strided_copy.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/data_movement.h"

namespace dfuse::test {
namespace {

class DataMovementHost : public ::testing::TestWithParam<DType> {};

TEST_P(DataMovementHost, UspMergeHeadsMatchesPermute) {
  uint64_t seed = 600;
  for (const auto& c : small_usp_merge_heads_cases())
    EXPECT_EQ(run_usp_merge_heads_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementHost, JointQkvCatMatchesCat) {
  uint64_t seed = 700;
  for (const auto& c : small_joint_qkv_cat_cases())
    EXPECT_EQ(run_joint_qkv_cat_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementHost, PackQkvMatchesDestinationShards) {
  uint64_t seed = 800;
  for (const auto& c : small_pack_qkv_cases())
    EXPECT_EQ(run_pack_qkv_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementHost, VarlenPackQkvMatchesIndexSelect) {
  uint64_t seed = 900;
  for (const auto& c : small_varlen_cases())
    EXPECT_EQ(run_varlen_pack_qkv_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementHost, VarlenPackSegmentedQkvMatchesCatThenIndexSelect) {
  uint64_t seed = 1000;
  for (const auto& c : small_varlen_cases())
    EXPECT_EQ(run_varlen_pack_segmented_qkv_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementHost, VarlenScatterToPaddedMatchesIndexCopy) {
  uint64_t seed = 1100;
  for (const auto& c : small_varlen_cases())
    EXPECT_EQ(run_varlen_scatter_to_padded_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DataMovementHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Signaling and quiet NaNs with payloads, -0, infinities and denormals come out bit for bit, on
// the vectorized path (aligned) and the element path (one element in).
TEST(DataMovementHostBits, PayloadsArePreserved) {
  const uint32_t patterns[] = {0x7F800001u, 0x7FBFFFFFu, 0xFFC00123u, 0x7FC0ABCDu, 0x80000000u,
                               0xFF800000u, 0x00000001u, 0x807FFFFFu};
  for (int64_t start : {0, 1}) {
    std::vector<uint32_t> storage(1 + 2 * 3 * 1 * 2 * 8), out(2 * 3 * 2 * 8, 0);
    for (size_t i = 0; i < storage.size(); ++i) storage[i] = patterns[i % 8] ^ uint32_t(i << 8 & 0x3F00);
    TensorView x(storage.data() + start, DType::f32, {2, 3, 1, 2, 8});
    usp_merge_heads(x, TensorView(out.data(), DType::f32, {1, 3, 2, 2, 8}));
    for (int64_t w = 0; w < 2; ++w)
      for (int64_t s = 0; s < 3; ++s)
        for (int64_t e = 0; e < 16; ++e)
          ASSERT_EQ(out[size_t((s * 2 + w) * 16 + e)], storage[size_t(start + (w * 3 + s) * 16 + e)])
              << "start " << start;
  }
}

// The CUDA kernel's 32-bit index decomposition: every unit's multi-index from the copy's size dividers
// (common/uint_divider.h) equals the one from % and /, on a collapsed copy with odd sizes.
TEST(DataMovementHostBits, SizeDividersDecomposeEveryUnit) {
  std::vector<uint16_t> src(5 * 7 * 3 * 9), dst(src.size());
  // src [5, 3, 7, 9] seen as [5, 7, 3, 9] (dims 1 and 2 swapped) into a contiguous dst: four dims stay.
  const int64_t sizes[] = {5, 7, 3, 9}, src_strides[] = {7 * 3 * 9, 9, 7 * 9, 1},
                dst_strides[] = {7 * 3 * 9, 3 * 9, 9, 1};
  const TensorView from(src.data(), DType::bf16, sizes, src_strides, 4),
      to(dst.data(), DType::bf16, sizes, dst_strides, 4);
  const detail::StridedCopyParams p = detail::strided_copy_params({{from, to}});
  ASSERT_EQ(p.count, 1);
  const detail::CopyPair& c = p.pairs[0];
  ASSERT_GE(c.ndim, 2);
  for (int d = 0; d < c.ndim; ++d) ASSERT_EQ(int64_t(c.size_dividers[d].divisor()), c.sizes[d]) << d;
  for (uint32_t i = 0; i < uint32_t(c.units); ++i) {
    uint32_t by_divider = i, by_division = i;
    for (int d = c.ndim - 1; d >= 0; --d) {
      const uint32_t q = c.size_dividers[d].div(by_divider);
      ASSERT_EQ(c.size_dividers[d].mod(by_divider, q), by_division % uint32_t(c.sizes[d])) << i << " dim " << d;
      by_divider = q;
      by_division /= uint32_t(c.sizes[d]);
    }
  }
}

// ---- guards ----------------------------------------------------------------------------------

struct DataMovementGuards : ::testing::Test {
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 4 * 3 * 2 * 8, float_to_bf16(1.0f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 4 * 3 * 2 * 8);
  std::vector<bf16_t> ts = std::vector<bf16_t>(3 * 2 * 5 * 2 * 8, float_to_bf16(0.5f));
  TensorView x{xs.data(), DType::bf16, {2, 4, 3, 2, 8}};      // usp x [W, S, B, h, D]
  TensorView merged{os.data(), DType::bf16, {3, 4, 2, 2, 8}};  // its out [B, S, W, h, D]
  // joint_qkv_cat: img [1, 4, 2, 8] x3 in xs, txt [1, 2, 2, 8] x3, out [1, 6, 2, 8] x3 in os.
  TensorView img(int i) { return {xs.data() + i * 64, DType::bf16, {1, 4, 2, 8}}; }
  TensorView txt(int i) { return {ts.data() + i * 32, DType::bf16, {1, 2, 2, 8}}; }
  TensorView cat(int i) { return {os.data() + i * 96, DType::bf16, {1, 6, 2, 8}}; }
  // pack_qkv: q, k, v [4, 6, 8] in xs, out [2, 4, 3, 24] in ts.
  TensorView head(int i) { return {xs.data() + i * 192, DType::bf16, {4, 6, 8}}; }
  TensorView packed{ts.data(), DType::bf16, {2, 4, 3, 24}};

  template <typename CanUse, typename Run>
  std::string guard_of(const char* op, CanUse can_use, Run run) {
    std::string why;
    EXPECT_FALSE(can_use(&why));
    EXPECT_NE(why.find(std::string(op) + ": "), std::string::npos) << why;
    try {
      run();
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
  std::string usp_guard(const TensorView& xv, const TensorView& o) {
    return guard_of(
        "usp_merge_heads", [&](std::string* why) { return can_use_usp_merge_heads(xv, o, why); },
        [&] { usp_merge_heads(xv, o); });
  }
  std::string cat_guard(const QkvViews& i, const QkvViews& t, const QkvViews& o) {
    return guard_of(
        "joint_qkv_cat", [&](std::string* why) { return can_use_joint_qkv_cat(i, t, o, why); },
        [&] { joint_qkv_cat(i, t, o); });
  }
  std::string pack_guard(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o) {
    return guard_of(
        "pack_qkv_destination_major",
        [&](std::string* why) { return can_use_pack_qkv_destination_major(q, k, v, o, why); },
        [&] { pack_qkv_destination_major(q, k, v, o); });
  }
  QkvViews imgs() { return {img(0), img(1), img(2)}; }
  QkvViews txts() { return {txt(0), txt(1), txt(2)}; }
  QkvViews cats() { return {cat(0), cat(1), cat(2)}; }
};

TEST_F(DataMovementGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_usp_merge_heads(x, merged));
  EXPECT_TRUE(can_use_joint_qkv_cat(imgs(), txts(), cats()));
  EXPECT_TRUE(can_use_pack_qkv_destination_major(head(0), head(1), head(2), packed));
}

TEST_F(DataMovementGuards, RejectsUnsupportedAndMixedDtypes) {
  std::vector<double> d(x.numel());
  TensorView xd(d.data(), DType::f64, {2, 4, 3, 2, 8});
  EXPECT_EQ(usp_guard(xd, xd), "dtype");
  std::vector<float> f(merged.numel());
  EXPECT_EQ(usp_guard(x, TensorView(f.data(), DType::f32, {3, 4, 2, 2, 8})), "dtype");
  const TensorView f32_k(f.data(), DType::f32, {1, 4, 2, 8});
  EXPECT_EQ(cat_guard({img(0), f32_k, img(2)}, txts(), cats()), "dtype");
}

TEST_F(DataMovementGuards, RejectsOtherDevice) {
  TensorView on_gpu(os.data(), DType::bf16, merged.sizes(), merged.strides(), 5, Device::cuda(0));
  EXPECT_EQ(usp_guard(x, on_gpu), "device");
}

TEST_F(DataMovementGuards, RejectsWrongRank) {
  EXPECT_EQ(usp_guard(img(0), merged), "rank");
  EXPECT_EQ(pack_guard(img(0), img(1), img(2), packed), "rank");
  EXPECT_EQ(pack_guard(head(0), head(1), head(2), TensorView(ts.data(), DType::bf16, {2, 4, 72})), "rank");
}

TEST_F(DataMovementGuards, RejectsMissingData) {
  TensorView null_x(nullptr, DType::bf16, {2, 4, 3, 2, 8});
  EXPECT_EQ(usp_guard(null_x, merged), "data");
}

TEST_F(DataMovementGuards, RejectsNegativeStrides) {
  const int64_t strides[] = {-384, 96, 32, 8, 1};
  EXPECT_EQ(usp_guard(TensorView(xs.data() + 384, DType::bf16, x.sizes(), strides, 5), merged), "stride");
}

TEST_F(DataMovementGuards, RejectsStridedLastDim) {
  const int64_t sizes[] = {1, 4, 2, 4}, strides[] = {64, 16, 8, 2};
  const TensorView every_other(xs.data(), DType::bf16, sizes, strides, 4);
  EXPECT_EQ(cat_guard({every_other, img(1), img(2)}, txts(), cats()), "last_dim_stride");
}

TEST_F(DataMovementGuards, RejectsWrongShapes) {
  EXPECT_EQ(usp_guard(x, TensorView(os.data(), DType::bf16, {2, 4, 3, 2, 8})), "shape");
  EXPECT_EQ(cat_guard({img(0), txt(1), img(2)}, txts(), cats()), "shape");
  TensorView wide_txt(ts.data(), DType::bf16, {1, 2, 1, 16});
  EXPECT_EQ(cat_guard(imgs(), {wide_txt, wide_txt, wide_txt}, cats()), "shape");
  EXPECT_EQ(pack_guard(head(0), head(1), head(2), TensorView(ts.data(), DType::bf16, {2, 4, 3, 16})),
            "shape");
}

TEST_F(DataMovementGuards, RejectsWorldNotDividingHeads) {
  const TensorView four_ranks(ts.data(), DType::bf16, {4, 4, 1, 24});
  const TensorView no_rank(ts.data(), DType::bf16, {0, 4, 3, 24});
  EXPECT_EQ(pack_guard(head(0), head(1), head(2), four_ranks), "world");
  EXPECT_EQ(pack_guard(head(0), head(1), head(2), no_rank), "world");
}

TEST_F(DataMovementGuards, RejectsStridedOutput) {
  const int64_t sizes[] = {3, 4, 2, 2, 8}, strides[] = {256, 64, 16, 8, 1};  // rows padded to 64
  std::vector<bf16_t> big(3 * 256);
  EXPECT_EQ(usp_guard(x, TensorView(big.data(), DType::bf16, sizes, strides, 5)), "out_layout");
}

TEST_F(DataMovementGuards, RejectsOverlap) {
  EXPECT_EQ(usp_guard(x, TensorView(xs.data(), DType::bf16, {3, 4, 2, 2, 8})), "overlap");
  EXPECT_EQ(cat_guard(imgs(), txts(), {cat(0), cat(0), cat(2)}), "overlap");
  EXPECT_EQ(pack_guard(head(0), head(1), head(2), TensorView(xs.data() + 96, DType::bf16, {2, 4, 3, 24})),
            "overlap");
}

// ---- varlen guards and index checks ------------------------------------------------------------

struct VarlenGuards : ::testing::Test {
  std::vector<float> xs = std::vector<float>(3 * 2 * 4 * 2 * 4, 1.0f);  // q, k, v [2, 4, 2, 4]
  std::vector<float> os = std::vector<float>(3 * 3 * 2 * 4);            // out q, k, v [3, 2, 4]
  std::vector<int32_t> index_values = {5, 0, 7};
  std::vector<int32_t> inverse_values = {1, -1, -1, -1, -1, 0, -1, 2};
  TensorView x(int i) { return {xs.data() + i * 64, DType::f32, {2, 4, 2, 4}}; }
  TensorView out(int i) { return {os.data() + i * 24, DType::f32, {3, 2, 4}}; }
  TensorView indices{index_values.data(), DType::i32, {3}};
  TensorView inverse{inverse_values.data(), DType::i32, {8}};
  QkvViews xv() { return {x(0), x(1), x(2)}; }
  QkvViews outs() { return {out(0), out(1), out(2)}; }

  std::string pack_guard(const QkvViews& in, const TensorView& idx, const QkvViews& o) {
    std::string why;
    EXPECT_FALSE(can_use_varlen_pack_qkv(in, idx, o, &why));
    try {
      varlen_pack_qkv(in, idx, o);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(VarlenGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_varlen_pack_qkv(xv(), indices, outs()));
  EXPECT_TRUE(can_use_varlen_pack_segmented_qkv(xv(), xv(), indices, outs()));
  EXPECT_TRUE(can_use_varlen_scatter_to_padded(out(0), inverse, x(0)));
}

TEST_F(VarlenGuards, RejectsBadInputs) {
  std::vector<int16_t> shorts(3);
  EXPECT_EQ(pack_guard(xv(), TensorView(shorts.data(), DType::u8, {3}), outs()), "dtype");
  EXPECT_EQ(pack_guard(xv(), TensorView(index_values.data(), DType::i32, {3, 1}), outs()), "rank");
  EXPECT_EQ(pack_guard(xv(), indices, {out(0), out(1), TensorView(os.data() + 48, DType::f32, {3, 1, 8})}),
            "shape");
  const int64_t sizes[] = {2, 4, 2, 4}, strides[] = {64, 8, 4, 1};  // not contiguous: padded batches
  EXPECT_EQ(pack_guard({TensorView(xs.data(), DType::f32, sizes, strides, 4), x(1), x(2)}, indices, outs()),
            "layout");
  EXPECT_EQ(pack_guard(xv(), indices, {out(0), out(0), out(2)}), "overlap");
  EXPECT_EQ(pack_guard(xv(), indices, {TensorView(xs.data(), DType::f32, {3, 2, 4}), out(1), out(2)}), "overlap");
  std::string why;
  EXPECT_FALSE(can_use_varlen_scatter_to_padded(out(0), TensorView(inverse_values.data(), DType::i32, {7}), x(0),
                                                &why));
  EXPECT_NE(why.find("inv_indices"), std::string::npos) << why;
}

TEST_F(VarlenGuards, HostThrowsOnOutOfRangeIndices) {
  index_values[1] = 8;  // B * S = 8
  EXPECT_THROW(varlen_pack_qkv(xv(), indices, outs()), InvalidArgument);
  index_values[1] = -1;  // padding only in the scatter
  EXPECT_THROW(varlen_pack_qkv(xv(), indices, outs()), InvalidArgument);
  index_values[1] = 16;  // B * (Sp + Sm) = 16 with a 4-token prefix and a 4-token main
  EXPECT_THROW(varlen_pack_segmented_qkv(xv(), xv(), indices, outs()), InvalidArgument);
  inverse_values[3] = 3;  // x has 3 rows
  EXPECT_THROW(varlen_scatter_to_padded(out(0), inverse, x(0)), InvalidArgument);
}

// -0 and NaN payloads move unchanged; padding rows are +0.0 bits.
TEST_F(VarlenGuards, SignedZerosAndPaddingBits) {
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = i % 2 ? -0.0f : std::bit_cast<float>(0x7FA00000u + uint32_t(i));
  varlen_pack_segmented_qkv(xv(), xv(), indices, outs());
  for (int64_t e = 0; e < 8; ++e)  // out.q row 0 = token 5 of batch 0 = main row 1
    EXPECT_EQ(std::bit_cast<uint32_t>(os[size_t(e)]), std::bit_cast<uint32_t>(xs[size_t(8 + e)])) << e;
  std::vector<float> padded(64, 1.0f);
  varlen_scatter_to_padded(out(0), inverse, TensorView(padded.data(), DType::f32, {2, 4, 2, 4}));
  for (int64_t e = 0; e < 8; ++e) {
    EXPECT_EQ(std::bit_cast<uint32_t>(padded[size_t(8 + e)]), 0u) << e;
    EXPECT_EQ(std::bit_cast<uint32_t>(padded[size_t(e)]), std::bit_cast<uint32_t>(os[size_t(8 + e)])) << e;
  }
}

}  // namespace
}  // namespace dfuse::test
