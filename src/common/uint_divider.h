// Division of a 32-bit index by a divisor fixed at launch, as a multiply-high, an add and a shift
// instead of the dozen instructions of a general 32-bit division: for the block-uniform index
// arithmetic at the top of the row-wise kernel. Exact for divisors in [1, 2^31] and numerators below
// 2^31 (Granlund and Montgomery's round-up method: with s = ceil(log2 d) and
// m = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, m) + n) >> s).
#pragma once

#include <cstdint>
#include <string>

#include "dfuse/core/dtype.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

class UintDivider {
 public:
  UintDivider() = default;
  explicit UintDivider(uint32_t d) : d_(d) {
    if (d == 0 || d > (uint32_t(1) << 31))
      throw InvalidArgument("UintDivider: divisor " + std::to_string(d) + " outside [1, 2^31]");
    while (s_ < 31 && (uint32_t(1) << s_) < d) ++s_;
    m_ = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s_) - d)) / d + 1);
  }
  DFUSE_HD uint32_t divisor() const { return d_; }
  DFUSE_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, m_);
#else
    const uint32_t hi = uint32_t((uint64_t(n) * m_) >> 32);
#endif
    return (hi + n) >> s_;
  }
  DFUSE_HD uint32_t mod(uint32_t n, uint32_t quotient) const { return n - quotient * d_; }

 private:
  uint32_t d_ = 1, m_ = 1, s_ = 0;
};

}  // namespace dfuse::detail
