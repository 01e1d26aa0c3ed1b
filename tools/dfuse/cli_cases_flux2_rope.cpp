// Cases for FLUX.2's QK-norm + RoPE ops: flux2_strided_qknorm_rope (q and k as slots of the packed
// [B, S, 3 H D + MLP] single-stream projection, out [2, B, S, H, D]: q's result, k's) and
// flux2_qkv_epilogue (image and text [B, S, 3 H D] to_qkv projections, out [3, B, S_txt + S_img, H, D]:
// joint q, k, v), at FLUX.2 Klein (24 x 128) and FLUX.2 dev (48 x 128) over 4096 image + 512 text
// tokens and odd shapes (heads 1, 3, 30; tokens 1, 7, 4097); quick runs (a slow host) use few tokens.
#include "dfuse/cli_cases.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::cli {

namespace {

constexpr double kEps = 1e-6;

// out [n, ...]: element `index` of the leading dim.
TensorView output_slot(const TensorView& out, int index) {
  auto* base = static_cast<char*>(out.data()) + index * out.stride(0) * int64_t(dtype_size(out.dtype()));
  return TensorView(base, out.dtype(), out.sizes() + 1, out.strides() + 1, out.dim() - 1, out.device());
}

// Slot `slot` (0 q, 1 k, 2 v) of a [B, S, width] projection as [B, S, H, D].
TensorView projection_heads(const TensorView& proj, int64_t heads, int64_t head_dim, int slot) {
  const int64_t b = proj.size(0), s = proj.size(1), width = proj.size(2);
  int64_t sizes[] = {b, s, heads, head_dim}, strides[] = {proj.stride(0), width, head_dim, 1};
  return proj.narrow(2, slot * heads * head_dim, heads * head_dim).restrided(sizes, strides, 4);
}

// inputs = {q, k ([B, S, H, D] views of packed projections), q_weight, k_weight, cos, sin}.
const CaseOp kStrided{
    "diffusion.flux2_strided_qknorm_rope",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      flux2_strided_qknorm_rope(in[0], in[1], &in[2], &in[3], kEps, in[4], in[5], output_slot(out, 0),
                                output_slot(out, 1), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::flux2_qknorm_rope_chain(in[0], &in[2], kEps, in[4], in[5], output_slot(out, 0), ws, s);
      eager::flux2_qknorm_rope_chain(in[1], &in[3], kEps, in[4], in[5], output_slot(out, 1), ws, s);
    },
};

// inputs = {img [B, S_img, 3 H D], txt [B, S_txt, 3 H D], q_weight, k_weight, added_q_weight,
// added_k_weight, cos, sin}; the head count is the weights' D into the projection width / 3.
template <bool kEager>
void epilogue(std::span<const TensorView> in, const TensorView& out, eager::Workspace* ws, Stream s) {
  const int64_t d = in[2].size(0), h = in[0].size(2) / (3 * d);
  const TensorView iq = projection_heads(in[0], h, d, 0), ik = projection_heads(in[0], h, d, 1),
                   iv = projection_heads(in[0], h, d, 2), tq = projection_heads(in[1], h, d, 0),
                   tk = projection_heads(in[1], h, d, 1), tv = projection_heads(in[1], h, d, 2);
  if constexpr (kEager)
    eager::flux2_qkv_epilogue_chain(iq, ik, iv, tq, tk, tv, &in[2], &in[3], &in[4], &in[5], kEps, in[6], in[7],
                                    output_slot(out, 0), output_slot(out, 1), output_slot(out, 2), *ws, s);
  else
    flux2_qkv_epilogue(iq, ik, iv, tq, tk, tv, &in[2], &in[3], &in[4], &in[5], kEps, in[6], in[7],
                       output_slot(out, 0), output_slot(out, 1), output_slot(out, 2), s);
}

const CaseOp kEpilogue{
    "diffusion.flux2_qkv_epilogue",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) { epilogue<false>(in, out, nullptr, s); },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      epilogue<true>(in, out, &ws, s);
    },
};

struct Flux2Shape {
  std::string name;
  int64_t batch, img_tokens, txt_tokens, heads, head_dim = 128;
  int64_t tokens() const { return img_tokens + txt_tokens; }
};

// Tokens of a model shape: as the model has them, or few (and odd) on a quick run.
int64_t case_tokens(const CaseRequest& request, int64_t model_tokens) {
  return &request.shapes == &shape_table(true) ? std::min<int64_t>(model_tokens, 33) : model_tokens;
}

std::vector<Flux2Shape> model_shapes(const CaseRequest& r) {
  return {{"flux.2 klein 4096+512", 1, case_tokens(r, 4096), case_tokens(r, 512), 24},
          {"flux.2 dev 4096+512", 1, case_tokens(r, 4096), case_tokens(r, 512), 48}};
}

std::vector<Flux2Shape> odd_shapes(const CaseRequest& r) {
  return {{"odd heads 1 tokens 4097", 1, case_tokens(r, 4090), 7, 1},
          {"odd heads 3 tokens 7", 2, 6, 1, 3},
          {"odd heads 30 tokens 4097", 1, case_tokens(r, 3585), case_tokens(r, 512), 30},
          {"odd heads 24 tokens 1+1", 1, 1, 1, 24}};
}

// cos/sin [1, S, 1, D] fp32 (diffusers' cos[None, :, None, :]).
OperandSpec table(std::string name, int64_t tokens, int64_t head_dim) {
  OperandSpec t = dense(std::move(name), {1, tokens, 1, head_dim});
  t.dtype = DType::f32;
  return t;
}

// ---- flux2_strided_qknorm_rope: the single-stream block over the joint tokens ---------------------

Case strided(const Flux2Shape& s, DType dtype, Values values = Values::finite) {
  const int64_t hd = s.heads * s.head_dim, tokens = s.tokens();
  const int64_t width = 3 * hd + 6 * hd;  // q, k, v, then the MLP in: 2 x mlp_ratio 3 x inner dim
  const auto slot = [&](std::string name, int index) {
    return OperandSpec{std::move(name),
                       {s.batch, tokens, s.heads, s.head_dim},
                       {tokens * width, width, s.head_dim, 1},
                       index * hd,
                       s.batch * tokens * width};
  };
  return kStrided.make(s.name + " packed", dtype,
                       {slot("q", 0), slot("k", 1), dense("q_weight", {s.head_dim}), dense("k_weight", {s.head_dim}),
                        table("cos", tokens, s.head_dim), table("sin", tokens, s.head_dim)},
                       {2, s.batch, tokens, s.heads, s.head_dim}, values);
}

std::vector<Case> strided_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  for (const auto& s : model_shapes(request)) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(strided(s, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(strided(s, t));
    cases.push_back(strided(s, DType::bf16, Values::specials));
  }
  if (request.purpose == Purpose::bench) return cases;
  for (const auto& s : odd_shapes(request))
    for (DType t : kCaseDtypes) cases.push_back(strided(s, t, Values::specials));
  return cases;
}

// ---- flux2_qkv_epilogue: the double-stream block's image and text projections ---------------------

Case qkv_epilogue(const Flux2Shape& s, DType dtype, Values values = Values::finite) {
  const int64_t width = 3 * s.heads * s.head_dim;
  return kEpilogue.make(s.name, dtype,
                        {dense("img_qkv", {s.batch, s.img_tokens, width}), dense("txt_qkv", {s.batch, s.txt_tokens, width}),
                         dense("q_weight", {s.head_dim}), dense("k_weight", {s.head_dim}),
                         dense("added_q_weight", {s.head_dim}), dense("added_k_weight", {s.head_dim}),
                         table("cos", s.tokens(), s.head_dim), table("sin", s.tokens(), s.head_dim)},
                        {3, s.batch, s.tokens(), s.heads, s.head_dim}, values);
}

std::vector<Case> epilogue_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  for (const auto& s : model_shapes(request)) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(qkv_epilogue(s, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(qkv_epilogue(s, t));
    cases.push_back(qkv_epilogue(s, DType::bf16, Values::specials));
  }
  if (request.purpose == Purpose::bench) return cases;
  for (const auto& s : odd_shapes(request))
    for (DType t : kCaseDtypes) cases.push_back(qkv_epilogue(s, t, Values::specials));
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.flux2_strided_qknorm_rope", &strided_cases);
DFUSE_CLI_CASES("diffusion.flux2_qkv_epilogue", &epilogue_cases);

}  // namespace dfuse::cli
