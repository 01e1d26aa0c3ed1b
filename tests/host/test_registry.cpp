// Registry: inventory contents, metadata-only listing, and select_kernel's rules.
#include <gtest/gtest.h>

#include "dfuse/core/error.h"
#include "dfuse/registry/registry.h"

namespace dfuse {
namespace {

KernelSpec spec(std::string op, Backend b, std::vector<DeviceKind> devices, std::optional<SmVersion> min_sm = {},
                std::optional<SmVersion> max_sm = {}) {
  KernelSpec s;
  s.op = std::move(op);
  s.backend = b;
  s.symbol = "sym";
  s.capabilities.devices = std::move(devices);
  s.capabilities.min_sm = min_sm;
  s.capabilities.max_sm = max_sm;
  return s;
}

const Platform kHost{DeviceKind::host, std::nullopt};
const Platform kHopper{DeviceKind::cuda, SmVersion{9, 0}};
const Platform kAmpere{DeviceKind::cuda, SmVersion{8, 0}};

TEST(Registry, InventoryHasBothOpsWithHostAndCudaBackends) {
  const Registry& r = Registry::global();
  for (const char* op : {"diffusion.modulate_scale_shift", "diffusion.residual_gate_add"}) {
    auto specs = r.specs(op);
    ASSERT_EQ(specs.size(), 2u) << op;
    for (const auto& s : specs) {
      EXPECT_EQ(s.contract, Contract::bit_exact);
      EXPECT_EQ(s.tier, Quality::lossless);
      EXPECT_FALSE(s.replaces.empty());
      EXPECT_FALSE(s.models.empty());
      EXPECT_TRUE(s.supports_dtype(DType::bf16));
      EXPECT_FALSE(s.supports_dtype(DType::f64));
    }
  }
  for (const auto& s : r.all()) EXPECT_EQ(s.op.rfind("diffusion.", 0), 0u) << s.op;
}

TEST(Registry, AddReplacesSameOpAndBackend) {
  Registry r;
  r.add(spec("diffusion.x", Backend::host, {DeviceKind::host}));
  auto s = spec("diffusion.x", Backend::host, {DeviceKind::host});
  s.description = "second";
  r.add(s);
  ASSERT_EQ(r.specs("diffusion.x").size(), 1u);
  EXPECT_EQ(r.specs("diffusion.x")[0].description, "second");
  EXPECT_EQ(r.specs("diffusion.x")[0].name(), "x");
  EXPECT_TRUE(r.specs("diffusion.none").empty());
}

TEST(Registry, SelectionRules) {
  Registry r;
  r.add(spec("diffusion.both", Backend::host, {DeviceKind::host}));
  r.add(spec("diffusion.both", Backend::cuda, {DeviceKind::cuda}, SmVersion{9, 0}, SmVersion{9, 0}));
  r.add(spec("diffusion.single", Backend::cuda, {DeviceKind::cuda}, SmVersion{9, 0}));
  r.add(spec("diffusion.anywhere_a", Backend::host, {}));
  r.add(spec("diffusion.anywhere_a", Backend::jit, {}));

  // explicit backend wins, regardless of platform
  EXPECT_EQ(select_kernel("diffusion.both", Backend::cuda, kHost, r).backend, Backend::cuda);
  // a single spec is returned even where it cannot run
  EXPECT_EQ(select_kernel("diffusion.single", std::nullopt, kHost, r).backend, Backend::cuda);
  // several: filter by platform
  EXPECT_EQ(select_kernel("diffusion.both", std::nullopt, kHost, r).backend, Backend::host);
  EXPECT_EQ(select_kernel("diffusion.both", std::nullopt, kHopper, r).backend, Backend::cuda);

  auto message = [&](std::string_view op, std::optional<Backend> b, const Platform& p) {
    try {
      select_kernel(op, b, p, r);
    } catch (const SelectionError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("diffusion.unknown", std::nullopt, kHost).find("no kernel registered"), std::string::npos);
  EXPECT_NE(message("diffusion.both", Backend::jit, kHost).find("registered: host, cuda"), std::string::npos);
  // none eligible: an Ampere GPU is outside the CUDA spec's inclusive SM window
  EXPECT_NE(message("diffusion.both", std::nullopt, kAmpere).find("none of the registered backends (host, cuda)"),
            std::string::npos);
  // several eligible: an error naming them
  EXPECT_NE(message("diffusion.anywhere_a", std::nullopt, kHost).find("several backends run here (host, jit)"),
            std::string::npos);
}

TEST(Registry, CapabilityWindowIsInclusive) {
  auto s = spec("diffusion.w", Backend::cuda, {DeviceKind::cuda}, SmVersion{9, 0}, SmVersion{10, 0});
  EXPECT_TRUE(s.supports({DeviceKind::cuda, SmVersion{9, 0}}));
  EXPECT_TRUE(s.supports({DeviceKind::cuda, SmVersion{10, 0}}));
  EXPECT_FALSE(s.supports({DeviceKind::cuda, SmVersion{10, 3}}));
  EXPECT_FALSE(s.supports({DeviceKind::cuda, SmVersion{8, 9}}));
  EXPECT_FALSE(s.supports(kHost));
}

TEST(Registry, ListingLoadsNoBackend) {
  // Listing and selecting touch metadata only; loading a host entry works without CUDA.
  auto all = Registry::global().all();
  EXPECT_GE(all.size(), 4u);
  auto host = select_kernel("diffusion.modulate_scale_shift", Backend::host);
  EXPECT_NE(host.load().entry, nullptr);
  KernelSpec missing = host;
  missing.symbol = "no_such_entry";
  EXPECT_THROW(missing.load(), SelectionError);
}

TEST(Registry, BackendNames) {
  for (Backend b : {Backend::host, Backend::cuda, Backend::jit, Backend::cublaslt})
    EXPECT_EQ(parse_backend(backend_name(b)), b);
  EXPECT_THROW(parse_backend("triton"), InvalidArgument);
  EXPECT_EQ(layout_names(layout_contiguous | layout_broadcast), "contiguous|broadcast");
}

}  // namespace
}  // namespace dfuse
