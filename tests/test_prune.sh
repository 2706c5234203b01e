#!/usr/bin/env bash
# kernels: via-engine
# The ViT pruning tools (docs/compression.md) against the PyTorch reference (tests/reference/prune_ref.py) on
# fresh random tiny checkpoints and frames (SEED printed; SEED=... replays). Thresholds, printed on every line:
#   SNR per block:          |mact - reference| <= 1e-3 dB (fp32 both sides)
#   distillation metrics:   |cos_token|, |cos_flat| differences <= 1e-5; rel_mse within 1e-3 relative (+1e-9)
#   pruned vs identity:     mact parity's gate (cosine >= 0.99999, max abs <= 1e-4 x max|ref|), max abs printed
#   full keep:              outputs bitwise equal (distill-eval "identical"), files byte-identical but config.json
#   refusals:               non-zero exit, the reason on stderr, no output directory and no temporary left
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
REF=tests/reference/prune_ref.py
T=${MACT_TMP:-$(mktemp -d)}/prune; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; }
# the teachers: HF layout, 8 of 10 configured ViT blocks stored, taps [-3,-6] = layers 7 and 4 (the real teacher:
# 25 of 27, [-3,-9] = 24 and 18), tensors in the generator's order; a LeRobot+PEFT one with LoRA on every ViT
# block, sharded in 3; and mact synth's tiny (3 blocks, safetensors order, tokenizer.json: mact run works)
$PY $REF gen "$T/A" --seed "$SEED" >"$T/genA.log" 2>&1 || { fail "prune_gen_A: $(tail -2 "$T/genA.log")"; exit 1; }
$PY $REF gen "$T/B" --seed $((SEED + 1)) --vit-lora 4 --shards 3 >"$T/genB.log" 2>&1 || { fail "prune_gen_B: $(tail -2 "$T/genB.log")"; exit 1; }
$MACT synth tiny "$T/C" --seed $((SEED + 2)) >"$T/genC.log" 2>&1 || { fail "prune_gen_C: $(tail -2 "$T/genC.log")"; exit 1; }
$PY $REF images "$T/img" --n 3 --seed $((SEED + 3)) >/dev/null || { fail "prune_images"; exit 1; }
PNGS=("$T"/img/im*.png); NPYS=("$T"/img/im*.npy)
IMG_ARGS=(); for p in "${PNGS[@]}"; do IMG_ARGS+=(--image "$p"); done

# ---- SNR per block and the proposed keep-set
$MACT prune-analyze --model "$T/A" "${IMG_ARGS[@]}" --json "$T/snr_c.json" --png "$T/snr.png" --target-depth 4 \
    >"$T/snr_c.log" 2>&1 || fail "prune_analyze: exit $? $(tail -2 "$T/snr_c.log")"
$PY $REF snr "$T/A" --images "${NPYS[@]}" --target-depth 4 --json "$T/snr_ref.json" >"$T/snr_ref.log" 2>&1 ||
    fail "prune_snr_ref: $(tail -2 "$T/snr_ref.log")"
$PY - "$T/snr_c.json" "$T/snr_ref.json" <<'EOF'
import json, sys
c, r = (json.load(open(p)) for p in sys.argv[1:3])
d = max(abs(a - b) for a, b in zip(c["snr_db"], r["snr_db"]))
ok = len(c["snr_db"]) == len(r["snr_db"]) == 8 and d <= 1e-3
print(f"{'PASS' if ok else 'FAIL'} prune_snr_vs_reference (8 blocks, max |mact - ref| = {d:.2e} dB <= 1e-3; mact "
      + " ".join(f"{v:.4f}" for v in c["snr_db"]) + "; ref " + " ".join(f"{v:.4f}" for v in r["snr_db"]) + ")")
ok = c["keep"] == r["keep"] and c["student_taps"] == r["student_taps"]
print(f"{'PASS' if ok else 'FAIL'} prune_target_depth (depth 4: mact keep {c['keep']} taps {c['student_taps']} "
      f"lands on {c['student_taps_teacher_layers']}; reference keep {r['keep']} taps {r['student_taps']}; deepest tap "
      f"{max(c['taps'])} pinned)")
EOF
if [ "$(head -c 8 "$T/snr.png" | od -An -tx1 | tr -d ' ')" = "89504e470d0a1a0a" ]; then pass "prune_png (bar chart $(stat -c %s "$T/snr.png") bytes)"
else fail "prune_png: $T/snr.png is not a PNG"; fi
vision_parity() {  # name, what the row compares, mact parity's log: PASS or FAIL, with the vision row's numbers and gate
    local row nums
    row=$(awk '$1 == "vision"' "$3")
    [ -n "$row" ] || { fail "$1: no vision row in mact parity's output: $(tr '\n' ' ' <"$3")"; return; }
    nums=$(awk '{printf "cosine %s max_abs_err %s max|ref| %s; gate cosine >= 0.99999, max abs <= 1e-4 x max|ref| = %.3g", $3, $4, $5, 1e-4 * $5}' <<<"$row")
    [ "${row##* }" = PASS ] && pass "$1 ($2: $nums)" || fail "$1 ($2: $nums; row: $row)"
}
distill_cmp() {  # mact's json, the reference's json, name
    $PY - "$1" "$2" "$3" <<'EOF'
import json, sys
c, r = (json.load(open(p)) for p in sys.argv[1:3])
rows = list(zip(c["images"], r["images"])) + [(c["overall"], r["overall"])]
dc = max(max(abs(a["cos_token"] - b["cos_token"]), abs(a["cos_flat"] - b["cos_flat"])) for a, b in rows)
dm = max(abs(a["rel_mse"] - b["rel_mse"]) / (abs(b["rel_mse"]) + 1e-9) for a, b in rows)
o, q = c["overall"], r["overall"]
ok = dc <= 1e-5 and dm <= 1e-3 and not o["identical"]
print(f"{'PASS' if ok else 'FAIL'} prune_distill_vs_reference_{sys.argv[3]} (overall mact cos_token {o['cos_token']:.6f} cos_flat "
      f"{o['cos_flat']:.6f} rel_mse {o['rel_mse']:.6f}; ref {q['cos_token']:.6f} {q['cos_flat']:.6f} {q['rel_mse']:.6f}; "
      f"max |d cos| {dc:.1e} <= 1e-5, max rel d rel_mse {dm:.1e} <= 1e-3)")
EOF
}
# ---- the card's kind of keep-set: the shallow tap's layer (4) dropped, explicit student taps [-1,-4]
KEEP=0,1,2,5,7; TAPS=-1,-4
if $MACT prune --model "$T/A" --keep $KEEP --taps=$TAPS --out "$T/A_p" >"$T/A_p.log" 2>&1; then
    grep -q "tap 0: student vit_layers\[0\] = -1 = student block 4 = teacher layer 7" "$T/A_p.log" &&
    grep -q "tap 1: student vit_layers\[1\] = -4 = student block 1 = teacher layer 1" "$T/A_p.log" &&
        pass "prune_taps_printed (-1 -> teacher layer 7, -4 -> teacher layer 1)" || fail "prune_taps_printed: $(grep '^tap' "$T/A_p.log")"
    $PY $REF check "$T/A" "$T/A_p" --keep $KEEP --taps=$TAPS
    [ "$(stat -c %a "$T/A_p")" = "$(stat -c %a "$T/A")" ] && pass "prune_out_mode ($(stat -c %a "$T/A_p"), as the teacher's directory)" ||
        fail "prune_out_mode: $(stat -c %a "$T/A_p") vs $(stat -c %a "$T/A")"
    $PY $REF identity "$T/A" --keep $KEEP --taps=$TAPS --images "${NPYS[@]}" --golden "$T/g_A_p" --student "$T/A_p" | grep -v '^identity'
    $MACT parity "$T/g_A_p" --model "$T/A_p" >"$T/A_p.parity" 2>&1
    vision_parity prune_identity_parity "mact on the pruned checkpoint vs the reference teacher with blocks 3,4,6 as the identity" "$T/A_p.parity"
    # the distillation metrics: mact distill-eval against the reference
    $MACT distill-eval --teacher "$T/A" --student "$T/A_p" "${IMG_ARGS[@]}" --json "$T/d_c.json" >"$T/d_c.log" 2>&1 || fail "prune_distill_eval: $(tail -2 "$T/d_c.log")"
    $PY $REF distill "$T/A" "$T/A_p" --images "${NPYS[@]}" --json "$T/d_r.json" >/dev/null 2>&1 || fail "prune_distill_ref"
    distill_cmp "$T/d_c.json" "$T/d_r.json" card_keep
else fail "prune_card_keep: $(tail -3 "$T/A_p.log")"; fi
# ---- default taps: a keep-set holding both tapped layers (7, 4)
if $MACT prune --model "$T/A" --keep 0,2,4,7 --out "$T/A_d" >"$T/A_d.log" 2>&1; then
    $PY $REF check "$T/A" "$T/A_d" --keep 0,2,4,7
    $PY $REF identity "$T/A" --keep 0,2,4,7 --taps=-1,-2 --images "${NPYS[0]}" --golden "$T/g_A_d" >/dev/null
    $MACT parity "$T/g_A_d" --model "$T/A_d" >"$T/A_d.parity" 2>&1
    $MACT distill-eval --teacher "$T/A" --student "$T/A_d" "${IMG_ARGS[@]}" --json "$T/d2_c.json" >/dev/null 2>&1 &&
    $PY $REF distill "$T/A" "$T/A_d" --images "${NPYS[@]}" --json "$T/d2_r.json" >/dev/null 2>&1 &&
        distill_cmp "$T/d2_c.json" "$T/d2_r.json" default_taps || fail "prune_distill_default_taps: distill-eval or the reference failed"
    vision_parity prune_default_taps_parity "taps on teacher layers 7 and 4" "$T/A_d.parity"
else fail "prune_default_taps: $(tail -3 "$T/A_d.log")"; fi
# ---- LeRobot + LoRA on the ViT blocks, sharded: renamed with their blocks, index rewritten
if $MACT prune --model "$T/B" --keep $KEEP --taps=$TAPS --out "$T/B_p" >"$T/B_p.log" 2>&1; then
    $PY $REF check "$T/B" "$T/B_p" --keep $KEEP --taps=$TAPS | sed 's/prune_check_/prune_check_lora_sharded_/'
    $PY $REF identity "$T/B" --keep $KEEP --taps=$TAPS --images "${NPYS[0]}" --golden "$T/g_B_p" >/dev/null
    $MACT parity "$T/g_B_p" --model "$T/B_p" >"$T/B_p.parity" 2>&1
    vision_parity prune_lora_sharded_parity "LoRA merged by both loaders" "$T/B_p.parity"
else fail "prune_lora_sharded: $(tail -3 "$T/B_p.log")"; fi
# ---- full keep: bitwise outputs, byte-identical files
full_keep() {  # name, teacher, keep, expect config identical (1/0)
    local n=$1 src=$2 keep=$3 cfg_same=$4 out="$T/$1_full" diffs=""
    $MACT prune --model "$src" --keep "$keep" --out "$out" >"$out.log" 2>&1 || { fail "prune_full_$n: $(tail -2 "$out.log")"; return; }
    for f in "$src"/*; do
        b=$(basename "$f")
        [ "$b" = config.json ] && [ "$cfg_same" = 0 ] && continue
        cmp -s "$f" "$out/$b" || diffs="$diffs $b"
    done
    [ "$(ls "$src" | wc -l)" = "$(ls "$out" | wc -l)" ] || diffs="$diffs (file count)"
    [ -z "$diffs" ] && pass "prune_full_${n}_files ($(ls "$src" | wc -l) files byte-identical$([ "$cfg_same" = 0 ] && echo ' except config.json: num_hidden_layers and taps restated for the stored depth'))" ||
        fail "prune_full_${n}_files: differ:$diffs"
    $MACT distill-eval --teacher "$src" --student "$out" --image "${PNGS[0]}" --image "${PNGS[1]}" >"$out.eval" 2>&1
    grep -q '^overall .* yes$' "$out.eval" && pass "prune_full_${n}_bitwise (connector outputs identical: $(awk '/^overall/ {print "cos_token", $2, "rel_mse", $4, "max_abs", $5}' "$out.eval"))" ||
        fail "prune_full_${n}_bitwise: $(tail -2 "$out.eval")"
}
full_keep A "$T/A" 0,1,2,3,4,5,6,7 0
full_keep B "$T/B" 0,1,2,3,4,5,6,7 0
full_keep C "$T/C" 0,1,2 1
$PY $REF check "$T/A" "$T/A_full" --keep 0,1,2,3,4,5,6,7 | sed 's/prune_check_/prune_check_full_/'
# the whole pipeline on mact synth's checkpoint: the same actions, bit for bit
run_actions() { $MACT run --model "$1" --image "${PNGS[0]}" --image "${PNGS[1]}" --task "pick up the cube" \
    --state "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8" --seed 7 --precision fp32 --json 2>&1 |
    $PY -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["actions"]))' 2>&1; }
a1=$(run_actions "$T/C"); a2=$(run_actions "$T/C_full")
[ -n "$a1" ] && [ "$a1" = "$a2" ] && echo "$a1" | grep -q '^\[\[' && pass "prune_full_C_actions (mact run on both: the same $(echo "$a1" | grep -o '\]' | wc -l | awk '{print $1 - 1}') action rows, bit for bit)" ||
    fail "prune_full_C_actions: $(echo "$a1" | head -c 200) / $(echo "$a2" | head -c 200)"
# ---- the card's geometry at tiny widths: 25 of 27 blocks stored, taps [-3,-9] = layers 24 and 18; the card's command
$PY $REF gen "$T/R" --seed $((SEED + 4)) --vit-layers 25 --vit-config-layers 27 --taps=-3,-9 >"$T/genR.log" 2>&1 || fail "prune_gen_R: $(tail -2 "$T/genR.log")"
if $MACT prune --model "$T/R" --keep 0,1,2,3,5,6,7,8,9,24 --taps -1,-4 --out "$T/R_p" >"$T/R_p.log" 2>&1 &&
   grep -q "tap 0: student vit_layers\[0\] = -1 = student block 9 = teacher layer 24 (teacher tap -3 = layer 24, same layer)" "$T/R_p.log" &&
   grep -q "tap 1: student vit_layers\[1\] = -4 = student block 6 = teacher layer 7 (teacher tap -9 = layer 18, a different layer" "$T/R_p.log"; then
    pass "prune_card_geometry (--keep 0,1,2,3,5,6,7,8,9,24 --taps -1,-4: $(grep '^tap' "$T/R_p.log" | sed 's/ (teacher tap.*//' | paste -sd ';'))"
    $PY $REF check "$T/R" "$T/R_p" --keep 0,1,2,3,5,6,7,8,9,24 --taps=-1,-4 | sed 's/prune_check_/prune_check_card_/'
else fail "prune_card_geometry: $(grep -E '^tap|mact prune' "$T/R_p.log")"; fi
$MACT prune --model "$T/R" --keep 0,1,2,3,5,6,7,8,9,24 --out "$T/R_refused" >"$T/R_refused.log" 2>&1
[ $? -ne 0 ] && grep -q "drops teacher layer 18, which adapter tap vit_layers\[1\] = -9 reads" "$T/R_refused.log" && [ ! -e "$T/R_refused" ] &&
    pass "prune_card_default_taps_refused ($(head -1 "$T/R_refused.log"))" || fail "prune_card_default_taps_refused: $(head -1 "$T/R_refused.log")"
$MACT prune-analyze --model "$T/R" --image "${PNGS[0]}" --target-depth 10 >"$T/R_an.log" 2>&1 &&
    grep -q "proposed keep-set (10 blocks: teacher layer 24 pinned" "$T/R_an.log" &&
    pass "prune_card_target_depth ($(grep '^proposed' "$T/R_an.log" | sed 's/.*: //'); $(grep '^tap 1' "$T/R_an.log" | sed 's/.*-> //'))" ||
    fail "prune_card_target_depth: $(tail -3 "$T/R_an.log")"

# the same teacher with both keys absent (the class defaults 27 and [-3,-9]): they are inserted, nothing else moves
cp -r "$T/R" "$T/R0" && $PY - "$T/R0/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
del c["vit_config"]["num_hidden_layers"], c["adapter_config"]["vit_layers"]
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
if $MACT prune --model "$T/R0" --keep 0,1,2,3,5,6,7,8,9,24 --taps -1,-4 --out "$T/R0_p" >"$T/R0_p.log" 2>&1; then
    $PY $REF check "$T/R0" "$T/R0_p" --keep 0,1,2,3,5,6,7,8,9,24 --taps=-1,-4 | sed 's/prune_check_/prune_check_absent_keys_/'
else fail "prune_absent_keys: $(tail -2 "$T/R0_p.log")"; fi

# ---- refusals: a clear reason, nothing written
refuse() {  # name, expected text, args...
    local n=$1 want=$2; shift 2
    local out="$T/refused_$n"
    $MACT prune --model "$T/A" --out "$out" "$@" >"$out.log" 2>&1
    local rc=$? left
    left=$(ls -d "$out" "$out".partial-* 2>/dev/null | wc -l)
    if [ $rc -ne 0 ] && [ "$left" = 0 ] && grep -q -- "$want" "$out.log" && grep -q "nothing written" "$out.log"; then
        pass "prune_refuse_$n (exit $rc: $(head -1 "$out.log"))"
    else fail "prune_refuse_$n: exit $rc, $left paths left, message: $(head -2 "$out.log")"; fi
}
refuse out_of_range "index 8 is out of range (the checkpoint stores ViT blocks 0..7)" --keep 0,1,8
refuse configured_not_stored "index 9 is out of range" --keep 0,9
refuse negative "index -1 is out of range" --keep -1,7
refuse repeat "block 2 is listed twice" --keep 0,2,2,7
refuse not_increasing "not increasing (2 after 3)" --keep 0,3,2,7
refuse drops_tapped_layer "drops teacher layer 4, which adapter tap vit_layers\[1\] = -6 reads" --keep $KEEP
refuse tap_out_of_range "tap -6 is out of range for a 5-block student" --keep $KEEP --taps=-1,-6
refuse tap_positive_out_of_range "tap 5 is out of range for a 5-block student" --keep $KEEP --taps=4,5
refuse blocks_after_deepest_tap "student block 3 would feed nothing" --keep 0,2,4,7 --taps -2,-3
refuse tap_count "1 taps given but the checkpoint has 2" --keep $KEEP --taps=-1
refuse empty "not a comma-separated list" --keep ,
refuse garbage "not a comma-separated list" --keep 0,x,2
mkdir -p "$T/exists"
$MACT prune --model "$T/A" --keep 0,2,4,7 --out "$T/exists" >"$T/exists.log" 2>&1; rc=$?
[ $rc -ne 0 ] && [ -z "$(ls -A "$T/exists")" ] && grep -q "exists" "$T/exists.log" && ! ls -d "$T"/exists.partial-* >/dev/null 2>&1 &&
    pass "prune_refuse_out_exists (exit $rc: $(head -1 "$T/exists.log"))" || fail "prune_refuse_out_exists: $(head -1 "$T/exists.log")"
# calibration frames from a LeRobot dataset (images stored in the parquet files: `mact synth-dataset --robot libero`)
$MACT synth-dataset "$T/ds" --robot libero --episodes 3 --len 10:20 --seed 5 >/dev/null 2>&1
$MACT prune-analyze --model "$T/A" --dataset "$T/ds" --frames 7 --json "$T/ds.json" >"$T/ds.log" 2>&1; rc=$?
"$PY" - "$T/ds.json" <<'PYEOF' && [ $rc -eq 0 ] && pass "prune_analyze_dataset (7 frames from 3 episodes x 2 cameras)" || fail "prune_analyze_dataset: exit $rc: $(tail -2 "$T/ds.log")"
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["images"] == 7, j["images"]
assert len(j["snr_db"]) == j["blocks"] and all(math.isfinite(v) for v in j["snr_db"]), j["snr_db"]
PYEOF
# held-out frames from the dataset: the teacher against itself is identical on every frame
$MACT distill-eval --teacher "$T/A" --student "$T/A" --dataset "$T/ds" --frames 4 --json "$T/dd.json" >"$T/dd.log" 2>&1; rc=$?
"$PY" - "$T/dd.json" <<'PYEOF' && [ $rc -eq 0 ] && pass "distill_eval_dataset (4 frames, teacher vs itself identical)" || fail "distill_eval_dataset: exit $rc: $(tail -2 "$T/dd.log")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["overall"]["n_images"] == 4 and j["overall"]["identical"] is True and j["overall"]["rel_mse"] == 0, j["overall"]
PYEOF
# video cameras (v3.0 H.264): every frame of the dataset (--frames = all of them) gives the SNRs that the same
# frames give as PNG files written by `mact dataset frame`
$MACT synth-dataset "$T/dsv" --version v3.0 --robot libero --episodes 2 --len 6:6 --video h264 --seed 5 >/dev/null 2>&1
imgs=()
for e in 0 1; do for c in observation.images.image observation.images.wrist_image; do for t in 0 1 2 3 4 5; do
    $MACT dataset frame "$T/dsv" --episode $e --index $t --camera $c --out "$T/dsv_${e}_${c}_$t.png" >/dev/null 2>&1
    imgs+=(--image "$T/dsv_${e}_${c}_$t.png")
done; done; done
$MACT prune-analyze --model "$T/A" --dataset "$T/dsv" --frames 24 --json "$T/dsv.json" >"$T/dsv.log" 2>&1; rc=$?
$MACT prune-analyze --model "$T/A" "${imgs[@]}" --json "$T/dsv_png.json" >>"$T/dsv.log" 2>&1; rc2=$?
"$PY" - "$T/dsv.json" "$T/dsv_png.json" <<'PYEOF' >"$T/dsv_cmp.txt" 2>&1 && [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && pass "prune_analyze_dataset_video ($(cat "$T/dsv_cmp.txt"))" || fail "prune_analyze_dataset_video: exit $rc/$rc2: $(tail -2 "$T/dsv.log") $(tail -2 "$T/dsv_cmp.txt")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["images"] == b["images"] == 24, (a["images"], b["images"])
d = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a["snr_db"], b["snr_db"]))
assert d <= 1e-9, (a["snr_db"], b["snr_db"])
print(f"24 frames, SNR per block equal to the PNG frames' within {d:.1g} relative (threshold 1e-9)")
PYEOF
$MACT synth-dataset "$T/ds_noimg" --robot so101 --no-cameras --episodes 2 --seed 5 >/dev/null 2>&1
$MACT prune-analyze --model "$T/A" --dataset "$T/ds_noimg" >"$T/ds2.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "no image feature" "$T/ds2.log" && pass "prune_analyze_dataset_without_images_refused ($(head -1 "$T/ds2.log"))" ||
    fail "prune_analyze_dataset_without_images_refused: exit $rc: $(head -1 "$T/ds2.log")"
exit 0
