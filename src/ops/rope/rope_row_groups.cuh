// The work items of the row-wise RoPE kernels (interleaved_rope_fp64, rope_rotate_half) that rotate several rows
// of x with one table row: a row group is up to kGroupRows consecutive rows along an outer dim over which every
// table broadcasts (the heads of a token), and an item is one unit (a kernel's vector or pair of vectors of
// columns) of every row of a group, numbered unit fastest, then the group, then the row's other outer indices.
// group_rows_by_tables moves that dim to dim 2 of the geometry and of every operand (one relabeling of the rows
// for all, so every row is still visited once) and the item splits its index by multiply and shift
// (uint_divider.h); where no dim qualifies, a group is one row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "common/rows.h"
#include "common/uint_divider.h"

namespace dfuse::detail {

// Rows per group: four vectors of x (eight for paired q and k) per thread in flight together, as in
// ltx25_decoder_rope.
constexpr int kGroupRows = 4;

// The items, numbered with 32 bits: fewer than 2^31 (at most one per element of x), split by multiply and shift.
struct RowGroupItems {
  UintDivider units, groups, outer1;  // units per row, groups per outer index pair (dims 0, 1), outer[1]
  uint32_t group_rows = 1;            // rows per group (the last of a dim-2 run may have fewer)
  uint32_t rows2 = 1;                 // outer[2]
  uint32_t total = 0;

  // Item i's unit; idx = the outer indices of its first row; rows = its rows (consecutive along dim 2).
  __device__ __forceinline__ uint32_t split(uint32_t i, uint32_t (&idx)[3], int& rows) const {
    const uint32_t group = units.div(i), pair = groups.div(group);
    idx[2] = groups.mod(group, pair) * group_rows;
    idx[0] = outer1.div(pair);
    idx[1] = outer1.mod(pair, idx[0]);
    rows = int(group_rows < rows2 - idx[2] ? group_rows : rows2 - idx[2]);
    return units.mod(i, group);
  }

  // The same groups with other_units (> 0) units per row: a second range of items over the same rows.
  RowGroupItems with_units(int64_t other_units) const {
    RowGroupItems other = *this;
    other.units = UintDivider(uint32_t(other_units));
    other.total = uint32_t(int64_t(total) / units.divisor() * other_units);
    return other;
  }
};

// Picks the innermost outer dim of more than one row along which every operand of `tables` has stride 0, moves it
// to dim 2 of `geom` and of every operand of `tables` and `others` (the other two dims keep their order), and
// returns the items of `units` units per row with equal groups of at most max_group_rows rows along it (one row
// per group where no dim qualifies). geom.rows() > 0 and geom.rows() * units < 2^31.
inline RowGroupItems group_rows_by_tables(RowGeometry& geom, std::initializer_list<RowOperand*> tables,
                                          std::initializer_list<RowOperand*> others, int64_t units,
                                          int64_t max_group_rows = kGroupRows) {
  int dim = -1;
  for (int d = 2; d >= 0 && dim < 0; --d) {
    bool shared = geom.outer[d] > 1;
    for (const RowOperand* t : tables) shared = shared && t->stride[d] == 0;
    if (shared) dim = d;
  }
  const auto to_last = [dim](auto (&v)[3]) {
    for (int d = dim; d < 2; ++d) std::swap(v[d], v[d + 1]);
  };
  if (dim >= 0) {
    to_last(geom.outer);
    for (RowOperand* op : tables) to_last(op->stride);
    for (RowOperand* op : others) to_last(op->stride);
  }
  const int64_t rows2 = geom.outer[2];
  const int64_t groups = dim >= 0 ? (rows2 + max_group_rows - 1) / max_group_rows : rows2;
  const int64_t group_rows = (rows2 + groups - 1) / groups;
  const int64_t groups_per_pair = (rows2 + group_rows - 1) / group_rows;
  const int64_t total = geom.outer[0] * geom.outer[1] * groups_per_pair * units;
  return {UintDivider(uint32_t(units)), UintDivider(uint32_t(groups_per_pair)), UintDivider(uint32_t(geom.outer[1])),
          uint32_t(group_rows), uint32_t(rows2), uint32_t(total)};
}

}  // namespace dfuse::detail
