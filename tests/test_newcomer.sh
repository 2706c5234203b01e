#!/usr/bin/env bash
# kernels: via-engine (its checks are of the command line; it reaches the kernels only through `mact run`,
# whose results the parity suites check on every kernel set)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# The CLI as a newcomer meets it (tools/common/cli.c's parser, tools/mact.c's table):
#   help_list            `mact --help` / `-h` / `help`: exit 0, on stdout, every command of tools/mact.c's table
#                        and every subcommand line (dataset frame, eval merge, export golden|onnx, synth-dataset
#                        --episodes / --video, bench --preset)
#   help_<cmd>           every command and subcommand with --help and with -h (also `mact help CMD`): exit 0, the
#                        usage on stdout naming the command, nothing on stderr (no --help opened as a path)
#   help_anywhere        -h after other flags, even where a value is expected, is help, not a value
#   typo_*               an unknown flag names the nearest one (--modle: --model, --images: --image), a mistyped
#                        command or subcommand the one meant; exit 2, on stderr
#   missing_*            a missing required option is named (run --task, serve's port, eval, export, parity, stats)
#   eq_*                 --key=value gives byte for byte the output of --key value (run, tokenize, dataset frame)
#   synth_dataset_says   synth-dataset prints one line: what it wrote (episodes, frames, cameras, version)
#   bench_says           bench without --model says on stderr what it is about to write, how big, where, and --model
#   camera_count_*       one input rule: 1 or 3 images on a two-camera tag refused, naming the tag's cameras in order
#   not_a_checkpoint     a folder of photos: what a checkpoint holds, and what this one holds
#   inspect_contract     per tag what a caller sends (state width and names, cameras in order) and gets; the default
#   inspect_json         --json gives the same contract (GET /act and Python's describe(as_json=True) are checked
#                        equal to it in test_serve.sh and test_python.sh)
#   serve_bad_model_silent  serve on a non-checkpoint fails without announcing a port
#   so101_demo_state     `synth tiny --robot so101` takes the README's SO-101 state
#   eval_no_camera_says_what_to_do  eval --policy model on a recording without cameras names the way out
#   parity_*_gates       export golden (fp32) then parity --precision bf16 / int8 passes at that precision's gates
set -u
cd "$(dirname "$0")/.."
MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/newcomer; rm -rf "$T"; mkdir -p "$T"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# run CMD...: $rc, $T/out, $T/err
run() { "$MACT" "$@" >"$T/out" 2>"$T/err"; rc=$?; }

# ---- help: every command of the table, every subcommand ----
mapfile -t CMDS < <(sed -n 's/^ *{"\([a-z-]*\)", cmd_[a-z_]*,.*/\1/p' tools/mact.c)
[ ${#CMDS[@]} -ge 15 ] || fail help_table "read ${#CMDS[@]} commands from tools/mact.c's table"
for h in --help -h help; do
    run $h
    why=""
    [ $rc -eq 0 ] || why="exit $rc"
    [ -s "$T/err" ] && why="$why; stderr: $(head -c 200 "$T/err")"
    for c in "${CMDS[@]}"; do grep -qE "^  $c( |$)" "$T/out" || why="$why; no $c"; done
    for line in "dataset info" "dataset frame" "dataset dump" "eval merge" "export golden" "export onnx"; do
        grep -q "^  $line " "$T/out" || why="$why; no '$line' line"
    done
    for flag in "synth-dataset .*--episodes" "--video" "bench .*--preset"; do
        grep -qE -- "$flag" "$T/out" || why="$why; no $flag"
    done
    [ -z "$why" ] && pass "help_list ($h)" || fail "help_list ($h)" "${why#; }"
done

SUBS=("dataset info" "dataset frame" "dataset dump" "eval merge" "export golden" "export onnx")
for c in "${CMDS[@]}" "${SUBS[@]}"; do
    why=""
    # shellcheck disable=SC2086
    for h in --help -h; do
        run $c $h
        [ $rc -eq 0 ] || why="$why; $h: exit $rc"
        [ -s "$T/err" ] && why="$why; $h: stderr: $(head -c 200 "$T/err")"
        if [ "$c" = serve ] && grep -q "no policy server" "$T/out"; then continue; fi  # a build without it
        grep -qi "usage" "$T/out" || why="$why; $h: no usage on stdout"
        grep -q -- "${c##* }" "$T/out" || why="$why; $h: the usage does not name ${c##* }"
    done
    if [ "${c% *}" = "$c" ] && [ "$c" != help ]; then
        run help "$c"
        [ $rc -eq 0 ] && grep -q -- "$c" "$T/out" || why="$why; mact help $c: exit $rc"
    fi
    [ -z "$why" ] && pass "help_${c// /_}" || fail "help_${c// /_}" "${why#; }"
done

why=""
for a in "run --model -h" "inspect --help" "dataset info --help" "dataset dump --help" "parity --help --model x" \
         "export golden --model m --out --help" "synth tiny --help"; do
    # shellcheck disable=SC2086
    run $a
    [ $rc -eq 0 ] || why="$why; mact $a: exit $rc"
    [ -s "$T/err" ] && why="$why; mact $a: $(head -c 200 "$T/err")"
    grep -qi usage "$T/out" || why="$why; mact $a: no usage"
done
[ -z "$why" ] && pass help_anywhere || fail help_anywhere "${why#; }"

# ---- typos ----
typo() {  # typo NAME WANT ARGS...: exit 2 and WANT on stderr, nothing on stdout
    local name=$1 want=$2; shift 2
    run "$@"
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$T/err" && [ ! -s "$T/out" ]; then pass "$name"
    else fail "$name" "exit $rc; stderr: $(head -c 200 "$T/err")"; fi
}
typo typo_modle "unknown option --modle; did you mean --model?" run --modle X
typo typo_images "unknown option --images; did you mean --image?" run --images a.png
typo typo_eq "unknown option --modle=X; did you mean --model?" run --modle=X
typo typo_iters "did you mean --iters?" bench --iter 3
typo typo_command "unknown command 'synth-datset'; did you mean synth-dataset?" synth-datset x
typo typo_subcommand "did you mean info?" dataset ifno d
typo typo_no_guess "unknown option --frobnicate" run --frobnicate
grep -q "did you mean" "$T/err" && fail typo_no_guess_far "--frobnicate got a suggestion: $(head -1 "$T/err")" \
    || pass typo_no_guess_far
typo flag_takes_no_value "--json takes no value" run --json=1

# ---- missing options named ----
typo missing_run_task "mact run: --task is required" run --model M --image a.png --state 1
typo missing_run_all "--model, --image, --task and --state are required" run
typo missing_serve_port "at least one protocol port" serve --model M
typo missing_serve_model "mact serve: --model is required" serve --act 8100
typo missing_eval "--dataset and --out are required" eval --model M
typo missing_eval_model "mact eval: --model is required" eval --dataset D --out O
typo missing_export "--task and --out are required" export golden --model M --image a.png --state 1
typo missing_onnx "mact export onnx: --out is required" export onnx --model M
typo missing_parity_model "mact parity: --model is required" parity G
typo missing_parity_golden "mact parity: GOLDEN_DIR is required" parity --model M
typo missing_stats "--tag and --out are required" stats --dataset D
typo missing_prune "--keep is required" prune --model M --out O
typo missing_inspect "MODEL_DIR is required" inspect
typo missing_synth "OUT_DIR is required" synth tiny

# ---- synth-dataset says what it wrote; a PNG from it for the model ----
run synth-dataset "$T/ds" --version v3.0 --robot libero --episodes 2 --len 10:12 --seed 3
if [ $rc -eq 0 ] && [ "$(wc -l <"$T/out")" = 1 ] &&
   grep -qE "^wrote $T/ds: LeRobot v3.0, .*2 episodes, [0-9]+ frames.*2 cameras" "$T/out"; then
    pass "synth_dataset_says ($(cat "$T/out"))"
else fail synth_dataset_says "exit $rc; stdout: $(head -c 300 "$T/out")"; fi

CAM=observation.images.image
FRAME=(dataset frame "$T/ds" --episode 1 --index 3 --camera $CAM --print-number)
run "${FRAME[@]}" --out "$T/a.png"; cp "$T/out" "$T/frame_sp.txt"
run dataset frame "$T/ds" --episode=1 --index=3 --camera=$CAM --print-number --out="$T/b.png"
if [ $rc -eq 0 ] && [ -s "$T/a.png" ] && cmp -s "$T/out" "$T/frame_sp.txt" && cmp -s "$T/a.png" "$T/b.png"; then
    pass eq_dataset_frame
else fail eq_dataset_frame "exit $rc; $(head -c 200 "$T/err")"; fi

# ---- --key=value is --key value, byte for byte ----
"$MACT" synth tiny "$T/tiny" --seed 11 >/dev/null 2>&1 || { fail eq_setup "mact synth tiny failed"; exit 1; }
S="0.1,-0.2,0.05,0.3,-0.1,0,0.02,0.04"
"$MACT" run --model "$T/tiny" --image "$T/a.png" --image "$T/a.png" --task "pick up the cube" --state "$S" --seed 5 \
    >"$T/run_sp.txt" 2>"$T/run_sp.err"; rc1=$?
"$MACT" run --model="$T/tiny" --image="$T/a.png" --image "$T/a.png" --task="pick up the cube" --state="$S" --seed=5 \
    >"$T/run_eq.txt" 2>"$T/run_eq.err"; rc2=$?
# the last line's stage times are the clock's; everything else must be the same bytes
strip() { sed 's/; time: .*//' "$1"; }
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "actions \[" "$T/run_sp.txt" &&
   [ "$(strip "$T/run_sp.txt" | md5sum)" = "$(strip "$T/run_eq.txt" | md5sum)" ]; then pass eq_run
else fail eq_run "exit $rc1 / $rc2: $(head -c 200 "$T/run_eq.err")"; fi

run tokenize --model "$T/tiny" "pick up the cube"; cp "$T/out" "$T/tok_sp.txt"
run tokenize --model="$T/tiny" "pick up the cube"
[ $rc -eq 0 ] && [ -s "$T/out" ] && cmp -s "$T/out" "$T/tok_sp.txt" && pass eq_tokenize || fail eq_tokenize "exit $rc"

run inspect "$T/tiny"
[ $rc -eq 0 ] && grep -q "K=16 tokens/image" "$T/out" && pass inspect_tiny || fail inspect_tiny "exit $rc"

# ---- the mistakes a newcomer makes with a model, each with its message ----
# one input rule: the tag names two cameras, so one image (or three) is refused, naming them in order
run run --model "$T/tiny" --image "$T/a.png" --task "pick up the cube" --state "$S"
[ $rc -eq 1 ] && ! [ -s "$T/out" ] && grep -qF '1 camera frames; norm tag "libero" takes 2 (observation.images.image, observation.images.wrist_image), in that order' "$T/err" \
    && pass camera_count_one || fail camera_count_one "exit $rc; $(head -c 300 "$T/err")"
run run --model "$T/tiny" --image "$T/a.png" --image "$T/a.png" --image "$T/a.png" --task "pick up the cube" --state "$S"
[ $rc -eq 1 ] && grep -qF '3 camera frames; norm tag "libero" takes 2' "$T/err" \
    && pass camera_count_three || fail camera_count_three "exit $rc; $(head -c 300 "$T/err")"
# a folder that is no checkpoint: says what a checkpoint holds and what this one holds
mkdir -p "$T/photos"; cp "$T/a.png" "$T/photos/"
run inspect "$T/photos"
[ $rc -eq 1 ] && grep -q "has no config.json (no such file), so it is not a MolmoAct2 checkpoint" "$T/err" && grep -q "It holds: a.png" "$T/err" \
    && pass not_a_checkpoint || fail not_a_checkpoint "exit $rc; $(head -c 300 "$T/err")"
# inspect shows what a caller sends: the state's width and names, the cameras in order, the default tag; --json too
run inspect "$T/tiny"
grep -q 'norm tags: 1 (default "libero")' "$T/out" && grep -q "send: state \[8\] " "$T/out" &&
    grep -q "cameras 2, in this order: observation.images.image, observation.images.wrist_image" "$T/out" &&
    grep -q "get:  actions \[10 x 7\]" "$T/out" && pass inspect_contract || fail inspect_contract "$(tail -6 "$T/out")"
run inspect "$T/tiny" --json
[ $rc -eq 0 ] && grep -q '^{"norm_tags": \[{"name":"libero","default":true,"state":{"dim":8,"names":\[' "$T/out" \
    && pass inspect_json || fail inspect_json "exit $rc; $(head -c 300 "$T/out")"
# serve on a folder that is no checkpoint: fails without announcing a port
port=$((20000 + RANDOM % 30000))
run serve --model "$T/photos" --act $port
if [ $rc -ne 0 ] && ! grep -q " on 127.0.0.1:" "$T/err" && grep -q "no config.json" "$T/err"; then pass serve_bad_model_silent
else fail serve_bad_model_silent "exit $rc; $(head -c 300 "$T/err")"; fi
# an SO-101-shaped checkpoint takes the README's SO-101 state
"$MACT" synth tiny "$T/so101" --robot so101 --seed 12 >/dev/null 2>&1
run run --model "$T/so101" --image "$T/a.png" --image "$T/a.png" --task "pick up the cube" --state "0,90,90,0,0,10"
[ $rc -eq 0 ] && grep -q "actions \[30 x 6\]" "$T/out" && pass so101_demo_state || fail so101_demo_state "exit $rc; $(head -c 300 "$T/err")"
# eval on a recording without cameras: says what to do
"$MACT" synth-dataset "$T/ds_nocam" --robot so101 --no-cameras --episodes 1 --len 40:40 --seed 2 >/dev/null 2>&1
run eval --model "$T/so101" --dataset "$T/ds_nocam" --out "$T/ev_nocam"
[ $rc -ne 0 ] && grep -q "cameras: none: the model policy needs the frames" "$T/err" && grep -q "record the dataset with its cameras" "$T/err" \
    && pass eval_no_camera_says_what_to_do || fail eval_no_camera_says_what_to_do "exit $rc; $(head -c 400 "$T/err")"
# parity at a reduced precision: the precision's documented gates, passing on a healthy checkpoint
"$MACT" export golden --model "$T/tiny" --image "$T/a.png" --image "$T/a.png" --task "pick up the cube" --state "$S" \
    --out "$T/golden" >/dev/null 2>&1
for p in bf16 int8; do
    run parity "$T/golden" --model "$T/tiny" --precision $p
    if [ $rc -eq 0 ] && grep -q "failed (cosine >= 0.999;" "$T/out" && grep -q " 0 failed" "$T/out"; then
        pass "parity_${p}_gates ($(tail -1 "$T/out"))"
    else fail "parity_${p}_gates" "exit $rc; $(tail -3 "$T/out")"; fi
done

# ---- bench without --model says what it is about to write (a cache it cannot create: it stops right after) ----
: >"$T/not_a_dir"
MACT_CACHE="$T/not_a_dir/cache" "$MACT" bench >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -ne 0 ] && grep -qE "no --model: .*~11 GB.*$T/not_a_dir/cache/bench-libero.*--model DIR" "$T/err"; then
    pass bench_says
else fail bench_says "exit $rc; stderr: $(head -c 300 "$T/err")"; fi
rm -rf "$T"
