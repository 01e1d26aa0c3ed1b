// Cases for the data-movement family: usp_merge_heads (the Ulysses head merge), joint_qkv_cat
// (image + text tokens, separate or slices of one packed QKV projection) and
// pack_qkv_destination_major (2 and 4 ranks), against the eager copy replicas; the varlen pack,
// segmented pack and scatter over the valid tokens of a padded batch (their index operands hold
// valid indices, int64 and int32), against the eager index_select / index_copy_ chains. Sizes are
// fixed by the models; quick runs (a slow host) use few tokens.
#include <random>

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

// The three outputs of a q, k, v op are the slices of one dense [3, ...] case output.
TensorView qkv_slice(const TensorView& out, int index) {
  const TensorView slice = out.narrow(0, index, 1);
  return slice.restrided(slice.sizes() + 1, slice.strides() + 1, slice.dim() - 1);
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

// inputs = {q, k, v, indices}.
const CaseOp kVarlenPackQkv{
    "diffusion.varlen_pack_qkv",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      varlen_pack_qkv({in[0], in[1], in[2]}, in[3], {qkv_slice(out, 0), qkv_slice(out, 1), qkv_slice(out, 2)}, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      for (int i = 0; i < 3; ++i) eager::index_select_tokens_chain(in[i], in[3], qkv_slice(out, i), s);
    },
};

// inputs = {prefix.q, prefix.k, prefix.v, main.q, main.k, main.v, indices}.
const CaseOp kVarlenPackSegmentedQkv{
    "diffusion.varlen_pack_segmented_qkv",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      varlen_pack_segmented_qkv({in[0], in[1], in[2]}, {in[3], in[4], in[5]}, in[6],
                                {qkv_slice(out, 0), qkv_slice(out, 1), qkv_slice(out, 2)}, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      for (int i = 0; i < 3; ++i)
        eager::cat_index_select_tokens_chain(in[i], in[i + 3], in[6], qkv_slice(out, i), s);
    },
};

// inputs = {x, inv_indices}.
const CaseOp kVarlenScatterToPadded{
    "diffusion.varlen_scatter_to_padded",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      varlen_scatter_to_padded(in[0], in[1], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      eager::scatter_tokens_to_padded_chain(in[0], in[1], out, s);
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

// ---- varlen: the valid tokens of a padded batch ------------------------------------------------

// A padded batch of `batch` sequences of `prefix + tokens` positions, `heads` x `head_dim` each
// (prefix: the text tokens in front of the segmented pack's main tokens; the other ops see one
// sequence of prefix + tokens).
struct VarlenShape {
  std::string name;
  int64_t batch, prefix, tokens, heads, head_dim;
  bool scattered;  // valid tokens anywhere (a random subset); else each sequence's leading ones
};

// FLUX.1 (512 text + 4096 image tokens, 24 x 128) and Wan 2.1 14B (75600 tokens, 40 x 128, no
// joint text tokens: the segmented pack's empty prefix) as a padded batch of two, the second
// sequence half as long (25% padding); an odd shape with a quarter of its tokens dropped at random.
std::vector<VarlenShape> varlen_shapes(const CaseRequest& request) {
  std::vector<VarlenShape> shapes = {{"flux.1 padded", 2, 512, tokens(request, 4096), 24, 128, false},
                                     {"wan2.1-14b padded", 2, 0, tokens(request, 75600), 40, 128, false}};
  if (request.purpose == Purpose::verify) shapes.push_back({"odd", 3, 5, 19, 3, 5, true});
  return shapes;
}

// The sorted positions of the valid tokens among the batch * (prefix + tokens) padded ones.
std::vector<int64_t> kept_tokens(const VarlenShape& s) {
  const int64_t sequence = s.prefix + s.tokens;
  std::vector<int64_t> kept;
  std::mt19937_64 random(s.batch * 1000003 + sequence);
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t length = b + 1 == s.batch && s.batch > 1 ? sequence / 2 : sequence;
    for (int64_t t = 0; t < sequence; ++t) {
      const bool valid = s.scattered ? random() % 4 != 0 : t < length;
      if (valid) kept.push_back(b * sequence + t);
    }
  }
  return kept;
}

// inv_indices of the padded positions: each valid token's place in `kept`, -1 for padding.
std::vector<int64_t> inverse_indices(const std::vector<int64_t>& kept, int64_t padded) {
  std::vector<int64_t> inverse(size_t(padded), -1);
  for (size_t j = 0; j < kept.size(); ++j) inverse[size_t(kept[j])] = int64_t(j);
  return inverse;
}

std::string index_label(const std::string& name, DType index_dtype) {
  return name + " " + std::string(dtype_name(index_dtype)) + " indices";
}

// A pack reads only the rows it gathers (as many as it writes) and the indices.
int64_t gathered_bytes(const Case& c, DType index_dtype) {
  return c.out_numel() * int64_t(dtype_size(c.dtype)) + c.inputs.back().numel() * int64_t(dtype_size(index_dtype));
}

// The case on every dtype (verify; and bf16 with NaN/inf/-0, copied bit for bit), or bf16 (bench),
// with int64 and int32 indices.
template <typename MakeCase>
std::vector<Case> varlen_cases(const CaseRequest& request, MakeCase make) {
  std::vector<Case> cases;
  for (const VarlenShape& s : varlen_shapes(request)) {
    for (DType index_dtype : {DType::i64, DType::i32}) {
      if (request.purpose == Purpose::bench || index_dtype == DType::i32) {
        cases.push_back(make(s, DType::bf16, index_dtype, Values::finite));
        continue;
      }
      for (DType t : kCaseDtypes) cases.push_back(make(s, t, index_dtype, Values::finite));
      cases.push_back(make(s, DType::bf16, index_dtype, Values::specials));
    }
  }
  for (Case& c : cases) c.eager_on_host = true;  // the chains gather on the host (src/eager/varlen.cpp)
  return cases;
}

// ---- varlen_pack_qkv: q, k, v [B, S, H, D], indices [n] -> [3, n, H, D] -------------------------

std::vector<Case> varlen_pack_qkv_cases(const CaseRequest& request) {
  return varlen_cases(request, [](const VarlenShape& s, DType dtype, DType index_dtype, Values values) {
    const std::vector<int64_t> x = {s.batch, s.prefix + s.tokens, s.heads, s.head_dim};
    std::vector<int64_t> kept = kept_tokens(s);
    const int64_t n = int64_t(kept.size());
    Case c = kVarlenPackQkv.make(index_label(s.name, index_dtype), dtype,
                                 {dense("q", x), dense("k", x), dense("v", x),
                                  index_list("indices", std::move(kept), index_dtype)},
                                 {3, n, s.heads, s.head_dim}, values);
    c.input_bytes_read = gathered_bytes(c, index_dtype);
    return c;
  });
}

// ---- varlen_pack_segmented_qkv: prefix [B, Sp, H, D], main [B, Sm, H, D] -> [3, n, H, D] ----------

std::vector<Case> varlen_pack_segmented_qkv_cases(const CaseRequest& request) {
  return varlen_cases(request, [](const VarlenShape& s, DType dtype, DType index_dtype, Values values) {
    const std::vector<int64_t> prefix = {s.batch, s.prefix, s.heads, s.head_dim};
    const std::vector<int64_t> main = {s.batch, s.tokens, s.heads, s.head_dim};
    std::vector<int64_t> kept = kept_tokens(s);
    const int64_t n = int64_t(kept.size());
    Case c = kVarlenPackSegmentedQkv.make(
        index_label(s.name, index_dtype), dtype,
        {dense("prefix.q", prefix), dense("prefix.k", prefix), dense("prefix.v", prefix), dense("main.q", main),
         dense("main.k", main), dense("main.v", main), index_list("indices", std::move(kept), index_dtype)},
        {3, n, s.heads, s.head_dim}, values);
    c.input_bytes_read = gathered_bytes(c, index_dtype);
    return c;
  });
}

// ---- varlen_scatter_to_padded: x [n, H, D], inv_indices [B * S] -> [B, S, H, D] -------------------

std::vector<Case> varlen_scatter_to_padded_cases(const CaseRequest& request) {
  return varlen_cases(request, [](const VarlenShape& s, DType dtype, DType index_dtype, Values values) {
    const int64_t sequence = s.prefix + s.tokens;
    const std::vector<int64_t> kept = kept_tokens(s);
    return kVarlenScatterToPadded.make(
        index_label(s.name, index_dtype), dtype,
        {dense("x", {int64_t(kept.size()), s.heads, s.head_dim}),
         index_list("inv_indices", inverse_indices(kept, s.batch * sequence), index_dtype)},
        {s.batch, sequence, s.heads, s.head_dim}, values);
  });
}

}  // namespace

DFUSE_CLI_CASES("diffusion.usp_merge_heads", &usp_merge_heads_cases);
DFUSE_CLI_CASES("diffusion.joint_qkv_cat", &joint_qkv_cat_cases);
DFUSE_CLI_CASES("diffusion.pack_qkv_destination_major", &pack_qkv_cases);
DFUSE_CLI_CASES("diffusion.varlen_pack_qkv", &varlen_pack_qkv_cases);
DFUSE_CLI_CASES("diffusion.varlen_pack_segmented_qkv", &varlen_pack_segmented_qkv_cases);
DFUSE_CLI_CASES("diffusion.varlen_scatter_to_padded", &varlen_scatter_to_padded_cases);

}  // namespace dfuse::cli
