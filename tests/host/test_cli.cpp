// The dfuse CLI in process: the JSON writer, the list output, the case tables, the bitwise
// harness (it must catch unwritten and wrong elements), and verify/bench on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "dfuse/cli_app.h"
#include "dfuse/cli_cases.h"
#include "dfuse/cli_harness.h"
#include "dfuse/cli_json.h"
#include "dfuse/cli_list.h"
#include "dfuse/cli_verify.h"
#include "dfuse/core/error.h"
#include "dfuse/registry/registry.h"

namespace dfuse::cli {
namespace {

struct CliRun {
  int status;
  std::string out, err;
};

CliRun run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_cli(args, out, err);
  return {status, out.str(), err.str()};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- JSON ------------------------------------------------------------------------------------

TEST(CliJson, QuotesAndEscapes) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(json_quote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  EXPECT_EQ(json_quote("x * (1 + scale)"), "\"x * (1 + scale)\"");
  EXPECT_EQ(json_quote("\x7f"), "\"\x7f\"");                                    // DEL needs no escape
  EXPECT_EQ(json_quote("\xc2\xb2 \xe2\x80\x94"), "\"\xc2\xb2 \xe2\x80\x94\"");  // UTF-8 passes through
}

TEST(CliJson, WritesNestedValues) {
  JsonWriter json;
  json.begin_object()
      .field("name", "a\"b")
      .field("count", 3)
      .field("big", int64_t(1) << 40)
      .field("ratio", 0.5)
      .field("nan", std::nan(""))
      .field("ok", true)
      .field("list", std::vector<std::string>{"x", "y"});
  json.key("empty").begin_array().end_array();
  json.key("none").null();
  json.end_object();
  EXPECT_EQ(json.str(),
            "{\n"
            "  \"name\": \"a\\\"b\",\n"
            "  \"count\": 3,\n"
            "  \"big\": 1099511627776,\n"
            "  \"ratio\": 0.5,\n"
            "  \"nan\": null,\n"
            "  \"ok\": true,\n"
            "  \"list\": [\n"
            "    \"x\",\n"
            "    \"y\"\n"
            "  ],\n"
            "  \"empty\": [],\n"
            "  \"none\": null\n"
            "}\n");
}

TEST(CliJson, RejectsMisuse) {
  {
    JsonWriter json;
    json.begin_array();
    EXPECT_THROW(json.key("k"), InvalidArgument);
    EXPECT_THROW(json.end_object(), InvalidArgument);
  }
  {
    JsonWriter json;
    json.begin_object();
    EXPECT_THROW(json.value(1), InvalidArgument);
    json.key("k");
    EXPECT_THROW(json.end_object(), InvalidArgument);
  }
  {
    JsonWriter json;
    json.value(1);
    EXPECT_THROW(json.value(2), InvalidArgument);
  }
}

// ---- list ------------------------------------------------------------------------------------

TEST(CliList, TableAndJsonNameEveryRegisteredSpec) {
  const auto specs = Registry::global().all();
  ASSERT_FALSE(specs.empty());
  const Platform host{};
  const std::string table = list_table(specs, host);
  const std::string json = list_json(specs, host);
  for (const auto& op : Registry::global().ops()) {
    EXPECT_TRUE(contains(table, op)) << op;
    EXPECT_TRUE(contains(json, "\"op\": " + json_quote(op))) << op;
  }
  size_t objects = 0;
  for (size_t at = json.find("\"op\": "); at != std::string::npos; at = json.find("\"op\": ", at + 1))
    ++objects;
  EXPECT_EQ(objects, specs.size());
  for (const char* column : {"backend", "family", "contract", "tier", "dtypes", "layouts", "sm", "available",
                             "models", "replaces"}) {
    EXPECT_TRUE(contains(table, column)) << column;
  }
  // On the host platform the host specs are available and the CUDA ones are not.
  EXPECT_TRUE(contains(json, "\"backend\": \"host\""));
  for (const auto& spec : specs) {
    EXPECT_EQ(spec.supports(host), spec.backend == Backend::host)
        << spec.op << " " << backend_name(spec.backend);
  }
}

TEST(CliList, RunsThroughTheCommandLine) {
  const CliRun table = run({"list"});
  EXPECT_EQ(table.status, 0) << table.err;
  const CliRun json = run({"list", "--json"});
  EXPECT_EQ(json.status, 0) << json.err;
  for (const auto& op : Registry::global().ops()) {
    EXPECT_TRUE(contains(table.out, op)) << op;
    EXPECT_TRUE(contains(json.out, op)) << op;
  }
  EXPECT_EQ(json.out.front(), '[');
}

// ---- cases and harness -----------------------------------------------------------------------

TEST(CliCases, BroadcastAndChunkOperandsCountOnce) {
  const OperandSpec slice = chunk_slice("shift", 3, 8, 6, 2);
  EXPECT_EQ(slice.offset, 16);
  EXPECT_EQ(slice.storage_elements, 3 * 48);
  EXPECT_EQ(slice.strides, (std::vector<int64_t>{48, 48, 1}));
  EXPECT_EQ(slice.distinct_elements(), 24);
  const OperandSpec expanded{"gate", {3, 5, 8}, {8, 0, 1}, 0, 24};
  EXPECT_EQ(expanded.distinct_elements(), 24);
  Case c;
  c.dtype = DType::bf16;
  c.inputs = {dense("x", {3, 5, 8}), slice};
  c.out_sizes = {3, 5, 8};
  EXPECT_EQ(c.min_bytes(), (120 + 24 + 120) * 2);
}

TEST(CliCases, EveryAdalnOpHasCasesForEveryDtype) {
  for (const char* op : {"diffusion.modulate_scale_shift", "diffusion.residual_gate_add"}) {
    const CaseGenerator generate = find_cases(op);
    ASSERT_NE(generate, nullptr) << op;
    const auto cases = generate({Purpose::verify, shape_table(true)});
    for (DType t : {DType::bf16, DType::f16, DType::f32}) {
      EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.dtype == t; })) << op;
    }
    EXPECT_TRUE(
        std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.values == Values::specials; }));
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.in_place_input >= 0; }));
    EXPECT_FALSE(generate({Purpose::bench, shape_table(false)}).empty());
  }
  EXPECT_EQ(find_cases("diffusion.no_such_op"), nullptr);
}

TEST(CliHarness, RandomDataIsReproducibleNonzeroAndHasSpecialsOnRequest) {
  std::vector<float> a(100000), b(100000), specials(100000);
  fill_random(a.data(), DType::f32, int64_t(a.size()), 7, Values::finite);
  fill_random(b.data(), DType::f32, int64_t(b.size()), 7, Values::finite);
  fill_random(specials.data(), DType::f32, int64_t(specials.size()), 7, Values::specials);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::none_of(a.begin(), a.end(), [](float v) { return v == 0 || !std::isfinite(v); }));
  EXPECT_TRUE(std::any_of(specials.begin(), specials.end(), [](float v) { return std::isnan(v); }));
  EXPECT_TRUE(std::any_of(specials.begin(), specials.end(), [](float v) { return std::isinf(v) && v < 0; }));
  EXPECT_TRUE(
      std::any_of(specials.begin(), specials.end(), [](float v) { return v == 0 && std::signbit(v); }));
}

TEST(CliHarness, ComparesRawBitsAndFindsPoison) {
  const std::vector<uint16_t> expected = {0x0000, 0x3f80, 0x7fc0, 0x1234};
  std::vector<uint16_t> actual = {0x8000, 0x3f80, 0x7fff, 0xffff};  // -0, same, other NaN, poison
  const BitComparison cmp = compare_bits(actual.data(), expected.data(), 4, 2);
  EXPECT_EQ(cmp.mismatches, 3);
  EXPECT_EQ(cmp.first_mismatch, 0);
  EXPECT_EQ(count_poisoned(actual.data(), 4, 2), 1);
  EXPECT_EQ(element_hex(actual.data(), 2, 2), "0x7fff");
  EXPECT_EQ(compare_bits(expected.data(), expected.data(), 4, 2).mismatches, 0);
}

TEST(CliHarness, HostF32NanPayloadsMayDiffer) {
  const std::vector<uint32_t> expected = {0x7fc00000, 0x80000000, 0x3f800000};
  const std::vector<uint32_t> actual = {0xffc00000, 0x00000000, 0x3f800000};  // other NaN, +0 vs -0
  EXPECT_EQ(compare_bits(actual.data(), expected.data(), 3, 4).mismatches, 2);
  EXPECT_EQ(compare_bits(actual.data(), expected.data(), 3, 4, /*any_nan_f32=*/true).mismatches, 1);
}

// The harness must fail a fused op that leaves elements unwritten or gets one bit wrong.
TEST(CliHarness, CatchesUnwrittenAndWrongOutputs) {
  const auto cases = find_cases("diffusion.residual_gate_add")({Purpose::verify, shape_table(true)});
  Case c = cases.front();
  eager::Workspace workspace(Device::host());
  ASSERT_TRUE(verify_case(c, Device::host(), workspace, 1).passed());

  c.fused = [](std::span<const TensorView>, const TensorView&, Stream) {};
  VerifyResult silent = verify_case(c, Device::host(), workspace, 1);
  EXPECT_FALSE(silent.passed());
  EXPECT_EQ(silent.unwritten, silent.elements);

  c.fused = [](std::span<const TensorView> in, const TensorView& out, Stream s) {
    eager::Workspace ws(Device::host());
    eager::residual_gate_add_chain(in[0], in[1], in[2], out, ws, s);
    static_cast<unsigned char*>(out.data())[out.numel() * 2 - 1] ^= 0x80;  // sign of the last bf16
  };
  ASSERT_EQ(c.dtype, DType::bf16);
  VerifyResult flipped = verify_case(c, Device::host(), workspace, 1);
  EXPECT_FALSE(flipped.passed());
  EXPECT_EQ(flipped.mismatches, 1);
  EXPECT_EQ(flipped.unwritten, 0);
}

TEST(CliHarness, IndexOperandsHoldTheirValues) {
  for (DType index_dtype : {DType::i32, DType::i64}) {
    Case c;
    c.dtype = DType::bf16;
    c.inputs = {dense("x", {4, 2}), index_list("indices", {3, 0, -1, 2}, index_dtype)};
    c.out_sizes = {4, 2};
    EXPECT_EQ(c.min_bytes(), 8 * 2 + 4 * int64_t(dtype_size(index_dtype)) + 8 * 2);
    const DeviceInputs inputs = upload_inputs(c, Device::host(), 5);
    ASSERT_EQ(inputs.views[1].dtype(), index_dtype);
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(load_as_double(inputs.views[1].data(), index_dtype, i), (std::vector<double>{3, 0, -1, 2})[i]);
    c.inputs[1].index_values->pop_back();
    EXPECT_THROW(upload_inputs(c, Device::host(), 5), InvalidArgument);
  }
}

// Pack indices: sorted token positions in range; scatter: every packed row once, -1 elsewhere.
TEST(CliCases, VarlenIndexOperandsAreValid) {
  for (const char* op :
       {"diffusion.varlen_pack_qkv", "diffusion.varlen_pack_segmented_qkv", "diffusion.varlen_scatter_to_padded"}) {
    const CaseGenerator generate = find_cases(op);
    ASSERT_NE(generate, nullptr) << op;
    const auto cases = generate({Purpose::verify, shape_table(true)});
    for (DType index_dtype : {DType::i32, DType::i64}) {
      EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const Case& c) {
        return c.inputs.back().dtype == index_dtype;
      })) << op;
    }
    for (const Case& c : cases) {
      const OperandSpec& index = c.inputs.back();
      ASSERT_TRUE(index.index_values.has_value()) << op << " " << c.label;
      const std::vector<int64_t>& values = *index.index_values;
      if (c.op == "diffusion.varlen_scatter_to_padded") {
        const int64_t rows = c.inputs[0].sizes[0];
        std::vector<int> seen(size_t(rows), 0);
        for (int64_t v : values) {
          ASSERT_TRUE(v >= -1 && v < rows) << c.label;
          if (v >= 0) ++seen[size_t(v)];
        }
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << c.label;
        EXPECT_LT(rows, int64_t(values.size())) << c.label << ": no padding";
      } else {
        int64_t tokens = 0;  // B * S over the q operands (prefix and main for the segmented pack)
        for (size_t k = 0; k + 1 < c.inputs.size(); k += 3) tokens += c.inputs[k].sizes[0] * c.inputs[k].sizes[1];
        EXPECT_EQ(int64_t(values.size()), c.out_sizes[1]) << c.label;
        EXPECT_TRUE(std::is_sorted(values.begin(), values.end())) << c.label;
        EXPECT_TRUE(std::adjacent_find(values.begin(), values.end()) == values.end()) << c.label;
        EXPECT_TRUE(values.front() >= 0 && values.back() < tokens) << c.label;
        EXPECT_LT(int64_t(values.size()), tokens) << c.label << ": no padding";
      }
    }
  }
}

// ---- verify and bench through the command line -----------------------------------------------

TEST(CliVerify, QuickPassesOnTheHost) {
  const CliRun r = run({"verify", "--quick", "--device", "host", "--seed", "12345"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "pass"));
  EXPECT_FALSE(contains(r.out, "FAIL"));
  EXPECT_FALSE(contains(r.out, "ERROR"));
  for (const char* op : {"modulate_scale_shift", "residual_gate_add"}) EXPECT_TRUE(contains(r.out, op)) << op;
}

TEST(CliVerify, SelectsOneOpByShortOrFullName) {
  for (const char* name : {"residual_gate_add", "diffusion.residual_gate_add"}) {
    const CliRun r = run({"verify", "--quick", "--device", "host", "--op", name});
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "residual_gate_add"));
    EXPECT_FALSE(contains(r.out, "modulate_scale_shift"));
  }
}

TEST(CliBench, QuickRunWritesTableAndJson) {
  const std::string path = ::testing::TempDir() + "dfuse_cli_bench.json";
  const CliRun r = run({"bench", "--quick", "--device", "host", "--iters", "3", "--json", path});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "copy bandwidth"));
  EXPECT_TRUE(contains(r.out, "% same-size copy"));
  EXPECT_TRUE(contains(r.err, "[1/"));
  std::ifstream file(path);
  std::stringstream json;
  json << file.rdbuf();
  EXPECT_TRUE(contains(json.str(), "\"copy_gbps\": "));
  EXPECT_TRUE(contains(json.str(), "\"op\": \"modulate_scale_shift\""));
  EXPECT_TRUE(contains(json.str(), "\"speedup\": "));
  EXPECT_TRUE(contains(json.str(), "\"same_size_copy_us\": "));
  EXPECT_TRUE(contains(json.str(), "\"fused_percent_of_same_size_copy\": "));
  std::remove(path.c_str());
}

TEST(CliUsage, RejectsBadArguments) {
  EXPECT_EQ(run({}).status, 2);
  EXPECT_EQ(run({"frobnicate"}).status, 2);
  EXPECT_EQ(run({"list", "--xml"}).status, 2);
  EXPECT_EQ(run({"verify", "--device", "tpu"}).status, 2);
  EXPECT_EQ(run({"bench", "--device", "host", "--iters", "0"}).status, 2);
  const CliRun unknown = run({"verify", "--quick", "--device", "host", "--op", "no_such_op"});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_TRUE(contains(unknown.err, "diffusion.modulate_scale_shift")) << unknown.err;
  EXPECT_EQ(run({"--help"}).status, 0);
}

}  // namespace
}  // namespace dfuse::cli
