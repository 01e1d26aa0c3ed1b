#include "common/guards.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dfuse::detail {

std::string shape_str(const TensorView& t) {
  std::string s = "[";
  for (int d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

std::string strides_str(const TensorView& t) {
  std::string s = "[";
  for (int d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.stride(d));
  return s + "]";
}

void GuardList::fail(const char* guard, std::string message) {
  if (!guard_.empty()) return;
  guard_ = guard;
  message_ = std::move(message);
}

bool GuardList::answer(std::string* why) const {
  if (ok()) return true;
  if (why) *why = std::string(op_) + ": " + message_;
  return false;
}

void GuardList::throw_if_failed() const {
  if (!ok()) throw Unsupported(op_, guard_, std::string(op_) + ": " + message_);
}

void GuardList::dtype_in(const char* name, const TensorView& t, std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype()) != allowed.end()) return;
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  fail("dtype", std::string(name) + " must be one of " + list + ", got " + std::string(dtype_name(t.dtype())));
}

void GuardList::same_dtype(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name) {
  if (t.dtype() != ref.dtype())
    fail("dtype", std::string(name) + " must have " + ref_name + "'s dtype " + std::string(dtype_name(ref.dtype())) +
                      ", got " + std::string(dtype_name(t.dtype())));
}

void GuardList::same_device(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name) {
  if (!(t.device() == ref.device()))
    fail("device", std::string(name) + " must be on " + ref_name + "'s device " + ref.device().str() + ", got " +
                       t.device().str());
}

void GuardList::rank_between(const char* name, const TensorView& t, int lo, int hi) {
  if (t.dim() < lo || t.dim() > hi)
    fail("rank", std::string(name) + " must have rank " + std::to_string(lo) + ".." + std::to_string(hi) +
                     ", got " + std::to_string(t.dim()) + " " + shape_str(t));
}

void GuardList::not_null(const char* name, const TensorView& t) {
  if (t.data() == nullptr && t.numel() > 0) fail("data", std::string(name) + " has no data pointer");
}

void GuardList::last_dim_contiguous(const char* name, const TensorView& t) {
  if (t.dim() > 0 && t.size(-1) > 1 && t.stride(-1) != 1)
    fail("last_dim_stride",
         std::string(name) + " must be contiguous in its last dim, got stride " + std::to_string(t.stride(-1)));
}

void GuardList::same_shape(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name) {
  bool same = t.dim() == ref.dim();
  for (int d = 0; same && d < t.dim(); ++d) same = t.size(d) == ref.size(d);
  if (!same)
    fail("shape", std::string(name) + " must have " + ref_name + "'s shape " + shape_str(ref) + ", got " +
                      shape_str(t));
}

void GuardList::broadcastable_rows(const char* name, const TensorView& t, const TensorView& ref,
                                   const char* ref_name) {
  if (t.dim() > ref.dim()) {
    fail("broadcast", std::string(name) + " " + shape_str(t) + " has more dims than " + ref_name + " " +
                          shape_str(ref));
    return;
  }
  const int lead = ref.dim() - t.dim();
  for (int d = 0; d < t.dim(); ++d) {
    int64_t s = t.size(d), r = ref.size(d + lead);
    if (s != r && s != 1) {
      fail("broadcast", std::string(name) + " " + shape_str(t) + " does not broadcast to " + ref_name + " " +
                            shape_str(ref));
      return;
    }
  }
  last_dim_contiguous(name, t);
}

void GuardList::non_negative_strides(const char* name, const TensorView& t) {
  for (int d = 0; d < t.dim(); ++d)
    if (t.stride(d) < 0) {
      fail("stride", std::string(name) + " has a negative stride " + strides_str(t));
      return;
    }
}

void GuardList::non_overlapping(const char* name, const TensorView& t) {
  // Walk the dims from the smallest stride up: each stride must step past everything the
  // smaller-strided dims already cover.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t covered = 0;  // largest offset reachable with the dims seen so far
  for (const auto& [stride, size] : dims) {
    if (stride <= covered) {
      fail("overlap", std::string(name) + " has elements that share an address (strides " + strides_str(t) + ")");
      return;
    }
    covered += stride * (size - 1);
  }
}

namespace {

// True when a and b, two views with the same sizes and strides (size-1 dims aside), interleave
// without sharing a byte: the q, k and v heads of one packed projection. With the dims sorted by
// stride, some inner dims span E bytes within a period S (the next stride, which every outer
// stride is a multiple of); the views are disjoint when b's offset from a modulo S leaves E bytes
// free on both sides: E <= r <= S - E.
bool interleave_disjointly(const TensorView& a, const TensorView& b) {
  if (dtype_size(a.dtype()) != dtype_size(b.dtype()) || a.dim() != b.dim()) return false;
  const auto es = int64_t(dtype_size(a.dtype()));
  std::vector<std::pair<int64_t, int64_t>> dims;  // (byte stride, size) of dims with size > 1
  for (int d = 0; d < a.dim(); ++d) {
    if (a.size(d) != b.size(d)) return false;
    if (a.size(d) == 1) continue;
    if (a.stride(d) != b.stride(d) || a.stride(d) < 0) return false;
    dims.emplace_back(a.stride(d) * es, a.size(d));
  }
  std::sort(dims.begin(), dims.end());
  const int64_t delta = reinterpret_cast<intptr_t>(b.data()) - reinterpret_cast<intptr_t>(a.data());
  int64_t extent = es;  // bytes spanned by the inner dims dims[0 .. p)
  for (size_t p = 0; p < dims.size(); ++p) {
    const int64_t period = dims[p].first;
    bool periodic = period > 0;
    for (size_t q = p; periodic && q < dims.size(); ++q) periodic = dims[q].first % period == 0;
    if (periodic) {
      const int64_t r = ((delta % period) + period) % period;
      if (extent <= r && r <= period - extent) return true;
    }
    extent += (dims[p].second - 1) * dims[p].first;
  }
  return false;
}

}  // namespace

void GuardList::no_partial_overlap(const char* out_name, const TensorView& out, const char* name, const TensorView& t,
                                   bool in_place_ok) {
  if (out.numel() == 0 || t.numel() == 0) return;
  auto [olo, ohi] = out.byte_extent();
  auto [tlo, thi] = t.byte_extent();
  auto ob = reinterpret_cast<intptr_t>(out.data()), tb = reinterpret_cast<intptr_t>(t.data());
  bool overlap = ob + olo <= tb + thi && tb + tlo <= ob + ohi;
  if (!overlap || interleave_disjointly(out, t)) return;
  bool identical = out.data() == t.data() && out.dim() == t.dim() && out.dtype() == t.dtype();
  for (int d = 0; identical && d < out.dim(); ++d)
    identical = out.size(d) == t.size(d) && out.stride(d) == t.stride(d);
  if (identical && in_place_ok) return;
  fail("overlap", std::string(out_name) + " overlaps " + name +
                      (in_place_ok ? " without being the same view (in place needs identical views)" : ""));
}

}  // namespace dfuse::detail
