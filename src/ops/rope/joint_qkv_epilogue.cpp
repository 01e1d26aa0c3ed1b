// The joint-QKV epilogue's guards, parameters and host kernel (ops/rope/joint_qkv_epilogue.h).
#include "ops/rope/joint_qkv_epilogue.h"

#include <string>

#include "common/dispatch.h"
#include "common/rms_norm_arith.h"
#include "common/rowwise_guards.h"
#include "ops/norm/rmsnorm_rows.h"
#include "ops/rope/rope_guards.h"

namespace dfuse::detail {

namespace {

struct Named {
  std::string name;
  const TensorView* view;
};

// The three heads of a stream with their names ("img_q", ...) into out[0..2].
void stream_heads(const QkvStream& s, const char* stream, Named* out) {
  out[0] = {std::string(stream) + "_q", &s.q};
  out[1] = {std::string(stream) + "_k", &s.k};
  out[2] = {std::string(stream) + "_v", &s.v};
}

void check_stream(GuardList& g, const QkvStream& s, const char* stream, double eps, const TensorView& ref) {
  Named heads[3];
  stream_heads(s, stream, heads);
  const std::string qw = std::string(stream) + "_q_weight", kw = std::string(stream) + "_k_weight";
  for (const Named& h : heads) g.rank_between(h.name.c_str(), *h.view, 4, 4);
  check_rms_norm_input(g, RmsNormChain::diffusers_decomposed, s.q, s.q_weight, eps, heads[0].name.c_str(), qw.c_str());
  check_rms_norm_input(g, RmsNormChain::diffusers_decomposed, s.k, s.k_weight, eps, heads[1].name.c_str(), kw.c_str());
  check_rowwise_input(g, heads[2].name.c_str(), s.v);
  for (const Named& h : heads) {
    g.same_dtype(h.name.c_str(), *h.view, ref, "the first q");
    g.same_device(h.name.c_str(), *h.view, ref, "the first q");
  }
  if (!g.ok()) return;
  g.same_shape(heads[1].name.c_str(), s.k, s.q, heads[0].name.c_str());
  g.same_shape(heads[2].name.c_str(), s.v, s.q, heads[0].name.c_str());
  if (g.ok() && s.q.size(-1) != kJointQkvHeadDim)
    g.fail("head_dim", "the head dim D = " + heads[0].name + ".size(-1) must be 128, got " +
                           std::to_string(s.q.size(-1)));
  if (g.ok() && (s.q.size(0) != ref.size(0) || s.q.size(2) != ref.size(2)))
    g.fail("shape", heads[0].name + " " + shape_str(s.q) + " must share the first q's batch and head counts " +
                        shape_str(ref));
}

}  // namespace

void check_joint_qkv(GuardList& g, const QkvStream& first, const char* first_name, const QkvStream& second,
                     const char* second_name, double eps, const TensorView& joint_q, const TensorView& joint_k,
                     const TensorView& joint_v, std::initializer_list<const TensorView*> tables) {
  check_stream(g, first, first_name, eps, first.q);
  check_stream(g, second, second_name, eps, first.q);
  if (!g.ok()) return;
  const int64_t b = first.q.size(0), h = first.q.size(2), tokens = first.q.size(1) + second.q.size(1);
  const Named outs[3] = {{"joint_q", &joint_q}, {"joint_k", &joint_k}, {"joint_v", &joint_v}};
  Named inputs[6];
  stream_heads(first, first_name, inputs);
  stream_heads(second, second_name, inputs + 3);
  for (const Named& o : outs) {
    const char* name = o.name.c_str();
    const TensorView& t = *o.view;
    g.not_null(name, t);
    g.same_dtype(name, t, first.q, "the first q");
    g.same_device(name, t, first.q, "the first q");
    g.rank_between(name, t, 4, 4);
    if (!g.ok()) return;
    if (t.size(0) != b || t.size(1) != tokens || t.size(2) != h || t.size(3) != kJointQkvHeadDim)
      g.fail("shape", o.name + " must be [" + std::to_string(b) + ", " + std::to_string(tokens) + ", " +
                          std::to_string(h) + ", 128] (the streams' tokens joined), got " + shape_str(t));
    g.last_dim_contiguous(name, t);
    g.non_negative_strides(name, t);
    g.non_overlapping(name, t);
    check_rope_extent(g, name, t);
    // Outputs are written while inputs are still read: no output may touch anything read.
    for (const Named& in : inputs) g.no_partial_overlap(name, t, in.name.c_str(), *in.view, false);
    for (const QkvStream* s : {&first, &second})
      for (const TensorView* w : {s->q_weight, s->k_weight})
        if (w) g.no_partial_overlap(name, t, "a weight", *w, false);
    for (const TensorView* table : tables) g.no_partial_overlap(name, t, "a RoPE table", *table, false);
  }
  g.no_partial_overlap("joint_k", joint_k, "joint_q", joint_q, false);
  g.no_partial_overlap("joint_v", joint_v, "joint_q", joint_q, false);
  g.no_partial_overlap("joint_v", joint_v, "joint_k", joint_k, false);
}

void check_joint_qkv_table(GuardList& g, const char* name, const TensorView& table, int64_t tokens,
                           const TensorView& x, const char* stream_name) {
  g.not_null(name, table);
  g.dtype_in(name, table, {DType::f32});
  g.same_device(name, table, x, stream_name);
  g.rank_between(name, table, 2, 2);
  if (!g.ok()) return;
  if (table.size(0) != tokens || table.size(1) != kJointQkvHeadDim)
    g.fail("shape", std::string(name) + " must be [" + std::to_string(tokens) + ", 128] (the " + stream_name +
                        " stream's tokens), got " + shape_str(table));
  g.last_dim_contiguous(name, table);
  g.non_negative_strides(name, table);
}

JointQkvParams joint_qkv_params(const QkvStream& any, double eps) {
  JointQkvParams p;
  p.dtype = any.q.dtype();
  p.device = any.q.device().index;
  p.eps = float(eps);
  return p;
}

void add_joint_qkv_stream(JointQkvParams& p, const QkvStream& stream, PairRotation rotation, const TensorView* cos,
                          const TensorView* sin, int64_t token_start, const TensorView& joint_q,
                          const TensorView& joint_k, const TensorView& joint_v) {
  const int64_t tokens = stream.q.size(1);
  const struct {
    const TensorView* x;
    const TensorView* weight;
    const TensorView* joint;
    bool qk;
  } heads[3] = {{&stream.q, stream.q_weight, &joint_q, true},
                {&stream.k, stream.k_weight, &joint_k, true},
                {&stream.v, nullptr, &joint_v, false}};
  for (const auto& h : heads) {
    JointQkvPart& part = p.part[p.parts++];
    const TensorView& x = *h.x;
    part.geom = row_geometry(x);
    part.x = row_operand(x, x);
    part.out = row_operand(h.joint->narrow(1, token_start, tokens), x);
    part.normalize = h.qk;
    part.weight = h.weight ? h.weight->data() : nullptr;
    part.mean_factor = mean_factor(part.geom.rows(), kJointQkvHeadDim);
    if (h.qk && rotation != PairRotation::none) {
      part.rotation = rotation;
      // [S, 128] tables against [B, S, H, 128]: viewed as [S, 1, 128], broadcast over batch and heads.
      const int64_t sizes[] = {tokens, 1, kJointQkvHeadDim};
      const int64_t cos_strides[] = {cos->stride(0), 0, 1};
      part.cos = row_operand(cos->restrided(sizes, cos_strides, 3), x);
      if (sin) {
        const int64_t sin_strides[] = {sin->stride(0), 0, 1};
        part.sin = row_operand(sin->restrided(sizes, sin_strides, 3), x);
      }
    }
  }
}

namespace {

template <typename T>
void host_part(const JointQkvParams& p, const JointQkvPart& part) {
  using S = Storage<T>;
  constexpr int64_t n = kJointQkvHeadDim;
  const int64_t rows = part.geom.rows();
  const MeanReduceConfig mean = mean_reduce_config(rows, n);
  const T* weight = static_cast<const T*>(part.weight);
  T row[n];  // the row as the rotation reads it: x, or x normalized and rounded to T
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    part.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(part.x.data) + part.x.offset(idx);
    T* out = static_cast<T*>(part.out.data) + part.out.offset(idx);
    for (int64_t c = 0; c < n; ++c) row[c] = x[c];
    if (part.normalize) {
      const float inv =
          decomposed_inv_rms_host([&row](int64_t k) { return S::load(row[k]); }, n, mean, 0, part.mean_factor, p.eps);
      for (int64_t c = 0; c < n; ++c)
        row[c] = S::store(
            decomposed_rms_norm_element<T>(S::load(row[c]), inv, weight != nullptr, weight ? S::load(weight[c]) : 1.0f));
    }
    if (part.rotation == PairRotation::none) {  // copied bit for bit (torch.cat)
      for (int64_t c = 0; c < n; ++c) out[c] = row[c];
      continue;
    }
    const float* cs = static_cast<const float*>(part.cos.data) + part.cos.offset(idx);
    const float* sn =
        part.rotation == PairRotation::real_pairs ? static_cast<const float*>(part.sin.data) + part.sin.offset(idx) : cs;
    for (int64_t c = 0; c < n; c += 2) {
      const float x1 = S::load(row[c]), x2 = S::load(row[c + 1]);
      const RotatedPair<T> r2 = part.rotation == PairRotation::complex_mul
                                    ? qwen_complex_pair<T>(x1, x2, cs[c], cs[c + 1])
                                    : rope_interleaved_pair<T>(x1, x2, cs[c], cs[c + 1], sn[c], sn[c + 1]);
      out[c] = r2.even;
      out[c + 1] = r2.odd;
    }
  }
}

}  // namespace

void joint_qkv_host(const JointQkvParams& p, Stream) {
  dispatch_bf16_f16_f32(p.dtype, "joint qkv epilogue host kernel", [&](auto tag) {
    for (int i = 0; i < p.parts; ++i) host_part<decltype(tag)>(p, p.part[i]);
  });
}

}  // namespace dfuse::detail
