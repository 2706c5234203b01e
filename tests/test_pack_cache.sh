#!/usr/bin/env bash
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# The on-disk cache of repacked weights (mact_load_options.pack_cache_dir, `--pack-cache`, $MACT_PACK_CACHE):
# on a `mact synth tiny` checkpoint, in bf16 and int8, a first load writes the cache, a second maps it, and
# both give bitwise the actions of a load without the cache. A changed checkpoint file gets a new cache file;
# a truncated or corrupted cache file is ignored and rewritten; an unusable cache directory only reports it.
# Packs exist only with the packing kernels (`mact inspect` names them; not the plain-C reference or AVX2):
# elsewhere the cases are reported as INFO, not counted.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/pack_cache; rm -rf "$T"; mkdir -p "$T"
$MACT synth tiny "$T/model" --seed 3 >/dev/null || { echo "FAIL pack_cache_synth: mact synth tiny failed"; exit 1; }
# packs exist only for the packing kernels (not the plain-C reference, not AVX2): elsewhere nothing to cache
KERN=$($MACT inspect "$T/model" | sed -n 's/^kernels: \([^ ]*\).*/\1/p')
[ -n "$KERN" ] || { echo "FAIL pack_cache_kernels: mact inspect names no kernels"; exit 1; }
case "$KERN" in ref|avx2) echo "INFO pack_cache: kernels '$KERN' read weights row-major: nothing to cache"; exit 0;; esac
$PY -c "
import numpy as np
r = np.random.default_rng(5)
for i in range(2): np.save('$T/cam%d.npy' % i, r.integers(0, 256, (120, 160, 3), dtype=np.uint8))
" || { echo "FAIL pack_cache_inputs: numpy failed"; exit 1; }
run() {  # precision, extra args... -> the JSON line on stdout
    local p=$1; shift
    $MACT run --model "$T/model" --image "$T/cam0.npy" --image "$T/cam1.npy" --task "stack the cups" \
        --state "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8" --seed 7 --json --precision "$p" "$@" 2>"$T/err.log"
}
field() { $PY -c 'import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps(d[sys.argv[1]]))' "$1"; }
check() {  # name, json, want_status, reference actions
    local name=$1 js=$2 want=$3 ref=$4 st act
    st=$(echo "$js" | field pack_cache 2>/dev/null | tr -d '"'); act=$(echo "$js" | field actions 2>/dev/null)
    if [ "$st" != "$want" ]; then echo "FAIL pack_cache_$name: status '$st', expected '$want' ($(tail -1 "$T/err.log"))"
    elif [ -z "$act" ] || [ "$act" != "$ref" ]; then echo "FAIL pack_cache_$name: actions differ from the uncached load"
    else echo "PASS pack_cache_$name: status $st, actions bitwise equal to the uncached load"; fi
}
for p in bf16 int8; do
    ref=$(run $p | field actions 2>/dev/null)
    [ -n "$ref" ] || { echo "FAIL pack_cache_${p}_reference: mact run failed: $(tail -1 "$T/err.log")"; continue; }
    C="$T/cache_$p"; mkdir -p "$C"
    check "${p}_first_load_writes" "$(run $p --pack-cache "$C")" written "$ref"
    n=$(ls "$C"/mact-$p-*.pack 2>/dev/null | wc -l)
    [ "$n" = 1 ] && echo "PASS pack_cache_${p}_one_file" || echo "FAIL pack_cache_${p}_one_file: $n cache files"
    check "${p}_second_load_maps" "$(run $p --pack-cache "$C")" loaded "$ref"
    check "${p}_env_var" "$(MACT_PACK_CACHE="$C" run $p)" loaded "$ref"
    f=$(ls "$C"/mact-$p-*.pack | head -1)
    truncate -s -4096 "$f"
    check "${p}_truncated_rewritten" "$(run $p --pack-cache "$C")" written "$ref"
    printf 'XXXXXXXX' | dd of="$f" bs=1 seek=0 conv=notrunc status=none
    check "${p}_bad_magic_rewritten" "$(run $p --pack-cache "$C")" written "$ref"
    check "${p}_after_rewrite_maps" "$(run $p --pack-cache "$C")" loaded "$ref"
done
# a checkpoint file changed (same bytes, new mtime) gets its own cache file
C="$T/cache_bf16"; ref=$(run bf16 | field actions 2>/dev/null)
touch -d '2001-01-01' "$T/model/config.json"
check bf16_changed_checkpoint_new_key "$(run bf16 --pack-cache "$C")" written "$ref"
n=$(ls "$C"/mact-bf16-*.pack | wc -l)
[ "$n" = 2 ] && echo "PASS pack_cache_changed_checkpoint_second_file" || echo "FAIL pack_cache_changed_checkpoint_second_file: $n files"
# the cache directory is not a directory: the load still works and says the cache was unusable
check bf16_unusable_dir "$(run bf16 --pack-cache "$T/model/config.json")" unusable "$ref"
check bf16_missing_dir "$(run bf16 --pack-cache "$T/no/such/dir")" unusable "$ref"
