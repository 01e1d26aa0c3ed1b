#!/usr/bin/env bash
# Session 23 run 3: ncu of temb_table_slices and ltx2_ada_values (the table split at eight blocks per SM, one vector per
# thread for 32-byte vectors) and qk_head_layernorm beside torch.compile's kernels: duration, DRAM bytes read and
# written, sections (gpu_check's profile step). The tree of the commit that adds this script.
# The first call profiled run 2's last build (ea39805's files: the device's copy of the tree kept older mtimes than
# its build outputs, so make rebuilt nothing; its profile.csv is in head_by_mistake/); the sources are touched first.
set -u
touch src/common/layer_norm_stats.h src/cuda/layer_norm_stats.cuh src/cuda/layer_norm_modulate_rows.cuh \
  src/cuda/norm_fp32_rows.cuh src/cuda/table_split.cuh src/ops/norm/fp32_layernorm_bf16.cu src/ops/norm/qk_head_layernorm.cu
T=/tmp/r3
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_PROFILE=1 DFUSE_PROFILE_OPS="temb_table_slices ltx2_ada_values qk_head_layernorm" \
DFUSE_CHECK_BUDGET_S=330 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/profile.log $T/ 2>/dev/null
tar czf $OUT/r3.tgz -C /tmp r3
tail -8 $T/summary.md
python3 - <<'PY'
import csv
rows = list(csv.reader(open('/tmp/r3/profile.csv')))
head = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
cols = rows[head]
def col(name):
    return cols.index(name)
for r in rows[head + 2:]:
    if len(r) != len(cols):
        continue
    name = r[col('Kernel Name')][:60]
    vals = [r[col(m)] for m in ('gpu__time_duration.sum', 'dram__bytes_read.sum', 'dram__bytes_write.sum',
                                'dram__throughput.avg.pct_of_peak_sustained_elapsed',
                                'sm__throughput.avg.pct_of_peak_sustained_elapsed', 'launch__grid_size',
                                'launch__block_size', 'launch__registers_per_thread', 'smsp__inst_executed.sum')]
    print(name, '|', ' | '.join(vals))
PY
