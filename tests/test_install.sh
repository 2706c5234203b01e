#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# asan: skip (packaging (make install, pkg-config); the code it links runs in the other suites)
# `make install` as a Debian package build does it (DESTDIR staging, PREFIX=/usr), then the header's usage
# example (tests/c/install_example.c) built against the installed copy only, through pkg-config: once with the
# shared library (run with LD_LIBRARY_PATH) and once with libmact.a (--static). Both must print the same
# actions as `mact run` on the same frames, task and state, bit for bit (%.9g round-trips a float).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
MACT=${MACT_BIN:-$BUILD/mact}
T=${MACT_TMP:-$(mktemp -d)}/install; rm -rf "$T"; mkdir -p "$T"
ROOT="$T/root"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }

if ! make -s --no-print-directory BUILD="$BUILD" install DESTDIR="$ROOT" PREFIX=/usr >"$T/make.log" 2>&1; then
    fail install_make "make install DESTDIR=$ROOT PREFIX=/usr failed: $(tail -3 "$T/make.log")"; exit 1
fi
VERSION=$(sed -n 's/^#define MACT_VERSION_STRING "\(.*\)"/\1/p' include/mact.h)
L="$ROOT/usr/lib"
missing=""
for f in lib/libmact.so.$VERSION lib/libmact.a lib/pkgconfig/mact.pc include/mact.h include/mact_stages.h bin/mact; do
    [ -f "$ROOT/usr/$f" ] || missing="$missing $f"
done
[ "$(readlink "$L/libmact.so.0")" = "libmact.so.$VERSION" ] || missing="$missing lib/libmact.so.0->libmact.so.$VERSION"
[ "$(readlink "$L/libmact.so")" = "libmact.so.0" ] || missing="$missing lib/libmact.so->libmact.so.0"
[ -z "$missing" ] && pass install_layout || fail install_layout "missing under $ROOT/usr:$missing"
# the toolkits: each library (the real file, the soname link), its archive, header and .pc
missing=""
for t in data compress; do
    for f in lib/libmact_$t.so.$VERSION lib/libmact_$t.a lib/pkgconfig/mact_$t.pc include/mact_$t.h; do
        [ -f "$ROOT/usr/$f" ] || missing="$missing $f"
    done
    [ "$(readlink "$L/libmact_$t.so.0")" = "libmact_$t.so.$VERSION" ] || missing="$missing lib/libmact_$t.so.0"
done
[ -z "$missing" ] && pass install_layout_toolkits || fail install_layout_toolkits "missing under $ROOT/usr:$missing"

# pkg-config sees only the staged copy; the sysroot maps its /usr paths into the staging directory
export PKG_CONFIG_LIBDIR="$L/pkgconfig" PKG_CONFIG_PATH="" PKG_CONFIG_SYSROOT_DIR="$ROOT"
v=$(pkg-config --modversion mact 2>&1)
[ "$v" = "$VERSION" ] && pass "install_pkgconfig_version ($v)" || fail install_pkgconfig_version "'$v', header says $VERSION"
cflags=$(pkg-config --cflags mact) libs=$(pkg-config --libs mact) slibs=$(pkg-config --static --libs mact)
echo "INFO pkg-config: cflags '$cflags' libs '$libs' static '$slibs'"
# a sanitized build's library needs the sanitizer runtime in the program too
san=""
nm "$BUILD/libmact.a" 2>/dev/null | grep -q __asan_ && san="-fsanitize=address,undefined"
nm "$BUILD/libmact.a" 2>/dev/null | grep -q __tsan_ && san="-fsanitize=thread"
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $san tests/c/install_example.c $cflags $libs -o "$T/example_shared" \
        2>"$T/cc_shared.log"; then
    if readelf -d "$T/example_shared" | grep -q 'NEEDED.*\[libmact.so.0\]'; then pass install_build_shared
    else fail install_build_shared "the program does not need libmact.so.0"; fi
else fail install_build_shared "$(head -5 "$T/cc_shared.log")"; fi
# --static: libmact.a itself (-l:libmact.a; plain -lmact would pick the .so) and the private libraries, as
# README.md says
slibs_a=$(echo "$slibs" | sed 's/-lmact\b/-l:libmact.a/')
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $san tests/c/install_example.c $cflags $slibs_a -o "$T/example_static" \
        2>"$T/cc_static.log"; then
    if readelf -d "$T/example_static" | grep -q 'NEEDED.*libmact'; then
        fail install_build_static "the program still needs a libmact.so"
    else pass install_build_static; fi
else fail install_build_static "$(head -5 "$T/cc_static.log")"; fi

# a program of both toolkits, through pkg-config, shared and static: it reads a dataset the CLI synthesized (the
# toolkits require the runtime: mact_version() links through them)
{ printf '#include <stdio.h>\n#include <mact_data.h>\n#include <mact_compress.h>\n'
  printf 'int main(int c, char **v) { (void)c; char e[512]; mact_dataset *d; mact_dataset_info i;\n'
  printf '  if (mact_dataset_open(v[1], &d, e, sizeof e)) { fprintf(stderr, "%%s\\n", e); return 1; }\n'
  printf '  mact_dataset_get_info(d, &i); printf("%%d %%lld %%s %%s\\n", i.n_episodes, (long long)i.n_frames, mact_compress_version(), mact_version());\n'
  printf '  mact_dataset_close(d); return 0; }\n'; } >"$T/toolkits.c"
$MACT synth-dataset "$T/ds" --episodes 2 --len 20:30 --seed 3 >"$T/ds.log" 2>&1 || fail install_toolkits "synth-dataset failed"
ver=$(sed -n 's/^#define MACT_VERSION_STRING "\(.*\)"/\1/p' include/mact.h)
want="2 $($MACT dataset info "$T/ds" 2>/dev/null | sed -n 's/.*frames \([0-9]*\) (info.*/\1/p') $ver $ver"
tk_cflags=$(pkg-config --cflags mact_data mact_compress) tk_libs=$(pkg-config --libs mact_data mact_compress)
tk_slibs=$(pkg-config --static --libs mact_compress mact_data | sed -E 's/-lmact(_data|_compress)?\b/-l:libmact\1.a/g')
for kind in shared static; do
    # shellcheck disable=SC2086
    if [ $kind = shared ]; then $CC -std=c11 -Wall -Werror $san "$T/toolkits.c" $tk_cflags $tk_libs -o "$T/tk_$kind" 2>"$T/tk_cc.log"
    else $CC -std=c11 -Wall -Werror $san "$T/toolkits.c" $tk_cflags $tk_slibs -o "$T/tk_$kind" 2>"$T/tk_cc.log"; fi ||
        { fail "install_toolkits_$kind" "$(head -3 "$T/tk_cc.log")"; continue; }
    got=$(LD_LIBRARY_PATH="$L" "$T/tk_$kind" "$T/ds" 2>&1)
    [ "$got" = "$want" ] && pass "install_toolkits_$kind ($got)" || fail "install_toolkits_$kind" "printed '$got', want '$want'"
done

# the model: $MACT_TEST_MODEL when it has what mact_predict needs, else a tiny synthesized one
MODEL=${MACT_TEST_MODEL:-}
if [ -z "$MODEL" ] || [ ! -f "$MODEL/tokenizer.json" ] || [ ! -f "$MODEL/norm_stats.json" ]; then
    MODEL="$T/model"
    $MACT synth tiny "$MODEL" --seed 11 >"$T/synth.log" 2>&1 || { fail install_model "mact synth tiny failed"; exit 1; }
    echo "INFO model: mact synth tiny (MACT_TEST_MODEL has no tokenizer.json)"
fi
# two camera frames, raw RGB for the example and the same bytes as .npy (uint8 HxWx3) for `mact run`
H=48 W=64
"${PYTHON:-/usr/bin/python3}" - "$T" $H $W <<'PYEOF' || { fail install_frames "could not write the frames"; exit 1; }
import struct, sys
d, h, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(2):
    px = bytes(((x * 5 + y * 3 + k * 70) % 256, (x * y + 40 * k) % 256, (255 - 4 * x + 9 * y * k) % 256)[c]
               for y in range(h) for x in range(w) for c in range(3))
    open(f"{d}/cam{k}.rgb", "wb").write(px)
    hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, 3), }" % (h, w)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    open(f"{d}/cam{k}.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + px)
PYEOF
TASK="Pick up the blue cube and put it in the box."
STATE="0.1, -0.2, 0.05, 0.3, -0.1, 0.0, 0.02, 0.04"
if ! $MACT run --model "$MODEL" --image "$T/cam0.npy" --image "$T/cam1.npy" --task "$TASK" --state "$STATE" --json \
        >"$T/run.json" 2>"$T/run.log"; then
    fail install_reference "mact run failed: $(tail -3 "$T/run.log")"; exit 1
fi
# {"actions": [[a, b], [c, d]], ...} -> one row per line, values space-separated (the same %.9g text)
sed -E 's/^\{"actions": \[\[(.*)\]\], "n_tokens".*/\1/; s/\], \[/\n/g; s/, / /g' "$T/run.json" >"$T/ref.txt"
rows=$(wc -l <"$T/ref.txt")
for kind in shared static; do
    exe="$T/example_$kind"
    [ -x "$exe" ] || continue
    if ! LD_LIBRARY_PATH="$L" "$exe" "$MODEL" "$TASK" "$STATE" $H $W "$T/cam0.rgb" "$T/cam1.rgb" >"$T/$kind.out" \
            2>"$T/$kind.err"; then
        fail "install_example_$kind" "exited non-zero: $(tail -3 "$T/$kind.err")"; continue
    fi
    tail -n +2 "$T/$kind.out" >"$T/$kind.txt"
    if [ "$rows" -gt 0 ] && cmp -s "$T/ref.txt" "$T/$kind.txt"; then
        pass "install_example_$kind ($(head -1 "$T/$kind.out" | sed 's/: actions//'), $rows rows bitwise equal to mact run)"
    else
        fail "install_example_$kind" "actions differ from mact run: $(diff "$T/ref.txt" "$T/$kind.txt" | head -4 | tr '\n' ' ')"
    fi
done
[ "$fails" -eq 0 ]
