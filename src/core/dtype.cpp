#include "dfuse/core/dtype.h"

#include <cmath>
#include <utility>

#include "dfuse/core/error.h"

namespace dfuse {

namespace {

struct DTypeName {
  DType type;
  std::string_view name;
  std::string_view torch_name;
};
constexpr DTypeName kNames[] = {
    {DType::f32, "f32", "float32"},          {DType::f16, "f16", "float16"},
    {DType::bf16, "bf16", "bfloat16"},       {DType::f64, "f64", "float64"},
    {DType::i32, "i32", "int32"},            {DType::i64, "i64", "int64"},
    {DType::u8, "u8", "uint8"},              {DType::f8_e4m3fn, "f8_e4m3fn", "float8_e4m3fn"},
    {DType::f8_e5m2, "f8_e5m2", "float8_e5m2"}, {DType::f4_e2m1x2, "f4_e2m1x2", "float4_e2m1fn_x2"},
};

// A small binary float format: 1 sign bit, `exp_bits`, `man_bits`, exponent bias `bias`.
struct MiniFloat {
  int man_bits;
  int bias;
};

double decode_minifloat(uint32_t code, MiniFloat f) {
  uint32_t exp = code >> f.man_bits;
  uint32_t man = code & ((1u << f.man_bits) - 1u);
  if (exp == 0) return std::ldexp(double(man), 1 - f.bias - f.man_bits);
  return std::ldexp(double(man | (1u << f.man_bits)), int(exp) - f.bias - f.man_bits);
}

// Magnitude code of |x| (finite, x given as double) rounded to nearest even, with subnormals.
// The result may exceed the format's largest finite code: callers apply their overflow rule.
uint32_t encode_minifloat(double ax, MiniFloat f) {
  if (ax == 0.0) return 0;
  int e;
  std::frexp(ax, &e);  // ax = m * 2^e, m in [0.5, 1)
  e -= 1;              // ax = m' * 2^e, m' in [1, 2)
  const int min_exp = 1 - f.bias;
  if (e < min_exp) {
    // Subnormal: a multiple of the smallest quantum. nearbyint rounds half to even; q equal to
    // 2^man_bits is the smallest normal, which this code encodes correctly as exp 1, man 0.
    double q = std::nearbyint(std::ldexp(ax, f.man_bits - min_exp));
    return uint32_t(q);
  }
  double q = std::nearbyint(std::ldexp(ax, f.man_bits - e));
  if (q >= std::ldexp(1.0, f.man_bits + 1)) {
    q = std::ldexp(1.0, f.man_bits);
    e += 1;
  }
  return (uint32_t(e + f.bias) << f.man_bits) | (uint32_t(q) - (1u << f.man_bits));
}

constexpr MiniFloat kE4M3{3, 7};
constexpr MiniFloat kE5M2{2, 15};
constexpr MiniFloat kE2M1{1, 1};

}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
    case DType::f8_e4m3fn:
    case DType::f8_e5m2:
    case DType::f4_e2m1x2:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& n : kNames)
    if (n.type == t) return n.name;
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string valid;
  for (const auto& n : kNames) {
    if (name == n.name || name == n.torch_name) return n.type;
    valid += (valid.empty() ? "" : ", ") + std::string(n.name);
  }
  throw InvalidArgument("unknown dtype \"" + std::string(name) + "\"; valid: " + valid);
}

bool is_floating(DType t) {
  return t != DType::i32 && t != DType::i64 && t != DType::u8;
}

float f8_e4m3fn_to_float(uint8_t v) {
  double mag = (v & 0x7F) == 0x7F ? NAN : decode_minifloat(v & 0x7Fu, kE4M3);
  return float((v & 0x80) ? -mag : mag);
}

float f8_e5m2_to_float(uint8_t v) {
  // e5m2 is the upper byte of an f16.
  return f16_to_float(f16_t{uint16_t(v << 8)});
}

float f4_e2m1_to_float(uint8_t nibble) {
  double mag = decode_minifloat(nibble & 0x7u, kE2M1);
  return float((nibble & 0x8) ? -mag : mag);
}

uint8_t float_to_f8_e4m3fn(float f) {
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f) || std::isinf(f)) return sign | 0x7F;
  uint32_t code = encode_minifloat(std::fabs(double(f)), kE4M3);
  return sign | uint8_t(code > 0x7F ? 0x7F : code);  // past 448 rounds into 0x7F, the NaN
}

uint8_t float_to_f8_e5m2(float f) {
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7F;
  if (std::isinf(f)) return sign | 0x7C;
  uint32_t code = encode_minifloat(std::fabs(double(f)), kE5M2);
  return sign | uint8_t(code > 0x7C ? 0x7C : code);  // overflow is inf
}

uint8_t float_to_f4_e2m1(float f) {
  uint8_t sign = std::signbit(f) ? 0x8 : 0;
  if (std::isnan(f)) return sign | 0x7;
  uint32_t code = std::isinf(f) ? 0x7 : encode_minifloat(std::fabs(double(f)), kE2M1);
  return sign | uint8_t(code > 0x7 ? 0x7 : code);  // saturates to 6
}

double load_as_double(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(data)[i];
    case DType::f64:
      return static_cast<const double*>(data)[i];
    case DType::f16:
      return f16_to_float(static_cast<const f16_t*>(data)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const bf16_t*>(data)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(data)[i];
    case DType::i64:
      return double(static_cast<const int64_t*>(data)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(data)[i];
    case DType::f8_e4m3fn:
      return f8_e4m3fn_to_float(static_cast<const uint8_t*>(data)[i]);
    case DType::f8_e5m2:
      return f8_e5m2_to_float(static_cast<const uint8_t*>(data)[i]);
    case DType::f4_e2m1x2: {
      uint8_t byte = static_cast<const uint8_t*>(data)[i / 2];
      return f4_e2m1_to_float((i % 2) ? byte >> 4 : byte & 0xF);
    }
  }
  return 0.0;
}

void store_from_double(void* data, DType t, int64_t i, double v) {
  float f = float(v);
  switch (t) {
    case DType::f32:
      static_cast<float*>(data)[i] = f;
      return;
    case DType::f64:
      static_cast<double*>(data)[i] = v;
      return;
    case DType::f16:
      static_cast<f16_t*>(data)[i] = float_to_f16(f);
      return;
    case DType::bf16:
      static_cast<bf16_t*>(data)[i] = float_to_bf16(f);
      return;
    case DType::i32:
      static_cast<int32_t*>(data)[i] = int32_t(v);
      return;
    case DType::i64:
      static_cast<int64_t*>(data)[i] = int64_t(v);
      return;
    case DType::u8:
      static_cast<uint8_t*>(data)[i] = uint8_t(v);
      return;
    case DType::f8_e4m3fn:
      static_cast<uint8_t*>(data)[i] = float_to_f8_e4m3fn(f);
      return;
    case DType::f8_e5m2:
      static_cast<uint8_t*>(data)[i] = float_to_f8_e5m2(f);
      return;
    case DType::f4_e2m1x2: {
      uint8_t& byte = static_cast<uint8_t*>(data)[i / 2];
      uint8_t nib = float_to_f4_e2m1(f);
      byte = (i % 2) ? uint8_t((byte & 0x0F) | (nib << 4)) : uint8_t((byte & 0xF0) | nib);
      return;
    }
  }
}

}  // namespace dfuse
