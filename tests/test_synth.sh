#!/usr/bin/env bash
# `mact synth` (src/compress/synth.c): random MolmoAct2 checkpoints written from C must be in the real layout.
# Checks, on the tiny preset with a fresh seed (printed; SEED=... replays):
#   synth_tiny / synth_inspect      the CLI writes the four files and mact's loader accepts them
#   synth_deterministic             same seed -> identical files, other seed -> other weights
#   synth_layout_*                  safetensors header (8-byte length, padded JSON, contiguous offsets,
#                                   __metadata__ format pt), dtype policy, value scales, config <-> tokenizer
#                                   ids, norm_stats.json format (independent Python reader)
#   synth_tokenizer_rust            HF `tokenizers` (Rust, Node build) gives every added token the id the
#                                   file states and encodes prompts exactly like mact's tokenizer
#   synth_parity_*                  the PyTorch reference (tests/reference/molmoact2_ref.py, independent of
#                                   the C loader) loads the checkpoint, make_golden.py writes a golden set
#                                   and `mact parity` passes every boundary
#   synth_f32 / synth_errors        --dtype f32 stores no BF16; bad presets / dtypes fail cleanly
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}; BUILD=${BUILD:-build}
T=$(mktemp -d "${MACT_TMP:-/tmp}/synth.XXXXXX")
trap 'rm -rf "$T"' EXIT
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
CK="$T/tiny"

if ! "$MACT" synth tiny "$CK" --seed "$SEED" >"$T/synth.log" 2>&1; then
    echo "FAIL synth_tiny: mact synth exited non-zero:"; sed 's/^/    /' "$T/synth.log"; exit 1
fi
ok=1
for f in config.json model.safetensors norm_stats.json tokenizer.json; do
    [ -s "$CK/$f" ] || { echo "FAIL synth_tiny: $f missing or empty"; ok=0; }
done
[ "$ok" = 1 ] && echo "PASS synth_tiny ($(grep -o '[0-9]* tensors, [0-9]* parameters' "$T/synth.log"))"

if "$MACT" inspect "$CK" >"$T/inspect.log" 2>&1 && grep -q 'K=16 tokens/image' "$T/inspect.log" &&
   grep -q 'vocab 1024 + 128' "$T/inspect.log"; then
    echo "PASS synth_inspect"
else
    echo "FAIL synth_inspect:"; sed 's/^/    /' "$T/inspect.log"
fi

# determinism
"$MACT" synth tiny "$T/tiny_again" --seed "$SEED" >/dev/null 2>&1
"$MACT" synth tiny "$T/tiny_other" --seed $((SEED + 1)) >/dev/null 2>&1
same=1
for f in config.json model.safetensors norm_stats.json tokenizer.json; do
    cmp -s "$CK/$f" "$T/tiny_again/$f" || { same=0; echo "FAIL synth_deterministic: $f differs for the same seed"; }
done
if [ "$same" = 1 ]; then
    if cmp -s "$CK/model.safetensors" "$T/tiny_other/model.safetensors"; then
        echo "FAIL synth_deterministic: seeds $SEED and $((SEED + 1)) gave identical weights"
    else
        echo "PASS synth_deterministic"
    fi
fi

# layout, dtype policy, values, ids (independent Python reader); run on each dtype mode below
cat >"$T/check_layout.py" <<'EOF'
import json, os, struct, sys
import numpy as np
d, mode, want_lm_head = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
fails = []
def check(c, msg):
    if not c: fails.append(msg)
path = os.path.join(d, "model.safetensors")
size = os.path.getsize(path)
with open(path, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    raw = f.read(n)
check(n % 8 == 0, f"header length {n} not a multiple of 8")
check(raw.rstrip(b" ").endswith(b"}") and len(raw) - len(raw.rstrip(b" ")) < 8, "header padding is not < 8 spaces")
h = json.loads(raw)
meta = h.pop("__metadata__", None)
check(isinstance(meta, dict) and meta.get("format") == "pt", f"__metadata__ {meta}")
ents = sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0])
off = 0
es = {"F32": 4, "BF16": 2}
for name, e in ents:
    b, t = e["data_offsets"]
    check(b == off, f"{name}: offset {b} != {off} (not contiguous)")
    check(e["dtype"] in es, f"{name}: dtype {e['dtype']}")
    check(t - b == int(np.prod(e["shape"])) * es.get(e["dtype"], 0), f"{name}: size")
    check(b % es.get(e["dtype"], 1) == 0, f"{name}: misaligned")
    off = t
check(8 + n + off == size, f"file size {size} != 8 + {n} + {off}")
sys.path.insert(0, "tests/reference")
from molmoact2_ref import read_safetensors
w, _ = read_safetensors(path)
big_prefixes = ("model.vision_backbone.image_vit.", "model.vision_backbone.image_pooling_2d.",
                "model.vision_backbone.image_projector.", "model.transformer.", "lm_head.")
for name, e in ents:
    a = w[name]
    check(np.isfinite(a).all(), f"{name}: non-finite")
    check(np.count_nonzero(a) == a.size, f"{name}: {a.size - np.count_nonzero(a)} zeros")
    big = name.startswith(big_prefixes) and len(e["shape"]) == 2
    want = {"mixed": "BF16" if big else "F32", "f32": "F32", "bf16": "BF16" if len(e["shape"]) == 2 else "F32"}[mode]
    check(e["dtype"] == want, f"{name}: dtype {e['dtype']}, want {want} under {mode}")
    if name.endswith(("norm.weight", "ln_f.weight")):
        check(0.69 < a.min() and a.max() < 1.31 and np.abs(a - 1).max() > 0.2, f"{name}: norm weights {a.min()}..{a.max()}")
    elif len(e["shape"]) == 2 and "embedding" not in name:
        s = a.std() * np.sqrt(e["shape"][1])
        check(0.8 < s < 1.2, f"{name}: std*sqrt(fan_in) = {s:.3f}")
check("model.transformer.ln_f.weight" in w, "ln_f missing")
check(("lm_head.weight" in w) == want_lm_head, "lm_head " + ("missing" if want_lm_head else "present despite --no-lm-head"))
# config <-> tokenizer
cfg = json.load(open(os.path.join(d, "config.json")))
tok = json.load(open(os.path.join(d, "tokenizer.json")))
V = cfg["text_config"]["vocab_size"]; A = cfg["text_config"]["additional_vocab_size"]
added = {t["content"]: t["id"] for t in tok["added_tokens"]}
ids = [t["id"] for t in tok["added_tokens"]]
vocab = tok["model"]["vocab"]
check(sorted(vocab.values()) == list(range(len(vocab))), "BPE vocab ids not contiguous from 0")
check(ids == list(range(len(vocab), len(vocab) + len(ids))),
      "added token ids do not follow the vocab contiguously (HF tokenizers would renumber them)")
check(max(ids) < V + A, f"added id {max(ids)} >= vocab_size + additional_vocab_size {V + A}")
want = {"<im_start>": "image_start_token_id", "<im_end>": "image_end_token_id", "<im_patch>": "image_patch_id",
        "<im_col>": "image_col_id", "<low_res_im_start>": "low_res_image_start_token_id",
        "<im_low>": "image_low_res_id", "<frame_start>": "frame_start_token_id", "<frame_end>": "frame_end_token_id",
        "<|im_end|>": "eos_token_id", "<action_output>": "action_output_token_id",
        "<action_start>": "action_start_token_id", "<action_end>": "action_end_token_id",
        "<state_start>": "state_start_token_id", "<state_end>": "state_end_token_id",
        "<state_0>": "state_token_start_id", "<|endoftext|>": "pad_token_id"}
for tokname, key in want.items():
    check(added.get(tokname) == cfg.get(key), f"{tokname}: tokenizer id {added.get(tokname)} != config {key} {cfg.get(key)}")
for i, t in enumerate(["<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>", "<|image|>",
                       "<im_low>", "<frame_start>", "<frame_end>"]):
    check(added.get(t) == V + i, f"{t} at {added.get(t)}, docs/spec/molmoact2.md 4.2 wants vocab_size + {i} = {V + i}")
ns = cfg.get("num_state_tokens", 256)
for k in range(ns):
    check(added.get(f"<state_{k}>") == cfg["state_token_start_id"] + k, f"<state_{k}> id")
for t in ["<|im_start|>", "<setup_start>", "<setup_end>", "<control_start>", "<control_end>", "<|image|>"]:
    check(t in added, f"{t} missing")
check(cfg.get("bos_token_id") == cfg["eos_token_id"], "bos != eos")
merges = tok["model"]["merges"]
check(len(merges) > 100, f"only {len(merges)} merges")
for m in merges:
    a, b = m.split(" ")
    check(a in vocab and b in vocab and a + b in vocab, f"merge {m!r} not in vocab")
check(tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] ==
      r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
      "pre-tokenizer regex is not Qwen2's")
# norm stats
nsj = json.load(open(os.path.join(d, "norm_stats.json")))
check(nsj.get("format") == "molmoact2_norm_stats.v1" and nsj.get("norm_mode") == "q01_q99", "norm_stats format")
for tag, md in nsj["metadata_by_tag"].items():
    for k in ("action_stats", "state_stats"):
        st = md[k]
        q01, q99 = np.array(st["q01"]), np.array(st["q99"])
        check((q01 < q99).all() and (np.array(st["min"]) <= q01).all() and (q99 <= np.array(st["max"])).all(),
              f"{tag}.{k}: min <= q01 < q99 <= max violated")
        check(all(len(st[x]) == len(q01) for x in ("min", "max", "mean", "std", "mask")), f"{tag}.{k}: lengths")
    for k in ("setup_type", "control_mode", "action_horizon", "n_action_steps", "camera_keys"):
        check(k in md, f"{tag}: {k} missing")
if fails:
    print(f"FAIL synth_layout_{mode}: {len(fails)} problems: " + "; ".join(fails[:8]))
else:
    print(f"PASS synth_layout_{mode} ({len(ents)} tensors, {len(vocab)} BPE tokens, {len(merges)} merges, "
          f"{len(ids)} added tokens)")
EOF
"$PY" "$T/check_layout.py" "$CK" mixed 1

# tokenizer: HF's Rust library vs the file's ids and vs mact's encoder
TD=tests/tokenizer; TOOL="$BUILD/tests/test_tokenizer"
scripts/setup_tokenizer.sh >"$T/tok_setup.log" 2>&1 || { echo "FAIL synth_tokenizer_setup:"; tail -5 "$T/tok_setup.log"; }
if [ -d "$TD/node_modules/@anush008/tokenizers" ] && command -v node >/dev/null && [ -x "$TOOL" ]; then
    "$PY" - "$CK" "$T/prompts.hex" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
K = 16
img = "<im_start>" + "<im_patch>" * K + "<im_end>"
state = "<state_start>" + "".join(f"<state_{b}>" for b in (0, 17, 128, 255, 3, 99)) + "<state_end>"
prompts = [
    "Image 1" + img + "Image 2" + img + "<|im_start|>user\nThe task is to put both the alphabet soup and the "
    "tomato sauce in the basket. The setup is <setup_start>single franka robotic arm in libero<setup_end>. "
    "The current state of the robot is " + state + ". The expected control mode is <control_start>delta "
    "end-effector pose<control_end>. Given these, what action should the robot take to complete the task?"
    "<|im_end|>\n<|im_start|>assistant\n<action_output>",
    "pick up the black bowl next to the cookie box and place it on the plate",
    "Task: stack 3 cubes; don't drop them!  It's 12:45 -- ok?\n\n\ttabs  and   spaces ",
    "unicode: café naïve 日本語 emoji \U0001F916 <|image|><frame_start><frame_end><im_col><im_low><low_res_im_start>",
    "<state_start><state_end><action_start><action_end><|endoftext|>",
]
with open(sys.argv[2], "w") as f:
    for p in prompts:
        f.write(p.encode("utf-8").hex() + "\n")
EOF
    if node -e '
const {Tokenizer} = require(process.argv[1] + "/node_modules/@anush008/tokenizers");
const fs = require("fs");
const j = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const t = Tokenizer.fromFile(process.argv[2]);
const bad = j.added_tokens.filter(a => t.tokenToId(a.content) !== a.id).map(a => `${a.content}=${t.tokenToId(a.content)} (file ${a.id})`);
if (bad.length) { console.log("FAIL synth_tokenizer_rust_ids: " + bad.slice(0, 5).join(", ")); process.exit(1); }
' "$PWD/$TD" "$CK/tokenizer.json" &&
       node "$TD/encode_rust.js" "$CK/tokenizer.json" "$T/prompts.hex" "$T/rust.txt" 2>"$T/rust.log" &&
       "$TOOL" encode "$CK/tokenizer.json" "$T/prompts.hex" "$T/c.txt" 2>"$T/c.log"; then
        if node "$TD/compare.js" synth_rust "$CK/tokenizer.json" "$T/prompts.hex" "$T/rust.txt" "$T/c.txt" >"$T/cmp.log"; then
            echo "PASS synth_tokenizer_rust (added-token ids as in the file; $(wc -l <"$T/c.txt") prompts encode identically)"
        else
            echo "FAIL synth_tokenizer_rust: mact and HF tokenizers disagree:"; sed 's/^/    /' "$T/cmp.log"
        fi
    else
        echo "FAIL synth_tokenizer_rust:"; cat "$T/rust.log" "$T/c.log" 2>/dev/null | sed 's/^/    /'
    fi
else
    echo "FAIL synth_tokenizer_rust: needs node, $TD/node_modules (scripts/setup_tokenizer.sh) and $TOOL"
fi

# parity against the independent PyTorch reference
parity_case() {  # name, checkpoint dir, make_golden args
    local name=$1 ck=$2; shift 2
    local gd="$T/golden_$name"
    if ! "$PY" tests/reference/make_golden.py "$ck" "$gd" --seed $((SEED + 11)) "$@" >"$T/$name.gold.log" 2>&1; then
        echo "FAIL synth_parity_$name: the reference could not load or run the synthesized checkpoint:"
        tail -5 "$T/$name.gold.log" | sed 's/^/    /'; return
    fi
    "$MACT" parity "$gd" --model "$ck" >"$T/$name.parity.log" 2>&1
    local rc=$? summary
    summary=$(grep '^parity:' "$T/$name.parity.log")
    if [ $rc -eq 0 ] && [ -n "$summary" ]; then
        echo "PASS synth_parity_$name (${summary#parity: })"
    else
        echo "FAIL synth_parity_$name: mact parity exited $rc: $(grep -E 'FAIL|could not|error' "$T/$name.parity.log" | head -8 | tr '\n' ';')"
        [ -z "$summary" ] && tail -5 "$T/$name.parity.log" | sed 's/^/    /'
    fi
}
parity_case mixed "$CK" --n-images 2
if "$MACT" synth tiny "$T/tiny_bf16" --seed $((SEED + 2)) --dtype bf16 --no-lm-head >"$T/synth_bf16.log" 2>&1; then
    "$PY" "$T/check_layout.py" "$T/tiny_bf16" bf16 0
    parity_case bf16_no_lm_head "$T/tiny_bf16" --n-images 1 --seq-len 45
else
    echo "FAIL synth_parity_bf16_no_lm_head: mact synth --dtype bf16 failed:"; sed 's/^/    /' "$T/synth_bf16.log"
fi

# --outliers K:S (the int8 stress checkpoints, docs/parity.md) and --llm-layers / --vit-layers: against the plain
# checkpoint of the same seed, exactly K channels of each residual stream are S times larger in every tensor that
# writes the stream (bf16 rounding aside), the BOS row carries the massive 1e3, every other value is identical,
# and the reference passes parity on it at fp32; then int8 with every component quantized passes run_mode's gates
"$MACT" synth tiny "$T/tiny_out" --seed "$SEED" --outliers 2:20 --llm-layers 4 --vit-layers 4 >"$T/synth_out.log" 2>&1 &&
"$MACT" synth tiny "$T/tiny_plain4" --seed "$SEED" --llm-layers 4 --vit-layers 4 >>"$T/synth_out.log" 2>&1 ||
    echo "FAIL synth_outliers: mact synth failed: $(tail -3 "$T/synth_out.log")"
cat >"$T/check_outliers.py" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/reference")
from molmoact2_ref import read_safetensors
a, _ = read_safetensors(sys.argv[1] + "/model.safetensors")
b, _ = read_safetensors(sys.argv[2] + "/model.safetensors")
K, S = int(sys.argv[3]), float(sys.argv[4])
fails = []
layers = sum(1 for n in a if n.endswith(".mlp.ff_out.weight"))
vit = sum(1 for n in a if n.endswith("feed_forward.w2.weight"))
if layers != 4 or vit != 4: fails.append(f"layers: llm {layers}, vit {vit} (want 4, 4)")
if set(a) != set(b): fails.append("tensor names differ")
chans, changed = {}, 0
for n in sorted(a):
    x, y = a[n].astype(np.float64), b[n].astype(np.float64)
    if x.shape != y.shape:
        fails.append(f"{n}: shape"); continue
    diff = x != y
    if n == "model.transformer.wte.embedding":
        m = x == 1000.0
        if m.sum() != 1: fails.append(f"{n}: {int(m.sum())} entries at 1e3 (want 1: the BOS row)")
        diff &= ~m
    if not diff.any(): continue
    changed += 1
    cols = "wte." in n or "positional_embedding" in n
    d = (diff.any(axis=0) if cols else diff.any(axis=1)) if x.ndim == 2 else diff
    chans.setdefault("llm" if n.startswith("model.transformer.") else "vit", set()).add(tuple(np.nonzero(d)[0].tolist()))
    r = x[diff] / y[diff]
    if np.abs(r - S).max() > S * 0.01: fails.append(f"{n}: ratio {r.min():.4g}..{r.max():.4g}, want {S}")
for part in ("llm", "vit"):
    s = chans.get(part, set())
    if len(s) != 1 or len(next(iter(s))) != K: fails.append(f"{part}: channel sets {sorted(s)}, want one set of {K}")
for n in a:
    planted = any(k in n for k in ("attn_out.weight", "ff_out.weight", "wte.embedding", "wte.new_embedding",
                                   "attention.wo.", "feed_forward.w2.", "patch_embedding", "positional_embedding"))
    same = bool((a[n] == b[n]).all())
    if planted and same: fails.append(f"{n}: no planted values")
    if not planted and not same: fails.append(f"{n}: changed, but it writes no residual stream")
print(("FAIL synth_outliers: " + "; ".join(fails[:6])) if fails else
      f"PASS synth_outliers ({K} channels x {S:g} per stream in {changed} tensors, BOS at 1e3, the rest identical; "
      "4 LLM / 4 ViT layers)")
EOF
[ -d "$T/tiny_out" ] && "$PY" "$T/check_outliers.py" "$T/tiny_out" "$T/tiny_plain4" 2 20
if [ -d "$T/tiny_out" ]; then
    parity_case outliers "$T/tiny_out" --n-images 2
    # int8 as shipped (the LLM quantized, its outlier channels split off) at run_mode's gates on every boundary but
    # vision, which stays bf16 in this mode: its row must equal the bf16 run's digit for digit (the ViT's planted
    # channels move the grid sampler's points, so bf16 vision itself lands anywhere in cosine 0.97-0.999 here)
    "$MACT" parity "$T/golden_outliers" --model "$T/tiny_out" --precision int8 --cos-min 0.5 --tol-informational \
        --abs-tol 0.25 --vjp-abs-tol 0.75 >"$T/out_int8.log" 2>&1
    "$MACT" parity "$T/golden_outliers" --model "$T/tiny_out" --precision bf16 --cos-min 0.5 --tol-informational \
        --abs-tol 0.25 >"$T/out_bf16.log" 2>&1
    low=$(awk '$NF == "PASS" && $1 != "vision" && $3 < 0.999 {print $1 "/" $2 " " $3}' "$T/out_int8.log")
    v8=$(awk '$1 == "vision" {print $3, $4}' "$T/out_int8.log"); v16=$(awk '$1 == "vision" {print $3, $4}' "$T/out_bf16.log")
    if grep -q "^parity: .* 0 failed" "$T/out_int8.log" && [ -z "$low" ] && [ -n "$v8" ] && [ "$v8" = "$v16" ]; then
        echo "PASS synth_outliers_int8 ($(awk '$1 == "e2e" {print "e2e actions cosine " $3 ", max abs " $4}' "$T/out_int8.log"); vision = bf16's ($v8); gates: cosine >= 0.999 past vision, actions max abs <= 0.25)"
    else
        echo "FAIL synth_outliers_int8: ${low:-} vision int8 '$v8' bf16 '$v16'"
        grep -E "FAIL|could not|parity:" "$T/out_int8.log" | head -6 | sed 's/^/    /'
    fi
    # every component int8: a gate that catches a broken int8 vision or expert path (garbage, NaN: cosine near 0),
    # not an accuracy claim (that is docs/parity.md's table at real widths): vision cosine >= 0.5 (the sampler's
    # points amplify its error, see above), every other row >= 0.99, actions max abs <= 0.5
    "$MACT" parity "$T/golden_outliers" --model "$T/tiny_out" --precision int8 --int8-parts all --cos-min 0.5 \
        --tol-informational --abs-tol 0.5 --vjp-abs-tol 1.5 >"$T/out_int8_all.log" 2>&1
    low=$(awk '$NF == "PASS" && $1 != "vision" && $3 < 0.99 {print $1 "/" $2 " " $3}' "$T/out_int8_all.log")
    if ! grep -q "int8 components" "$T/out_int8_all.log"; then  # kernels without int8 (MACT_KERNELS=ref): as bf16/fp32
        echo "INFO synth_outliers_int8_all: these kernels have no int8 GEMM ($(grep -m1 '^precision' "$T/out_int8_all.log")): nothing int8 to gate"
    elif grep -q "^parity: .* 0 failed" "$T/out_int8_all.log" && [ -z "$low" ] &&
       grep -q "int8 components vision,llm,expert" "$T/out_int8_all.log"; then
        echo "PASS synth_outliers_int8_all ($(awk '$1 == "vision" {print "vision cosine " $3} $1 == "e2e" {print ", e2e actions cosine " $3 ", max abs " $4}' "$T/out_int8_all.log" | tr -d '\n'); gates: vision cosine >= 0.5, the rest >= 0.99, actions max abs <= 0.5)"
    else
        echo "FAIL synth_outliers_int8_all: ${low:-}"; grep -E "FAIL|could not|parity:|precision" "$T/out_int8_all.log" | head -6 | sed 's/^/    /'
    fi
fi

# --dtype f32 and error handling
if "$MACT" synth tiny "$T/tiny_f32" --seed "$SEED" --dtype f32 >"$T/synth_f32.log" 2>&1 &&
   "$MACT" inspect "$T/tiny_f32" 2>&1 | grep -q 'BF16 0,'; then
    echo "PASS synth_f32"
    "$PY" "$T/check_layout.py" "$T/tiny_f32" f32 1
else
    echo "FAIL synth_f32: $(tail -3 "$T/synth_f32.log")"
fi
errs=""
"$MACT" synth nosuch "$T/x" >"$T/e1.log" 2>&1 && errs="$errs unknown-preset-accepted"
grep -q "unknown preset 'nosuch'" "$T/e1.log" || errs="$errs no-preset-message"
[ -e "$T/x/model.safetensors" ] && errs="$errs wrote-files-for-bad-preset"
"$MACT" synth tiny "$T/x" --dtype fp8 >/dev/null 2>&1 && errs="$errs bad-dtype-accepted"
: >"$T/afile"
"$MACT" synth tiny "$T/afile/sub" --seed 1 >"$T/e3.log" 2>&1 && errs="$errs file-as-dir-accepted"
"$MACT" synth tiny "$T/x" --outliers 2 >/dev/null 2>&1 && errs="$errs outliers-without-scale-accepted"
"$MACT" synth tiny "$T/x" --outliers 2:-1 >/dev/null 2>&1 && errs="$errs negative-outlier-scale-accepted"
"$MACT" synth tiny "$T/x2" --outliers 999:20 >"$T/e4.log" 2>&1 && errs="$errs too-many-outliers-accepted"
grep -q "outlier channels outside" "$T/e4.log" || errs="$errs no-outlier-count-message"
"$MACT" synth tiny "$T/x3" --vit-layers 1 >"$T/e5.log" 2>&1 && errs="$errs vit-shallower-than-taps-accepted"
grep -q "vit layers 1 outside" "$T/e5.log" || errs="$errs no-vit-layers-message"
{ [ -e "$T/x2/model.safetensors" ] || [ -e "$T/x3/model.safetensors" ]; } && errs="$errs wrote-files-for-bad-options"
[ -z "$errs" ] && echo "PASS synth_errors" || echo "FAIL synth_errors:$errs"
