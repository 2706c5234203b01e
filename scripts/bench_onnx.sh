#!/usr/bin/env bash
# ONNX Runtime as a peer (docs/benchmarks.md): `mact bench` and ONNX Runtime's CPU run of `mact export onnx`'s
# graphs, alternating in one run, same threads, same shapes (the golden's N; use a task whose prompt gives
# N = 130 for the LIBERO row, e.g. "pick up the bowl and put it on the plate" on `mact synth libero --seed 1`).
#   scripts/bench_onnx.sh MODEL_DIR ONNX_DIR GOLDEN_DIR [THREADS] [ITERS] [ROUNDS] [PRECISIONS]
# PRECISIONS: mact precisions to time each round (default "fp32 bf16"); ONNX Runtime runs the exported fp32
# graphs. Needs scripts/setup_onnx.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1 onnx=$2 golden=$3 threads=${4:-2} iters=${5:-3} rounds=${6:-2} precs=${7:-fp32 bf16}
MACT=${MACT_BIN:-build/mact}
echo "bench_onnx: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg) threads $threads iters $iters"
for r in $(seq 1 "$rounds"); do
    for p in $precs; do
        echo "== round $r: mact bench --precision $p"
        "$MACT" bench --model "$model" --threads "$threads" --iters "$iters" --precision "$p" 2>&1 | grep -vE '^\s*$'
    done
    echo "== round $r: ONNX Runtime (load $(cut -d' ' -f1-3 /proc/loadavg))"
    node tests/onnx/bench_onnx.js "$onnx" "$golden" --threads "$threads" --iters "$iters"
done
echo "bench_onnx: done $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
