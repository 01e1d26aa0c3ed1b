#!/usr/bin/env bash
# Session 38 run 3 (any card; carry nothing): run2.sh cut to the device time left (408 s, of which a machine's start
# takes ~100): qk_rows_fewer_instructions.patch applied, gpu_check's build of the patched tree, torch_bench of the
# ops it serves (each row also checks the op's contract against the eager chain at FLUX.1 and Wan 2.1). No baseline in
# the same call: the comparison is with session 37's H100 call (tree 48.6 us at FLUX.1), so it can only show a change
# larger than the ~1% those calls agree within; run2.sh remains the measurement to make.
set -u
LIMIT_S=${LIMIT_S:-250}
T=/tmp/s38r3
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s38r3.tgz
git apply docs/runs/2026-12-07-session38-run1/qk_rows_fewer_instructions.patch && echo "patch applied"
build_tree
# RUN3_OPS: fewer ops where the time left is shorter
read -ra ops <<<"${RUN3_OPS:-fused_qknorm_rope flux2_strided_qknorm_rope fused_inplace_qknorm_rope qk_rmsnorm}"
bench fewer_instructions "${ops[@]}"
snapshot
grep -h "copy bandwidth" $T/tb_*.txt
grep -h "^| .* | dfuse \|^| .* | compile " $T/tb_*.txt
contract_summary $T/tb_*.txt
