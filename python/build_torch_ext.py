"""Builds the dfuse torch extension (python/dfuse/csrc/*.cpp) against a CMake build of libdfuse.

    python3 python/build_torch_ext.py --cmake-build build-gpu [--out DIR] [--verbose]
    python3 python/build_torch_ext.py --print-cxx

Links libdfuse.so from the CMake build directory (with an rpath to it; libdfuse finds libdfuse_cuda.so
beside itself) and prints the path of the built library, which `dfuse.torch` loads from $DFUSE_TORCH_LIB or,
by default, from python/dfuse/_lib/.

The extension must share the process's libstdc++ (the one torch loads): a compiler that links libstdc++
statically (the GPU machine's $CXX does) gives the extension a second, uninitialized copy, whose iostreams
crash the process on the first TORCH_CHECK message. So the compiler is the first of $CXX, g++ and c++ that
links libstdc++ as a shared library, and the built extension is checked for it.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAME = "dfuse_torch"


def needs_shared_libstdcxx(library: Path) -> bool:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return "libstdc++.so" in dynamic


def shared_libstdcxx_compiler() -> str:
    """The first C++ compiler of $CXX, g++, c++ whose shared libraries load libstdc++.so."""
    candidates = [c for c in (os.environ.get("CXX"), shutil.which("g++"), shutil.which("c++")) if c]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("#include <string>\nstd::string probe(int v) { return std::to_string(v); }\n")
        for compiler in candidates:
            library = Path(tmp) / "probe.so"
            built = subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(library)],
                                   capture_output=True).returncode == 0
            if built and needs_shared_libstdcxx(library):
                return compiler
    raise SystemExit(f"build_torch_ext: none of {candidates} links libstdc++ as a shared library")


def build(cmake_build: Path, out: Path, verbose: bool) -> Path:
    from torch.utils import cpp_extension

    os.environ["CXX"] = shared_libstdcxx_compiler()

    libdfuse = cmake_build / "libdfuse.so"
    if not libdfuse.is_file():
        raise SystemExit(f"build_torch_ext: {libdfuse} not found; build the CMake project first")
    out.mkdir(parents=True, exist_ok=True)
    cuda_home = cpp_extension.CUDA_HOME or "/usr/local/cuda"
    cpp_extension.load(
        name=NAME,
        # torch_ops.cpp defines the library; each other file adds one op family as a fragment.
        sources=sorted(str(p) for p in (REPO / "python" / "dfuse" / "csrc").glob("*.cpp")),
        # The dfuse headers are C++20; a later -std wins over cpp_extension's -std=c++17.
        extra_cflags=["-std=c++20", "-O2", "-Wall"],
        extra_include_paths=[str(REPO / "include"), os.path.join(cuda_home, "include")],
        extra_ldflags=[f"-L{cmake_build}", "-ldfuse", f"-Wl,-rpath,{cmake_build}"],
        build_directory=str(out),
        with_cuda=True,
        is_python_module=False,
        verbose=verbose,
    )
    library = out / f"{NAME}.so"
    if not needs_shared_libstdcxx(library):
        raise SystemExit(f"build_torch_ext: {library} does not load libstdc++.so (built with {os.environ['CXX']})")
    return library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cmake-build", type=Path, default=REPO / "build",
                        help="the CMake build directory holding libdfuse.so (default: build)")
    parser.add_argument("--out", type=Path, default=REPO / "python" / "dfuse" / "_lib",
                        help="where the extension is built (default: python/dfuse/_lib)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--print-cxx", action="store_true",
                        help="print the C++ compiler that links libstdc++ shared, and build nothing")
    args = parser.parse_args()
    if args.print_cxx:
        print(shared_libstdcxx_compiler())
        return 0
    print(build(args.cmake_build.resolve(), args.out.resolve(), args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
