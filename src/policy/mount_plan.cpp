#include "dfuse/policy/mount_plan.h"

#include <algorithm>
#include <utility>

#include "dfuse/core/error.h"
#include "common/text_table.h"

namespace dfuse {
namespace {

// Families in the order their first site was marked, so reports follow the model.
std::vector<std::string> families_in_order(const std::vector<FusionSite>& sites) {
  std::vector<std::string> families;
  for (const FusionSite& site : sites) {
    if (std::find(families.begin(), families.end(), site.family) == families.end()) {
      families.push_back(site.family);
    }
  }
  return families;
}

// The first site of `family` that failed its static guard, or null.
const FusionSite* first_rejected_site(const std::vector<FusionSite>& sites, std::string_view family) {
  for (const FusionSite& site : sites) {
    if (site.family == family && !site.reject_reason.empty()) return &site;
  }
  return nullptr;
}

}  // namespace

MountPlan::MountPlan(std::string model_name) : model_(std::move(model_name)) {}

void MountPlan::add_site(FusionSite site) {
  const std::string where = "MountPlan \"" + model_ + "\": ";
  if (batch_open_) throw InvalidArgument(where + "sites are marked between batches, not inside one");
  if (site.name.empty() || site.family.empty()) {
    throw InvalidArgument(where + "a fusion site needs a name and a family (site \"" + site.name +
                          "\", family \"" + site.family + "\")");
  }
  for (const FusionSite& existing : sites_) {
    if (existing.name == site.name) {
      throw InvalidArgument(where + "duplicate fusion site \"" + site.name + "\"");
    }
    // A family is mounted as one unit, which needs one tier for all of its sites.
    if (existing.family == site.family && existing.tier != site.tier) {
      throw InvalidArgument(where + "family \"" + site.family + "\" is registered at tier " +
                            std::string(quality_name(existing.tier)) + " (site \"" + existing.name +
                            "\") and at tier " + std::string(quality_name(site.tier)) + " (site \"" +
                            site.name + "\")");
    }
  }
  site.fused = false;  // the next begin_batch decides
  sites_.push_back(std::move(site));
}

void MountPlan::set_graph_capture(bool captured) { graph_capture_ = captured; }

void MountPlan::begin_batch(Quality q) {
  const std::string where = "MountPlan \"" + model_ + "\": ";
  if (batch_open_) {
    throw InvalidArgument(where + "cannot begin a batch at quality " + std::string(quality_name(q)) +
                          " while the batch at quality " + std::string(quality_name(quality_)) +
                          " is open; quality changes only between batches");
  }
  // Decide every family before touching any site, so a refused batch leaves the plan as it was.
  std::vector<std::string> fused_families;
  std::vector<std::string> request_gated;
  for (const std::string& family : families_in_order(sites_)) {
    const auto site = std::find_if(sites_.begin(), sites_.end(),
                                   [&](const FusionSite& s) { return s.family == family; });
    if (!quality_allows(q, site->tier) || first_rejected_site(sites_, family) != nullptr) continue;
    fused_families.push_back(family);
    if (site->tier != Quality::lossless) request_gated.push_back(family);
  }
  // Graph warm-up captured the lossless branches; replay would silently skip these fusions.
  // A rejected family mounts nothing, so it does not conflict with the captured graph.
  if (graph_capture_ && !request_gated.empty()) {
    throw InvalidArgument(where + "quality " + std::string(quality_name(q)) +
                          " cannot be used with captured CUDA graphs: its request-gated fusions (" +
                          detail::join_names({request_gated.begin(), request_gated.end()}) +
                          ") would be bypassed, since the graph replays the branches captured at "
                          "warm-up; use quality lossless or disable graph capture");
  }
  for (FusionSite& site : sites_) {
    site.fused = std::find(fused_families.begin(), fused_families.end(), site.family) != fused_families.end();
  }
  quality_ = q;
  batch_open_ = true;
}

void MountPlan::end_batch() {
  if (!batch_open_) throw InvalidArgument("MountPlan \"" + model_ + "\": end_batch without an open batch");
  batch_open_ = false;
}

bool MountPlan::is_fused(std::string_view site) const {
  for (const FusionSite& s : sites_) {
    if (s.name == site) return s.fused;
  }
  std::string message = "MountPlan \"" + model_ + "\": unknown fusion site \"" + std::string(site) + "\"";
  constexpr size_t kMaxListed = 8;  // a transformer has hundreds of sites; list a few
  if (sites_.empty()) {
    message += "; no sites are marked";
  } else {
    std::vector<std::string_view> names;
    for (size_t i = 0; i < sites_.size() && i < kMaxListed; ++i) names.push_back(sites_[i].name);
    message += "; valid: " + detail::join_names(names);
    if (sites_.size() > kMaxListed) message += ", ... (" + std::to_string(sites_.size()) + " sites)";
  }
  throw InvalidArgument(message);
}

std::vector<std::pair<std::string, std::string>> MountPlan::rejected_families() const {
  std::vector<std::pair<std::string, std::string>> rejected;
  for (const std::string& family : families_in_order(sites_)) {
    const FusionSite* site = first_rejected_site(sites_, family);
    if (site != nullptr && quality_allows(quality_, site->tier)) {
      rejected.emplace_back(family, site->name + ": " + site->reject_reason);
    }
  }
  return rejected;
}

std::string MountPlan::batch_key(Quality q) const {
  return "model=" + model_ + ";quality=" + std::string(quality_name(q));
}

std::string MountPlan::report() const {
  std::vector<std::vector<std::string>> rows;
  for (const FusionSite& site : sites_) {
    std::string reason;
    if (!site.reject_reason.empty()) {
      reason = site.reject_reason;
    } else if (!quality_allows(quality_, site.tier)) {
      reason = "tier " + std::string(quality_name(site.tier)) + " is above quality " +
               std::string(quality_name(quality_));
    } else if (const FusionSite* rejected = first_rejected_site(sites_, site.family)) {
      reason = "family off: site " + rejected->name + " failed (" + rejected->reject_reason + ")";
    } else if (!site.fused) {
      reason = "no batch begun since it was marked";
    }
    rows.push_back({site.name, site.family, site.op, std::string(quality_name(site.tier)),
                    std::string(contract_name(site.contract)), site.fused ? "yes" : "no",
                    reason.empty() ? "-" : reason});
  }
  std::string text = "MountPlan \"" + model_ + "\": quality " + std::string(quality_name(quality_)) +
                     (batch_open_ ? ", batch open" : ", no batch open") +
                     (graph_capture_ ? ", CUDA graph capture on" : "") + "\n";
  return text + detail::format_table({"site", "family", "op", "tier", "contract", "fused", "reason"}, rows);
}

}  // namespace dfuse
