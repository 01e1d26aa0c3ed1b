// Test cases of the joint-QKV epilogues (qwen_qkv_epilogue, hunyuan_qkv_rope_pack), run on any device:
// fresh random q, k, v of an image and a text stream, weights and tables; the eager chain and the
// fused op write into differently placed, poisoned joint outputs; every output bit is compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct JointQkvCase {
  std::string name;
  int64_t batch = 1, img_tokens = 9, txt_tokens = 5, heads = 2;
  bool packed = false;         // each stream's q, k, v are slices of one packed [B, S, 3 * H * 128] projection
  bool single_stream = false;  // the streams are the image and text token ranges of one q, k, v (shared weights)
  bool weights = true;         // RMSNorm modules with weights (elementwise_affine)
  int64_t offset = 0;          // inputs start this many elements into their storage (misaligned rows)
  bool specials = false;       // NaN / Inf / -0 / tiny values in the inputs
  bool strided_out = false;    // the joint outputs are the q, k, v slots of one [B, S, 3, H, 128] buffer
};

// Small shapes covering every layout and odd size: fast enough for the host in CI.
std::vector<JointQkvCase> small_joint_qkv_cases();
// Qwen-Image (24 x 128, 4096 image + 512 text tokens) and HunyuanVideo (24 x 128, 8190 + 256 tokens,
// packed and single-stream) shapes, and odd ones (heads 1, 3, 30; tokens 1, 7, 4097). For GPU runs.
std::vector<JointQkvCase> model_joint_qkv_cases();

// "" on a bitwise match with every element written, else what went wrong.
std::string run_qwen_qkv_epilogue_case(Device d, DType t, const JointQkvCase& c, uint64_t seed);
std::string run_hunyuan_qkv_rope_pack_case(Device d, DType t, const JointQkvCase& c, uint64_t seed);

}  // namespace dfuse::test
