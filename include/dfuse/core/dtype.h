// dfuse core: element types and exact host conversions.
//
// The conversions below are the host side of the library's arithmetic. They are written with
// integer bit manipulation only, so they compile for the host and (through DFUSE_HD) for the
// device, and they are tested bit for bit against the CUDA conversion intrinsics on a GPU
// (tests/cuda/test_conversions.cpp) over every float bit pattern.
//
// NaN handling: float -> bf16 and float -> f16 return the canonical NaN of the target format
// (0x7FFF for both), which is what the sm_90 conversion instructions (cvt.rn.bf16.f32 /
// cvt.rn.f16.f32, i.e. __float2bfloat16_rn / __float2half_rn) produce. c10's *software*
// BFloat16 conversion returns 0x7FC0 instead; torch on CUDA uses the hardware instruction, so
// dfuse follows the hardware. Payload and sign of NaN are not preserved.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define DFUSE_HD __host__ __device__ __forceinline__
#else
#define DFUSE_HD inline
#endif

namespace dfuse {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  f64,
  i32,
  i64,
  u8,
  f8_e4m3fn,
  f8_e5m2,
  f4_e2m1x2,  // two e2m1 values packed per byte, element 0 in the low nibble
};

// Size of one storage element in bytes; f4_e2m1x2 counts one byte per packed pair.
size_t dtype_size(DType t);
// "bf16", "f16", ...: the names used by the CLI, the registry and error messages.
std::string_view dtype_name(DType t);
// Inverse of dtype_name; also accepts the torch spellings (bfloat16, float16, float32, ...).
// Throws dfuse::InvalidArgument listing the valid names.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

// Storage types for 16-bit floats usable on host and device without CUDA headers.
struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

DFUSE_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
DFUSE_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// ---- bf16 -------------------------------------------------------------------------------
DFUSE_HD float bf16_to_float(bf16_t v) { return bits_float(uint32_t(v.bits) << 16); }

// Round to nearest even; NaN -> 0x7FFF; overflow rounds to +-inf as the hardware does.
DFUSE_HD bf16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16_t{0x7FFF};
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return bf16_t{uint16_t(u >> 16)};
}

// ---- f16 (IEEE binary16) -----------------------------------------------------------------
DFUSE_HD float f16_to_float(f16_t v) {
  uint32_t h = v.bits;
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    // subnormal: value = man * 2^-24, exact in float
    float m = float(man) * bits_float(0x33800000u);  // 2^-24
    return bits_float(sign | float_bits(m));
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// Round to nearest even, including into the subnormal range; NaN -> 0x7FFF; overflow -> inf.
DFUSE_HD f16_t float_to_f16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return f16_t{0x7FFF};
  if (a >= 0x477FF000u) return f16_t{uint16_t(sign | 0x7C00u)};  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // result is subnormal or zero: quantum 2^-24
    if (a < 0x33000000u) return f16_t{sign};  // < 2^-25 rounds to zero (2^-25 ties to even 0)
    uint32_t e = a >> 23;                     // 102..112
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - e;  // bits to drop so that the result is in units of 2^-24
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return f16_t{uint16_t(sign | q)};
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits
  uint32_t r = a - 0x38000000u;  // exponent - 112
  uint32_t lsb = (r >> 13) & 1u;
  r += 0xFFFu + lsb;
  return f16_t{uint16_t(sign | (r >> 13))};
}

// ---- fp8 / fp4 ---------------------------------------------------------------------------
// Decoding is exact. Encoding rounds to nearest even without saturation (torch's
// Float8_e4m3fn / Float8_e5m2 semantics): e4m3fn overflow and NaN give 0x7F (its only NaN,
// with the sign of the input), e5m2 overflow gives inf and NaN gives 0x7F|sign.
// e2m1 has no inf or NaN; encoding saturates to +-6 (the behaviour of the satfinite producer).
float f8_e4m3fn_to_float(uint8_t v);
float f8_e5m2_to_float(uint8_t v);
float f4_e2m1_to_float(uint8_t nibble);
uint8_t float_to_f8_e4m3fn(float f);
uint8_t float_to_f8_e5m2(float f);
uint8_t float_to_f4_e2m1(float f);

// Reads element `i` of a buffer of type `t` as double (packed fp4: nibble `i`).
double load_as_double(const void* data, DType t, int64_t i);
// Writes `v` to element `i`, rounding as the type's float conversion above does.
void store_from_double(void* data, DType t, int64_t i, double v);

}  // namespace dfuse
