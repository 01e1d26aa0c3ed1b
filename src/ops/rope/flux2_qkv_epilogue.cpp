// diffusion.flux2_qkv_epilogue — FLUX.2 double-stream attention after the projections: norm_q/norm_k
// on the image q/k, norm_added_q/norm_added_k on the text q/k (torch.nn.RMSNorm: F.rms_norm, each
// module over its own tokens), text then image tokens concatenated into the joint q, k, v, and
// diffusers' interleaved-pair RoPE on the joint q and k. Contract: bit-exact against that chain
// (dfuse/ops/rope.h): the cat moves bits, so joint token t of q is the rope_interleaved_pairs
// element of the rounded norm output with table row t; v is copied bit for bit.
// Four parts of one launch of the QK-norm + RoPE kernel (ops/rope/qknorm_rope_rows.h): text q, text
// k (copying the text v rows), image q, image k (copying the image v rows), each written into its
// token range of the joint outputs with the table rows of that range. This file: guards, dispatch
// and the host entry (the CUDA entry: ops/rope/qknorm_rope_rows.cu).
#include <initializer_list>
#include <string>
#include <tuple>

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/qknorm_rope_rows.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "flux2_qkv_epilogue";
constexpr auto kChain = RmsNormChain::torch_rms_norm;  // torch.nn.RMSNorm
constexpr auto kPairing = detail::RopePairing::interleaved_pairs;
constexpr int kSeqDim = 1;  // [B, S, H, D]

// The table rows of joint tokens [start, start + len): the table's dim that broadcasts against the
// sequence dim, narrowed unless it has size 1.
TensorView table_rows(const TensorView& t, int64_t start, int64_t len) {
  const int dim = t.dim() - (4 - kSeqDim);
  if (dim < 0 || t.size(dim) == 1) return t;
  return t.narrow(dim, start, len);
}

struct Operands {
  const TensorView &img_q, &img_k, &img_v, &txt_q, &txt_k, &txt_v;
  const TensorView *q_weight, *k_weight, *added_q_weight, *added_k_weight;
  double eps;
  const TensorView &cos, &sin, &q_out, &k_out, &v_out;
};

detail::GuardList check(const Operands& o) {
  detail::GuardList g(kOp);
  for (const auto& [name, t] : {std::pair{"img_q", &o.img_q}, std::pair{"img_k", &o.img_k}, std::pair{"img_v", &o.img_v},
                                std::pair{"txt_q", &o.txt_q}, std::pair{"txt_k", &o.txt_k}, std::pair{"txt_v", &o.txt_v},
                                std::pair{"q_out", &o.q_out}, std::pair{"k_out", &o.k_out}, std::pair{"v_out", &o.v_out}}) {
    g.rank_between(name, *t, 4, 4);
    if (g.ok()) g.same_dtype(name, *t, o.img_q, "img_q");
    if (g.ok()) g.same_device(name, *t, o.img_q, "img_q");
  }
  if (!g.ok()) return g;
  const int64_t b = o.img_q.size(0), s_img = o.img_q.size(1), s_txt = o.txt_q.size(1), h = o.img_q.size(2),
                d = o.img_q.size(3);
  const auto shape_is = [&](const char* name, const TensorView& t, int64_t s) {
    if (g.ok() && (t.size(0) != b || t.size(1) != s || t.size(2) != h || t.size(3) != d))
      g.fail("shape", std::string(name) + " must be [" + std::to_string(b) + ", " + std::to_string(s) + ", " +
                          std::to_string(h) + ", " + std::to_string(d) + "], got " + detail::shape_str(t));
  };
  shape_is("img_k", o.img_k, s_img);
  shape_is("img_v", o.img_v, s_img);
  shape_is("txt_q", o.txt_q, s_txt);
  shape_is("txt_k", o.txt_k, s_txt);
  shape_is("txt_v", o.txt_v, s_txt);
  for (const auto& [name, t] : {std::pair{"q_out", &o.q_out}, std::pair{"k_out", &o.k_out}, std::pair{"v_out", &o.v_out}})
    shape_is(name, *t, s_txt + s_img);
  if (!g.ok()) return g;
  // The tables cover the joint tokens; each part sees its own rows.
  g.not_null("cos", o.cos);
  g.rank_between("cos", o.cos, 1, 4);
  g.same_shape("sin", o.sin, o.cos, "cos");
  if (g.ok()) g.broadcastable_rows("cos", o.cos, o.q_out, "q_out");
  if (!g.ok()) return g;
  const TensorView img_cos = table_rows(o.cos, s_txt, s_img), img_sin = table_rows(o.sin, s_txt, s_img);
  const TensorView txt_cos = table_rows(o.cos, 0, s_txt), txt_sin = table_rows(o.sin, 0, s_txt);
  const auto m = RopeMath::fp32_opmath;
  detail::check_qknorm_rope_input(g, kChain, "img_q", o.img_q, o.q_weight, "q_weight", o.eps, img_cos, img_sin, m,
                                  kPairing);
  detail::check_qknorm_rope_input(g, kChain, "img_k", o.img_k, o.k_weight, "k_weight", o.eps, img_cos, img_sin, m,
                                  kPairing);
  detail::check_qknorm_rope_input(g, kChain, "txt_q", o.txt_q, o.added_q_weight, "added_q_weight", o.eps, txt_cos,
                                  txt_sin, m, kPairing);
  detail::check_qknorm_rope_input(g, kChain, "txt_k", o.txt_k, o.added_k_weight, "added_k_weight", o.eps, txt_cos,
                                  txt_sin, m, kPairing);
  detail::check_rope_extent(g, "v_out", o.v_out);
  if (!g.ok()) return g;
  // The outputs: dense enough to be written once each, overlapping no operand nor each other.
  const std::initializer_list<std::pair<const char*, const TensorView*>> reads = {
      {"img_q", &o.img_q}, {"img_k", &o.img_k}, {"img_v", &o.img_v}, {"txt_q", &o.txt_q},
      {"txt_k", &o.txt_k}, {"txt_v", &o.txt_v}, {"cos", &o.cos},     {"sin", &o.sin}};
  for (const auto& [name, out] : {std::pair{"q_out", &o.q_out}, std::pair{"k_out", &o.k_out}, std::pair{"v_out", &o.v_out}}) {
    g.last_dim_contiguous(name, *out);
    g.non_overlapping(name, *out);
    for (const auto& [in_name, in] : reads) g.no_partial_overlap(name, *out, in_name, *in, false);
    for (const TensorView* w : {o.q_weight, o.k_weight, o.added_q_weight, o.added_k_weight})
      if (w) g.no_partial_overlap(name, *out, "a norm weight", *w, false);
  }
  g.no_partial_overlap("k_out", o.k_out, "q_out", o.q_out, false);
  g.no_partial_overlap("v_out", o.v_out, "q_out", o.q_out, false);
  g.no_partial_overlap("v_out", o.v_out, "k_out", o.k_out, false);
  return g;
}

detail::QkNormRopeLaunch launch_of(const Operands& o) {
  const int64_t s_txt = o.txt_q.size(kSeqDim);
  detail::QkNormRopeLaunch launch;
  const auto add = [&](const TensorView& x, const TensorView* weight, int64_t start, const TensorView& out,
                       const TensorView* v) {
    if (x.numel() == 0) return;
    const int64_t len = x.size(kSeqDim);
    detail::QkNormRopeRows p = detail::qknorm_rope_rows(
        kChain, x, weight, o.eps, table_rows(o.cos, start, len), table_rows(o.sin, start, len), RopeMath::fp32_opmath,
        kPairing, true, out.narrow(kSeqDim, start, len));
    if (v) {
      p.copies = true;
      p.copy_src = detail::row_operand(*v, x);
      p.copy_dst = detail::row_operand(o.v_out.narrow(kSeqDim, start, len), x);
    }
    launch.part[launch.parts++] = p;
  };
  add(o.txt_q, o.added_q_weight, 0, o.q_out, nullptr);
  add(o.txt_k, o.added_k_weight, 0, o.k_out, &o.txt_v);
  add(o.img_q, o.q_weight, s_txt, o.q_out, nullptr);
  add(o.img_k, o.k_weight, s_txt, o.k_out, &o.img_v);
  return launch;
}

void host_entry(const detail::QkNormRopeLaunch& launch, Stream) { detail::qknorm_rope_host(launch); }

DFUSE_REGISTER_ENTRY(host, "flux2_qkv_epilogue", &host_entry);

}  // namespace

bool can_use_flux2_qkv_epilogue(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                                const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                                const TensorView* q_weight, const TensorView* k_weight,
                                const TensorView* added_q_weight, const TensorView* added_k_weight, double eps,
                                const TensorView& cos, const TensorView& sin, const TensorView& q_out,
                                const TensorView& k_out, const TensorView& v_out, std::string* why) {
  const Operands o{img_q,    img_k,          img_v,          txt_q, txt_k, txt_v, q_weight, k_weight,
                   added_q_weight, added_k_weight, eps, cos,   sin,   q_out, k_out,    v_out};
  return check(o).answer(why);
}

void flux2_qkv_epilogue(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                        const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                        const TensorView* q_weight, const TensorView* k_weight, const TensorView* added_q_weight,
                        const TensorView* added_k_weight, double eps, const TensorView& cos, const TensorView& sin,
                        const TensorView& q_out, const TensorView& k_out, const TensorView& v_out, Stream stream) {
  const Operands o{img_q,    img_k,          img_v,          txt_q, txt_k, txt_v, q_weight, k_weight,
                   added_q_weight, added_k_weight, eps, cos,   sin,   q_out, k_out,    v_out};
  check(o).throw_if_failed();
  const detail::QkNormRopeLaunch launch = launch_of(o);
  if (launch.parts == 0) return;
  static detail::OpEntry entry("diffusion.flux2_qkv_epilogue");
  entry.get<detail::QkNormRopeEntry>(q_out.device())(launch, stream);
}

}  // namespace dfuse
