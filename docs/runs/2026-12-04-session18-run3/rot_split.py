"""Session 18 run 3 diagnostic: rope_rotate_half at HunyuanVideo's [1, 32760, 24, 128] bf16 by math and rotary
width, to split the storage-dtype rot 64 case's time between its rotation and its tail copy. Median of CUDA-event
timings over two rotating inputs (each 201 MB, > 2x L2), beside a copy of the same bytes."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "python"))
import dfuse.torch as dt  # noqa: E402


def tables(tokens, dim, dtype):
    inv = 1.0 / 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64, device="cuda") / dim)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device="cuda"), inv)
    freqs = torch.cat([freqs, freqs], dim=-1)
    return freqs.cos().to(dtype)[:, None, :], freqs.sin().to(dtype)[:, None, :]


def median_us(fn, args_list, iters=60):
    for a in args_list:
        fn(*a)
    times = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a = args_list[i % len(args_list)]
        start.record()
        fn(*a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


b, s, h, d = 1, 32760, 24, 128
xs = [torch.randn((b, s, h, d), device="cuda").to(torch.bfloat16) for _ in range(2)]
copy_us = median_us(lambda x: x.clone(), [(x,) for x in xs])
print(f"copy of x (clone) {copy_us:7.1f} us")
for math, table_dtype in (("fp32_opmath", torch.float32), ("storage_dtype", torch.bfloat16)):
    for rot in (128, 64):
        cos, sin = tables(s, rot, table_dtype)
        us = median_us(lambda x: dt.rope_rotate_half(x, cos, sin, math), [(x,) for x in xs])
        print(f"{math:13s} rot {rot:3d} {us:7.1f} us  ({copy_us / us * 100:5.1f}% of the clone)")
