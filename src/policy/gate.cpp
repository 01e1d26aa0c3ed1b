#include "dfuse/policy/gate.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "dfuse/core/error.h"
#include "common/text_table.h"

namespace dfuse {
namespace {

constexpr const char* kKillSwitchVariable = "DFUSE_DISABLE_OPS";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// "diffusion.layernorm_modulate" -> "layernorm_modulate": the kill switch accepts both.
std::string_view bare_op_name(std::string_view op) {
  const auto dot = op.find('.');
  return dot == std::string_view::npos ? op : op.substr(dot + 1);
}

// Signatures are built on every gated call: append digits in place, without temporaries.
void append_int(std::string& key, int64_t value) {
  char text[24];
  key.append(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void append_dims(std::string& key, const TensorView& t, int64_t (TensorView::*dim_value)(int) const) {
  key += '[';
  for (int d = 0; d < t.dim(); ++d) {
    if (d > 0) key += ',';
    append_int(key, (t.*dim_value)(d));
  }
  key += ']';
}

// Element `i` as an unsigned integer of the element's width.
uint64_t element_bits(const void* data, int64_t i, size_t bytes) {
  const auto* at = static_cast<const unsigned char*>(data) + i * int64_t(bytes);
  switch (bytes) {
    case 1: return *at;
    case 2: { uint16_t v; std::memcpy(&v, at, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, at, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, at, 8); return v; }
  }
}

std::string hex_bits(uint64_t bits, size_t bytes) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%0*llx", int(2 * bytes), static_cast<unsigned long long>(bits));
  return text;
}

}  // namespace

// ---- Signature ------------------------------------------------------------------------------

Signature::Signature(std::string op) : op_(std::move(op)), key_(op_) { key_.reserve(256); }

// "bf16[2,3,4]s[12,4,1]a16@cuda:0": everything about a tensor an eager dispatch may look at.
Signature& Signature::add(const TensorView& t) {
  key_ += ' ';
  key_ += dtype_name(t.dtype());
  append_dims(key_, t, &TensorView::size);
  key_ += 's';
  append_dims(key_, t, &TensorView::stride);
  key_ += 'a';
  append_int(key_, t.alignment());
  key_ += t.device().is_cuda() ? "@cuda:" : "@host";
  if (t.device().is_cuda()) append_int(key_, t.device().index);
  return *this;
}

Signature& Signature::add_scalar(std::string_view name, double value) {
  // Shortest round-trip form: two scalars share a key only when they are the same double.
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  key_ += ' ';
  key_ += name;
  key_ += '=';
  key_.append(text, end);
  return *this;
}

Signature& Signature::set_sm(int major, int minor) {
  key_ += " sm_";
  append_int(key_, major);
  append_int(key_, minor);
  return *this;
}

std::string_view gate_state_name(GateState s) {
  switch (s) {
    case GateState::unverified: return "unverified";
    case GateState::verifying: return "verifying";
    case GateState::verified: return "verified";
    case GateState::disabled: return "disabled";
  }
  return "invalid";
}

// ---- Gate -----------------------------------------------------------------------------------

Gate::Gate(std::string_view kill_switch) {
  while (!kill_switch.empty()) {
    const auto comma = kill_switch.find(',');
    const std::string_view name = trim(kill_switch.substr(0, comma));
    if (name == "all") kill_all_ = true;
    else if (!name.empty()) killed_ops_.emplace_back(name);
    if (comma == std::string_view::npos) break;
    kill_switch.remove_prefix(comma + 1);
  }
}

Gate& Gate::global() {
  // A function-local static: the environment is read once, on first use, thread-safely.
  static Gate gate([] {
    const char* value = std::getenv(kKillSwitchVariable);
    return std::string_view(value ? value : "");
  }());
  return gate;
}

bool Gate::killed(std::string_view op) const {
  if (kill_all_) return true;
  for (const auto& name : killed_ops_) {
    if (name == op || name == bare_op_name(op)) return true;
  }
  return false;
}

GateDecision Gate::decide(const Signature& sig, bool capturing) {
  std::lock_guard lock(mu_);
  Slot& slot = slots_.try_emplace(sig.key(), sig.op(), Slot{}).first->second.second;
  if (slot.state != GateState::disabled && killed(sig.op())) {
    slot.state = GateState::disabled;
    slot.reason = std::string("kill switch (") + kKillSwitchVariable + ")";
    ++counters_[sig.op()].fallbacks;
  }
  switch (slot.state) {
    case GateState::verified: return GateDecision::run_fused;
    case GateState::disabled:
    case GateState::verifying: return GateDecision::run_eager;
    case GateState::unverified: break;
  }
  // Verification syncs the host and runs the eager chain; inside graph capture that would
  // break the capture, so an unverified signature stays on the eager chain there.
  if (capturing) return GateDecision::run_eager;
  slot.state = GateState::verifying;
  ++counters_[sig.op()].verifications;
  return GateDecision::verify;
}

void Gate::report_match(const Signature& sig) {
  std::lock_guard lock(mu_);
  Slot& slot = slots_.try_emplace(sig.key(), sig.op(), Slot{}).first->second.second;
  // Disabled is final: a late match must not revive a signature that already failed.
  if (slot.state != GateState::disabled) slot.state = GateState::verified;
}

void Gate::report_mismatch(const Signature& sig, std::string reason) {
  std::lock_guard lock(mu_);
  Slot& slot = slots_.try_emplace(sig.key(), sig.op(), Slot{}).first->second.second;
  if (slot.state == GateState::disabled) return;  // keep the first reason
  slot.state = GateState::disabled;
  slot.reason = std::move(reason);
  ++counters_[sig.op()].fallbacks;
}

void Gate::count(const Signature& sig, bool fused) {
  std::lock_guard lock(mu_);
  Slot& slot = slots_.try_emplace(sig.key(), sig.op(), Slot{}).first->second.second;
  OpCounters& op = counters_[sig.op()];
  if (fused) {
    ++slot.fused_calls;
    ++op.fused_calls;
  } else {
    ++slot.eager_calls;
    ++op.eager_calls;
  }
}

void Gate::run(const Signature& sig, bool capturing, const std::function<void()>& fused,
               const std::function<void()>& eager, const std::function<std::string()>& verify) {
  const GateDecision decision = decide(sig, capturing);
  if (decision == GateDecision::run_eager) {
    eager();
    count(sig, false);
    return;
  }
  std::string failure;
  try {
    if (decision == GateDecision::run_fused) {
      fused();
      count(sig, true);
      return;
    }
    const std::string mismatch = verify();
    if (mismatch.empty()) {
      report_match(sig);
      count(sig, true);
      return;
    }
    failure = "mismatch: " + mismatch;
  } catch (const std::exception& e) {
    failure = std::string("exception: ") + e.what();
  } catch (...) {
    failure = "exception: (not a std::exception)";
  }
  // The fused kernel may have written part or all of the output; the eager chain rewrites it.
  report_mismatch(sig, std::move(failure));
  eager();
  count(sig, false);
}

GateState Gate::state(const Signature& sig) const {
  std::lock_guard lock(mu_);
  const auto it = slots_.find(sig.key());
  return it == slots_.end() ? GateState::unverified : it->second.second.state;
}

std::vector<GateEntry> Gate::entries() const {
  std::lock_guard lock(mu_);
  std::vector<GateEntry> result;
  result.reserve(slots_.size());
  for (const auto& [key, op_and_slot] : slots_) {
    const auto& [op, slot] = op_and_slot;
    result.push_back({op, key, slot.state, slot.reason, slot.fused_calls, slot.eager_calls});
  }
  return result;
}

OpCounters Gate::counters(std::string_view op) const {
  std::lock_guard lock(mu_);
  const auto it = counters_.find(op);
  return it == counters_.end() ? OpCounters{} : it->second;
}

std::string Gate::report() const {
  std::vector<std::vector<std::string>> rows;
  for (const GateEntry& e : entries()) {
    rows.push_back({e.op, std::string(gate_state_name(e.state)), std::to_string(e.fused_calls),
                    std::to_string(e.eager_calls), e.reason.empty() ? "-" : e.reason, e.signature});
  }
  std::string text;
  if (kill_all_) {
    text += "kill switch: all ops\n";
  } else if (!killed_ops_.empty()) {
    std::vector<std::string_view> names(killed_ops_.begin(), killed_ops_.end());
    text += "kill switch: " + detail::join_names(names) + "\n";
  }
  return text + detail::format_table({"op", "state", "fused", "eager", "reason", "signature"}, rows);
}

void Gate::reset() {
  std::lock_guard lock(mu_);
  slots_.clear();
  counters_.clear();
}

// ---- bitwise comparison ---------------------------------------------------------------------

std::string describe_bitwise_mismatch(const void* fused, const void* eager, DType dtype, int64_t n) {
  const size_t bytes = dtype_size(dtype);
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) {
    throw InvalidArgument("describe_bitwise_mismatch: dtype " + std::string(dtype_name(dtype)) + " has " +
                          std::to_string(bytes) + "-byte elements; valid sizes: 1, 2, 4, 8");
  }
  if (n < 0) throw InvalidArgument("describe_bitwise_mismatch: negative element count " + std::to_string(n));
  if (n > 0 && (fused == nullptr || eager == nullptr)) {
    throw InvalidArgument("describe_bitwise_mismatch: null buffer for " + std::to_string(n) + " elements");
  }
  int64_t differing = 0;
  int64_t first = -1;
  uint64_t first_fused = 0, first_eager = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Integer comparison, so -0/+0 and NaN payloads count as differences.
    const uint64_t a = element_bits(fused, i, bytes);
    const uint64_t b = element_bits(eager, i, bytes);
    if (a == b) continue;
    if (differing++ == 0) {
      first = i;
      first_fused = a;
      first_eager = b;
    }
  }
  if (differing == 0) return "";
  return std::to_string(differing) + " of " + std::to_string(n) + " elements differ; first at flat index " +
         std::to_string(first) + ": fused " + hex_bits(first_fused, bytes) + " eager " +
         hex_bits(first_eager, bytes);
}

}  // namespace dfuse
