// diffusion.qwen_qkv_epilogue: the CUDA entry, the joint-QKV epilogue kernel
// (ops/rope/joint_qkv_epilogue.cu). Contract and arithmetic: ops/rope/qwen_qkv_epilogue.h.
#include "common/entries.h"
#include "ops/rope/qwen_qkv_epilogue.h"

namespace dfuse::detail {
namespace {

DFUSE_REGISTER_ENTRY(cuda, "qwen_qkv_epilogue", &joint_qkv_cuda);

}  // namespace
}  // namespace dfuse::detail
