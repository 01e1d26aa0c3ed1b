"""pytest setup for the dfuse torch binding tests.

Puts python/ on sys.path. The tests need torch and a CUDA device: without them a test module calling
`require_cuda()` is skipped, except under DFUSE_REQUIRE_CUDA=1 (the GPU check script), where that is an error.
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _cuda_problem():
    try:
        import torch
    except ImportError as e:
        return f"torch is not importable ({e})"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


def require_cuda():
    """Skips the calling test module when CUDA is unavailable; fails it under DFUSE_REQUIRE_CUDA=1."""
    problem = _cuda_problem()
    if problem is None:
        return
    if os.environ.get("DFUSE_REQUIRE_CUDA") == "1":
        pytest.fail(f"DFUSE_REQUIRE_CUDA=1 but {problem}", pytrace=False)
    pytest.skip(problem, allow_module_level=True)
