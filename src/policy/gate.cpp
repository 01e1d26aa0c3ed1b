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

// The key's records, after the op name and a NUL: 'T' a tensor (dtype, rank, sizes, strides,
// alignment, device), 'S' a named scalar, 'M' the SM. Values are appended as raw bytes.
template <typename V>
void append_raw(std::string& key, V value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename V>
V read_raw(std::string_view& key) {
  V value{};
  if (key.size() < sizeof value) throw InvalidArgument("malformed signature key");
  std::memcpy(&value, key.data(), sizeof value);
  key.remove_prefix(sizeof value);
  return value;
}

void append_int(std::string& text, int64_t value) {
  char digits[24];
  text.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
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

Signature::Signature(std::string op) : op_(std::move(op)), key_(op_) {
  key_.reserve(op_.size() + 160);
  key_ += '\0';
}

Signature& Signature::add(const TensorView& t) {
  const int n = t.dim();
  key_ += 'T';
  append_raw(key_, uint8_t(t.dtype()));
  append_raw(key_, uint8_t(n));
  key_.append(reinterpret_cast<const char*>(t.sizes()), size_t(n) * sizeof(int64_t));
  key_.append(reinterpret_cast<const char*>(t.strides()), size_t(n) * sizeof(int64_t));
  append_raw(key_, uint8_t(t.alignment()));
  append_raw(key_, int16_t(t.device().is_cuda() ? t.device().index : -1));
  return *this;
}

Signature& Signature::add_scalar(std::string_view name, double value) {
  // The double's bits: two scalars share a key only when they are the same double.
  key_ += 'S';
  append_raw(key_, uint8_t(name.size()));
  key_.append(name.substr(0, 255));
  append_raw(key_, value);
  return *this;
}

Signature& Signature::set_sm(int major, int minor) {
  key_ += 'M';
  append_raw(key_, uint8_t(major));
  append_raw(key_, uint8_t(minor));
  return *this;
}

std::string Signature::signature_text(std::string_view key) {
  const auto nul = key.find('\0');
  std::string text(key.substr(0, nul));
  if (nul == std::string_view::npos) return text;
  key.remove_prefix(nul + 1);
  while (!key.empty()) {
    const char record = key.front();
    key.remove_prefix(1);
    text += ' ';
    if (record == 'T') {
      const auto dtype = DType(read_raw<uint8_t>(key));
      const int n = read_raw<uint8_t>(key);
      if (n > TensorView::kMaxDims) throw InvalidArgument("malformed signature key");
      int64_t dims[2 * TensorView::kMaxDims];
      for (int i = 0; i < 2 * n; ++i) dims[i] = read_raw<int64_t>(key);
      text += dtype_name(dtype);
      for (int part = 0; part < 2; ++part) {
        text += part == 0 ? "[" : "s[";
        for (int d = 0; d < n; ++d) {
          if (d > 0) text += ',';
          append_int(text, dims[part * n + d]);
        }
        text += ']';
      }
      text += 'a';
      append_int(text, read_raw<uint8_t>(key));
      const int device = read_raw<int16_t>(key);
      text += device < 0 ? "@host" : "@cuda:";
      if (device >= 0) append_int(text, device);
    } else if (record == 'S') {
      const size_t length = read_raw<uint8_t>(key);
      if (key.size() < length) throw InvalidArgument("malformed signature key");
      text += key.substr(0, length);
      key.remove_prefix(length);
      char digits[32];
      text += '=';
      text.append(digits, std::to_chars(digits, digits + sizeof digits, read_raw<double>(key)).ptr);
    } else if (record == 'M') {
      text += "sm_";
      append_int(text, read_raw<uint8_t>(key));
      append_int(text, read_raw<uint8_t>(key));
    } else {
      throw InvalidArgument("malformed signature key");
    }
  }
  return text;
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

Gate::SlotEntry& Gate::slot_of(const Signature& sig) {
  auto it = slots_.find(sig.key());
  if (it == slots_.end()) {
    OpCounters* op = &counters_.try_emplace(sig.op()).first->second;
    it = slots_.emplace(sig.key(), SlotEntry{sig.op(), Slot{}, op}).first;
  }
  return it->second;
}

GateDecision Gate::decide(const Signature& sig, bool capturing) {
  std::lock_guard lock(mu_);
  return decide_locked(slot_of(sig), capturing);
}

GateDecision Gate::decide_locked(SlotEntry& entry, bool capturing) {
  Slot& slot = entry.slot;
  if (slot.state != GateState::disabled && killed(entry.op)) {
    slot.state = GateState::disabled;
    slot.reason = std::string("kill switch (") + kKillSwitchVariable + ")";
    ++entry.op_counters->fallbacks;
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
  ++entry.op_counters->verifications;
  return GateDecision::verify;
}

void Gate::report_match(const Signature& sig) {
  std::lock_guard lock(mu_);
  Slot& slot = slot_of(sig).slot;
  // Disabled is final: a late match must not revive a signature that already failed.
  if (slot.state != GateState::disabled) slot.state = GateState::verified;
}

void Gate::report_mismatch(const Signature& sig, std::string reason) {
  std::lock_guard lock(mu_);
  SlotEntry& entry = slot_of(sig);
  if (entry.slot.state == GateState::disabled) return;  // keep the first reason
  entry.slot.state = GateState::disabled;
  entry.slot.reason = std::move(reason);
  ++entry.op_counters->fallbacks;
}

void Gate::count_locked(SlotEntry& entry, bool fused) {
  if (fused) {
    ++entry.slot.fused_calls;
    ++entry.op_counters->fused_calls;
  } else {
    ++entry.slot.eager_calls;
    ++entry.op_counters->eager_calls;
  }
}

void Gate::count(const Signature& sig, bool fused) {
  std::lock_guard lock(mu_);
  count_locked(slot_of(sig), fused);
}

void Gate::run(const Signature& sig, bool capturing, const std::function<void()>& fused,
               const std::function<void()>& eager, const std::function<std::string()>& verify) {
  // One lookup per call: the entry found here is counted after the call (map nodes stay put).
  SlotEntry* entry;
  GateDecision decision;
  {
    std::lock_guard lock(mu_);
    entry = &slot_of(sig);
    decision = decide_locked(*entry, capturing);
  }
  const auto count_call = [&](bool fused_call) {
    std::lock_guard lock(mu_);
    count_locked(*entry, fused_call);
  };
  if (decision == GateDecision::run_eager) {
    eager();
    count_call(false);
    return;
  }
  std::string failure;
  try {
    if (decision == GateDecision::run_fused) {
      fused();
      count_call(true);
      return;
    }
    const std::string mismatch = verify();
    if (mismatch.empty()) {
      report_match(sig);
      count_call(true);
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
  count_call(false);
}

GateState Gate::state(const Signature& sig) const {
  std::lock_guard lock(mu_);
  const auto it = slots_.find(sig.key());
  return it == slots_.end() ? GateState::unverified : it->second.slot.state;
}

std::vector<GateEntry> Gate::entries() const {
  std::lock_guard lock(mu_);
  std::vector<GateEntry> result;
  result.reserve(slots_.size());
  for (const auto& [key, entry] : slots_) {
    const Slot& slot = entry.slot;
    result.push_back({entry.op, Signature::signature_text(key), slot.state, slot.reason, slot.fused_calls,
                      slot.eager_calls});
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
