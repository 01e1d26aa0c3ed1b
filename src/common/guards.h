// Input guards shared by ops. Each check returns "" when it passes and a message naming the
// failure otherwise; `GuardList` collects the first failure with its guard name so that
// can_use_<op> and <op> evaluate one list of checks.
#pragma once

#include <initializer_list>
#include <string>

#include "dfuse/core/error.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

class GuardList {
 public:
  explicit GuardList(const char* op) : op_(op) {}
  // Records the first failure: `guard` names the check, `message` says what was found.
  void fail(const char* guard, std::string message);
  bool ok() const { return guard_.empty(); }
  // For can_use_<op>: returns ok(), writing "<op>: <message>" to *why on failure.
  bool answer(std::string* why) const;
  // For <op>: throws Unsupported on failure.
  void throw_if_failed() const;

  // Common checks. `name` is the argument's name in the op's signature.
  void dtype_in(const char* name, const TensorView& t, std::initializer_list<DType> allowed);
  void same_dtype(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name);
  void same_device(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name);
  void rank_between(const char* name, const TensorView& t, int lo, int hi);
  void not_null(const char* name, const TensorView& t);
  void last_dim_contiguous(const char* name, const TensorView& t);
  void same_shape(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name);
  // Right-aligned broadcast of t to ref's shape, with a contiguous or size-1 last dim.
  void broadcastable_rows(const char* name, const TensorView& t, const TensorView& ref, const char* ref_name);
  void non_negative_strides(const char* name, const TensorView& t);
  // No two elements of t at one address (an as_strided view whose rows overlap, a broadcast):
  // writing such an output would race.
  void non_overlapping(const char* name, const TensorView& t);
  // `out` must not overlap `t` unless it is exactly `t` (same data, shape and strides) and
  // `in_place_ok`.
  void no_partial_overlap(const char* out_name, const TensorView& out, const char* name, const TensorView& t,
                          bool in_place_ok);

 private:
  const char* op_;
  std::string guard_;
  std::string message_;
};

std::string shape_str(const TensorView& t);    // "[1, 4608, 3072]"
std::string strides_str(const TensorView& t);  // "[14155776, 3072, 1]"

}  // namespace dfuse::detail
