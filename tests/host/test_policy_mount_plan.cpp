// MountPlan: which fusion sites of one transformer are fused for a batch at a given quality.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "dfuse/core/error.h"
#include "dfuse/policy/mount_plan.h"

namespace dfuse {
namespace {

constexpr const char* kLosslessFamily = "layernorm_modulate bit-exact";
constexpr const char* kExtraHighFamily = "layernorm_modulate as layer_norm(weight=1+scale)";
constexpr const char* kHighFamily = "bf16 vae decode";

FusionSite site(std::string name, std::string family, Quality tier, std::string reject_reason = "") {
  FusionSite s;
  s.name = std::move(name);
  s.family = std::move(family);
  s.op = "diffusion.layernorm_modulate";
  s.tier = tier;
  s.contract = tier == Quality::lossless ? Contract::bit_exact_verified : Contract::close;
  s.reject_reason = std::move(reject_reason);
  return s;
}

// Two blocks with one site per tier each.
MountPlan three_tier_plan() {
  MountPlan plan("flux1-dev");
  for (int block = 0; block < 2; ++block) {
    const std::string prefix = "transformer_blocks." + std::to_string(block);
    plan.add_site(site(prefix + ".norm1", kLosslessFamily, Quality::lossless));
    plan.add_site(site(prefix + ".norm1_context", kExtraHighFamily, Quality::extra_high));
    plan.add_site(site(prefix + ".vae_decode", kHighFamily, Quality::high));
  }
  return plan;
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument thrown";
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PolicyMountPlan, NothingIsFusedBeforeTheFirstBatch) {
  MountPlan plan = three_tier_plan();
  FusionSite pre_fused = site("extra", kLosslessFamily, Quality::lossless);
  pre_fused.fused = true;  // the plan, not the caller, decides
  plan.add_site(pre_fused);
  for (const FusionSite& s : plan.sites()) EXPECT_FALSE(plan.is_fused(s.name)) << s.name;
  EXPECT_FALSE(plan.batch_open());
}

TEST(PolicyMountPlan, TiersAreCumulativeAndLosslessIsFusedAtEveryQuality) {
  MountPlan plan = three_tier_plan();
  struct Expected {
    Quality quality;
    bool lossless, extra_high, high;
  };
  // Back to lossless at the end: a lower tier unmounts what a higher one mounted.
  for (const Expected& e :
       {Expected{Quality::lossless, true, false, false}, Expected{Quality::extra_high, true, true, false},
        Expected{Quality::high, true, true, true}, Expected{Quality::lossless, true, false, false}}) {
    plan.begin_batch(e.quality);
    EXPECT_EQ(plan.quality(), e.quality);
    for (int block = 0; block < 2; ++block) {
      const std::string prefix = "transformer_blocks." + std::to_string(block);
      EXPECT_EQ(plan.is_fused(prefix + ".norm1"), e.lossless) << quality_name(e.quality);
      EXPECT_EQ(plan.is_fused(prefix + ".norm1_context"), e.extra_high) << quality_name(e.quality);
      EXPECT_EQ(plan.is_fused(prefix + ".vae_decode"), e.high) << quality_name(e.quality);
    }
    plan.end_batch();
  }
}

TEST(PolicyMountPlan, OneRejectedSiteKeepsItsWholeFamilyOff) {
  MountPlan plan("qwen-image");
  plan.add_site(site("blocks.0.norm1", kExtraHighFamily, Quality::extra_high));
  plan.add_site(site("blocks.1.norm1", kExtraHighFamily, Quality::extra_high, "norm weight is fp32"));
  plan.add_site(site("blocks.2.norm1", kExtraHighFamily, Quality::extra_high));
  plan.add_site(site("blocks.0.ff", "linear+gelu epilogue", Quality::extra_high));
  plan.add_site(site("blocks.0.norm2", kLosslessFamily, Quality::lossless, "eps is not a constant"));

  plan.begin_batch(Quality::lossless);
  EXPECT_FALSE(plan.is_fused("blocks.0.norm2"));  // rejection applies at lossless too
  ASSERT_EQ(plan.rejected_families().size(), 1u);
  EXPECT_EQ(plan.rejected_families()[0].first, kLosslessFamily);
  plan.end_batch();

  plan.begin_batch(Quality::high);
  EXPECT_FALSE(plan.is_fused("blocks.0.norm1"));
  EXPECT_FALSE(plan.is_fused("blocks.1.norm1"));
  EXPECT_FALSE(plan.is_fused("blocks.2.norm1"));
  EXPECT_TRUE(plan.is_fused("blocks.0.ff"));  // other families are unaffected
  const auto rejected = plan.rejected_families();
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0].first, kExtraHighFamily);
  EXPECT_EQ(rejected[0].second, "blocks.1.norm1: norm weight is fp32");
  EXPECT_EQ(rejected[1].first, kLosslessFamily);

  const std::string report = plan.report();
  EXPECT_TRUE(contains(report, "norm weight is fp32")) << report;
  EXPECT_TRUE(contains(report, "family off: site blocks.1.norm1 failed")) << report;
}

TEST(PolicyMountPlan, QualityChangesOnlyBetweenBatches) {
  MountPlan plan = three_tier_plan();
  EXPECT_TRUE(contains(error_of([&] { plan.end_batch(); }), "without an open batch"));
  plan.begin_batch(Quality::extra_high);
  EXPECT_TRUE(plan.batch_open());
  const std::string message = error_of([&] { plan.begin_batch(Quality::lossless); });
  EXPECT_TRUE(contains(message, "quality changes only between batches")) << message;
  EXPECT_TRUE(contains(message, "extra-high")) << message;
  // The refused switch changed nothing.
  EXPECT_EQ(plan.quality(), Quality::extra_high);
  EXPECT_TRUE(plan.is_fused("transformer_blocks.0.norm1_context"));
  EXPECT_TRUE(contains(error_of([&] { plan.add_site(site("late", kHighFamily, Quality::high)); }),
                       "between batches"));

  plan.end_batch();
  plan.begin_batch(Quality::lossless);
  EXPECT_FALSE(plan.is_fused("transformer_blocks.0.norm1_context"));
}

TEST(PolicyMountPlan, GraphCaptureRefusesRequestGatedFusions) {
  MountPlan plan = three_tier_plan();
  plan.set_graph_capture(true);
  plan.begin_batch(Quality::lossless);  // bit-exact families are what the graph captured
  EXPECT_TRUE(plan.is_fused("transformer_blocks.0.norm1"));
  plan.end_batch();

  const std::string message = error_of([&] { plan.begin_batch(Quality::extra_high); });
  EXPECT_TRUE(contains(message, "CUDA graph")) << message;
  EXPECT_TRUE(contains(message, "extra-high")) << message;
  EXPECT_TRUE(contains(message, kExtraHighFamily)) << message;
  EXPECT_FALSE(plan.batch_open());
  EXPECT_EQ(plan.quality(), Quality::lossless);
  EXPECT_FALSE(plan.is_fused("transformer_blocks.0.norm1_context"));
  EXPECT_TRUE(contains(error_of([&] { plan.begin_batch(Quality::high); }), kHighFamily));

  plan.set_graph_capture(false);
  plan.begin_batch(Quality::high);
  EXPECT_TRUE(plan.is_fused("transformer_blocks.0.vae_decode"));
}

TEST(PolicyMountPlan, GraphCaptureAllowsHigherQualityWhenItFusesNothingMore) {
  MountPlan lossless_only("sd3");
  lossless_only.add_site(site("blocks.0.norm1", kLosslessFamily, Quality::lossless));
  lossless_only.set_graph_capture(true);
  lossless_only.begin_batch(Quality::high);
  EXPECT_TRUE(lossless_only.is_fused("blocks.0.norm1"));

  MountPlan high_only("wan2.2");
  high_only.add_site(site("vae.decoder", kHighFamily, Quality::high));
  high_only.set_graph_capture(true);
  high_only.begin_batch(Quality::extra_high);  // does not reach the high-tier family
  high_only.end_batch();
  EXPECT_THROW(high_only.begin_batch(Quality::high), InvalidArgument);

  // A rejected family mounts nothing, so the captured graph stays what the batch runs.
  MountPlan rejected("ltx-2");
  rejected.add_site(site("blocks.0.norm1", kExtraHighFamily, Quality::extra_high, "weight not bf16"));
  rejected.set_graph_capture(true);
  rejected.begin_batch(Quality::extra_high);
  EXPECT_FALSE(rejected.is_fused("blocks.0.norm1"));
}

TEST(PolicyMountPlan, UnknownSiteNamesTheSiteAndTheValidOnes) {
  MountPlan plan = three_tier_plan();
  const std::string message = error_of([&] { plan.is_fused("transformer_blocks.9.norm1"); });
  EXPECT_TRUE(contains(message, "\"transformer_blocks.9.norm1\"")) << message;
  EXPECT_TRUE(contains(message, "transformer_blocks.0.norm1_context")) << message;
  EXPECT_TRUE(contains(error_of([&] { MountPlan("empty").is_fused("x"); }), "no sites are marked"));
}

TEST(PolicyMountPlan, RejectsDuplicateSitesAndFamiliesAtTwoTiers) {
  MountPlan plan = three_tier_plan();
  const std::string duplicate = error_of(
      [&] { plan.add_site(site("transformer_blocks.0.norm1", kLosslessFamily, Quality::lossless)); });
  EXPECT_TRUE(contains(duplicate, "duplicate fusion site \"transformer_blocks.0.norm1\"")) << duplicate;
  const std::string two_tiers =
      error_of([&] { plan.add_site(site("transformer_blocks.5.norm1", kLosslessFamily, Quality::high)); });
  EXPECT_TRUE(contains(two_tiers, kLosslessFamily)) << two_tiers;
  EXPECT_TRUE(contains(two_tiers, "lossless")) << two_tiers;
  EXPECT_TRUE(contains(two_tiers, "high")) << two_tiers;
  EXPECT_THROW(plan.add_site(site("", kLosslessFamily, Quality::lossless)), InvalidArgument);
  EXPECT_EQ(plan.sites().size(), 6u);  // none of the refused sites was added
}

TEST(PolicyMountPlan, BatchKeySeparatesModelsAndQualities) {
  const MountPlan flux("flux1-dev");
  const std::string key = flux.batch_key(Quality::extra_high);
  EXPECT_TRUE(contains(key, "flux1-dev")) << key;
  EXPECT_TRUE(contains(key, "extra-high")) << key;
  EXPECT_EQ(key, flux.batch_key(Quality::extra_high));
  EXPECT_NE(key, flux.batch_key(Quality::lossless));
  EXPECT_NE(key, flux.batch_key(Quality::high));
  EXPECT_NE(key, MountPlan("wan2.2").batch_key(Quality::extra_high));
}

TEST(PolicyMountPlan, ReportListsEverySiteWithItsDecision) {
  MountPlan plan = three_tier_plan();
  plan.begin_batch(Quality::extra_high);
  const std::string report = plan.report();
  for (const char* column : {"site", "family", "op", "tier", "fused", "reason"}) {
    EXPECT_TRUE(contains(report, column)) << report;
  }
  for (const FusionSite& s : plan.sites()) EXPECT_TRUE(contains(report, s.name)) << report;
  EXPECT_TRUE(contains(report, "flux1-dev")) << report;
  EXPECT_TRUE(contains(report, "tier high is above quality extra-high")) << report;
  EXPECT_TRUE(contains(report, " yes ")) << report;
  EXPECT_TRUE(contains(report, " no ")) << report;
}

}  // namespace
}  // namespace dfuse
