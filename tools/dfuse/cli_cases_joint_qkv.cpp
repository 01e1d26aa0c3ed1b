// Cases for the joint-QKV epilogues: qwen_qkv_epilogue (Qwen-Image's QK RMSNorm + complex RoPE +
// [txt, img] joint writes) and hunyuan_qkv_rope_pack (HunyuanVideo's QK RMSNorm + interleaved-pair
// RoPE on the image tokens + [img, txt] pack), on dense heads and on q/k/v slices of packed QKV
// projections, at the Qwen-Image and HunyuanVideo head shapes and odd ones; quick runs (a slow host)
// use few tokens. Inputs: img q, k, v, txt q, k, v, the four RMSNorm weights, two f32 tables
// (qwen: img_freqs, txt_freqs; hunyuan: cos, sin). The output [3, B, S_txt + S_img, H, 128] holds the
// joint q, k, v.
#include <algorithm>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::cli {

namespace {

constexpr int64_t kD = 128;

// Slot k of the [3, B, S, H, D] output: joint q, k or v.
TensorView joint_slot(const TensorView& out, int k) {
  auto* base = static_cast<char*>(out.data()) + k * out.stride(0) * int64_t(dtype_size(out.dtype()));
  return TensorView(base, out.dtype(), out.sizes() + 1, out.strides() + 1, out.dim() - 1, out.device());
}

QkvStream stream(std::span<const TensorView> in, int first, int first_weight) {
  return {in[size_t(first)], in[size_t(first + 1)], in[size_t(first + 2)], &in[size_t(first_weight)],
          &in[size_t(first_weight + 1)]};
}

const CaseOp kQwen{
    "diffusion.qwen_qkv_epilogue",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      qwen_qkv_epilogue(stream(in, 0, 6), stream(in, 3, 8), 1e-6, in[10], in[11], joint_slot(out, 0),
                        joint_slot(out, 1), joint_slot(out, 2), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::qwen_qkv_epilogue_chain(stream(in, 0, 6), stream(in, 3, 8), 1e-6, in[10], in[11], joint_slot(out, 0),
                                     joint_slot(out, 1), joint_slot(out, 2), ws, s);
    },
};

const CaseOp kHunyuan{
    "diffusion.hunyuan_qkv_rope_pack",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      hunyuan_qkv_rope_pack(stream(in, 0, 6), stream(in, 3, 8), 1e-6, in[10], in[11], joint_slot(out, 0),
                            joint_slot(out, 1), joint_slot(out, 2), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::hunyuan_qkv_rope_pack_chain(stream(in, 0, 6), stream(in, 3, 8), 1e-6, in[10], in[11],
                                         joint_slot(out, 0), joint_slot(out, 1), joint_slot(out, 2), ws, s);
    },
};

struct JointShape {
  std::string name;
  int64_t batch, img_tokens, txt_tokens, heads;
};

int64_t case_tokens(const CaseRequest& request, int64_t model_tokens) {
  return &request.shapes == &shape_table(true) ? std::min<int64_t>(model_tokens, 33) : model_tokens;
}

// Slot `slot` (q, k, v) of a stream's heads [B, S, H, 128]: dense, or of a packed [B, S, 3 * H * 128].
OperandSpec heads(std::string name, int64_t b, int64_t s, int64_t h, bool packed, int slot) {
  if (!packed) return dense(std::move(name), {b, s, h, kD});
  const int64_t row = 3 * h * kD;
  return {std::move(name), {b, s, h, kD}, {s * row, row, kD, 1}, slot * h * kD, b * s * row};
}

Case joint(const CaseOp& op, const JointShape& s, bool packed, DType dtype, Values values = Values::finite) {
  std::vector<OperandSpec> in;
  const char* names[] = {"img_q", "img_k", "img_v", "txt_q", "txt_k", "txt_v"};
  for (int i = 0; i < 6; ++i)
    in.push_back(heads(names[i], s.batch, i < 3 ? s.img_tokens : s.txt_tokens, s.heads, packed, i % 3));
  for (const char* w : {"img_q_weight", "img_k_weight", "txt_q_weight", "txt_k_weight"}) in.push_back(dense(w, {kD}));
  const bool qwen = &op == &kQwen;
  OperandSpec a = dense(qwen ? "img_freqs" : "cos", {s.img_tokens, kD});
  OperandSpec b = dense(qwen ? "txt_freqs" : "sin", {qwen ? s.txt_tokens : s.img_tokens, kD});
  a.dtype = b.dtype = DType::f32;
  in.push_back(std::move(a));
  in.push_back(std::move(b));
  return op.make(s.name + (packed ? " packed" : ""), dtype, std::move(in),
                 {3, s.batch, s.img_tokens + s.txt_tokens, s.heads, kD}, values);
}

std::vector<JointShape> odd_shapes(const CaseRequest& r) {
  return {{"odd heads 1 tokens 4097+1", 1, case_tokens(r, 4097), 1, 1},
          {"odd heads 3 tokens 7+7", 3, 7, 7, 3},
          {"odd heads 30 tokens 4097+7", 1, case_tokens(r, 4097), 7, 30}};
}

std::vector<Case> cases_for(const CaseOp& op, const JointShape& model, const CaseRequest& request) {
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    cases.push_back(joint(op, model, false, DType::bf16));
    cases.push_back(joint(op, model, true, DType::bf16));
    return cases;
  }
  for (DType t : kCaseDtypes) {
    cases.push_back(joint(op, model, false, t));
    cases.push_back(joint(op, model, true, t));
  }
  cases.push_back(joint(op, model, true, DType::bf16, Values::specials));
  for (const auto& s : odd_shapes(request))
    for (DType t : kCaseDtypes) cases.push_back(joint(op, s, true, t, Values::specials));
  return cases;
}

std::vector<Case> qwen_cases(const CaseRequest& r) {
  return cases_for(kQwen, {"qwen-image 1024^2", 1, case_tokens(r, 4096), case_tokens(r, 512), 24},
                   r);
}

std::vector<Case> hunyuan_cases(const CaseRequest& r) {
  return cases_for(kHunyuan,
                   {"hunyuanvideo 720p", 1, case_tokens(r, 32760), case_tokens(r, 256), 24}, r);
}

}  // namespace

DFUSE_CLI_CASES("diffusion.qwen_qkv_epilogue", &qwen_cases);
DFUSE_CLI_CASES("diffusion.hunyuan_qkv_rope_pack", &hunyuan_cases);

}  // namespace dfuse::cli
