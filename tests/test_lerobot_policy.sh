#!/usr/bin/env bash
# kernels: via-engine (its checks are of the loader and the processors; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# The checkpoints users hold (docs/spec/molmoact2.md 2, 4.3; docs/checkpoints.md): LeRobot policy folders written
# as LeRobot's save code writes them (tests/reference/lerobot_policy.py) and Hugging Face hub repo ids resolved in a
# cache laid out as huggingface_hub lays one out. Gates:
#   - against the reference applying LeRobot's processors in float32 (tests/reference/predict_ref.py): the
#     integrator's gates of tests/predict_case.sh (ids identical, actions max abs <= 1e-4 x max(1, max|ref|));
#   - against the equivalent HF-layout folder (its merged weights, the policy's statistics as a norm tag, the joint
#     frame in its processor files): ids identical, actions max abs <= 1e-4 x max(1, max|a|) (LeRobot's float32
#     statistics against HF's double; a LoRA merge in float32 against float64);
#   - a repo id against its snapshot folder, and Python against the CLI: bit for bit;
#   - every surface on a policy folder (run, inspect, parity, export, bench, eval, serve on every protocol, Python);
#   - each bad input a named error, nothing computed.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/lerobot_policy; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; }
if ! scripts/setup_tokenizer.sh >"$T/tok_setup.log" 2>&1; then
    fail "lerobot_setup: scripts/setup_tokenizer.sh failed: $(tail -2 "$T/tok_setup.log")"; exit 1; fi
$MACT synth tiny "$T/base" --seed "$SEED" >/dev/null || { fail "lerobot_synth: mact synth tiny failed"; exit 1; }
. "$(dirname "$0")/predict_case.sh"
gen() {  # name, seed, generator args...
    local n=$1 s=$2; shift 2
    $PY tests/reference/lerobot_policy.py "$T/base" "$T/$n" --seed "$s" "$@" >"$T/$n.gen.log" 2>&1 \
        || { fail "lerobot_gen_$n: $(tail -2 "$T/$n.gen.log")"; return 1; }
}
# A: 6-dim tag, LeRobot's default null joint values, a full fine-tune, one file, float32 masks
gen A $((SEED + 1)) --state-dim 6 --action-dim 6 --hf-twin "$T/A_hf" --rename observation.images.front=observation.images.top
# B: 8-dim tag, joint values that are not SO-101's, LoRA (train_mode_vlm lora: no adapter_config.json), 2 shards,
#    BOOL masks, action_mode both (the encoder mask drops EOS)
gen B $((SEED + 2)) --state-dim 8 --action-dim 8 --joints custom --lora 4 --lora-alpha 8 --shards 2 --mask-dtype bool \
    --action-mode both --hf-twin "$T/B_hf"

# ---- against the reference, and against the equivalent HF folder
twin() {  # name, case dir, HF folder
    local name=$1 d=$2 hf=$3 imgs=() f
    for f in $($PY -c "import json;print(' '.join(json.load(open('$d/case.json'))['images']))"); do imgs+=(--image "$d/$f"); done
    $MACT run --model "$hf" "${imgs[@]}" --task "$($PY -c "import json;print(json.load(open('$d/case.json'))['task'])")" \
        --state "$($PY -c "import json;print(json.load(open('$d/case.json'))['state'])")" --noise "$d/noise.npy" \
        --precision fp32 --dump "$d/twin" >"$d.twin.log" 2>&1 || { fail "lerobot_${name}_hf_twin: mact run failed: $(tail -2 "$d.twin.log")"; return; }
    $PY - "$d" "$name" <<'PYEOF'
import sys, numpy as np
d, name = sys.argv[1:3]
ids, tids = np.load(f"{d}/dump/input_ids.npy"), np.load(f"{d}/twin/input_ids.npy")
a, b = np.load(f"{d}/dump/actions.npy"), np.load(f"{d}/twin/actions.npy")
e = float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
g = 1e-4 * max(1.0, float(np.abs(b).max()))
ok = ids.shape == tids.shape and (ids == tids).all() and e <= g
print(("PASS" if ok else "FAIL") + f" lerobot_{name}_equals_hf_twin (ids identical: {ids.shape == tids.shape and bool((ids == tids).all())}; "
      f"actions {a.shape} max abs {e:.3e} <= {g:.3e})")
PYEOF
}
MODEL="$T/A" run_case lerobot_null_joints_6d 2
twin null_joints_6d "$T/lerobot_null_joints_6d" "$T/A_hf"
MODEL="$T/B" run_case lerobot_custom_joints_8d_lora 2 "Put the cup on the plate."
twin custom_joints_8d_lora "$T/lerobot_custom_joints_8d_lora" "$T/B_hf"
# the base's own norm tag has other dims and statistics: the policy's processors are what was applied
$PY - "$T/base/norm_stats.json" "$T/A/policy_preprocessor_step_3_molmoact2_masked_normalizer.safetensors" <<'PYEOF'
import json, sys
sys.path.insert(0, "tests/reference")
from molmoact2_ref import read_safetensors
md = next(iter(json.load(open(sys.argv[1]))["metadata_by_tag"].values()))
t, _ = read_safetensors(sys.argv[2])
q = [float(x) for x in t["observation.state.q01"]]
ok = q != md["state_stats"]["q01"][:len(q)]
print(("PASS" if ok else "FAIL") + f" lerobot_stats_differ_from_base (base tag: state {len(md['state_stats']['q01'])} dims, q01 "
      f"{md['state_stats']['q01'][0]:.3g}...; the policy's processor: {len(q)} dims, q01 {q[0]:.3g}...)")
PYEOF

# ---- inspect: what came from where
out=$($MACT inspect "$T/B" 2>&1)
for want in "layout: LeRobot policy folder" "base: checkpoint_path $T/base" "LoRA adapters merged at load, scale 2" \
            "policy_preprocessor_step_3_molmoact2_masked_normalizer.safetensors" "norm tags: 1 (default \"policy\")" \
            "cameras 2, in this order: observation.images.top, observation.images.wrist" "flow steps 2" "joint frame: state signs ["; do
    grep -qF -- "$want" <<<"$out" && pass "lerobot_inspect: '$want'" || fail "lerobot_inspect: no '$want' in: $out"
done
grep -q "actions \[[0-9]* x 8\].*" <<<"$out" && grep -q "rows of a horizon of 12;" <<<"$out" \
    && pass "lerobot_inspect_horizon (chunk_size 12 over the base's max_action_horizon)" \
    || fail "lerobot_inspect_horizon: $(grep -A4 ' policy' <<<"$out")"
# the caller's contract names the dims as the config's dataset_feature_names do (the generator's joint_i ... gripper)
grep -qF "send: state [8] joint_0, joint_1, joint_2, joint_3, joint_4, joint_5, joint_6, gripper" <<<"$out" \
    && pass "lerobot_inspect_names (state dims named from dataset_feature_names)" \
    || fail "lerobot_inspect_names: $(grep -A4 ' policy' <<<"$out")"

# ---- the hub cache: repo ids, revisions, HF_HUB_CACHE and HF_HOME, bit for bit equal to the folders
cache_put() {  # cache root, repo id, folder, commit: snapshots/COMMIT/* symlinked into blobs/SHA256, refs/main
    local d=$1/models--${2/\//--} f h
    mkdir -p "$d/blobs" "$d/refs" "$d/snapshots/$4"
    for f in "$3"/*; do h=$(sha256sum "$f" | cut -c1-64); cp "$f" "$d/blobs/$h"; ln -sf "../../blobs/$h" "$d/snapshots/$4/$(basename "$f")"; done
    printf '%s' "$4" >"$d/refs/main"
}
C1=$(printf 'a%.0s' {1..40}); C2=$(printf 'b%.0s' {1..40})
gen A_hub $((SEED + 1)) --state-dim 6 --action-dim 6 --checkpoint-path org/base --rename observation.images.front=observation.images.top
cache_put "$T/hub" org/base "$T/base" "$C1"
printf '%s' "$C1" >"$T/hub/models--org--base/refs/v1"
cache_put "$T/hub" org/policy-a "$T/A_hub" "$C2"
mkdir -p "$T/hfhome" && cp -a "$T/hub" "$T/hfhome/hub"
d="$T/lerobot_null_joints_6d"
run_args=(--image "$d/cam0.png" --image "$d/cam1.npy" --task "pick it up" --state "$($PY -c "import json;print(json.load(open('$d/case.json'))['state'])")"
          --seed 7 --precision fp32 --json)
$MACT run --model "$T/A" "${run_args[@]}" >"$T/ref.json" 2>&1 || fail "lerobot_hub_ref: $(tail -1 "$T/ref.json")"
hub_case() {  # name, env assignment, model reference
    local name=$1 env=$2 ref=$3
    if env "$env" HOME="$T/nohome" "$MACT" run --model "$ref" "${run_args[@]}" >"$T/$name.json" 2>&1 &&
       $PY -c "import json,sys; sys.exit(json.load(open('$T/$name.json'))['actions'] != json.load(open('$T/ref.json'))['actions'])"
    then pass "lerobot_hub_$name ($ref: the same actions, bit for bit, as $T/A)"
    else fail "lerobot_hub_$name: $ref: $(head -c 300 "$T/$name.json")"; fi
}
hub_case repo_id "HF_HUB_CACHE=$T/hub" org/policy-a
hub_case revision_main "HF_HUB_CACHE=$T/hub" org/policy-a@main
hub_case revision_commit "HF_HUB_CACHE=$T/hub" "org/policy-a@$C2"
hub_case hf_home "HF_HOME=$T/hfhome" org/policy-a
hub_case local_policy_hub_base "HF_HUB_CACHE=$T/hub" "$T/A_hub"
cp -r "$T/A_hub" "$T/A_rev" && $PY -c "
import json; p='$T/A_rev/config.json'; c=json.load(open(p)); c['checkpoint_revision']='v1'; json.dump(c, open(p,'w'))"
hub_case checkpoint_revision "HF_HUB_CACHE=$T/hub" "$T/A_rev"

# ---- Python: Policy.from_pretrained on a repo id equals the CLI bit for bit
HF_HUB_CACHE="$T/hub" PYTHONPATH=python $PY - "$T" "$d" <<'PYEOF'
import json, sys, numpy as np
import mact
T, d = sys.argv[1:3]
from PIL import Image
case = json.load(open(f"{d}/case.json"))
ref = np.array(json.load(open(f"{T}/ref.json"))["actions"], np.float32)
with mact.Policy.from_pretrained("org/policy-a", precision="fp32") as p:
    imgs = [np.asarray(Image.open(f"{d}/cam0.png").convert("RGB")), np.load(f"{d}/cam1.npy")]
    out = p.predict_action(images=imgs, task="pick it up", state=[float(x) for x in case["state"].split(",")], seed=7)
    a = np.asarray(out.actions, np.float32).reshape(ref.shape)
    tags = [t.name for t in p.norm_tags]
ok = a.tobytes() == ref.tobytes() and tags == ["policy"]
print(("PASS" if ok else "FAIL") + f" lerobot_python_repo_id (Policy.from_pretrained('org/policy-a') = mact run, bitwise: "
      f"{a.tobytes() == ref.tobytes()}; tags {tags})")
PYEOF

# ---- parity (golden from the reference on the equivalent HF folder), export, bench on a policy folder
$PY tests/reference/make_golden.py "$T/A_hf" "$T/gA" --seed $((SEED + 5)) --n-images 2 >"$T/gA.log" 2>&1 || fail "lerobot_golden: $(tail -2 "$T/gA.log")"
$MACT parity "$T/gA" --model "$T/A" >"$T/parity.log" 2>&1 && pass "lerobot_parity ($(grep '^parity:' "$T/parity.log"))" \
    || fail "lerobot_parity: $(grep -E 'FAIL|could not|error' "$T/parity.log" | head -5 | tr '\n' ';')"
$MACT export golden --model "$T/A" "${run_args[@]:0:6}" --state "$($PY -c "import json;print(json.load(open('$d/case.json'))['state'])")" \
    --out "$T/eg" >"$T/eg.log" 2>&1 && $MACT parity "$T/eg" --model "$T/A" >"$T/eg_parity.log" 2>&1 \
    && pass "lerobot_export_golden (its golden set passes mact parity on the policy folder: $(grep '^parity:' "$T/eg_parity.log"))" \
    || fail "lerobot_export_golden: $(tail -2 "$T/eg.log") $(tail -2 "$T/eg_parity.log" 2>/dev/null)"
$MACT export onnx --model "$T/A" --out "$T/onnx" >"$T/onnx.log" 2>&1 && ls "$T/onnx"/*/*.onnx >/dev/null 2>&1 \
    && pass "lerobot_export_onnx ($(ls "$T/onnx"/*/*.onnx | wc -l) graphs)" || fail "lerobot_export_onnx: $(tail -2 "$T/onnx.log")"
$MACT bench --model "$T/A" --iters 1 --threads 1 >"$T/bench.log" 2>&1 && grep -q "total" "$T/bench.log" \
    && pass "lerobot_bench" || fail "lerobot_bench: $(tail -2 "$T/bench.log")"

# ---- eval: a synthetic SO-101 dataset of the policy's widths, its cameras mapped by --camera
$MACT synth-dataset "$T/ds" --robot so101 --episodes 2 --len 120:130 --video mpeg4 --seed "$SEED" >"$T/ds.log" 2>&1 \
    || fail "lerobot_eval_dataset: $(tail -2 "$T/ds.log")"
cams=($($PY -c "import json;print(' '.join(k for k,v in json.load(open('$T/ds/meta/info.json'))['features'].items() if v['dtype'] in ('video','image')))"))
# every frame evaluated (--static-threshold 0): the policy's chunks really ran and were measured
# C: A's shape with normalize_gripper (every mask true): the synthetic SO-101 gripper (degrees) is normalised, not
#    passed through raw (LeRobot requires a raw value within [-1, 1])
if [ ${#cams[@]} -ge 2 ] && gen C $((SEED + 3)) --state-dim 6 --action-dim 6 --normalize-gripper &&
   $MACT eval --model "$T/C" --dataset "$T/ds" --out "$T/ev" --camera "${cams[0]}" --camera "${cams[1]}" \
        --steps 2 --static-threshold 0 >"$T/ev.log" 2>&1 && [ -f "$T/ev/result.json" ] &&
   $PY -c "import json,math,sys; r=json.load(open('$T/ev/result.json')); sys.exit(not (r['frames_evaluated'] > 0 and math.isfinite(r['mae']) and r['mae'] > 0))"
then pass "lerobot_eval ($(grep -m1 -i 'frames evaluated' "$T/ev.log"); $(grep -m1 -i 'mae' "$T/ev.log"))"
else fail "lerobot_eval: $(tail -3 "$T/ev.log")"; fi

# ---- serve: every protocol on the policy folder, actions bit for bit `mact run`'s
if "$PY" -c "import websockets, msgpack, requests, grpc, grpc_tools, torch" 2>/dev/null; then
    mkdir -p "$T/pb"
    "$PY" -m grpc_tools.protoc -I src/server --python_out="$T/pb" --grpc_python_out="$T/pb" src/server/lerobot_services.proto
    read -r P1 P2 P3 P4 < <("$PY" -c "
import socket
ss=[socket.socket() for _ in range(4)]
[s.bind(('127.0.0.1',0)) for s in ss]
print(' '.join(str(s.getsockname()[1]) for s in ss))")
    $MACT serve --model "$T/A" --openpi "$P1" --act "$P2" --vla-eval "$P3" --lerobot "$P4" --threads 1 >"$T/serve.log" 2>&1 &
    SPID=$!
    up=0; for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$P2/readyz" >/dev/null 2>&1 && { up=1; break; }; kill -0 $SPID 2>/dev/null || break; sleep 0.1; done
    if [ $up = 1 ]; then
        MACT_BIN="$MACT" "$PY" tests/serve/test_policy_folder.py "$T/A" "$T" "$P1" "$P2" "$P3" "$P4" "$T/pb" "$T/serve.log"
    else fail "lerobot_serve_ready: $(tail -3 "$T/serve.log")"; fi
    kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null
else fail "lerobot_serve: python3-websockets/-msgpack/-requests/-grpcio/-grpc-tools/torch missing (scripts/setup.sh --test)"; fi

# ---- bad inputs: each a named error, and nothing computed
bad() {  # name, expected fragment, folder edit (python on config c / folder d), [model reference]
    local name=$1 frag=$2 edit=$3 ref=${4:-$T/bad_$1}
    rm -rf "$T/bad_$name"; cp -r "$T/A" "$T/bad_$name"
    $PY - "$T/bad_$name" <<PYEOF
import json, os, sys
sys.path.insert(0, "tests/reference")
d = sys.argv[1]
c = json.load(open(f"{d}/config.json"))
$edit
json.dump(c, open(f"{d}/config.json", "w"))
PYEOF
    local out rc; out=$(env HF_HUB_CACHE="$T/hub" "$MACT" run --model "$ref" "${run_args[@]}" 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$frag" <<<"$out" && ! grep -q '"actions"' <<<"$out"; then pass "lerobot_bad_$name ($out)"
    else fail "lerobot_bad_$name: rc=$rc, want '$frag': $out"; fi
}
bad base_not_cached "is not in the Hugging Face cache" "c['checkpoint_path'] = 'org/missing'"
bad base_not_cached_command "huggingface-cli download org/missing" "c['checkpoint_path'] = 'org/missing'"
bad revision_missing "has no revision 'nope'" "c['checkpoint_path'] = 'org/base'; c['checkpoint_revision'] = 'nope'"
bad joint_lengths "joint_signs has 3 values but joint_offsets 2" "c['joint_signs'] = [1, 1, 1]; c['joint_offsets'] = [0, 0]"
bad joint_only_signs "joint_signs is set but joint_offsets is null" "c['joint_signs'] = [1, -1]; c['joint_offsets'] = None"
bad joint_lengths_processor "joint_signs has 2 values but joint_offsets 1" "
p = json.load(open(f'{d}/policy_preprocessor.json'))
p['steps'][2]['config'] = {'joint_signs': [1, -1], 'joint_offsets': [90]}
json.dump(p, open(f'{d}/policy_preprocessor.json', 'w'))"
bad type_pi0 "LeRobot policy of type 'pi0'" "c['type'] = 'pi0'"
bad discrete "inference_action_mode is discrete" "c['inference_action_mode'] = 'discrete'"
bad stat_missing "has no action.q99" "
from molmoact2_ref import read_safetensors, SafetensorsWriter
f = f'{d}/policy_postprocessor_step_1_molmoact2_masked_unnormalizer.safetensors'
t, _ = read_safetensors(f)
del t['action.q99']
w = SafetensorsWriter(f, [(k, 'F32', v.shape) for k, v in t.items()])
[w.write(k, v) for k, v in t.items()]
w.close()"
bad sampler_switch "refusing to drop them" "c['use_grid_token_sampler'] = False"
bad sampler_k "grid_token_sampler_num_tokens is 8" "c['grid_token_sampler_num_tokens'] = 8"
bad unknown_step "is not a step of LeRobot's MolmoAct2 preprocessor" "
p = json.load(open(f'{d}/policy_preprocessor.json'))
p['steps'].insert(3, {'registry_name': 'relative_actions_processor', 'config': {}})
json.dump(p, open(f'{d}/policy_preprocessor.json', 'w'))"
# a LoRA policy whose config's lora_rank disagrees with its adapters
rm -rf "$T/bad_lora_rank_B"; cp -r "$T/B" "$T/bad_lora_rank_B"
$PY -c "import json; p='$T/bad_lora_rank_B/config.json'; c=json.load(open(p)); c['lora_rank']=7; json.dump(c, open(p,'w'))"
out=$($MACT run --model "$T/bad_lora_rank_B" "${run_args[@]}" 2>&1) && fail "lerobot_bad_lora_rank: accepted" \
    || { grep -qF "but the adapter's r (lora_rank) is 7" <<<"$out" && pass "lerobot_bad_lora_rank ($out)" || fail "lerobot_bad_lora_rank: $out"; }
# a symlink in a snapshot that leaves the cache
cp -a "$T/hub" "$T/hub_evil"
ln -s /etc/hostname "$T/hub_evil/models--org--base/snapshots/$C1/extra.json"
out=$(HF_HUB_CACHE="$T/hub_evil" $MACT run --model org/policy-a "${run_args[@]}" 2>&1) && fail "lerobot_bad_symlink: accepted" \
    || { grep -qF "outside the repo's cache folder" <<<"$out" && pass "lerobot_bad_symlink_leaves_cache ($out)" || fail "lerobot_bad_symlink_leaves_cache: $out"; }
# a folder that is neither layout, and one whose config.json is neither
mkdir -p "$T/notamodel" && echo hi >"$T/notamodel/readme.txt"
out=$($MACT inspect "$T/notamodel" 2>&1) && fail "lerobot_bad_not_a_checkpoint: accepted" \
    || { grep -qF "has no config.json" <<<"$out" && grep -qF "readme.txt" <<<"$out" && pass "lerobot_bad_not_a_checkpoint ($out)" || fail "lerobot_bad_not_a_checkpoint: $out"; }
mkdir -p "$T/oddconfig" && echo '{"model_type": "llama"}' >"$T/oddconfig/config.json"
out=$($MACT inspect "$T/oddconfig" 2>&1) && fail "lerobot_bad_neither_config: accepted" \
    || { grep -qF "neither a MolmoAct2 HF config nor a LeRobot policy config" <<<"$out" && pass "lerobot_bad_neither_config ($out)" || fail "lerobot_bad_neither_config: $out"; }
out=$(HF_HUB_CACHE="$T/hub" $MACT inspect org/nothing 2>&1) && fail "lerobot_bad_repo_absent: accepted" \
    || { grep -qF "huggingface-cli download org/nothing" <<<"$out" && grep -qF "$T/hub/models--org--nothing" <<<"$out" \
         && pass "lerobot_bad_repo_absent ($out)" || fail "lerobot_bad_repo_absent: $out"; }
