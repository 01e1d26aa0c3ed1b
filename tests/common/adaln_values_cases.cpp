#include "common/adaln_values_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "common/tensors.h"
#include "dfuse/core/runtime.h"

namespace dfuse::test {

namespace {

constexpr uint8_t kPoison = 0xFF;  // a negative NaN in every float dtype, which no kernel writes

std::vector<float> to_floats(const TensorView& v) {
  const auto bytes = gather_bytes(v);
  std::vector<float> out(size_t(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (v.dtype()) {
      case DType::bf16: {
        bf16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        out[i] = bf16_to_float(b);
        break;
      }
      case DType::f16: {
        f16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = f16_to_float(h);
        break;
      }
      default:
        std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    }
  }
  return out;
}

// v rounded to dtype t (RNE), as torch's .to(t) and every op's store round a float.
float round_to(DType t, float v) {
  if (t == DType::bf16) return bf16_to_float(float_to_bf16(v));
  if (t == DType::f16) return f16_to_float(float_to_f16(v));
  return v;
}

// A contiguous host tensor of dtype t holding `values` (each already representable in t).
TestTensor host_tensor(DType t, const std::vector<int64_t>& sizes, const std::vector<float>& values) {
  TestTensor r = poisoned_tensor(Device::host(), t, sizes, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    char* p = static_cast<char*>(r.view.data()) + i * dtype_size(t);
    if (t == DType::bf16) {
      const bf16_t b = float_to_bf16(values[i]);
      std::memcpy(p, &b, 2);
    } else if (t == DType::f16) {
      const f16_t h = float_to_f16(values[i]);
      std::memcpy(p, &h, 2);
    } else {
      std::memcpy(p, &values[i], 4);
    }
  }
  return r;
}

// The NaN a float operation leaves: on CUDA the canonical 0x7FFFFFFF whatever the operands; on
// the host x86 propagates an operand's payload (the host comparison ignores f32 payloads, and
// the fused host kernels and the replicas take the operands in the same order).
float arith_result(Device d, float v) {
  if (d.is_cuda() && std::isnan(v)) {
    const uint32_t canonical = 0x7FFFFFFF;
    std::memcpy(&v, &canonical, 4);
  }
  return v;
}

// Every part of `fused` written and equal bit for bit to `expected`.
std::string compare_parts(Device d, const std::vector<TestTensor>& fused, const std::vector<TestTensor>& expected) {
  for (size_t k = 0; k < fused.size(); ++k) {
    if (!fully_written(fused[k].view, kPoison)) return "out[" + std::to_string(k) + "] has unwritten elements";
    const std::string diff = compare_bits(fused[k].view, expected[k].view, /*any_nan_f32=*/!d.is_cuda());
    if (!diff.empty()) return "out[" + std::to_string(k) + "]: " + diff;
  }
  return "";
}

std::vector<TensorView> views(const std::vector<TestTensor>& ts) {
  std::vector<TensorView> v;
  for (const auto& t : ts) v.push_back(t.view);
  return v;
}

}  // namespace

// ---- temb_table_slices -------------------------------------------------------------------------

std::vector<TembSlicesCase> small_temb_slices_cases() {
  return {
      {.name = "wan21_per_batch", .B = 2, .D = 64},
      {.name = "per_token", .B = 2, .S = 7, .D = 96},
      {.name = "odd_d", .B = 3, .D = 77},
      {.name = "table_2d", .B = 1, .D = 40, .table_rank = 2},
      {.name = "table_4d_per_token", .B = 1, .S = 5, .D = 48, .table_rank = 4},
      {.name = "strided_temb", .B = 2, .S = 3, .D = 64, .temb_pad = 8},
      {.name = "misaligned_temb", .B = 2, .D = 64, .temb_offset = 1},
      {.name = "specials", .B = 2, .S = 9, .D = 128, .specials = true},
      {.name = "single_column", .B = 2, .S = 2, .D = 1},
  };
}

std::vector<TembSlicesCase> model_temb_slices_cases() {
  return {
      {.name = "wan21_14b", .B = 1, .D = 5120},
      {.name = "wan21_1p3b_b2", .B = 2, .D = 1536},
      {.name = "wan22_ti2v_per_token", .B = 1, .S = 1560, .D = 3072},
      {.name = "per_token_odd", .B = 1, .S = 1001, .D = 3080, .temb_offset = 4},
  };
}

std::string run_temb_slices_case(Device d, DType temb_dtype, const TembSlicesCase& c, uint64_t seed) {
  const bool per_token = c.S > 0;
  const int64_t rows = c.B * (per_token ? c.S : 1);
  // temb [B, (S,) 6, D] inside storage whose parts are D + pad apart.
  std::vector<int64_t> temb_sizes =
      per_token ? std::vector<int64_t>{c.B, c.S, 6, c.D} : std::vector<int64_t>{c.B, 6, c.D};
  const int64_t part = c.D + c.temb_pad;
  std::vector<int64_t> temb_strides =
      per_token ? std::vector<int64_t>{c.S * 6 * part, 6 * part, part, 1} : std::vector<int64_t>{6 * part, part, 1};
  auto temb = random_tensor(d, temb_dtype, temb_sizes, temb_strides, c.temb_offset, {seed, 1.0, c.specials},
                            c.temb_offset + rows * 6 * part);
  std::vector<int64_t> table_sizes = {6, c.D};
  if (c.table_rank >= 3) table_sizes.insert(table_sizes.begin(), 1);
  if (c.table_rank == 4) table_sizes.insert(table_sizes.begin(), 1);
  auto table = random_tensor(d, DType::f32, table_sizes, {}, 0, {seed + 1, 0.25, c.specials});

  std::vector<int64_t> out_sizes = temb_sizes;
  out_sizes[out_sizes.size() - 2] = 1;
  std::vector<TestTensor> out;
  for (int k = 0; k < 6; ++k) out.push_back(poisoned_tensor(d, DType::f32, out_sizes, kPoison));
  const auto out_views = views(out);
  std::string why;
  if (!can_use_temb_table_slices(table.view, temb.view, out_views, &why)) return "rejected: " + why;
  temb_table_slices(table.view, temb.view, out_views);
  runtime(d).synchronize({});

  // Eager: t = temb.float() (exact); s = table + t (one f32 add, broadcast over rows);
  // s.chunk(6, dim=-2)[k].contiguous().
  const auto t = to_floats(temb.view), w = to_floats(table.view);
  std::vector<TestTensor> expected;
  for (int k = 0; k < 6; ++k) {
    std::vector<float> values(size_t(rows * c.D));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c.D; ++j)
        values[size_t(r * c.D + j)] = arith_result(d, w[size_t(k * c.D + j)] + t[size_t((r * 6 + k) * c.D + j)]);
    expected.push_back(host_tensor(DType::f32, out_sizes, values));
  }
  return compare_parts(d, out, expected);
}

// ---- ltx2_ada_values ---------------------------------------------------------------------------

std::vector<Ltx2Case> small_ltx2_cases() {
  return {
      {.name = "nine_per_batch", .B = 2, .T = 1, .n = 9, .D = 64},
      {.name = "nine_per_token", .B = 1, .T = 37, .n = 9, .D = 96},
      {.name = "six", .B = 2, .T = 5, .n = 6, .D = 48},
      {.name = "one", .B = 1, .T = 3, .n = 1, .D = 32},
      {.name = "odd_d", .B = 2, .T = 3, .n = 9, .D = 77},
      {.name = "strided_timestep", .B = 2, .T = 4, .n = 9, .D = 64, .timestep_pad = 16},
      {.name = "misaligned_timestep", .B = 1, .T = 6, .n = 9, .D = 64, .timestep_offset = 3},
      {.name = "specials", .B = 2, .T = 11, .n = 9, .D = 128, .specials = true},
  };
}

std::vector<Ltx2Case> model_ltx2_cases() {
  return {
      {.name = "ltx2_per_batch", .B = 2, .T = 1, .n = 9, .D = 4096},
      {.name = "ltx2_per_token", .B = 1, .T = 1536, .n = 9, .D = 4096},
      {.name = "ltx2_audio_per_token", .B = 1, .T = 1001, .n = 9, .D = 2048},
      {.name = "six_odd", .B = 1, .T = 2049, .n = 6, .D = 2056, .timestep_offset = 8},
  };
}

std::string run_ltx2_case(Device d, DType table_dtype, DType timestep_dtype, const Ltx2Case& c, uint64_t seed) {
  const int64_t row = c.n * c.D + c.timestep_pad;
  auto timestep = random_tensor(d, timestep_dtype, {c.B, c.T, c.n * c.D}, {c.T * row, row, 1}, c.timestep_offset,
                                {seed, 1.0, c.specials}, c.timestep_offset + c.B * c.T * row);
  auto table = random_tensor(d, table_dtype, {c.n, c.D}, {}, 0, {seed + 1, 0.25, c.specials});
  std::vector<TestTensor> out;
  for (int64_t k = 0; k < c.n; ++k) out.push_back(poisoned_tensor(d, timestep_dtype, {c.B, c.T, c.D}, kPoison));
  const auto out_views = views(out);
  std::string why;
  if (!can_use_ltx2_ada_values(table.view, timestep.view, out_views, &why)) return "rejected: " + why;
  ltx2_ada_values(table.view, timestep.view, out_views);
  runtime(d).synchronize({});

  // Eager: w = table[None, None].to(timestep.dtype) (one RNE rounding);
  // s = w + timestep.reshape(B, T, n, D) (float add, rounded to the dtype); s.unbind(2)[k].contiguous().
  const auto ts = to_floats(timestep.view), tab = to_floats(table.view);
  const int64_t rows = c.B * c.T;
  std::vector<TestTensor> expected;
  for (int64_t k = 0; k < c.n; ++k) {
    std::vector<float> values(size_t(rows * c.D));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c.D; ++j) {
        const float w = round_to(timestep_dtype, tab[size_t(k * c.D + j)]);
        const float sum = arith_result(d, w + ts[size_t((r * c.n + k) * c.D + j)]);
        values[size_t(r * c.D + j)] = round_to(timestep_dtype, sum);
      }
    expected.push_back(host_tensor(timestep_dtype, {c.B, c.T, c.D}, values));
  }
  return compare_parts(d, out, expected);
}

// ---- scaled_residual_bf16 ----------------------------------------------------------------------

std::vector<ScaledResidualCase> small_scaled_residual_cases() {
  return {
      {.name = "per_frame", .B = 2, .F = 3, .S = 5, .D = 64, .gate = ScaledGate::per_frame},
      {.name = "per_batch", .B = 2, .S = 17, .D = 96, .gate = ScaledGate::per_batch},
      {.name = "per_token", .B = 1, .S = 9, .D = 48, .gate = ScaledGate::per_token},
      {.name = "per_row", .B = 3, .S = 7, .D = 40, .gate = ScaledGate::per_row},
      {.name = "chunk6", .B = 1, .F = 4, .S = 6, .D = 64, .gate = ScaledGate::chunk6},
      {.name = "odd_d", .B = 1, .F = 2, .S = 3, .D = 77, .gate = ScaledGate::per_frame},
      {.name = "strided_x", .B = 2, .F = 2, .S = 4, .D = 64, .gate = ScaledGate::per_frame, .x_pad = 16},
      {.name = "misaligned_x", .B = 1, .S = 9, .D = 64, .gate = ScaledGate::per_batch, .x_offset = 1},
      {.name = "in_place", .B = 1, .F = 3, .S = 8, .D = 72, .gate = ScaledGate::per_frame, .in_place = true},
      {.name = "specials", .B = 2, .F = 2, .S = 16, .D = 128, .gate = ScaledGate::per_frame, .specials = true},
  };
}

std::vector<ScaledResidualCase> model_scaled_residual_cases() {
  return {
      {.name = "lingbot_per_frame", .B = 1, .F = 21, .S = 360, .D = 5120, .gate = ScaledGate::per_frame},
      {.name = "lingbot_chunk6", .B = 1, .F = 21, .S = 360, .D = 5120, .gate = ScaledGate::chunk6},
      {.name = "per_token_3072", .B = 1, .S = 4097, .D = 3072, .gate = ScaledGate::per_token},
      {.name = "in_place", .B = 1, .F = 21, .S = 360, .D = 5120, .gate = ScaledGate::per_frame, .in_place = true},
      {.name = "misaligned", .B = 1, .F = 5, .S = 999, .D = 3072, .gate = ScaledGate::per_frame, .x_offset = 3},
  };
}

std::string run_scaled_residual_case(Device d, const ScaledResidualCase& c, uint64_t seed) {
  const bool video = c.F > 0;
  const int64_t frames = video ? c.F : 1;
  const std::vector<int64_t> x_sizes =
      video ? std::vector<int64_t>{c.B, c.F, c.S, c.D} : std::vector<int64_t>{c.B, c.S, c.D};
  const int64_t xr = c.D + c.x_pad;
  const std::vector<int64_t> x_strides =
      video ? std::vector<int64_t>{c.F * c.S * xr, c.S * xr, xr, 1} : std::vector<int64_t>{c.S * xr, xr, 1};
  auto x = random_tensor(d, DType::bf16, x_sizes, x_strides, c.x_offset, {seed, 1.0, c.specials},
                         c.x_offset + c.B * frames * c.S * xr);
  auto y = random_tensor(d, DType::bf16, x_sizes, {}, 0, {seed + 1, 1.0, c.specials});
  const RandomSpec gr{seed + 2, 0.5, c.specials};
  TestTensor gate;
  switch (c.gate) {
    case ScaledGate::per_frame:
      gate = random_tensor(d, DType::f32, {c.B, c.F, 1, c.D}, {}, 0, gr);
      break;
    case ScaledGate::per_batch:
      gate = random_tensor(d, DType::f32, {c.B, 1, c.D}, {}, 0, gr);
      break;
    case ScaledGate::per_token:
      gate = random_tensor(d, DType::f32, x_sizes, {}, 0, gr);
      break;
    case ScaledGate::per_row:
      gate = random_tensor(d, DType::f32, {c.B, c.S, 1}, {}, 0, gr);
      break;
    case ScaledGate::chunk6:
      gate = random_tensor(d, DType::f32, {c.B, c.F, 1, c.D}, {c.F * 6 * c.D, 6 * c.D, c.D, 1}, 2 * c.D, gr,
                           c.B * c.F * 6 * c.D);
      break;
  }
  // The eager chain reads x before the in-place kernel overwrites it.
  const auto xv = to_floats(x.view), yv = to_floats(y.view);
  const auto gv = to_floats(gate.view);
  TestTensor out_storage;
  const TensorView out = c.in_place ? x.view : (out_storage = poisoned_tensor(d, DType::bf16, x_sizes, kPoison)).view;
  std::string why;
  if (!can_use_scaled_residual_bf16(x.view, y.view, gate.view, out, &why)) return "rejected: " + why;
  scaled_residual_bf16(x.view, y.view, gate.view, out);
  runtime(d).synchronize({});
  if (!c.in_place && !fully_written(out, kPoison)) return "out has unwritten elements";

  // Eager: p = y * gate (promoted: float(y) * gate, one f32 rounding); s = x.float() + p (f32);
  // s.type_as(x) (RNE to bf16). Gate elements follow torch's broadcast of gate against x.
  const int64_t rows = c.B * frames * c.S;
  std::vector<float> values(size_t(rows * c.D));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (frames * c.S), f = (r / c.S) % frames, s = r % c.S;
    for (int64_t j = 0; j < c.D; ++j) {
      int64_t gi = 0;
      switch (c.gate) {
        case ScaledGate::per_frame:
        case ScaledGate::chunk6:
          gi = (b * c.F + f) * c.D + j;
          break;
        case ScaledGate::per_batch:
          gi = b * c.D + j;
          break;
        case ScaledGate::per_token:
          gi = r * c.D + j;
          break;
        case ScaledGate::per_row:
          gi = b * c.S + s;
          break;
      }
      const size_t i = size_t(r * c.D + j);
      const float p = arith_result(d, yv[i] * gv[size_t(gi)]);
      values[i] = round_to(DType::bf16, arith_result(d, xv[i] + p));
    }
  }
  const auto expected = host_tensor(DType::bf16, x_sizes, values);
  return compare_bits(out, expected.view);
}

// ---- timestep_embedding ------------------------------------------------------------------------

std::vector<TimestepEmbeddingCase> timestep_embedding_cases() {
  return {
      {.name = "flux_256", .N = 2, .dim = 256, .options = {.flip_sin_to_cos = true, .downscale_freq_shift = 0}},
      {.name = "sd_320_shift1", .N = 3, .dim = 320},
      {.name = "wan_256", .N = 1, .dim = 256, .options = {.flip_sin_to_cos = true, .downscale_freq_shift = 0}},
      {.name = "odd_dim_pad", .N = 4, .dim = 129, .options = {.flip_sin_to_cos = true, .downscale_freq_shift = 0}},
      {.name = "scale_1000_fraction",
       .N = 5,
       .dim = 64,
       .options = {.downscale_freq_shift = 0, .scale = 1000.0},
       .t_max = 1.0},
      {.name = "max_period_1e4_shift_half", .N = 7, .dim = 96, .options = {.downscale_freq_shift = 0.5}},
      {.name = "strided_out", .N = 3, .dim = 128, .options = {.flip_sin_to_cos = true}, .out_row_pad = 5},
      {.name = "dim_1", .N = 2, .dim = 1},
      {.name = "many_timesteps",
       .N = 4096,
       .dim = 256,
       .options = {.flip_sin_to_cos = true, .downscale_freq_shift = 0}},
  };
}

std::string run_timestep_embedding_case(Device d, DType timesteps_dtype, const TimestepEmbeddingCase& c, uint64_t seed,
                                        double* worst) {
  TestTensor timesteps;
  if (timesteps_dtype == DType::i64) {
    std::vector<int64_t> host(size_t(c.N));
    uint64_t s = seed;
    for (auto& v : host) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = int64_t((s >> 33) % uint64_t(std::max(1.0, c.t_max)));
    }
    timesteps = poisoned_tensor(d, DType::i64, {c.N}, 0);
    runtime(d).copy_to_device(timesteps.view.data(), host.data(), host.size() * sizeof(int64_t));
  } else {
    timesteps = random_tensor(d, timesteps_dtype, {c.N}, {}, 0, {seed, c.t_max / 2});
  }
  const int64_t row = c.dim + c.out_row_pad;
  TestTensor storage = poisoned_tensor(d, DType::f32, {c.N * row}, kPoison);
  const int64_t sizes[] = {c.N, c.dim}, strides[] = {row, 1};
  const TensorView out = storage.view.restrided(sizes, strides, 2);
  std::string why;
  if (!can_use_timestep_embedding(timesteps.view, out, c.options, &why)) return "rejected: " + why;
  timestep_embedding(timesteps.view, out, c.options);
  runtime(d).synchronize({});
  if (!fully_written(out, kPoison)) return "out has unwritten elements";

  // The fp32 chain of get_timestep_embedding, every rounding as torch's, with exp/sin/cos
  // correctly rounded (double, then float).
  std::vector<double> t(size_t(c.N));
  if (timesteps_dtype == DType::i64) {
    const auto bytes = gather_bytes(timesteps.view);
    for (size_t i = 0; i < t.size(); ++i) {
      int64_t v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      t[i] = double(float(v));
    }
  } else {
    const auto f = to_floats(timesteps.view);
    for (size_t i = 0; i < t.size(); ++i) t[i] = f[i];
  }
  const auto got = to_floats(out);
  const int64_t half = c.dim / 2;
  const float neg_log = float(-std::log(c.options.max_period));
  const float inv_div = float(1.0 / (double(half) - c.options.downscale_freq_shift));
  const float scale = float(c.options.scale);
  *worst = 0;
  for (int64_t n = 0; n < c.N; ++n) {
    for (int64_t j = 0; j < c.dim; ++j) {
      const float g = got[size_t(n * c.dim + j)];
      if (j >= 2 * half) {
        if (g != 0.0f || std::signbit(g)) return "pad column " + std::to_string(j) + " is not +0";
        continue;
      }
      const int64_t k = j < half ? j : j - half;
      const float exponent = (neg_log * float(k)) * inv_div;
      const float freq = float(std::exp(double(exponent)));
      const float arg = scale * (float(t[size_t(n)]) * freq);
      const bool sine = (j < half) != c.options.flip_sin_to_cos;
      const float ref = float(sine ? std::sin(double(arg)) : std::cos(double(arg)));
      const double allowed = std::max(1.0, std::fabs(double(scale) * t[size_t(n)]));
      const double err = std::fabs(double(g) - double(ref)) / allowed;
      *worst = std::max(*worst, err);
      if (!(err <= std::ldexp(1.0, -20)))
        return "element [" + std::to_string(n) + ", " + std::to_string(j) + "] = " + std::to_string(g) +
               ", reference " + std::to_string(ref) + " for t = " + std::to_string(t[size_t(n)]) +
               ": outside 2^-20 * max(1, |scale * t|)";
    }
  }
  return "";
}

}  // namespace dfuse::test
