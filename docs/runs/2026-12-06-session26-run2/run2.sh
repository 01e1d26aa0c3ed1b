#!/usr/bin/env bash
# Session 26 run 2 (the H200 of run 1, its build kept): the acceptance check part 2, torch_bench of every op
# (each fused op beside its torch eager chain and torch.compile of the chain, the copy bandwidth measured in the
# same run, every output checked against eager at model shapes).
set -u
T=/tmp/r2
mkdir -p $T
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
[[ -f $DFUSE_TORCH_LIB ]] || { echo "no build from run 1 on this machine"; exit 1; }
timeout 560 python3 bench/torch_bench.py --json $T/torch_bench.json >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
tar czf $OUT/r2.tgz -C /tmp r2
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/torch_bench.txt
grep "meets its contract" $T/torch_bench.txt | grep -v "True, fused kernel ran: True" | head
python3 bench/compare_runs.py h200=$T/torch_bench.json | tail -80
