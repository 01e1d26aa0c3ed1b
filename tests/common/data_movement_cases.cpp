#include "common/data_movement_cases.h"

#include <algorithm>
#include <cstring>

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/ops/data_movement.h"

namespace dfuse::test {

namespace {

// A view of `sizes` into rows of sizes.back() + c.row_pad elements, from element c.offset.
TestTensor make_input(Device d, DType t, const DataMovementCase& c, const std::vector<int64_t>& sizes,
                      uint64_t seed) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= (i + 1 == sizes.size()) ? sizes[i] + c.row_pad : sizes[i];
  }
  return random_tensor(d, t, sizes, strides, c.offset, {seed, 1.0, c.specials});
}

// q, k and v of `sizes` [..., H, D]: three separate inputs, or (c.packed) slices 0, 1, 2 of one
// [..., 3, H, D] projection.
struct Qkv {
  std::vector<TestTensor> storage;
  TensorView q, k, v;
};

Qkv make_qkv(Device d, DType t, const DataMovementCase& c, const std::vector<int64_t>& sizes, uint64_t seed) {
  Qkv r;
  if (!c.packed) {
    for (int i = 0; i < 3; ++i) r.storage.push_back(make_input(d, t, c, sizes, seed + uint64_t(i)));
    r.q = r.storage[0].view, r.k = r.storage[1].view, r.v = r.storage[2].view;
    return r;
  }
  std::vector<int64_t> projection = sizes;
  projection.insert(projection.end() - 2, 3);
  r.storage.push_back(make_input(d, t, c, projection, seed));
  const TensorView& p = r.storage[0].view;
  const int slot_dim = int(projection.size()) - 3;
  TensorView* slots[] = {&r.q, &r.k, &r.v};
  for (int i = 0; i < 3; ++i) {
    const TensorView slice = p.narrow(slot_dim, i, 1);
    std::vector<int64_t> strides;
    for (int dim = 0; dim < p.dim(); ++dim)
      if (dim != slot_dim) strides.push_back(p.stride(dim));
    *slots[i] = slice.restrided(sizes.data(), strides.data(), int(sizes.size()));
  }
  return r;
}

// Row-major flat index of `index` in `sizes`.
int64_t flat(const std::vector<int64_t>& sizes, const std::vector<int64_t>& index) {
  int64_t f = 0;
  for (size_t i = 0; i < sizes.size(); ++i) f = f * sizes[i] + index[i];
  return f;
}

// Calls f(index) for every index of `sizes` in row-major order.
template <typename F>
void for_each_index(const std::vector<int64_t>& sizes, F f) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(index);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

// "" when `out`'s bytes equal `expected`, else the count and the first differing element.
std::string compare_bytes(const TensorView& out, const std::vector<uint8_t>& expected) {
  const auto got = gather_bytes(out);
  const size_t es = dtype_size(out.dtype());
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < got.size(); i += es)
    if (std::memcmp(got.data() + i, expected.data() + i, es) != 0) {
      if (first < 0) first = int64_t(i / es);
      ++differ;
    }
  if (differ == 0) return "";
  return std::to_string(differ) + " of " + std::to_string(out.numel()) +
         " elements differ, first at flat index " + std::to_string(first);
}

void copy_element(std::vector<uint8_t>& dst, int64_t dst_index, const std::vector<uint8_t>& src,
                  int64_t src_index, size_t es) {
  std::memcpy(dst.data() + size_t(dst_index) * es, src.data() + size_t(src_index) * es, es);
}


// Random bytes with every 7th element -0 and every 11th a NaN with a payload: raw bit patterns.
TestTensor random_bits(Device d, DType t, const std::vector<int64_t>& sizes, uint64_t seed) {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  const size_t es = dtype_size(t);
  std::vector<uint8_t> host(size_t(n) * es);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& byte : host) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    byte = uint8_t(state >> 56);
  }
  const uint32_t negative_zero = es == 4 ? 0x80000000u : 0x8000u;
  const uint32_t nan_payload = es == 4 ? 0x7FA00123u : t == DType::bf16 ? 0x7FA3u : 0x7E05u;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 7 == 3) std::memcpy(host.data() + size_t(i) * es, &negative_zero, es);
    if (i % 11 == 5) std::memcpy(host.data() + size_t(i) * es, &nan_payload, es);
  }
  TestTensor out{DeviceBuffer(d, std::max<size_t>(host.size(), 1)), {}};
  runtime(d).copy_to_device(out.storage.data(), host.data(), host.size());
  out.view = TensorView::contiguous(out.storage.data(), t, sizes.data(), int(sizes.size()), d);
  return out;
}

// `values` as a [values.size()] index tensor on d, int64 when `wide`, else int32.
TestTensor index_tensor(Device d, const std::vector<int64_t>& values, bool wide) {
  const int64_t n = int64_t(values.size());
  std::vector<uint8_t> host(values.size() * (wide ? 8 : 4));
  for (size_t i = 0; i < values.size(); ++i) {
    if (wide) std::memcpy(host.data() + i * 8, &values[i], 8);
    else {
      const int32_t narrow = int32_t(values[i]);
      std::memcpy(host.data() + i * 4, &narrow, 4);
    }
  }
  TestTensor out{DeviceBuffer(d, std::max<size_t>(host.size(), 1)), {}};
  runtime(d).copy_to_device(out.storage.data(), host.data(), host.size());
  out.view = TensorView::contiguous(out.storage.data(), wide ? DType::i64 : DType::i32, &n, 1, d);
  return out;
}

// `count` distinct values of [0, limit) in shuffled order (a partial Fisher-Yates shuffle).
std::vector<int64_t> shuffled_indices(int64_t limit, int64_t count, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(limit));
  for (int64_t i = 0; i < limit; ++i) all[size_t(i)] = i;
  uint64_t state = seed * 0xD1B54A32D192ED03ull + 5;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(all[size_t(i)], all[size_t(i + int64_t((state >> 33) % uint64_t(limit - i)))]);
  }
  all.resize(size_t(count));
  return all;
}

// Rows `rows` (of row_bytes each) of `source`, concatenated: the index loop of a gather.
std::vector<uint8_t> gather_rows(const std::vector<uint8_t>& source, const std::vector<int64_t>& rows,
                                 size_t row_bytes) {
  std::vector<uint8_t> out(rows.size() * row_bytes);
  for (size_t r = 0; r < rows.size(); ++r)
    std::memcpy(out.data() + r * row_bytes, source.data() + size_t(rows[r]) * row_bytes, row_bytes);
  return out;
}

// Tokens of prefix [B, Sp, ..] then main [B, Sm, ..] per batch: torch.cat([prefix, main], dim=1).
std::vector<uint8_t> cat_tokens(const std::vector<uint8_t>& prefix, const std::vector<uint8_t>& main,
                                int64_t batch, size_t prefix_bytes, size_t main_bytes) {
  std::vector<uint8_t> out;
  for (int64_t b = 0; b < batch; ++b) {
    out.insert(out.end(), prefix.begin() + b * prefix_bytes, prefix.begin() + (b + 1) * prefix_bytes);
    out.insert(out.end(), main.begin() + b * main_bytes, main.begin() + (b + 1) * main_bytes);
  }
  return out;
}

}  // namespace

std::vector<DataMovementCase> small_usp_merge_heads_cases() {
  return {
      {.name = "h3_heads", .sizes = {2, 64, 3, 4, 64}},
      {.name = "scalar_tail", .sizes = {4, 33, 2, 4, 100}},
      {.name = "odd", .sizes = {3, 7, 2, 3, 5}},
      {.name = "single_rank", .sizes = {1, 9, 2, 2, 16}},
      {.name = "strided", .sizes = {2, 11, 2, 3, 32}, .row_pad = 8},
      {.name = "misaligned", .sizes = {2, 13, 1, 5, 64}, .offset = 1},
      {.name = "specials", .sizes = {4, 17, 2, 2, 48}, .specials = true},
  };
}

std::vector<DataMovementCase> small_joint_qkv_cat_cases() {
  return {
      {.name = "joint", .sizes = {2, 64, 4, 32}, .text_tokens = 16},
      {.name = "odd", .sizes = {1, 37, 3, 7}, .text_tokens = 5},
      {.name = "packed", .sizes = {2, 33, 4, 64}, .text_tokens = 9, .packed = true},
      {.name = "no_text", .sizes = {1, 12, 2, 16}, .text_tokens = 0},
      {.name = "strided", .sizes = {2, 19, 3, 40}, .text_tokens = 7, .row_pad = 24},
      {.name = "misaligned", .sizes = {1, 21, 2, 64}, .text_tokens = 11, .offset = 3},
      {.name = "specials", .sizes = {2, 29, 2, 56}, .text_tokens = 13, .packed = true, .specials = true},
  };
}

std::vector<DataMovementCase> small_pack_qkv_cases() {
  return {
      {.name = "world2", .sizes = {64, 8, 64}, .world = 2},
      {.name = "world4", .sizes = {33, 12, 32}, .world = 4},
      {.name = "single_rank", .sizes = {17, 6, 16}, .world = 1},
      {.name = "odd", .sizes = {19, 9, 5}, .world = 3},
      {.name = "packed", .sizes = {40, 8, 64}, .world = 2, .packed = true},
      {.name = "strided", .sizes = {23, 4, 48}, .world = 4, .row_pad = 16},
      {.name = "misaligned", .sizes = {31, 6, 64}, .world = 2, .offset = 1},
      {.name = "specials", .sizes = {29, 8, 40}, .world = 4, .specials = true},
  };
}

std::vector<DataMovementCase> model_usp_merge_heads_cases() {
  return {
      {.name = "h3_768p_ulysses4", .sizes = {4, 7936, 1, 14, 128}},
      {.name = "h3_768p_strided", .sizes = {4, 7936, 1, 14, 128}, .row_pad = 128},
      {.name = "h3_768p_misaligned", .sizes = {4, 7936, 1, 14, 128}, .offset = 1},
  };
}

std::vector<DataMovementCase> model_joint_qkv_cat_cases() {
  return {
      {.name = "flux_joint", .sizes = {1, 4096, 24, 128}, .text_tokens = 512},
      {.name = "flux_joint_packed", .sizes = {1, 4096, 24, 128}, .text_tokens = 512, .packed = true},
      {.name = "flux_joint_misaligned", .sizes = {2, 4096, 24, 128}, .text_tokens = 512, .offset = 3},
  };
}

std::vector<DataMovementCase> model_pack_qkv_cases() {
  return {
      {.name = "world2", .sizes = {4096, 24, 128}, .world = 2},
      {.name = "world4", .sizes = {4096, 24, 128}, .world = 4},
      {.name = "world4_packed", .sizes = {4096, 24, 128}, .world = 4, .packed = true},
      {.name = "world2_misaligned", .sizes = {4096, 24, 128}, .world = 2, .offset = 1},
  };
}

std::string run_usp_merge_heads_case(Device d, DType t, const DataMovementCase& c, uint64_t seed) {
  const auto& s = c.sizes;  // W, S, B, h, D
  const auto x = make_input(d, t, c, s, seed);
  const std::vector<int64_t> out_sizes = {s[2], s[1], s[0], s[3], s[4]};
  const auto out = poisoned_tensor(d, t, out_sizes, kOutputPoison);
  std::string why;
  if (!can_use_usp_merge_heads(x.view, out.view, &why)) return "rejected: " + why;
  usp_merge_heads(x.view, out.view);
  runtime(d).synchronize({});

  const auto source = gather_bytes(x.view);
  std::vector<uint8_t> expected(source.size());
  for_each_index(out_sizes, [&](const std::vector<int64_t>& i) {  // out[b, s, w, j, e] = x[w, s, b, j, e]
    copy_element(expected, flat(out_sizes, i), source, flat(s, {i[2], i[1], i[0], i[3], i[4]}),
                 dtype_size(t));
  });
  return compare_bytes(out.view, expected);
}

std::string run_joint_qkv_cat_case(Device d, DType t, const DataMovementCase& c, uint64_t seed) {
  const auto& img_sizes = c.sizes;  // B, Si, H, D
  const std::vector<int64_t> txt_sizes = {img_sizes[0], c.text_tokens, img_sizes[2], img_sizes[3]};
  const std::vector<int64_t> out_sizes = {img_sizes[0], img_sizes[1] + c.text_tokens, img_sizes[2],
                                          img_sizes[3]};
  const Qkv img = make_qkv(d, t, c, img_sizes, seed), txt = make_qkv(d, t, c, txt_sizes, seed + 10);
  const TestTensor outs[] = {poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison)};
  const QkvViews img_views{img.q, img.k, img.v}, txt_views{txt.q, txt.k, txt.v};
  const QkvViews out_views{outs[0].view, outs[1].view, outs[2].view};
  std::string why;
  if (!can_use_joint_qkv_cat(img_views, txt_views, out_views, &why)) return "rejected: " + why;
  joint_qkv_cat(img_views, txt_views, out_views);
  runtime(d).synchronize({});

  const TensorView* images[] = {&img.q, &img.k, &img.v};
  const TensorView* texts[] = {&txt.q, &txt.k, &txt.v};
  for (int slot = 0; slot < 3; ++slot) {
    const auto image = gather_bytes(*images[slot]), text = gather_bytes(*texts[slot]);
    std::vector<uint8_t> expected(image.size() + text.size());
    for_each_index(out_sizes, [&](const std::vector<int64_t>& i) {  // tokens [0, Si) image, then text
      const int64_t si = img_sizes[1];
      if (i[1] < si)
        copy_element(expected, flat(out_sizes, i), image, flat(img_sizes, i), dtype_size(t));
      else
        copy_element(expected, flat(out_sizes, i), text, flat(txt_sizes, {i[0], i[1] - si, i[2], i[3]}),
                     dtype_size(t));
    });
    const std::string result = compare_bytes(outs[slot].view, expected);
    if (!result.empty()) return std::string("out.") + "qkv"[slot] + ": " + result;
  }
  return "";
}

std::string run_pack_qkv_case(Device d, DType t, const DataMovementCase& c, uint64_t seed) {
  const auto& s = c.sizes;  // rows, G, hs
  const int64_t local = s[1] / c.world, hs = s[2];
  const std::vector<int64_t> out_sizes = {c.world, s[0], local, 3 * hs};
  const Qkv qkv = make_qkv(d, t, c, s, seed);
  const auto out = poisoned_tensor(d, t, out_sizes, kOutputPoison);
  std::string why;
  if (!can_use_pack_qkv_destination_major(qkv.q, qkv.k, qkv.v, out.view, &why)) return "rejected: " + why;
  pack_qkv_destination_major(qkv.q, qkv.k, qkv.v, out.view);
  runtime(d).synchronize({});

  const std::vector<uint8_t> sources[] = {gather_bytes(qkv.q), gather_bytes(qkv.k), gather_bytes(qkv.v)};
  std::vector<uint8_t> expected(3 * sources[0].size());
  for_each_index(out_sizes, [&](const std::vector<int64_t>& i) {  // out[w, r, j, slot * hs + e]
    const int64_t slot = i[3] / hs, e = i[3] % hs;
    copy_element(expected, flat(out_sizes, i), sources[slot], flat(s, {i[1], i[0] * local + i[2], e}),
                 dtype_size(t));
  });
  return compare_bytes(out.view, expected);
}

std::vector<VarlenCase> small_varlen_cases() {
  return {
      {.name = "vectors", .batch = 2, .tokens = 64, .prefix = 16, .heads = 4, .head_dim = 64, .valid = 80},
      {.name = "wide", .batch = 2, .tokens = 33, .prefix = 7, .heads = 3, .head_dim = 32, .valid = 50, .wide = true},
      {.name = "odd", .batch = 3, .tokens = 19, .prefix = 5, .heads = 3, .head_dim = 5, .valid = 41},
      {.name = "all_valid", .batch = 1, .tokens = 24, .prefix = 8, .heads = 2, .head_dim = 8, .valid = 32},
      {.name = "no_prefix", .batch = 2, .tokens = 17, .prefix = 0, .heads = 1, .head_dim = 12, .valid = 9},
      {.name = "empty", .batch = 2, .tokens = 9, .prefix = 3, .heads = 2, .head_dim = 16, .valid = 0},
  };
}

std::vector<VarlenCase> model_varlen_cases() {
  return {
      {.name = "model", .batch = 2, .tokens = 4096, .prefix = 512, .heads = 24, .head_dim = 128, .valid = 6500},
      {.name = "model_wide", .batch = 2, .tokens = 4096, .prefix = 512, .heads = 24, .head_dim = 128,
       .valid = 6500, .wide = true},
  };
}

std::string run_varlen_pack_qkv_case(Device d, DType t, const VarlenCase& c, uint64_t seed) {
  const std::vector<int64_t> sizes = {c.batch, c.tokens + c.prefix, c.heads, c.head_dim};
  const std::vector<int64_t> out_sizes = {c.valid, c.heads, c.head_dim};
  const TestTensor x[] = {random_bits(d, t, sizes, seed), random_bits(d, t, sizes, seed + 1),
                          random_bits(d, t, sizes, seed + 2)};
  const auto rows = shuffled_indices(c.batch * sizes[1], c.valid, seed);
  const TestTensor indices = index_tensor(d, rows, c.wide);
  const TestTensor outs[] = {poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison)};
  const QkvViews in_views{x[0].view, x[1].view, x[2].view};
  const QkvViews out_views{outs[0].view, outs[1].view, outs[2].view};
  std::string why;
  if (!can_use_varlen_pack_qkv(in_views, indices.view, out_views, &why)) return "rejected: " + why;
  varlen_pack_qkv(in_views, indices.view, out_views);
  runtime(d).synchronize({});

  const size_t row_bytes = size_t(c.heads * c.head_dim) * dtype_size(t);
  for (int slot = 0; slot < 3; ++slot) {
    const std::string result = compare_bytes(outs[slot].view, gather_rows(gather_bytes(x[slot].view), rows, row_bytes));
    if (!result.empty()) return std::string("out.") + "qkv"[slot] + ": " + result;
  }
  return "";
}

std::string run_varlen_pack_segmented_qkv_case(Device d, DType t, const VarlenCase& c, uint64_t seed) {
  const std::vector<int64_t> prefix_sizes = {c.batch, c.prefix, c.heads, c.head_dim};
  const std::vector<int64_t> main_sizes = {c.batch, c.tokens, c.heads, c.head_dim};
  const std::vector<int64_t> out_sizes = {c.valid, c.heads, c.head_dim};
  const TestTensor prefix[] = {random_bits(d, t, prefix_sizes, seed), random_bits(d, t, prefix_sizes, seed + 1),
                               random_bits(d, t, prefix_sizes, seed + 2)};
  const TestTensor main[] = {random_bits(d, t, main_sizes, seed + 3), random_bits(d, t, main_sizes, seed + 4),
                             random_bits(d, t, main_sizes, seed + 5)};
  const auto rows = shuffled_indices(c.batch * (c.prefix + c.tokens), c.valid, seed);
  const TestTensor indices = index_tensor(d, rows, c.wide);
  const TestTensor outs[] = {poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison),
                             poisoned_tensor(d, t, out_sizes, kOutputPoison)};
  const QkvViews prefix_views{prefix[0].view, prefix[1].view, prefix[2].view};
  const QkvViews main_views{main[0].view, main[1].view, main[2].view};
  const QkvViews out_views{outs[0].view, outs[1].view, outs[2].view};
  std::string why;
  if (!can_use_varlen_pack_segmented_qkv(prefix_views, main_views, indices.view, out_views, &why))
    return "rejected: " + why;
  varlen_pack_segmented_qkv(prefix_views, main_views, indices.view, out_views);
  runtime(d).synchronize({});

  const size_t row_bytes = size_t(c.heads * c.head_dim) * dtype_size(t);
  for (int slot = 0; slot < 3; ++slot) {
    const auto joined = cat_tokens(gather_bytes(prefix[slot].view), gather_bytes(main[slot].view), c.batch,
                                   size_t(c.prefix) * row_bytes, size_t(c.tokens) * row_bytes);
    const std::string result = compare_bytes(outs[slot].view, gather_rows(joined, rows, row_bytes));
    if (!result.empty()) return std::string("out.") + "qkv"[slot] + ": " + result;
  }
  return "";
}

std::string run_varlen_scatter_to_padded_case(Device d, DType t, const VarlenCase& c, uint64_t seed) {
  const int64_t padded = c.batch * c.tokens;
  const int64_t valid = std::min(c.valid, padded);
  const TestTensor x = random_bits(d, t, {valid, c.heads, c.head_dim}, seed);
  const auto rows = shuffled_indices(padded, valid, seed);
  std::vector<int64_t> inverse(size_t(padded), -1);
  for (size_t j = 0; j < rows.size(); ++j) inverse[size_t(rows[j])] = int64_t(j);
  const TestTensor inv_indices = index_tensor(d, inverse, c.wide);
  const auto out = poisoned_tensor(d, t, {c.batch, c.tokens, c.heads, c.head_dim}, kOutputPoison);
  std::string why;
  if (!can_use_varlen_scatter_to_padded(x.view, inv_indices.view, out.view, &why)) return "rejected: " + why;
  varlen_scatter_to_padded(x.view, inv_indices.view, out.view);
  runtime(d).synchronize({});

  // zeros(B * S, H, D).index_copy_(0, rows, x): +0.0 is all-zero bytes in every dtype.
  const size_t row_bytes = size_t(c.heads * c.head_dim) * dtype_size(t);
  const auto source = gather_bytes(x.view);
  std::vector<uint8_t> expected(size_t(padded) * row_bytes, 0);
  for (size_t j = 0; j < rows.size(); ++j)
    std::memcpy(expected.data() + size_t(rows[j]) * row_bytes, source.data() + j * row_bytes, row_bytes);
  return compare_bytes(out.view, expected);
}

}  // namespace dfuse::test
