"""torch.ops.dfuse.group_limited_topk against the real PyTorch chain it replaces (LingBot Video's router).

The contract is selection-equivalent: each row holds the same set of expert ids as the chain's
topk(sorted=False); the order within a row is unspecified, so rows are compared sorted.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402

# (experts, n_group, topk_group, top_k): LingBot's production config first.
CONFIGS = [(128, 4, 2, 8), (64, 8, 3, 8), (128, 8, 3, 8), (256, 8, 3, 8), (64, 8, 3, 4), (32, 4, 2, 4),
           (1024, 8, 3, 8), (64, 4, 2, 32)]  # the largest row; top_k == topk_group * experts per group
TOKENS = [1, 17, 128, 4097]


def chain(scores, n_group, topk_group, top_k):
    tokens, experts = scores.shape
    group_scores = scores.view(tokens, n_group, -1).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(tokens, n_group, experts // n_group).reshape(tokens, -1)
    masked = scores.masked_fill(~score_mask.bool(), float("-inf"))
    return torch.topk(masked, k=top_k, dim=-1, sorted=False)[1]


def assert_same_sets(ids, ref):
    assert ids.dtype == torch.int64 and ids.shape == ref.shape
    assert torch.equal(ids.sort(dim=-1).values, ref.sort(dim=-1).values)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("tokens", TOKENS)
def test_random_scores(config, tokens):
    experts, n_group, topk_group, top_k = config
    scores = torch.randn(tokens, experts, device="cuda")
    assert_same_sets(dt.group_limited_topk(scores, n_group, topk_group, top_k),
                     chain(scores, n_group, topk_group, top_k))


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("kind", ["all_equal", "small_integers"])
def test_ties(config, kind):
    experts, n_group, topk_group, top_k = config
    if kind == "all_equal":
        scores = torch.full((128, experts), 0.5, device="cuda")
    else:
        scores = torch.randint(-1, 3, (128, experts), device="cuda").float()
    assert_same_sets(dt.group_limited_topk(scores, n_group, topk_group, top_k),
                     chain(scores, n_group, topk_group, top_k))


@pytest.mark.parametrize("config", CONFIGS)
def test_nan_inf_signed_zero(config):
    """The contract ranks like torch's CUDA topk key: NaN above +inf, +0 above -0."""
    experts, n_group, topk_group, top_k = config
    scores = torch.randn(256, experts, device="cuda")
    specials = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0], device="cuda")
    where = torch.rand(scores.shape, device="cuda") < 0.05
    scores[where] = specials[torch.randint(0, 5, (int(where.sum()),), device="cuda")]
    assert_same_sets(dt.group_limited_topk(scores, n_group, topk_group, top_k),
                     chain(scores, n_group, topk_group, top_k))


def test_strided_rows():
    wide = torch.randn(300, 160, device="cuda")
    scores = wide[:, :128]
    assert_same_sets(dt.group_limited_topk(scores, 4, 2, 8), chain(scores.contiguous(), 4, 2, 8))


def test_fallback_half_scores_matches_chain():
    scores = torch.randn(33, 64, device="cuda").half()
    assert_same_sets(dt.group_limited_topk(scores, 8, 3, 4), chain(scores, 8, 3, 4))


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    compiled = torch.compile(lambda s: dt.group_limited_topk(s, 4, 2, 8), fullgraph=True)
    scores = torch.randn(257, 128, device="cuda")
    assert_same_sets(compiled(scores), chain(scores, 4, 2, 8))
