// dfuse policy: the first-sight verification Gate.
//
// A bit-exact kernel whose reference dispatch can change underneath it verifies itself: the
// first call for each signature runs both the fused kernel and the live eager chain and compares
// them bitwise. Match: the signature is verified for the process. Mismatch or exception: the
// signature falls back to the eager chain for good, with the reason recorded. No verification
// happens during CUDA graph capture: an unverified signature takes the eager chain there.
// A kill switch (environment variable DFUSE_DISABLE_OPS, a comma-separated list of op names, or
// "all") sends the named ops to the eager chain without verifying.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/core/tensor_view.h"

namespace dfuse {

// Everything an eager dispatch can depend on: op, dtypes, shapes, strides, alignment, device, SM.
// Built on every gated call, so the key is the values' raw bytes (no number formatting);
// text() renders it for reports, e.g. "op bf16[2,3,4]s[12,4,1]a16@cuda:0 eps=1e-06 sm_90".
class Signature {
 public:
  explicit Signature(std::string op);
  Signature& add(const TensorView& t);  // dtype, sizes, strides, alignment, device
  Signature& add_scalar(std::string_view name, double value);
  Signature& set_sm(int major, int minor);
  const std::string& op() const { return op_; }
  const std::string& key() const { return key_; }  // the map key: op, then the encoded values
  std::string text() const { return signature_text(key_); }
  bool operator<(const Signature& o) const { return key_ < o.key_; }

  // The readable form of a key.
  static std::string signature_text(std::string_view key);

 private:
  std::string op_;
  std::string key_;
};

enum class GateState : uint8_t {
  unverified,  // never seen outside graph capture
  verifying,   // another thread is verifying it now
  verified,    // fused output matched the eager chain bitwise
  disabled,    // mismatch, exception, or kill switch: eager chain for good
};
std::string_view gate_state_name(GateState s);

// What a call should do now.
enum class GateDecision : uint8_t {
  run_fused,   // verified: fused kernel only
  verify,      // first sight: run both, compare, then report_match / report_mismatch
  run_eager,   // disabled, killed, being verified elsewhere, or unverified during capture
};

struct GateEntry {
  std::string op;
  std::string signature;
  GateState state = GateState::unverified;
  std::string reason;  // why disabled, when disabled
  uint64_t fused_calls = 0;
  uint64_t eager_calls = 0;
};

struct OpCounters {
  uint64_t fused_calls = 0;
  uint64_t eager_calls = 0;
  uint64_t verifications = 0;
  uint64_t fallbacks = 0;  // signatures disabled
};

class Gate {
 public:
  // Reads the kill switch from `kill_switch` ("" = none). The global gate reads the
  // DFUSE_DISABLE_OPS environment variable once.
  explicit Gate(std::string_view kill_switch = "");
  static Gate& global();

  // Thread-safe. `capturing`: the call is being recorded into a CUDA graph.
  GateDecision decide(const Signature& sig, bool capturing);
  void report_match(const Signature& sig);
  void report_mismatch(const Signature& sig, std::string reason);
  // Counts a call that ran the fused kernel (true) or the eager chain (false).
  void count(const Signature& sig, bool fused);

  // Runs one call through the gate. `fused` computes into the real output; `eager` computes
  // the reference into the real output; `verify` runs both (fused into the real output,
  // eager into a scratch) and returns "" on a bitwise match or the mismatch description.
  // An exception from `fused` or `verify` disables the signature and falls back to `eager`.
  void run(const Signature& sig, bool capturing, const std::function<void()>& fused,
           const std::function<void()>& eager, const std::function<std::string()>& verify);

  bool killed(std::string_view op) const;
  GateState state(const Signature& sig) const;
  std::vector<GateEntry> entries() const;
  OpCounters counters(std::string_view op) const;
  // A table of every signature seen, its state, reason and call counts.
  std::string report() const;
  void reset();  // forget everything (tests; not while calls run)

 private:
  struct Slot {
    GateState state = GateState::unverified;
    std::string reason;
    uint64_t fused_calls = 0;
    uint64_t eager_calls = 0;
  };
  bool kill_all_ = false;
  std::vector<std::string> killed_ops_;
  mutable std::mutex mu_;
  struct SlotEntry {
    std::string op;
    Slot slot;
    OpCounters* op_counters;  // counters_[op]; map nodes stay put until reset()
  };
  SlotEntry& slot_of(const Signature& sig);  // with mu_ held, as the two below
  GateDecision decide_locked(SlotEntry& entry, bool capturing);
  void count_locked(SlotEntry& entry, bool fused);
  std::map<std::string, SlotEntry> slots_;  // key -> slot
  std::map<std::string, OpCounters, std::less<>> counters_;
};

// Bitwise comparison of two host buffers of `n` elements of `dtype`. Returns "" when equal,
// otherwise "K of N elements differ; first at flat index i: fused 0x.. eager 0x..".
std::string describe_bitwise_mismatch(const void* fused, const void* eager, DType dtype, int64_t n);

}  // namespace dfuse
