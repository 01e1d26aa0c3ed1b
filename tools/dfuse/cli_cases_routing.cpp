// Cases for the routing family: group_limited_topk over the LingBot Video router's configs, at the
// shape table's token counts (batch * tokens rows), with finite scores and with NaN/inf/+-0 mixed
// in. The ids are compared as sets per row (sorted before the bitwise compare).
#include <utility>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/routing.h"
#include "dfuse/ops/routing.h"

namespace dfuse::cli {

namespace {

struct RoutingConfig {
  int64_t experts, n_group, topk_group, top_k;
};

// The runners take no scalars, so each config gets its own pair.
template <RoutingConfig C>
const CaseOp kGroupLimitedTopk{
    "diffusion.group_limited_topk",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      group_limited_topk(in[0], C.n_group, C.topk_group, C.top_k, out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      eager::group_limited_topk_chain(in[0], C.n_group, C.topk_group, C.top_k, out, s);
    },
};

// "E128 groups 4/2 top8"
std::string config_label(const RoutingConfig& c) {
  std::string label = "E";
  for (auto [text, value] : {std::pair{"", c.experts}, {" groups ", c.n_group}, {"/", c.topk_group},
                             {" top", c.top_k}})
    label.append(text).append(std::to_string(value));
  return label;
}

template <RoutingConfig C>
Case routing_case(int64_t tokens, Values values) {
  Case c = kGroupLimitedTopk<C>.make(config_label(C), DType::f32, {dense("scores", {tokens, C.experts})},
                                     {tokens, C.top_k}, values);
  c.out_dtype = DType::i64;
  c.out_rows_are_sets = true;
  c.eager_on_host = true;  // the reference chain sorts on the host (src/eager/routing.cpp)
  return c;
}

template <RoutingConfig... Configs>
void add_cases(std::vector<Case>& cases, int64_t tokens, Values values) {
  (cases.push_back(routing_case<Configs>(tokens, values)), ...);
}

// LingBot Video's production config first, then the configs the reference tests.
void add_router_configs(std::vector<Case>& cases, int64_t tokens, Values values) {
  add_cases<RoutingConfig{128, 4, 2, 8}, RoutingConfig{64, 8, 3, 8}, RoutingConfig{128, 8, 3, 8},
            RoutingConfig{256, 8, 3, 8}, RoutingConfig{64, 8, 3, 4}, RoutingConfig{32, 4, 2, 4}>(
      cases, tokens, values);
}

std::vector<Case> group_limited_topk_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  for (const auto& s : shapes.models) add_router_configs(cases, s.batch * s.tokens, Values::finite);
  if (request.purpose == Purpose::bench) return cases;
  for (const auto& s : shapes.odd) {
    add_router_configs(cases, s.batch * s.tokens, Values::finite);
    add_router_configs(cases, s.batch * s.tokens, Values::specials);
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.group_limited_topk", &group_limited_topk_cases);

}  // namespace dfuse::cli
