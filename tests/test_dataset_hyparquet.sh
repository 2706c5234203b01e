#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (equality with hyparquet; the parquet reader runs under ASan in test_dataset_parquet, test_dataset.sh and fuzz_parquet)
# The parquet reader (src/data/parquet.c) against an independent one: npm `hyparquet` (pure JS; installed by
# scripts/setup_dataset.sh with npm ci). For every generated variant (pyarrow layout, PLAIN, the
# dictionary->PLAIN fallback, several pages, several row groups, V2 pages, ZSTD, GZIP, uncompressed) x
# (v2.1, v3.0) x (SO-101, LIBERO with PNG structs), float32 and float64 timestamps, every parquet file of the
# tree (data, v3 episodes and tasks) is dumped by `mact dataset dump` and by hyparquet and compared value by
# value, exactly (tests/dataset/hyparquet_compare.mjs, one node process per tree). Seed printed; SEED=... replays.
set -u
cd "$(dirname "$0")/.."
MACT=${MACT_BIN:-build/mact}
T=$(mktemp -d "${MACT_TMP:-/tmp}/hyparquet.XXXXXX")
trap 'rm -rf "$T"' EXIT
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
if ! scripts/setup_dataset.sh >"$T/setup.log" 2>&1; then
    echo "FAIL hyparquet_setup: scripts/setup_dataset.sh failed:"; tail -5 "$T/setup.log" | sed 's/^/    /'; exit 1
fi
total_files=0; total_values=0
for variant in pyarrow plain fallback multipage rowgroups v2pages zstd gzip uncompressed; do
    for version in v2.1 v3.0; do
        for robot in so101 libero; do
            name="hyparquet_${variant}_${version}_${robot}"
            d="$T/$name"; ts=; [ "$robot" = libero ] && ts=--ts-f64
            if ! $MACT synth-dataset "$d" --version $version --robot $robot --variant $variant --episodes 4 --len 40:90 \
                    --seed $((SEED + total_files)) $ts >"$T/gen.log" 2>&1; then
                echo "FAIL $name: synth-dataset failed"; sed 's/^/    /' "$T/gen.log"; continue
            fi
            ok=1; pairs=()
            while IFS= read -r f; do
                if ! $MACT dataset dump "$f" >"$f.mact.json" 2>"$T/m.err"; then ok=0; echo "FAIL $name: mact dataset dump $f: $(cat "$T/m.err")"; break; fi
                pairs+=("$f.mact.json" "$f")
            done < <(find "$d" -name '*.parquet' | sort)
            [ "$ok" = 1 ] || continue
            if ! node tests/dataset/hyparquet_compare.mjs "${pairs[@]}" >"$T/c.log" 2>&1; then
                echo "FAIL $name: hyparquet disagrees or could not read:"; grep -v '^EQUAL' "$T/c.log" | sed "s|$d/||; s/^/    /"; continue
            fi
            nf=$(grep -c '^EQUAL' "$T/c.log"); nv=$(awk '/^EQUAL/ { for (i = 1; i <= NF; i++) if ($i ~ /^values=/) s += substr($i, 8) } END { print s + 0 }' "$T/c.log")
            enc=$(grep '^EQUAL file=[^ ]*/data/' "$T/c.log" | tail -1 | sed -n 's/.*\(codecs=[^ ]*\) \(encodings=[^ ]*\).*/\1 \2/p')
            [ "$nf" -eq $((${#pairs[@]} / 2)) ] && echo "PASS $name ($nf files, $nv values equal; data: $enc)" \
                || echo "FAIL $name: $nf of $((${#pairs[@]} / 2)) files compared"
            total_files=$((total_files + nf)); total_values=$((total_values + nv))
        done
    done
done
echo "INFO $total_files parquet files, $total_values values compared with hyparquet"
