// dfuse policy: MountPlan, the fusion sites of one transformer and which of them are fused.
//
// Sites are marked once (at mount time). Each site belongs to a family (e.g. "layernorm_modulate
// as layer_norm(weight=1+scale)") registered at a quality tier. At the start of each batch the
// plan is switched to the batch's quality: a family whose tier the quality allows is fused on
// all of its sites, or on none of them when any site failed its static guard (all-or-nothing
// per transformer and family). Quality changes only between batches: switching while a batch
// is open is an error. Request-gated families (above lossless) cannot be combined with
// captured CUDA graphs: the graph would replay the branches captured at warm-up.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/policy/contract.h"
#include "dfuse/policy/quality.h"

namespace dfuse {

struct FusionSite {
  std::string name;    // "transformer_blocks.3.norm1"
  std::string family;  // fusion family
  std::string op;      // "diffusion.layernorm_modulate"
  Quality tier = Quality::lossless;
  Contract contract = Contract::bit_exact;
  std::string reject_reason;  // static guard failure; empty when eligible
  bool fused = false;         // state for the current batch
};

class MountPlan {
 public:
  explicit MountPlan(std::string model_name = "");

  // Marks a site. Throws InvalidArgument on a duplicate name, or if a family is registered at
  // two tiers.
  void add_site(FusionSite site);
  // Declares that the transformer runs under captured CUDA graphs.
  void set_graph_capture(bool captured);

  // Opens a batch at `q`: decides which sites are fused. Throws InvalidArgument while a batch
  // is open, or when `q` enables a request-gated family and graph capture is on.
  void begin_batch(Quality q);
  void end_batch();
  bool batch_open() const { return batch_open_; }
  Quality quality() const { return quality_; }

  bool is_fused(std::string_view site) const;  // throws InvalidArgument for an unknown site
  const std::vector<FusionSite>& sites() const { return sites_; }
  // Families the current quality would enable but that stay off, with the first reason.
  std::vector<std::pair<std::string, std::string>> rejected_families() const;
  // The batching key: requests with different keys are never batched together.
  std::string batch_key(Quality q) const;
  std::string report() const;

 private:
  std::string model_;
  std::vector<FusionSite> sites_;
  bool graph_capture_ = false;
  bool batch_open_ = false;
  Quality quality_ = Quality::lossless;
};

}  // namespace dfuse
