// diffusion.hunyuan_qkv_rope_pack: the CUDA entry, the joint-QKV epilogue kernel
// (ops/rope/joint_qkv_epilogue.cu). Contract and arithmetic: ops/rope/hunyuan_qkv_rope_pack.h.
#include "common/entries.h"
#include "ops/rope/hunyuan_qkv_rope_pack.h"

namespace dfuse::detail {
namespace {

DFUSE_REGISTER_ENTRY(cuda, "hunyuan_qkv_rope_pack", &joint_qkv_cuda);

}  // namespace
}  // namespace dfuse::detail
