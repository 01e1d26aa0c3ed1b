// The eager chains of the varlen data-movement ops, computed on the host whatever the tensors'
// device (device data goes through host copies): index_select and index_copy_ move whole rows of
// bytes and have no arithmetic to reproduce, so a host gather is their exact replica.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/data_movement.h"

namespace dfuse::eager {

namespace {

void require_contiguous(const TensorView& t, const char* name) {
  if (!t.is_contiguous()) throw InvalidArgument(std::string("varlen chain: ") + name + " must be contiguous");
}

size_t bytes_of(const TensorView& t) { return size_t(t.numel()) * dtype_size(t.dtype()); }

// The bytes of a contiguous tensor, on the host.
std::vector<unsigned char> host_bytes(const TensorView& t, Stream stream) {
  std::vector<unsigned char> bytes(bytes_of(t));
  if (bytes.empty()) return bytes;
  Runtime& rt = runtime(t.device());
  rt.synchronize(stream);
  rt.copy_to_host(bytes.data(), t.data(), bytes.size());
  return bytes;
}

void write_back(const std::vector<unsigned char>& bytes, const TensorView& out) {
  if (!bytes.empty()) runtime(out.device()).copy_to_device(out.data(), bytes.data(), bytes.size());
}

// The values of a 1-D int32 or int64 index tensor.
std::vector<int64_t> host_indices(const TensorView& indices, Stream stream) {
  if (indices.dim() != 1 || (indices.dtype() != DType::i32 && indices.dtype() != DType::i64))
    throw InvalidArgument("varlen chain: indices must be a 1-D int32 or int64 tensor");
  require_contiguous(indices, "indices");
  const std::vector<unsigned char> bytes = host_bytes(indices, stream);
  std::vector<int64_t> values(size_t(indices.numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (indices.dtype() == DType::i32) {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      values[i] = v;
    } else {
      std::memcpy(&values[i], bytes.data() + i * 8, 8);
    }
  }
  return values;
}

// source.index_select(0, indices) over rows of `row_bytes` bytes.
std::vector<unsigned char> index_select_rows(const std::vector<unsigned char>& source, size_t row_bytes,
                                             const std::vector<int64_t>& indices) {
  const int64_t rows = row_bytes == 0 ? 0 : int64_t(source.size() / row_bytes);
  std::vector<unsigned char> out(indices.size() * row_bytes);
  for (size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] < 0 || indices[j] >= rows)
      throw InvalidArgument("varlen chain: index " + std::to_string(indices[j]) + " out of range [0, " +
                            std::to_string(rows) + ")");
    std::memcpy(out.data() + j * row_bytes, source.data() + size_t(indices[j]) * row_bytes, row_bytes);
  }
  return out;
}

// The bytes of one token (H * D elements) of a [.., H, D] tensor.
size_t token_bytes(const TensorView& t) { return size_t(t.size(-2) * t.size(-1)) * dtype_size(t.dtype()); }

}  // namespace

void index_select_tokens_chain(const TensorView& x, const TensorView& indices, const TensorView& out,
                               Stream stream) {
  require_contiguous(x, "x");
  require_contiguous(out, "out");
  const std::vector<int64_t> rows = host_indices(indices, stream);
  write_back(index_select_rows(host_bytes(x, stream), token_bytes(x), rows), out);
}

void cat_index_select_tokens_chain(const TensorView& prefix, const TensorView& main, const TensorView& indices,
                                   const TensorView& out, Stream stream) {
  require_contiguous(prefix, "prefix");
  require_contiguous(main, "main");
  require_contiguous(out, "out");
  const int64_t batch = main.size(0);
  const size_t prefix_bytes = size_t(prefix.size(1)) * token_bytes(main);
  const size_t main_bytes = size_t(main.size(1)) * token_bytes(main);
  const std::vector<unsigned char> p = host_bytes(prefix, stream), m = host_bytes(main, stream);
  // torch.cat([prefix, main], dim=1): per batch, its prefix tokens and then its main tokens.
  std::vector<unsigned char> joined(size_t(batch) * (prefix_bytes + main_bytes));
  for (int64_t b = 0; b < batch; ++b) {
    unsigned char* row = joined.data() + size_t(b) * (prefix_bytes + main_bytes);
    std::memcpy(row, p.data() + size_t(b) * prefix_bytes, prefix_bytes);
    std::memcpy(row + prefix_bytes, m.data() + size_t(b) * main_bytes, main_bytes);
  }
  write_back(index_select_rows(joined, token_bytes(main), host_indices(indices, stream)), out);
}

void scatter_tokens_to_padded_chain(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                                    Stream stream) {
  require_contiguous(x, "x");
  require_contiguous(out, "out");
  const size_t row_bytes = token_bytes(x);
  const std::vector<unsigned char> source = host_bytes(x, stream);
  const std::vector<int64_t> inverse = host_indices(inv_indices, stream);
  if (row_bytes * inverse.size() != bytes_of(out))
    throw InvalidArgument("varlen chain: inv_indices must have one entry per token of out");
  // torch.zeros: +0.0 is all-zero bytes in every float dtype.
  std::vector<unsigned char> padded(bytes_of(out), 0);
  const int64_t rows = x.size(0);
  for (size_t r = 0; r < inverse.size(); ++r) {
    if (inverse[r] < 0) continue;
    if (inverse[r] >= rows)
      throw InvalidArgument("varlen chain: inverse index " + std::to_string(inverse[r]) + " out of range [-1, " +
                            std::to_string(rows) + ")");
    std::memcpy(padded.data() + r * row_bytes, source.data() + size_t(inverse[r]) * row_bytes, row_bytes);
  }
  write_back(padded, out);
}

}  // namespace dfuse::eager
