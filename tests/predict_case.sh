# The integrator's path against the reference, one case: tests/reference/predict_ref.py writes frames, a state, a task
# and noise for MODEL (an HF folder or a LeRobot policy folder) with the expected ids and actions, `mact run` runs
# them, compare checks the dump. Sourced by the suites that need it (test_predict.sh, test_lerobot_policy.sh): they
# set PY, MACT, T and SEED. Gates: token ids identical; pixel_values max abs <= 1e-6; normalised actions max abs <=
# 1e-4; robot-unit actions max abs <= 1e-4 x max(1, max|ref|).
compare() {  # name, case dir
    local name=$1 d=$2
    $PY - "$d" "$name" <<'PYEOF'
import json, sys, numpy as np
d, name = sys.argv[1], sys.argv[2]
r = np.load(f"{d}/ref.npz")
def res(ok, what, detail):
    print(("PASS" if ok else "FAIL") + f" predict_{name}/{what} {detail}")
ids = np.load(f"{d}/dump/input_ids.npy").astype(np.int64)
ok = ids.shape == r["input_ids"].shape and (ids == r["input_ids"]).all()
res(ok, "input_ids", f"n={ids.size} ref_n={r['input_ids'].size}" + ("" if ok else f" first diff at {int(np.argmax(ids[:min(ids.size, r['input_ids'].size)] != r['input_ids'][:min(ids.size, r['input_ids'].size)]))}"))
pv = np.load(f"{d}/dump/pixel_values.npy"); e = float(np.abs(pv - r["pixel_values"]).max())
res(e <= 1e-6, "pixel_values", f"max_abs={e:.3e} (<= 1e-6)")
an = np.load(f"{d}/dump/actions_norm.npy"); e = float(np.abs(an - r["actions_norm"]).max())
res(e <= 1e-4, "actions_norm", f"max_abs={e:.3e} (<= 1e-4)")
a = np.load(f"{d}/dump/actions.npy"); ra = r["actions"]
e = float(np.abs(a - ra).max()) if a.shape == ra.shape else float("inf")
scale = float(np.abs(ra).max()) + 1e-12
res(e <= 1e-4 * max(1.0, scale), "actions", f"shape={a.shape} max_abs={e:.3e} (<= 1e-4 x max(1, {scale:.3g}))")
PYEOF
}
run_case() {  # name, n_images, [task]
    local name=$1 n=$2 task=${3:-}
    local d="$T/$name" extra=()
    [ -n "$task" ] && extra=(--task "$task")
    if ! $PY tests/reference/predict_ref.py "${MODEL:-$T/model}" "$d" --seed $((SEED + n)) --n-images "$n" "${extra[@]}" >"$d.log" 2>&1; then
        echo "FAIL predict_$name: reference failed"; tail -5 "$d.log"; return; fi
    local imgs=() f
    for f in $($PY -c "import json;print(' '.join(json.load(open('$d/case.json'))['images']))"); do imgs+=(--image "$d/$f"); done
    local task_arg state tag
    task_arg=$($PY -c "import json;print(json.load(open('$d/case.json'))['task'])")
    state=$($PY -c "import json;print(json.load(open('$d/case.json'))['state'])")
    tag=$($PY -c "import json;print(json.load(open('$d/case.json'))['norm_tag'])")
    local tag_arg=(); [ -n "$tag" ] && tag_arg=(--norm-tag "$tag")
    if ! $MACT run --model "${MODEL:-$T/model}" "${imgs[@]}" --task "$task_arg" --state "$state" "${tag_arg[@]}" \
            --noise "$d/noise.npy" --dump "$d/dump" --precision fp32 >"$d.run.log" 2>&1; then
        echo "FAIL predict_$name: mact run failed:"; tail -5 "$d.run.log"; return; fi
    compare "$name" "$d"
}
