#include "dfuse/cli_bench.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>

#include "dfuse/cli_harness.h"
#include "dfuse/cli_json.h"
#include "common/text_table.h"

namespace dfuse::cli {

double median(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

namespace {

// The L2 size stands in for "cache" on the host, which reports none.
constexpr int64_t kHostCacheBytes = int64_t(64) << 20;
constexpr size_t kMinCopyBytes = size_t(256) << 20;

struct BenchRow {
  std::string op, label, shape, dtype;
  int64_t bytes = 0;
  double fused_us = 0;
  double same_size_copy_us = 0;      // a device-to-device copy moving the case's bytes (half read, half written)
  std::optional<double> eager_us{};  // none when the eager chain is not timed (Case::eager_on_host)
  std::string error{};  // why the case could not run; empty when it ran
};

double gbps(int64_t bytes, double us) { return us > 0 ? double(bytes) / (us * 1e3) : 0.0; }

// The fused kernel's speed as a percentage of the same-size copy's (0 when the kernel's time is 0).
double percent_of_same_size_copy(const BenchRow& r) {
  return r.fused_us > 0 ? 100 * r.same_size_copy_us / r.fused_us : 0.0;
}

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

// Median time in microseconds of `iters` runs of `run(k)` after `warmup` untimed ones; k counts on
// across both, so rotating buffers keep rotating. Each run has its own timer and the runs are
// queued back to back, so a GPU sees no host gap between them.
double time_runs(Runtime& rt, int warmup, int iters, const std::function<void(int)>& run) {
  const Stream stream{};
  for (int i = 0; i < warmup; ++i) run(i);
  rt.synchronize(stream);
  std::vector<std::unique_ptr<Timer>> timers;
  for (int i = 0; i < iters; ++i) {
    timers.push_back(rt.make_timer());
    timers.back()->start(stream);
    run(warmup + i);
    timers.back()->stop(stream);
  }
  std::vector<double> us;
  for (auto& t : timers) us.push_back(t->elapsed_ms() * 1e3);
  return median(std::move(us));
}

// Buffer sets of one case, enough of them that cycling through them touches at least
// `rotate_bytes`: every run then reads its inputs from memory, not from the last run's cache.
struct RotatingSets {
  std::vector<std::vector<DeviceBuffer>> inputs;
  std::vector<DeviceBuffer> outputs;
  std::vector<std::vector<TensorView>> views;
  std::vector<TensorView> out_views;
};

RotatingSets make_sets(const Case& c, Device device, int64_t rotate_bytes, uint64_t seed) {
  const size_t out_bytes = size_t(c.out_numel()) * dtype_size(c.output_dtype());
  int64_t set_bytes = int64_t(out_bytes);
  for (const auto& operand : c.inputs)
    set_bytes += operand.storage_elements * int64_t(dtype_size(operand.dtype_in(c.dtype)));
  const int64_t count = std::max<int64_t>(1, (rotate_bytes + set_bytes - 1) / set_bytes);

  Runtime& rt = runtime(device);
  DeviceInputs first = upload_inputs(c, device, seed);
  RotatingSets sets;
  for (int64_t s = 0; s < count; ++s) {
    std::vector<DeviceBuffer> storage;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      if (s == 0) {
        storage.push_back(std::move(first.storage[k]));
        continue;
      }
      const DeviceBuffer& source = sets.inputs[0][k];
      storage.emplace_back(device, source.bytes());
      rt.copy_on_device(storage.back().data(), source.data(), source.bytes(), Stream{});
    }
    sets.views.push_back(input_views(c, storage));
    sets.inputs.push_back(std::move(storage));
    sets.outputs.emplace_back(device, out_bytes);
    sets.out_views.push_back(output_view(c, sets.outputs.back()));
  }
  rt.synchronize(Stream{});
  return sets;
}

// Device-to-device copy bandwidth in GB/s, counting the bytes read and the bytes written.
double copy_gbps(Runtime& rt, size_t bytes, int warmup, int iters) {
  DeviceBuffer source(rt.device(), bytes), destination(rt.device(), bytes);
  const double us = time_runs(
      rt, warmup, iters, [&](int) { rt.copy_on_device(destination.data(), source.data(), bytes, Stream{}); });
  return gbps(int64_t(2 * bytes), us);
}

// Median microseconds of a device-to-device copy of `bytes` / 2 bytes (so that it reads and writes `bytes` in
// all), rotating over buffer pairs that together hold at least `rotate_bytes`: what moving a case's bytes
// costs at its own size, where launch and ramp-up weigh more than in the large copy (a FLUX.1-sized copy
// reached 77% of the large copy's bandwidth on the H200).
double same_size_copy_us(Runtime& rt, int64_t bytes, int64_t rotate_bytes, int warmup, int iters) {
  const size_t half = size_t(std::max<int64_t>(bytes / 2, 1));
  const int64_t count = std::max<int64_t>(1, (rotate_bytes + bytes - 1) / std::max<int64_t>(bytes, 1));
  std::vector<DeviceBuffer> sources, destinations;
  for (int64_t k = 0; k < count; ++k) {
    sources.emplace_back(rt.device(), half);
    destinations.emplace_back(rt.device(), half);
  }
  return time_runs(rt, warmup, iters, [&](int k) {
    rt.copy_on_device(destinations[size_t(k % count)].data(), sources[size_t(k % count)].data(), half, Stream{});
  });
}

void write_json(const std::string& path, const DeviceInfo& info, const BenchOptions& options,
                size_t copy_bytes, double copy_bandwidth, const std::vector<BenchRow>& rows) {
  JsonWriter json;
  json.begin_object()
      .field("device", options.device.str())
      .field("device_name", info.name)
      .field("sm", std::to_string(info.sm_major) + "." + std::to_string(info.sm_minor))
      .field("iters", options.iters)
      .field("copy_bytes", int64_t(copy_bytes))
      .field("copy_gbps", copy_bandwidth);
  json.key("results").begin_array();
  for (const auto& r : rows) {
    json.begin_object()
        .field("op", r.op)
        .field("case", r.label)
        .field("shape", r.shape)
        .field("dtype", r.dtype)
        .field("bytes", r.bytes);
    if (!r.error.empty()) {
      json.field("error", r.error).end_object();
      continue;
    }
    json.field("fused_us", r.fused_us)
        .field("fused_gbps", gbps(r.bytes, r.fused_us))
        .field("fused_percent_of_copy", 100 * gbps(r.bytes, r.fused_us) / copy_bandwidth)
        .field("same_size_copy_us", r.same_size_copy_us)
        .field("fused_percent_of_same_size_copy", percent_of_same_size_copy(r));
    if (r.eager_us) {
      json.field("eager_us", *r.eager_us)
          .field("eager_gbps", gbps(r.bytes, *r.eager_us))
          .field("eager_percent_of_copy", 100 * gbps(r.bytes, *r.eager_us) / copy_bandwidth)
          .field("speedup", *r.eager_us / r.fused_us);
    }
    json.end_object();
  }
  json.end_array().end_object();
  std::ofstream file(path);
  file << json.str();
  if (!file) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int run_bench(const BenchOptions& options, std::ostream& out, std::ostream& progress) {
  Runtime& rt = runtime(options.device);
  const DeviceInfo info = rt.info();
  const int64_t cache_bytes = info.l2_bytes > 0 ? info.l2_bytes : kHostCacheBytes;
  const int64_t rotate_bytes = 2 * cache_bytes;
  const int warmup = std::max(2, options.iters / 10);

  std::vector<std::string> notes;
  std::vector<Case> cases =
      collect_cases(options.op, options.device, {Purpose::bench, shape_table(options.quick)}, notes);

  const size_t copy_bytes = std::max(kMinCopyBytes, size_t(4 * cache_bytes));
  progress << "copy bandwidth (" << (copy_bytes >> 20) << " MiB device to device) ...\n" << std::flush;
  const double copy_bandwidth = copy_gbps(rt, copy_bytes, warmup, options.iters);

  eager::Workspace workspace(options.device);
  std::vector<BenchRow> rows;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    BenchRow row{.op = short_op_name(c.op),
                 .label = c.label,
                 .shape = shape_str(c.out_sizes),
                 .dtype = std::string(dtype_name(c.dtype)),
                 .bytes = c.min_bytes()};
    progress << "[" << i + 1 << "/" << cases.size() << "] " << row.op << " " << row.label << " " << row.dtype
             << " ...\n"
             << std::flush;
    try {
      RotatingSets sets = make_sets(c, options.device, rotate_bytes, 0x5EED + i);
      const int count = int(sets.outputs.size());
      row.fused_us = time_runs(rt, warmup, options.iters, [&](int k) {
        c.fused(sets.views[k % count], sets.out_views[k % count], Stream{});
      });
      row.same_size_copy_us = same_size_copy_us(rt, row.bytes, rotate_bytes, warmup, options.iters);
      if (!(c.eager_on_host && options.device.is_cuda()))
        row.eager_us = time_runs(rt, warmup, options.iters, [&](int k) {
          c.eager(sets.views[k % count], sets.out_views[k % count], workspace, Stream{});
        });
    } catch (const std::exception& e) {
      row.error = e.what();
    }
    rows.push_back(std::move(row));
  }

  std::vector<std::vector<std::string>> table;
  std::vector<std::string> errors;
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      errors.push_back(r.op + " " + r.label + " " + r.dtype + ": " + r.error);
      table.push_back({r.op, r.label, r.shape, r.dtype, fixed(double(r.bytes) / 1e6, 1), "error"});
      continue;
    }
    const double fused_gbps = gbps(r.bytes, r.fused_us);
    const std::string untimed = "host ref";
    table.push_back({r.op, r.label, r.shape, r.dtype, fixed(double(r.bytes) / 1e6, 1), fixed(r.fused_us, 1),
                     r.eager_us ? fixed(*r.eager_us, 1) : untimed, fixed(fused_gbps, 1),
                     r.eager_us ? fixed(gbps(r.bytes, *r.eager_us), 1) : untimed,
                     fixed(100 * fused_gbps / copy_bandwidth, 1), fixed(percent_of_same_size_copy(r), 1),
                     r.eager_us ? fixed(*r.eager_us / r.fused_us, 2) + "x" : "-"});
  }
  out << "dfuse bench on " << options.device.str() << " (" << info.name << "), " << options.iters
      << " iterations, median\n";
  out << "copy bandwidth " << fixed(copy_bandwidth, 0) << " GB/s (" << (copy_bytes >> 20)
      << " MiB device to device, bytes read + written); \"% same-size copy\": the fused kernel's time against a copy\n"
      << "moving the case's bytes (half read, half written) in the same run\n\n";
  out << detail::format_table({"op", "case", "shape", "dtype", "MB", "fused us", "eager us", "fused GB/s",
                               "eager GB/s", "fused % copy", "% same-size copy", "speedup"},
                              table);
  for (const auto& note : notes) out << note << "\n";
  for (const auto& error : errors) out << "error: " << error << "\n";

  if (options.json_path) {
    try {
      write_json(*options.json_path, info, options, copy_bytes, copy_bandwidth, rows);
    } catch (const std::exception& e) {
      out << "error: " << e.what() << "\n";
      return 1;
    }
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace dfuse::cli
