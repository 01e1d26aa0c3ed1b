// The first-sight verification Gate: states, decisions, run(), kill switch, signatures,
// counters, reporting, thread-safety and the bitwise comparison it relies on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/policy/gate.h"

namespace dfuse {
namespace {

constexpr const char* kOp = "diffusion.layernorm_modulate";

// A small aligned host buffer with a TensorView over it, as a call site would describe its input.
struct HostTensor {
  alignas(16) uint16_t data[64] = {};
  TensorView view() { return TensorView(data, DType::bf16, {2, 3, 4}); }
};

Signature signature_of(HostTensor& t, std::string op = kOp) {
  return Signature(std::move(op)).add(t.view()).add_scalar("eps", 1e-6).set_sm(9, 0);
}

// Records which of run()'s callbacks ran, and writes distinct values into one output slot.
struct Calls {
  int fused = 0, eager = 0, verify = 0;
  int output = 0;
};

void run_once(Gate& gate, const Signature& sig, Calls& calls, bool capturing = false,
              std::string verify_result = "") {
  gate.run(
      sig, capturing,
      [&] {
        ++calls.fused;
        calls.output = 1;
      },
      [&] {
        ++calls.eager;
        calls.output = 2;
      },
      [&] {
        ++calls.verify;
        calls.output = 1;
        return verify_result;
      });
}

GateEntry only_entry(const std::vector<GateEntry>& entries) {
  EXPECT_EQ(entries.size(), 1u);
  return entries.front();
}

TEST(PolicyGate, FirstSightVerifiesThenRunsFused) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  EXPECT_EQ(gate.state(sig), GateState::unverified);
  EXPECT_EQ(gate.decide(sig, false), GateDecision::verify);
  EXPECT_EQ(gate.state(sig), GateState::verifying);
  gate.report_match(sig);
  EXPECT_EQ(gate.state(sig), GateState::verified);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gate.decide(sig, false), GateDecision::run_fused);
  EXPECT_EQ(gate.counters(kOp).verifications, 1u);
  EXPECT_EQ(gate.counters(kOp).fallbacks, 0u);
}

TEST(PolicyGate, MismatchSendsTheSignatureToEagerForGoodWithItsReason) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  ASSERT_EQ(gate.decide(sig, false), GateDecision::verify);
  gate.report_mismatch(sig, "3 of 24 elements differ");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gate.decide(sig, false), GateDecision::run_eager);
  // Neither a late match nor a second mismatch changes the outcome or the first reason.
  gate.report_match(sig);
  gate.report_mismatch(sig, "another reason");
  EXPECT_EQ(gate.state(sig), GateState::disabled);
  EXPECT_EQ(gate.decide(sig, false), GateDecision::run_eager);

  const GateEntry entry = only_entry(gate.entries());
  EXPECT_EQ(entry.op, kOp);
  EXPECT_EQ(entry.signature, sig.text());
  EXPECT_EQ(entry.state, GateState::disabled);
  EXPECT_EQ(entry.reason, "3 of 24 elements differ");
  EXPECT_EQ(gate.counters(kOp).fallbacks, 1u);
  const std::string report = gate.report();
  EXPECT_NE(report.find("disabled"), std::string::npos) << report;
  EXPECT_NE(report.find("3 of 24 elements differ"), std::string::npos) << report;
  EXPECT_NE(report.find(sig.text()), std::string::npos) << report;
}

TEST(PolicyGate, RunVerifiesOnceThenRunsOnlyTheFusedKernel) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  Calls calls;
  run_once(gate, sig, calls);
  EXPECT_EQ(calls.verify, 1);
  EXPECT_EQ(calls.fused, 0);
  EXPECT_EQ(calls.eager, 0);
  EXPECT_EQ(gate.state(sig), GateState::verified);
  run_once(gate, sig, calls);
  run_once(gate, sig, calls);
  EXPECT_EQ(calls.verify, 1);
  EXPECT_EQ(calls.fused, 2);
  EXPECT_EQ(calls.eager, 0);
  EXPECT_EQ(calls.output, 1);
  const OpCounters counters = gate.counters(kOp);
  EXPECT_EQ(counters.fused_calls, 3u);  // the verified first call delivered the fused output
  EXPECT_EQ(counters.eager_calls, 0u);
  EXPECT_EQ(counters.verifications, 1u);
}

TEST(PolicyGate, RunMismatchRewritesTheOutputWithTheEagerChain) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  Calls calls;
  run_once(gate, sig, calls, false, "1 of 24 elements differ; first at flat index 7");
  EXPECT_EQ(calls.verify, 1);
  EXPECT_EQ(calls.eager, 1);
  EXPECT_EQ(calls.output, 2);
  EXPECT_EQ(gate.state(sig), GateState::disabled);
  EXPECT_EQ(only_entry(gate.entries()).reason, "mismatch: 1 of 24 elements differ; first at flat index 7");
  run_once(gate, sig, calls);
  EXPECT_EQ(calls.verify, 1);
  EXPECT_EQ(calls.fused, 0);
  EXPECT_EQ(calls.eager, 2);
  EXPECT_EQ(gate.counters(kOp).eager_calls, 2u);
  EXPECT_EQ(gate.counters(kOp).fallbacks, 1u);
}

TEST(PolicyGate, ExceptionFromTheFusedKernelDisablesAVerifiedSignature) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  Calls calls;
  run_once(gate, sig, calls);
  ASSERT_EQ(gate.state(sig), GateState::verified);
  int eager_runs = 0;
  gate.run(
      sig, false, [] { throw std::runtime_error("launch failed"); }, [&] { ++eager_runs; },
      [] { return std::string(); });
  EXPECT_EQ(eager_runs, 1);
  EXPECT_EQ(gate.state(sig), GateState::disabled);
  EXPECT_EQ(only_entry(gate.entries()).reason, "exception: launch failed");
  run_once(gate, sig, calls);
  EXPECT_EQ(calls.fused, 0);
  EXPECT_EQ(calls.eager, 1);
}

TEST(PolicyGate, ExceptionDuringVerificationDisablesAndFallsBack) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  int eager_runs = 0;
  gate.run(
      sig, false, [] {}, [&] { ++eager_runs; },
      []() -> std::string { throw Unsupported(kOp, "x.last_dim_stride", "x must be contiguous"); });
  EXPECT_EQ(eager_runs, 1);
  EXPECT_EQ(gate.state(sig), GateState::disabled);
  EXPECT_EQ(only_entry(gate.entries()).reason, "exception: x must be contiguous");
  EXPECT_EQ(gate.counters(kOp).eager_calls, 1u);
}

TEST(PolicyGate, CaptureNeverVerifiesAndLeavesTheSignatureUnverified) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  EXPECT_EQ(gate.decide(sig, true), GateDecision::run_eager);
  EXPECT_EQ(gate.state(sig), GateState::unverified);
  Calls calls;
  run_once(gate, sig, calls, true);
  EXPECT_EQ(calls.verify, 0);
  EXPECT_EQ(calls.eager, 1);
  EXPECT_EQ(gate.state(sig), GateState::unverified);
  EXPECT_EQ(gate.counters(kOp).verifications, 0u);
  // Outside capture the signature is still first sight.
  EXPECT_EQ(gate.decide(sig, false), GateDecision::verify);
}

TEST(PolicyGate, CaptureRunsFusedOnceVerified) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  Calls calls;
  run_once(gate, sig, calls);
  run_once(gate, sig, calls, true);
  EXPECT_EQ(calls.fused, 1);
  EXPECT_EQ(calls.eager, 0);
  EXPECT_EQ(gate.decide(sig, true), GateDecision::run_fused);
}

TEST(PolicyGate, CallersWaitOnTheEagerChainWhileAnotherThreadVerifies) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  ASSERT_EQ(gate.decide(sig, false), GateDecision::verify);
  EXPECT_EQ(gate.decide(sig, false), GateDecision::run_eager);
  EXPECT_EQ(gate.decide(sig, true), GateDecision::run_eager);
  EXPECT_EQ(gate.state(sig), GateState::verifying);
  gate.report_match(sig);
  EXPECT_EQ(gate.decide(sig, false), GateDecision::run_fused);
}

TEST(PolicyGateKillSwitch, MatchesBareAndFullNamesOnly) {
  Gate gate(" layernorm_modulate , diffusion.rmsnorm_scale_shift,,");
  EXPECT_TRUE(gate.killed("diffusion.layernorm_modulate"));
  EXPECT_TRUE(gate.killed("layernorm_modulate"));
  EXPECT_TRUE(gate.killed("diffusion.rmsnorm_scale_shift"));
  EXPECT_FALSE(gate.killed("diffusion.layernorm"));  // no prefix matching
  EXPECT_FALSE(gate.killed("diffusion.gate_residual"));
  EXPECT_FALSE(gate.killed(""));

  HostTensor t;
  const Signature killed = signature_of(t);
  const Signature alive = signature_of(t, "diffusion.gate_residual");
  Calls calls;
  run_once(gate, killed, calls);
  EXPECT_EQ(calls.verify, 0);
  EXPECT_EQ(calls.eager, 1);
  EXPECT_EQ(gate.state(killed), GateState::disabled);
  EXPECT_EQ(gate.decide(alive, false), GateDecision::verify);
  for (const GateEntry& e : gate.entries()) {
    if (e.op == kOp) {
      EXPECT_NE(e.reason.find("DFUSE_DISABLE_OPS"), std::string::npos) << e.reason;
    }
  }
  EXPECT_NE(gate.report().find("kill switch"), std::string::npos);
}

TEST(PolicyGateKillSwitch, AllDisablesEveryOp) {
  Gate gate("all");
  EXPECT_TRUE(gate.killed("diffusion.anything"));
  HostTensor t;
  const Signature sig = signature_of(t, "diffusion.anything");
  EXPECT_EQ(gate.decide(sig, false), GateDecision::run_eager);
  EXPECT_EQ(gate.state(sig), GateState::disabled);
  EXPECT_FALSE(Gate().killed("diffusion.anything"));
}

TEST(PolicyGateKillSwitch, GlobalGateReadsTheEnvironmentOnce) {
  // A fresh process, so that no earlier test has created the global gate yet.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("DFUSE_DISABLE_OPS", "layernorm_modulate", 1);
        const bool killed_at_first_use = Gate::global().killed(kOp);
        setenv("DFUSE_DISABLE_OPS", "gate_residual", 1);
        const bool reread = Gate::global().killed("diffusion.gate_residual");
        std::exit(killed_at_first_use && !reread && &Gate::global() == &Gate::global() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(PolicyGateSignature, EveryDispatchInputChangesTheKey) {
  HostTensor t;
  const int64_t sizes[] = {2, 3, 4};
  const int64_t row_major[] = {12, 4, 1};
  const int64_t permuted[] = {12, 1, 3};
  const auto key = [&](const TensorView& v, int sm_major = 9, double eps = 1e-6) {
    return Signature(kOp).add(v).add_scalar("eps", eps).set_sm(sm_major, 0).key();
  };
  const TensorView base(t.data, DType::bf16, sizes, row_major, 3);
  const std::string base_key = key(base);
  EXPECT_EQ(base_key, key(TensorView(t.data, DType::bf16, {2, 3, 4})));
  EXPECT_NE(base_key, key(TensorView(t.data, DType::bf16, sizes, permuted, 3)));
  EXPECT_NE(base_key, key(TensorView(t.data + 1, DType::bf16, sizes, row_major, 3)));  // alignment 2
  EXPECT_NE(base_key, key(TensorView(t.data, DType::f16, sizes, row_major, 3)));
  EXPECT_NE(base_key, key(TensorView(t.data, DType::bf16, {2, 4, 3})));
  EXPECT_NE(base_key, key(TensorView(t.data, DType::bf16, sizes, row_major, 3, Device::cuda(0))));
  EXPECT_NE(base_key, key(base, 10));
  EXPECT_NE(base_key, key(base, 9, 1e-5));
  Signature other_op("diffusion.rmsnorm_scale_shift");
  other_op.add(base).add_scalar("eps", 1e-6).set_sm(9, 0);
  EXPECT_NE(base_key, other_op.key());
  EXPECT_EQ(Signature(kOp).add(base).op(), kOp);
}

TEST(PolicyGateSignature, TextNamesEveryValue) {
  HostTensor t;
  const int64_t sizes[] = {2, 3, 4};
  const int64_t strides[] = {12, 1, 3};
  const Signature sig = Signature(kOp)
                            .add(TensorView(t.data, DType::bf16, sizes, strides, 3, Device::cuda(1)))
                            .add(TensorView(t.data + 1, DType::f32, {5}))
                            .add_scalar("eps", 1e-6)
                            .set_sm(9, 0);
  EXPECT_EQ(sig.text(), std::string(kOp) + " bf16[2,3,4]s[12,1,3]a16@cuda:1 f32[5]s[1]a2@host eps=1e-06 sm_90");
  EXPECT_EQ(Signature::signature_text(sig.key()), sig.text());
  EXPECT_THROW(Signature::signature_text(sig.key().substr(0, sig.key().size() - 1)), InvalidArgument);
}

TEST(PolicyGateSignature, SignaturesAreVerifiedIndependently) {
  Gate gate;
  HostTensor t;
  const int64_t sizes[] = {2, 3, 4};
  const int64_t row_major[] = {12, 4, 1};
  const Signature aligned = Signature(kOp).add(TensorView(t.data, DType::bf16, sizes, row_major, 3));
  const Signature misaligned = Signature(kOp).add(TensorView(t.data + 1, DType::bf16, sizes, row_major, 3));
  Calls calls;
  run_once(gate, aligned, calls, false, "mismatch");
  run_once(gate, misaligned, calls);
  EXPECT_EQ(gate.state(aligned), GateState::disabled);
  EXPECT_EQ(gate.state(misaligned), GateState::verified);
  EXPECT_EQ(gate.entries().size(), 2u);
  EXPECT_EQ(gate.counters(kOp).verifications, 2u);
  EXPECT_EQ(gate.counters(kOp).fallbacks, 1u);
}

TEST(PolicyGate, CountsPerSignatureAndPerOp) {
  Gate gate;
  HostTensor t;
  const Signature a = Signature(kOp).add(t.view());
  const Signature b = Signature(kOp).add(t.view()).set_sm(10, 0);
  const Signature other = Signature("diffusion.gate_residual").add(t.view());
  gate.count(a, true);
  gate.count(a, true);
  gate.count(a, false);
  gate.count(b, false);
  gate.count(other, true);
  const OpCounters op = gate.counters(kOp);
  EXPECT_EQ(op.fused_calls, 2u);
  EXPECT_EQ(op.eager_calls, 2u);
  EXPECT_EQ(gate.counters("diffusion.gate_residual").fused_calls, 1u);
  EXPECT_EQ(gate.counters("diffusion.never_seen").fused_calls, 0u);
  for (const GateEntry& e : gate.entries()) {
    if (e.signature == a.text()) {
      EXPECT_EQ(e.fused_calls, 2u);
      EXPECT_EQ(e.eager_calls, 1u);
    }
  }
  gate.reset();
  EXPECT_TRUE(gate.entries().empty());
  EXPECT_EQ(gate.counters(kOp).fused_calls, 0u);
}

TEST(PolicyGate, ReportIsAFixedWidthTable) {
  Gate gate;
  HostTensor t;
  const Signature verified = Signature(kOp).add(t.view());
  const Signature failed = Signature("diffusion.gate_residual").add(t.view());
  Calls calls;
  run_once(gate, verified, calls);
  run_once(gate, failed, calls, false, "2 of 24 elements differ");
  const std::string report = gate.report();
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = report.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(report.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 4u) << report;  // header, rule, two signatures
  for (const char* column : {"op", "state", "fused", "eager", "reason", "signature"}) {
    EXPECT_NE(lines[0].find(column), std::string::npos) << report;
  }
  const size_t state_column = lines[0].find("state");
  EXPECT_EQ(lines[2].substr(state_column, 8), "disabled") << report;  // map order: gate_residual first
  EXPECT_EQ(lines[3].substr(state_column, 8), "verified") << report;
  EXPECT_NE(lines[2].find("mismatch: 2 of 24 elements differ"), std::string::npos) << report;
}

TEST(PolicyGateThreads, ManyThreadsOnANewSignatureVerifyItExactlyOnce) {
  Gate gate;
  HostTensor t;
  const Signature sig = signature_of(t);
  constexpr int kThreads = 16;
  std::atomic<int> fused{0}, eager{0}, verify{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      gate.run(
          sig, false, [&] { ++fused; }, [&] { ++eager; },
          [&] {
            // Slow enough that the other threads arrive while this one is verifying.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            ++verify;
            return std::string();
          });
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(verify.load(), 1);
  EXPECT_EQ(verify + fused + eager, kThreads);
  EXPECT_EQ(gate.state(sig), GateState::verified);
  const OpCounters counters = gate.counters(kOp);
  EXPECT_EQ(counters.verifications, 1u);
  EXPECT_EQ(counters.fused_calls + counters.eager_calls, uint64_t(kThreads));
}

TEST(PolicyGateThreads, ConcurrentCallsOverSeveralSignaturesKeepConsistentCounts) {
  Gate gate;
  HostTensor t;
  std::vector<Signature> sigs;
  for (int sm = 0; sm < 4; ++sm) sigs.push_back(Signature(kOp).add(t.view()).set_sm(9, sm));
  constexpr int kThreads = 8, kCalls = 200;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (int c = 0; c < kCalls; ++c) {
        const Signature& sig = sigs[(i + c) % sigs.size()];
        // Signature 3 never matches: it must end disabled, the others verified.
        const bool matches = &sig != &sigs[3];
        gate.run(sig, false, [] {}, [] {}, [&] { return std::string(matches ? "" : "differs"); });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const OpCounters counters = gate.counters(kOp);
  EXPECT_EQ(counters.verifications, 4u);
  EXPECT_EQ(counters.fallbacks, 1u);
  EXPECT_EQ(counters.fused_calls + counters.eager_calls, uint64_t(kThreads * kCalls));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(gate.state(sigs[s]), GateState::verified);
  EXPECT_EQ(gate.state(sigs[3]), GateState::disabled);
}

TEST(PolicyGateBitwise, CountsSignedZeroDifferencesInTwoByteData) {
  uint16_t fused[16], eager[16];
  for (uint16_t i = 0; i < 16; ++i) fused[i] = eager[i] = uint16_t(0x3F80 + i);
  EXPECT_EQ(describe_bitwise_mismatch(fused, eager, DType::bf16, 16), "");
  fused[5] = 0x0000;  // +0
  eager[5] = 0x8000;  // -0: equal as numbers, different bits
  fused[11] = 0x7FC1;
  eager[11] = 0x7FC0;  // NaN payloads
  EXPECT_EQ(describe_bitwise_mismatch(fused, eager, DType::bf16, 16),
            "2 of 16 elements differ; first at flat index 5: fused 0x0000 eager 0x8000");
  // Only the first n elements are compared.
  EXPECT_EQ(describe_bitwise_mismatch(fused, eager, DType::bf16, 5), "");
}

TEST(PolicyGateBitwise, ComparesOneFourAndEightByteElements) {
  const uint8_t bytes_a[3] = {1, 2, 3}, bytes_b[3] = {1, 2, 4};
  EXPECT_EQ(describe_bitwise_mismatch(bytes_a, bytes_b, DType::f8_e4m3fn, 3),
            "1 of 3 elements differ; first at flat index 2: fused 0x03 eager 0x04");
  const float floats_a[2] = {0.0f, 1.0f}, floats_b[2] = {-0.0f, 1.0f};
  EXPECT_EQ(describe_bitwise_mismatch(floats_a, floats_b, DType::f32, 2),
            "1 of 2 elements differ; first at flat index 0: fused 0x00000000 eager 0x80000000");
  const int64_t longs_a[2] = {7, int64_t(0x0123456789ABCDEF)}, longs_b[2] = {7, 0};
  EXPECT_EQ(describe_bitwise_mismatch(longs_a, longs_b, DType::i64, 2),
            "1 of 2 elements differ; first at flat index 1: "
            "fused 0x0123456789abcdef eager 0x0000000000000000");
}

TEST(PolicyGateBitwise, RejectsANegativeCount) {
  const uint16_t a[1] = {0};
  EXPECT_THROW(describe_bitwise_mismatch(a, a, DType::bf16, -1), InvalidArgument);
  EXPECT_EQ(describe_bitwise_mismatch(nullptr, nullptr, DType::bf16, 0), "");
}

}  // namespace
}  // namespace dfuse
