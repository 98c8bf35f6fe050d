#!/usr/bin/env bash
# The workload sample on a real GPU: alone, then beside a second process training on the same GPU (what time-slicing
# gives two tenants without MPS or MIG). Prints the GPU, its driver and CUDA, and for each run the step time
# p50/p95, its coefficient of variation and samples/s, then the slowdown p50(beside) / p50(alone).
#   bench/gpu_sample.sh                 # needs a GPU and PyTorch with CUDA (pip install torch)
#   FRAMEWORK=numpy DEVICE=cpu bench/gpu_sample.sh   # the same script on CPU (a dry run where there is no GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
framework=${FRAMEWORK:-torch} device=${DEVICE:-cuda} steps=${STEPS:-600}
size=(--features "${FEATURES:-4096}" --width "${WIDTH:-8192}" --batch "${BATCH:-1024}" --dataset-mb "${DATASET_MB:-256}")
work=$(mktemp -d)
trap 'kill "${other:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
sample() {  # name steps
  "$py" -m harness.sample.train --framework "$framework" --device "$device" "${size[@]}" --steps "$2" \
    --warmup $((steps / 6)) --checkpoint-every "$steps" --port 0 --log-every 100 --data-dir "$work/$1"
}
if [ "$device" = cuda ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
sample alone "$steps" > "$work/alone.log"
sample other $((steps * 20)) > "$work/other.log" 2>&1 &
other=$!
for _ in $(seq 600); do grep -q "step 100/" "$work/other.log" && break; sleep 0.5; done  # it trains, past warm-up
grep -q "step 100/" "$work/other.log" || { echo "the second process never reached step 100:"; tail -5 "$work/other.log"; exit 1; }
sample beside "$steps" > "$work/beside.log"
"$py" - "$work/alone.log" "$work/beside.log" <<'PY'
import sys
from pathlib import Path
from harness.sample.train import parse_summary
runs = {name: parse_summary(Path(path).read_text()) for name, path in zip(("alone", "beside"), sys.argv[1:])}
for name, s in runs.items():
    gpu = s.get("gpu") or {}
    print(f"{name:7} {s['framework']} on {s['device']} {gpu.get('name', '')} CUDA {gpu.get('cuda', '-')}: "
          f"step p50 {s['p50_s'] * 1000:.2f} ms, p95 {s['p95_s'] * 1000:.2f} ms, CoV {s['cov']:.3f}, "
          f"{s['samples_per_s']:.0f} samples/s, data {s['data_read_mb_s']:.0f} MB/s, "
          f"GPU memory {gpu.get('memory_bytes', 0) / 2**30:.2f} GiB, utilisation {gpu.get('utilization', '-')}")
print(f"slowdown p50(beside) / p50(alone): {runs['beside']['p50_s'] / runs['alone']['p50_s']:.3f}x")
PY
