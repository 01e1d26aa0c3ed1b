"""The kernels of dfuse torch ops and of torch.compile of the same chains, for a profiler to compare.

    ncu --profile-from-start off --csv --page raw --metrics ... python3 bench/kernel_profile.py [--ops NAME ...]

For each op of bench/torch_bench.py and each of its model shapes it compiles the chain and warms both
implementations up outside the profiled range, then calls the dfuse op and the compiled chain `--calls` times
each inside cudaProfilerStart/Stop, on fresh inputs per call. Run with TORCH_LOGS=output_code to also get the
Triton source that torch.compile generated.
"""

import argparse

import torch

import torch_bench as tb


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", nargs="+", choices=list(tb.OPS), default=list(tb.OPS), metavar="NAME")
    parser.add_argument("--calls", type=int, default=2, help="profiled calls per implementation and shape")
    parser.add_argument("--shapes", nargs="+", metavar="NAME", help="only these model shapes (e.g. Wan2.1-14B)")
    args = parser.parse_args()

    for name in args.ops:
        entry = tb.OPS[name]
        for shape_name, shape in (entry.shapes or tb.SHAPES).items():
            if args.shapes and shape_name not in args.shapes:
                continue
            sets = [entry.inputs(shape) for _ in range(args.calls)]
            compiled = torch.compile(entry.chain, fullgraph=True, dynamic=False)
            for impl in (entry.op, compiled):
                impl(*sets[0])
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            for impl in (entry.op, compiled):
                for s in sets:
                    impl(*s)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print(f"profiled {name} {shape_name} {tuple(shape)}", flush=True)
            del sets
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
