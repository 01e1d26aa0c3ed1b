// Core: dtype conversions, TensorView, the host runtime, and the CUDA backend reporting itself
// unavailable on a machine without CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "dfuse/core/dtype.h"
#include "dfuse/core/error.h"
#include "dfuse/core/runtime.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {
namespace {

// Reference rounding through double: the nearest representable value, ties to the even
// significand; independent of the bit tricks under test.
uint16_t bf16_reference(float f) {
  if (std::isnan(f)) return 0x7FFF;
  uint32_t u = float_bits(f);
  uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  double a = bits_float(uint32_t(lo) << 16), b = bits_float(uint32_t(hi) << 16);
  if (std::isinf(f)) return lo;
  if (std::isinf(b)) b = std::copysign(std::ldexp(1.0, 128), b);  // rounding treats inf as 2^128
  double dl = std::fabs(double(f) - a), dh = std::fabs(double(f) - b);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(CoreDtype, Bf16RoundsToNearestEvenOnSampledPatterns) {
  uint64_t s = 99;
  for (int i = 0; i < 2000000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float f = bits_float(uint32_t(s >> 32));
    ASSERT_EQ(float_to_bf16(f).bits, bf16_reference(f)) << std::hex << float_bits(f);
  }
}

TEST(CoreDtype, Bf16KnownValues) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3F80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3F808000)).bits, 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bf16(bits_float(0x3F818000)).bits, 0x3F82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(-0.0f).bits, 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FFF);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::quiet_NaN()).bits, 0x7FFF);
  EXPECT_EQ(float_to_bf16(bits_float(0x7F7FFFFF)).bits, 0x7F80);  // max float rounds to inf
  EXPECT_EQ(bf16_to_float(bf16_t{0x3F80}), 1.0f);
}

TEST(CoreDtype, F16KnownValues) {
  EXPECT_EQ(float_to_f16(1.0f).bits, 0x3C00);
  EXPECT_EQ(float_to_f16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.99f).bits, 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f).bits, 0x7C00);  // halfway to 2^16 rounds to inf
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even (zero)
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)).bits, 0x0002);  // 1.5 quanta -> 2 (even)
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(float_to_f16(-2.0f).bits, 0xC000);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FFF);
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::infinity()).bits, 0x7C00);
}

TEST(CoreDtype, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    f16_t v{uint16_t(h)};
    float f = f16_to_float(v);
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_f16(f).bits, 0x7FFF);
      continue;
    }
    ASSERT_EQ(float_to_f16(f).bits, h) << std::hex << h;
  }
}

TEST(CoreDtype, F16MidpointsRoundToEven) {
  // Between consecutive finite halves, the midpoint must go to the even code.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    double a = f16_to_float(f16_t{uint16_t(h)}), b = f16_to_float(f16_t{uint16_t(h + 1)});
    float mid = float((a + b) / 2);  // exact in float
    uint16_t want = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
    ASSERT_EQ(float_to_f16(mid).bits, want) << std::hex << h;
  }
}

TEST(CoreDtype, Fp8AndFp4) {
  EXPECT_EQ(float_to_f8_e4m3fn(448.0f), 0x7E);
  EXPECT_EQ(float_to_f8_e4m3fn(464.0f), 0x7E);  // tie between 448 and the NaN code: even
  EXPECT_EQ(float_to_f8_e4m3fn(470.0f), 0x7F);  // past the tie: NaN (no saturation)
  EXPECT_EQ(float_to_f8_e4m3fn(-1.0f), 0xB8);
  EXPECT_EQ(float_to_f8_e4m3fn(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_TRUE(std::isnan(f8_e4m3fn_to_float(0x7F)));
  EXPECT_EQ(f8_e4m3fn_to_float(0x7E), 448.0f);
  EXPECT_EQ(float_to_f8_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(float_to_f8_e5m2(61440.0f), 0x7C);  // tie rounds to even: inf
  EXPECT_EQ(float_to_f8_e5m2(-std::numeric_limits<float>::infinity()), 0xFC);
  EXPECT_EQ(f8_e5m2_to_float(0x3C), 1.0f);
  for (int code = 0; code < 0x7F; ++code) {  // every finite e4m3fn value round-trips
    EXPECT_EQ(float_to_f8_e4m3fn(f8_e4m3fn_to_float(uint8_t(code))), code);
    EXPECT_EQ(float_to_f8_e4m3fn(f8_e4m3fn_to_float(uint8_t(code | 0x80))), code | 0x80);
  }
  const float e2m1[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int code = 0; code < 8; ++code) {
    EXPECT_EQ(f4_e2m1_to_float(uint8_t(code)), e2m1[code]);
    EXPECT_EQ(float_to_f4_e2m1(e2m1[code]), code);
  }
  EXPECT_EQ(float_to_f4_e2m1(100.0f), 0x7);  // saturates
  EXPECT_EQ(float_to_f4_e2m1(-5.0f), 0xE);   // tie between 4 (code 6) and 6 (code 7): even code
  uint8_t packed = 0;
  store_from_double(&packed, DType::f4_e2m1x2, 0, 1.0);
  store_from_double(&packed, DType::f4_e2m1x2, 1, -6.0);
  EXPECT_EQ(packed, 0xF2);
  EXPECT_EQ(load_as_double(&packed, DType::f4_e2m1x2, 1), -6.0);
}

TEST(CoreDtype, NamesParse) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8,
                  DType::f8_e4m3fn, DType::f8_e5m2, DType::f4_e2m1x2})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  try {
    parse_dtype("bf17");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("\"bf17\""), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos);
  }
}

TEST(CoreTensorView, ContiguityAlignmentAndExtent) {
  alignas(16) uint16_t buf[64];
  TensorView v(buf, DType::bf16, {2, 4, 8});
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.numel(), 64);
  EXPECT_EQ(v.stride(0), 32);
  EXPECT_EQ(v.alignment(), 16);
  EXPECT_EQ(TensorView(buf + 1, DType::bf16, {2}).alignment(), 2);
  int64_t sizes[] = {2, 4, 4}, strides[] = {32, 8, 1};
  TensorView sub = v.restrided(sizes, strides, 3);
  EXPECT_FALSE(sub.is_contiguous());
  EXPECT_EQ(sub.byte_extent(), (std::pair<int64_t, int64_t>(0, (32 + 24 + 3) * 2 + 1)));
  EXPECT_EQ(sub.str(), "bf16[2, 4, 4] strides [32, 8, 1] on host");
  int64_t idx[] = {1, 2, 3};
  EXPECT_EQ(sub.element_ptr(idx), static_cast<void*>(buf + 32 + 16 + 3));
  EXPECT_THROW(TensorView(buf, DType::bf16, sizes, strides, 9), InvalidArgument);
}

TEST(CoreRuntime, HostRuntimeCopiesAndTimes) {
  Runtime& rt = runtime(Device::host());
  DeviceBuffer b(Device::host(), 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  char src[100];
  for (int i = 0; i < 100; ++i) src[i] = char(i);
  rt.copy_to_device(b.data(), src, 100);
  char dst[100] = {};
  rt.copy_to_host(dst, b.data(), 100);
  EXPECT_EQ(std::memcmp(src, dst, 100), 0);
  EXPECT_FALSE(rt.is_capturing({}));
  auto t = rt.make_timer();
  t->start({});
  t->stop({});
  EXPECT_GE(t->elapsed_ms(), 0.0);
}

TEST(CoreRuntime, CudaBackendUnavailableIsReportedNotFatal) {
  // On a machine without a CUDA device (CI) the backend either fails to load or reports no
  // device; both are BackendUnavailable with a reason, never a crash.
  try {
    Runtime& rt = runtime(Device::cuda(0));
    GTEST_SKIP() << "a CUDA device is present: " << rt.info().name;
  } catch (const BackendUnavailable& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

}  // namespace
}  // namespace dfuse
