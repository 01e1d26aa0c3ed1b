// Cases for the data-movement family: usp_merge_heads (the Ulysses head merge), joint_qkv_cat
// (image + text tokens, separate or slices of one packed QKV projection) and
// pack_qkv_destination_major (2 and 4 ranks), against the eager copy replicas. Sizes are fixed
// by the models; quick runs (a slow host) use few tokens.
#include "dfuse/cli_cases.h"
#include "dfuse/eager/data_movement.h"
#include "dfuse/ops/data_movement.h"

namespace dfuse::cli {

namespace {

const CaseOp kUspMergeHeads{
    "diffusion.usp_merge_heads",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) { usp_merge_heads(in[0], out, s); },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      eager::usp_merge_heads_chain(in[0], out, s);
    },
};

// joint_qkv_cat's three outputs are the slices of one dense [3, B, S, H, D] case output.
TensorView qkv_slice(const TensorView& out, int index) {
  const TensorView slice = out.narrow(0, index, 1);
  return slice.restrided(slice.sizes() + 1, slice.strides() + 1, 4);
}

// inputs = {img.q, img.k, img.v, txt.q, txt.k, txt.v}.
const CaseOp kJointQkvCat{
    "diffusion.joint_qkv_cat",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      joint_qkv_cat({in[0], in[1], in[2]}, {in[3], in[4], in[5]},
                    {qkv_slice(out, 0), qkv_slice(out, 1), qkv_slice(out, 2)}, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      for (size_t i = 0; i < 3; ++i) eager::cat_tokens_chain(in[i], in[i + 3], qkv_slice(out, int(i)), s);
    },
};

const CaseOp kPackQkv{
    "diffusion.pack_qkv_destination_major",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      pack_qkv_destination_major(in[0], in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      eager::pack_qkv_destination_major_chain(in[0], in[1], in[2], out, s);
    },
};

// Tokens of a model shape: as the model has them, or few (and odd) on a quick run.
int64_t tokens(const CaseRequest& request, int64_t model_tokens) {
  return &request.shapes == &shape_table(true) ? 33 : model_tokens;
}

// Slice `index` of a packed [batch, tokens, 3, heads, head_dim] QKV projection.
OperandSpec packed_slice(std::string name, int64_t batch, int64_t tokens, int64_t heads, int64_t head_dim,
                         int index) {
  const int64_t row = 3 * heads * head_dim;
  return {std::move(name),
          {batch, tokens, heads, head_dim},
          {tokens * row, row, head_dim, 1},
          index * heads * head_dim,
          batch * tokens * row};
}

// ---- usp_merge_heads: x [W, S, B, h, D] ------------------------------------------------------

std::vector<Case> usp_merge_heads_cases(const CaseRequest& request) {
  struct Shape {
    std::string name;
    int64_t world, tokens, batch, heads, head_dim;
  };
  const std::vector<Shape> shapes = {{"h3-768p ulysses-4", 4, tokens(request, 7936), 1, 14, 128},
                                     {"odd", 4, 33, 2, 4, 100}};
  std::vector<Case> cases;
  for (const auto& s : shapes) {
    const std::vector<int64_t> x = {s.world, s.tokens, s.batch, s.heads, s.head_dim};
    const std::vector<int64_t> out = {s.batch, s.tokens, s.world, s.heads, s.head_dim};
    if (request.purpose == Purpose::bench) {
      cases.push_back(kUspMergeHeads.make(s.name, DType::bf16, {dense("x", x)}, out));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(kUspMergeHeads.make(s.name, t, {dense("x", x)}, out));
    cases.push_back(kUspMergeHeads.make(s.name, DType::bf16, {dense("x", x)}, out, Values::specials));
  }
  return cases;
}

// ---- joint_qkv_cat: img q, k, v [B, Si, H, D], txt q, k, v [B, St, H, D] -------------------------

Case joint_qkv_cat(const CaseRequest& request, bool packed, DType dtype, Values values = Values::finite) {
  const int64_t batch = 1, image = tokens(request, 4096), text = 512, heads = 24, head_dim = 128;
  std::vector<OperandSpec> inputs;
  const char* names[] = {"img.q", "img.k", "img.v", "txt.q", "txt.k", "txt.v"};
  for (int i = 0; i < 6; ++i) {
    const int64_t n = i < 3 ? image : text;
    inputs.push_back(packed ? packed_slice(names[i], batch, n, heads, head_dim, i % 3)
                            : dense(names[i], {batch, n, heads, head_dim}));
  }
  return kJointQkvCat.make(std::string("flux-like joint") + (packed ? " packed" : ""), dtype,
                           std::move(inputs), {3, batch, image + text, heads, head_dim}, values);
}

std::vector<Case> joint_qkv_cat_cases(const CaseRequest& request) {
  if (request.purpose == Purpose::bench)
    return {joint_qkv_cat(request, false, DType::bf16), joint_qkv_cat(request, true, DType::bf16)};
  std::vector<Case> cases;
  for (DType t : kCaseDtypes) cases.push_back(joint_qkv_cat(request, false, t));
  cases.push_back(joint_qkv_cat(request, true, DType::bf16, Values::specials));
  return cases;
}

// ---- pack_qkv_destination_major: q, k, v [rows, G, hs] -> [W, rows, G/W, 3hs] -------------------

Case pack_qkv(const CaseRequest& request, int64_t world, DType dtype, Values values = Values::finite) {
  const int64_t rows = tokens(request, 4096), heads = 24, head_size = 128;
  const std::vector<int64_t> qkv = {rows, heads, head_size};
  return kPackQkv.make("ulysses-" + std::to_string(world), dtype,
                       {dense("q", qkv), dense("k", qkv), dense("v", qkv)},
                       {world, rows, heads / world, 3 * head_size}, values);
}

std::vector<Case> pack_qkv_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  for (int64_t world : {2, 4}) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(pack_qkv(request, world, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(pack_qkv(request, world, t));
    cases.push_back(pack_qkv(request, world, DType::bf16, Values::specials));
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.usp_merge_heads", &usp_merge_heads_cases);
DFUSE_CLI_CASES("diffusion.joint_qkv_cat", &joint_qkv_cat_cases);
DFUSE_CLI_CASES("diffusion.pack_qkv_destination_major", &pack_qkv_cases);

}  // namespace dfuse::cli
