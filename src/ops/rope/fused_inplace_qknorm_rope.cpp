// diffusion.fused_inplace_qknorm_rope and its other forms (fused_inplace_qknorm_rope_one_rounding,
// fused_qknorm_rope out of place, fused_qknorm_rope_pack_kv): guards, dispatch and the host entries
// (the CUDA entries: ops/rope/qknorm_rope_rows.cu).
#include "ops/rope/fused_inplace_qknorm_rope.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/rope.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "fused_inplace_qknorm_rope";
constexpr auto kPairing = detail::RopePairing::rotate_half;

// The inputs' guards, shared by every form.
void check_inputs(detail::GuardList& g, RmsNormChain chain, const TensorView& q, const TensorView& k,
                  const TensorView* q_weight, const TensorView* k_weight, double eps, const TensorView& cos,
                  const TensorView& sin, RopeMath math) {
  detail::check_qknorm_rope_input(g, chain, "q", q, q_weight, "q_weight", eps, cos, sin, math, kPairing);
  detail::check_qknorm_rope_input(g, chain, "k", k, k_weight, "k_weight", eps, cos, sin, math, kPairing);
  if (!g.ok()) return;
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  if (g.ok() && k.size(-1) != q.size(-1))
    g.fail("shape", "k's head dim must be q's " + std::to_string(q.size(-1)) + ", got " + std::to_string(k.size(-1)));
}

// A tensor written in place or an output: no element written twice, nothing written that another
// operand reads (`reads`, besides the tables and weights).
void check_written(detail::GuardList& g, const char* name, const TensorView& t,
                   std::initializer_list<std::pair<const char*, const TensorView*>> reads, const TensorView* q_weight,
                   const TensorView* k_weight, const TensorView& cos, const TensorView& sin) {
  g.non_overlapping(name, t);
  for (const auto& [other, view] : reads) g.no_partial_overlap(name, t, other, *view, false);
  g.no_partial_overlap(name, t, "cos", cos, false);
  g.no_partial_overlap(name, t, "sin", sin, false);
  if (q_weight) g.no_partial_overlap(name, t, "q_weight", *q_weight, false);
  if (k_weight) g.no_partial_overlap(name, t, "k_weight", *k_weight, false);
}

detail::GuardList check_in_place(const char* op, RmsNormChain chain, const TensorView& q, const TensorView& k,
                                 const TensorView* q_weight, const TensorView* k_weight, double eps,
                                 const TensorView& cos, const TensorView& sin, RopeMath math, bool round_norm) {
  detail::GuardList g(op);
  check_inputs(g, chain, q, k, q_weight, k_weight, eps, cos, sin, math);
  detail::check_qknorm_rope_rounding(g, round_norm, math);
  check_written(g, "q", q, {}, q_weight, k_weight, cos, sin);
  check_written(g, "k", k, {{"q", &q}}, q_weight, k_weight, cos, sin);
  return g;
}

// (q, k, v) seen from an output: its shape, dtype and device are x's, its last dim contiguous.
void check_output(detail::GuardList& g, const char* name, const TensorView& out, const TensorView& x,
                  const char* x_name) {
  g.same_dtype(name, out, x, x_name);
  g.same_device(name, out, x, x_name);
  g.same_shape(name, out, x, x_name);
  g.last_dim_contiguous(name, out);
}

detail::GuardList check_out_of_place(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                     const TensorView* q_weight, const TensorView* k_weight, double eps,
                                     const TensorView& cos, const TensorView& sin, RopeMath math,
                                     const TensorView& q_out, const TensorView& k_out) {
  detail::GuardList g("fused_qknorm_rope");
  check_inputs(g, chain, q, k, q_weight, k_weight, eps, cos, sin, math);
  check_output(g, "q_out", q_out, q, "q");
  check_output(g, "k_out", k_out, k, "k");
  check_written(g, "q_out", q_out, {{"q", &q}, {"k", &k}}, q_weight, k_weight, cos, sin);
  check_written(g, "k_out", k_out, {{"q", &q}, {"k", &k}, {"q_out", &q_out}}, q_weight, k_weight, cos, sin);
  return g;
}

// Slot `i` of kv [..., 2, H, D]: the [..., H, D] view of k's or v's place.
TensorView kv_slot(const TensorView& kv, int i) {
  int64_t sizes[8], strides[8];
  const int n = kv.dim(), slot_dim = n - 3;
  for (int d = 0, o = 0; d < n; ++d)
    if (d != slot_dim) sizes[o] = kv.size(d), strides[o++] = kv.stride(d);
  return TensorView(static_cast<char*>(kv.data()) + i * kv.stride(slot_dim) * int64_t(dtype_size(kv.dtype())),
                    kv.dtype(), sizes, strides, n - 1, kv.device());
}

detail::GuardList check_pack_kv(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView* q_weight, const TensorView* k_weight, double eps,
                                const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& kv) {
  detail::GuardList g("fused_qknorm_rope_pack_kv");
  check_inputs(g, chain, q, k, q_weight, k_weight, eps, cos, sin, math);
  if (!g.ok()) return g;
  g.rank_between("k", k, 3, 4);
  check_output(g, "v", v, k, "k");
  g.rank_between("kv", kv, k.dim() + 1, k.dim() + 1);
  if (g.ok() && kv.size(-3) != 2)
    g.fail("shape", "kv must be [..., 2, H, D] (k's shape with 2 before the heads), got " + detail::shape_str(kv));
  if (!g.ok()) return g;
  check_output(g, "kv[..., 0, :, :]", kv_slot(kv, 0), k, "k");
  check_written(g, "q", q, {{"k", &k}, {"v", &v}}, q_weight, k_weight, cos, sin);
  check_written(g, "kv", kv, {{"q", &q}, {"k", &k}, {"v", &v}}, q_weight, k_weight, cos, sin);
  return g;
}

detail::QkNormRopeRows rows(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                            const TensorView& cos, const TensorView& sin, RopeMath math, bool round_norm,
                            const TensorView& out) {
  return detail::qknorm_rope_rows(chain, x, weight, eps, cos, sin, math, kPairing, round_norm, out);
}

// q into q_out and k into k_out, one launch (k's part may also copy v's heads).
void run(detail::OpEntry& entry, const detail::QkNormRopeRows& q_rows, const detail::QkNormRopeRows& k_rows,
         Device device, Stream stream) {
  detail::QkNormRopeLaunch launch;
  for (const auto* p : {&q_rows, &k_rows})
    if (p->norm.rows.geom.rows() > 0) launch.part[launch.parts++] = *p;
  if (launch.parts == 0) return;
  entry.get<detail::QkNormRopeEntry>(device)(launch, stream);
}

void host_entry(const detail::QkNormRopeLaunch& launch, Stream) { detail::qknorm_rope_host(launch); }

DFUSE_REGISTER_ENTRY(host, "fused_inplace_qknorm_rope", &host_entry);
DFUSE_REGISTER_ENTRY(host, "fused_inplace_qknorm_rope_one_rounding", &host_entry);
DFUSE_REGISTER_ENTRY(host, "fused_qknorm_rope", &host_entry);
DFUSE_REGISTER_ENTRY(host, "fused_qknorm_rope_pack_kv", &host_entry);

}  // namespace

bool can_use_fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                       const TensorView* q_weight, const TensorView* k_weight, double eps,
                                       const TensorView& cos, const TensorView& sin, RopeMath math,
                                       std::string* why) {
  return check_in_place(kOp, chain, q, k, q_weight, k_weight, eps, cos, sin, math, true).answer(why);
}

void fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, Stream stream) {
  check_in_place(kOp, chain, q, k, q_weight, k_weight, eps, cos, sin, math, true).throw_if_failed();
  static detail::OpEntry entry("diffusion.fused_inplace_qknorm_rope");
  run(entry, rows(chain, q, q_weight, eps, cos, sin, math, true, q),
      rows(chain, k, k_weight, eps, cos, sin, math, true, k), q.device(), stream);
}

bool can_use_fused_inplace_qknorm_rope_one_rounding(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                                    const TensorView* q_weight, const TensorView* k_weight,
                                                    double eps, const TensorView& cos, const TensorView& sin,
                                                    std::string* why) {
  return check_in_place("fused_inplace_qknorm_rope_one_rounding", chain, q, k, q_weight, k_weight, eps, cos, sin,
                        RopeMath::fp32_opmath, false)
      .answer(why);
}

void fused_inplace_qknorm_rope_one_rounding(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                            const TensorView* q_weight, const TensorView* k_weight, double eps,
                                            const TensorView& cos, const TensorView& sin, Stream stream) {
  const RopeMath m = RopeMath::fp32_opmath;
  check_in_place("fused_inplace_qknorm_rope_one_rounding", chain, q, k, q_weight, k_weight, eps, cos, sin, m, false)
      .throw_if_failed();
  static detail::OpEntry entry("diffusion.fused_inplace_qknorm_rope_one_rounding");
  run(entry, rows(chain, q, q_weight, eps, cos, sin, m, false, q),
      rows(chain, k, k_weight, eps, cos, sin, m, false, k), q.device(), stream);
}

bool can_use_fused_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& q_out,
                               const TensorView& k_out, std::string* why) {
  return check_out_of_place(chain, q, k, q_weight, k_weight, eps, cos, sin, math, q_out, k_out).answer(why);
}

void fused_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                       const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                       RopeMath math, const TensorView& q_out, const TensorView& k_out, Stream stream) {
  check_out_of_place(chain, q, k, q_weight, k_weight, eps, cos, sin, math, q_out, k_out).throw_if_failed();
  static detail::OpEntry entry("diffusion.fused_qknorm_rope");
  run(entry, rows(chain, q, q_weight, eps, cos, sin, math, true, q_out),
      rows(chain, k, k_weight, eps, cos, sin, math, true, k_out), q.device(), stream);
}

bool can_use_fused_qknorm_rope_pack_kv(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView* q_weight, const TensorView* k_weight,
                                       double eps, const TensorView& cos, const TensorView& sin, RopeMath math,
                                       const TensorView& kv, std::string* why) {
  return check_pack_kv(chain, q, k, v, q_weight, k_weight, eps, cos, sin, math, kv).answer(why);
}

void fused_qknorm_rope_pack_kv(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& kv,
                               Stream stream) {
  check_pack_kv(chain, q, k, v, q_weight, k_weight, eps, cos, sin, math, kv).throw_if_failed();
  detail::QkNormRopeRows k_rows = rows(chain, k, k_weight, eps, cos, sin, math, true, kv_slot(kv, 0));
  k_rows.copies = true;
  k_rows.copy_src = detail::row_operand(v, k);
  k_rows.copy_dst = detail::row_operand(kv_slot(kv, 1), k);
  static detail::OpEntry entry("diffusion.fused_qknorm_rope_pack_kv");
  run(entry, rows(chain, q, q_weight, eps, cos, sin, math, true, q), k_rows,
      q.device(), stream);
}

}  // namespace dfuse
