#include "common/row_gather.h"

#include <cstring>
#include <string>

#include "dfuse/core/error.h"

namespace dfuse::detail {

namespace {

constexpr int kVectorBytes = 16;

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

}  // namespace

RowGatherParams row_gather_params(const TensorView& indices, int64_t row_elems, int64_t index_limit,
                                  bool padding, std::initializer_list<RowGatherViews> jobs) {
  RowGatherParams p;
  p.indices = indices.data();
  p.wide_indices = indices.dtype() == DType::i64;
  p.padding = padding;
  p.rows = indices.numel();
  p.index_limit = index_limit;
  if (jobs.size() == 0) return p;
  const TensorView& ref = jobs.begin()->dst;
  p.device = ref.device().index;
  const int64_t row_bytes = row_elems * int64_t(dtype_size(ref.dtype()));
  bool vectors = row_bytes % kVectorBytes == 0;
  for (const RowGatherViews& v : jobs) {
    RowGatherJob& job = p.jobs[p.count++];
    job.sources[0] = static_cast<const uint8_t*>(v.first->data());
    job.sources[1] = v.second ? static_cast<const uint8_t*>(v.second->data()) : nullptr;
    job.dst = static_cast<uint8_t*>(v.dst.data());
    vectors = vectors && aligned(job.sources[0]) && aligned(job.sources[1]) && aligned(job.dst);
  }
  p.unit_bytes = vectors ? kVectorBytes : int(dtype_size(ref.dtype()));
  p.row_units = row_bytes / p.unit_bytes;
  if (p.rows == 0 || p.row_units == 0) p.count = 0;
  return p;
}

void row_gather_host(const RowGatherParams& p, Stream) {
  const size_t row_bytes = size_t(p.row_units) * size_t(p.unit_bytes);
  for (int64_t r = 0; r < p.rows && p.count > 0; ++r) {
    const int64_t at = p.index_at(r);
    if (at >= p.index_limit || (at < 0 && !p.padding))
      throw InvalidArgument("row gather: index " + std::to_string(at) + " at position " + std::to_string(r) +
                            " is outside [0, " + std::to_string(p.index_limit) + ")" +
                            (p.padding ? " (negative indices mark padding)" : ""));
    for (int k = 0; k < p.count; ++k) {
      const RowGatherJob& job = p.jobs[k];
      uint8_t* dst = job.dst + size_t(r) * row_bytes;
      if (at < 0) {
        std::memset(dst, 0, row_bytes);
        continue;
      }
      int source = 0;
      int64_t row = 0;
      p.source_row(at, source, row);
      std::memcpy(dst, job.sources[source] + size_t(row) * row_bytes, row_bytes);
    }
  }
}

}  // namespace dfuse::detail
