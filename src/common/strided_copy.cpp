#include "common/strided_copy.h"

#include <cstring>

#include "dfuse/core/dtype.h"

namespace dfuse::detail {

namespace {

constexpr int kVectorBytes = 16;

// Drops size-1 dims and merges each dim into the next inner one when both views step over it
// as one run; keeps element units.
CopyPair collapsed(const TensorView& src, const TensorView& dst) {
  CopyPair c;
  c.src = static_cast<const uint8_t*>(src.data());
  c.dst = static_cast<uint8_t*>(dst.data());
  c.unit_bytes = int(dtype_size(src.dtype()));
  c.units = src.numel();
  int64_t sizes[kCopyMaxDims], src_strides[kCopyMaxDims], dst_strides[kCopyMaxDims];
  int n = 0;  // collapsed dims, innermost first
  for (int d = src.dim() - 1; d >= 0; --d) {
    if (src.size(d) == 1) continue;
    if (n > 0 && src.stride(d) == src_strides[n - 1] * sizes[n - 1] &&
        dst.stride(d) == dst_strides[n - 1] * sizes[n - 1]) {
      sizes[n - 1] *= src.size(d);
      continue;
    }
    sizes[n] = src.size(d), src_strides[n] = src.stride(d), dst_strides[n] = dst.stride(d);
    ++n;
  }
  if (n == 0) sizes[0] = 1, src_strides[0] = 1, dst_strides[0] = 1, n = 1;
  c.ndim = n;
  for (int d = 0; d < n; ++d) {
    c.sizes[d] = sizes[n - 1 - d];
    c.src_strides[d] = src_strides[n - 1 - d];
    c.dst_strides[d] = dst_strides[n - 1 - d];
  }
  return c;
}

// Switches a collapsed copy to 16-byte units where both sides allow it.
void vectorize(CopyPair& c) {
  const int vec = kVectorBytes / c.unit_bytes;
  const int inner = c.ndim - 1;
  if (vec <= 1 || c.src_strides[inner] != 1 || c.dst_strides[inner] != 1 || c.sizes[inner] % vec != 0) return;
  const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes != 0; };
  if (misaligned(c.src) || misaligned(c.dst)) return;
  for (int d = 0; d < inner; ++d)
    if (c.src_strides[d] % vec != 0 || c.dst_strides[d] % vec != 0) return;
  for (int d = 0; d < inner; ++d) c.src_strides[d] /= vec, c.dst_strides[d] /= vec;
  c.sizes[inner] /= vec;
  c.units /= vec;
  c.unit_bytes = kVectorBytes;
}

}  // namespace

int64_t StridedCopyParams::total_units() const {
  int64_t total = 0;
  for (int k = 0; k < count; ++k) total += pairs[k].units;
  return total;
}

StridedCopyParams strided_copy_params(std::initializer_list<CopyViews> copies) {
  StridedCopyParams p;
  if (copies.size() > 0) p.device = copies.begin()->src.device().index;
  for (const CopyViews& v : copies) {
    if (v.src.numel() == 0) continue;
    CopyPair c = collapsed(v.src, v.dst);
    vectorize(c);
    for (int d = 0; d < c.ndim; ++d)
      if (c.sizes[d] <= (int64_t(1) << 31)) c.size_dividers[d] = UintDivider(uint32_t(c.sizes[d]));
    p.pairs[p.count++] = c;
  }
  return p;
}

void strided_copy_host(const StridedCopyParams& p, Stream) {
  for (int k = 0; k < p.count; ++k) {
    const CopyPair& c = p.pairs[k];
    const int inner = c.ndim - 1;
    const bool inner_runs = c.src_strides[inner] == 1 && c.dst_strides[inner] == 1;
    const int64_t rows = c.units / c.sizes[inner];
    int64_t index[kCopyMaxDims] = {};
    for (int64_t row = 0; row < rows; ++row) {
      int64_t src_offset = 0, dst_offset = 0;
      for (int d = 0; d < inner; ++d) {
        src_offset += index[d] * c.src_strides[d];
        dst_offset += index[d] * c.dst_strides[d];
      }
      const uint8_t* src = c.src + src_offset * c.unit_bytes;
      uint8_t* dst = c.dst + dst_offset * c.unit_bytes;
      if (inner_runs) {
        std::memcpy(dst, src, size_t(c.sizes[inner]) * c.unit_bytes);
      } else {
        for (int64_t i = 0; i < c.sizes[inner]; ++i)
          std::memcpy(dst + i * c.dst_strides[inner] * c.unit_bytes,
                      src + i * c.src_strides[inner] * c.unit_bytes, c.unit_bytes);
      }
      for (int d = inner - 1; d >= 0 && ++index[d] == c.sizes[d]; --d) index[d] = 0;
    }
  }
}

}  // namespace dfuse::detail
