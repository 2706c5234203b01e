#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# asan: skip (static checks of the exported symbols and headers)
# Each shared library's ABI is exactly its public headers: `nm -D --defined-only $BUILD/libmact.so` lists every
# function declared MACT_API in include/mact.h and include/mact_stages.h and nothing else (the library is compiled
# -fvisibility=hidden); likewise libmact_data.so and include/mact_data.h, libmact_compress.so and
# include/mact_compress.h (the toolkits need libmact.so.0 and call only its public API).
# Also: every function the headers declare is MACT_API, each header compiles on its own (C11 -pedantic, and
# as C++ when a C++ compiler is here), the usage example in mact.h compiles, the soname is libmact.so.0, and
# mact_version() matches the header.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
SO="$BUILD/libmact.so"
T=${MACT_TMP:-$(mktemp -d)}/abi; rm -rf "$T"; mkdir -p "$T"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }

[ -f "$SO" ] || { fail abi_so "$SO does not exist (make builds it)"; exit 1; }
hdrs=(include/*.h)

# the MACT_API functions: the headers preprocessed (comments gone) with MACT_API as a marker
for h in "${hdrs[@]}"; do echo "#include \"$(basename "$h")\""; done >"$T/all.c"
if ! $CC -std=c11 -E -P -Iinclude -DMACT_API=__mact_api_marker__ "$T/all.c" >"$T/all.i" 2>"$T/cpp.log"; then
    fail abi_headers_preprocess "$(head -3 "$T/cpp.log")"; exit 1
fi
tr '\n' ' ' <"$T/all.i" | grep -o '__mact_api_marker__[^;(]*(' |
    sed -E 's/[[:space:]]*\($//; s/.*[^A-Za-z0-9_]//' | sort -u >"$T/declared.txt"
n_decl=$(wc -l <"$T/declared.txt")
[ "$n_decl" -gt 0 ] && pass "abi_declared ($n_decl MACT_API functions in ${hdrs[*]})" \
    || fail abi_declared "no MACT_API declaration found in ${hdrs[*]}"

# which header declares each function (GCC's -aux-info: lines like /* include/mact.h:83:NC */ extern ...);
# without it, every MACT_API function is taken as libmact.so's (the runtime's headers only)
: >"$T/origin.txt"
if $CC -std=c11 -fsyntax-only -Iinclude -aux-info "$T/aux.txt" "$T/all.c" 2>/dev/null && [ -s "$T/aux.txt" ]; then
    grep -E '^/\* include/[^ ]*\.h:' "$T/aux.txt" |
        sed -E 's|^/\* include/([^:]*)\.h:.*\*/ *(.*)$|\1 \2|; s/[[:space:]]*\(.*//' |
        awk '{ n = split($0, w, /[^A-Za-z0-9_]+/); print w[1], w[n] }' | sort -u >"$T/origin.txt"
fi
libs="mact mact_data mact_compress"
for lib in $libs; do
    so="$BUILD/lib$lib.so"
    case $lib in mact) own="mact mact_stages" ;; *) own="$lib" ;; esac
    if [ -s "$T/origin.txt" ]; then
        awk -v own=" $own " 'NR == FNR { if (index(own, " " $1 " ")) o[$2] = 1; next } ($1 in o)' \
            "$T/origin.txt" "$T/declared.txt" >"$T/declared_$lib.txt"
    elif [ "$lib" = mact ]; then cp "$T/declared.txt" "$T/declared_$lib.txt"
    else continue; fi
    [ -f "$so" ] || { fail "abi_so/$lib" "$so does not exist (make builds it)"; continue; }
    # the exports: every defined dynamic symbol, with its type
    nm -D --defined-only "$so" | awk '{print $NF, $(NF-1)}' | sort -u >"$T/exported_$lib.txt"
    extra=$(awk 'NR == FNR { d[$1] = 1; next } !($1 in d) || ($2 != "T") { print $1 " (" $2 ")" }' \
        "$T/declared_$lib.txt" "$T/exported_$lib.txt")
    sfx=$([ "$lib" = mact ] || echo "/$lib")
    [ -z "$extra" ] && pass "abi_no_extra_exports$sfx ($(wc -l <"$T/exported_$lib.txt") functions)" \
        || fail "abi_no_extra_exports$sfx" "$so exports what no header of it declares MACT_API (or not as a function): $(echo $extra)"
    missing=$(awk 'NR == FNR { e[$1] = 1; next } !($1 in e) { print $1 }' "$T/exported_$lib.txt" "$T/declared_$lib.txt")
    [ -z "$missing" ] && pass "abi_no_missing_exports$sfx" \
        || fail "abi_no_missing_exports$sfx" "declared MACT_API but not defined in $so: $(echo $missing)"
    # a toolkit is a client of the runtime: it needs libmact.so.0 (one runtime in a process; test_layout.sh checks
    # that it carries none of its own)
    if [ "$lib" != mact ]; then
        needed=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(libmact[^]]*\)\].*/\1/p' | tr '\n' ' ')
        grep -qw "libmact.so.0" <<<"$needed" && pass "abi_toolkit_needs_runtime/$lib (NEEDED $needed)" \
            || fail "abi_toolkit_needs_runtime/$lib" "$so needs [$needed], not libmact.so.0"
        soname=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
        [ "$soname" = "lib$lib.so.0" ] && pass "abi_soname/$lib" || fail "abi_soname/$lib" "SONAME is '$soname', not lib$lib.so.0"
    fi
done

# every function a public header declares carries MACT_API (else it would be hidden and go unnoticed above)
if [ -s "$T/aux.txt" ]; then
    # lines like: /* include/mact.h:83:NC */ extern const char *mact_version (void); (ours, not the system's)
    grep -E '^/\* include/[^ ]*\.h:' "$T/aux.txt" |
        sed -E 's|^/\*[^*]*\*/ *||; s/[[:space:]]*\(.*//; s/.*[^A-Za-z0-9_]//' | sort -u >"$T/all_functions.txt"
    undecl=$(comm -23 "$T/all_functions.txt" "$T/declared.txt")
    [ -s "$T/all_functions.txt" ] || undecl="(no prototype found in the -aux-info output)"
    [ -z "$undecl" ] && pass abi_every_function_marked \
        || fail abi_every_function_marked "declared in include/ without MACT_API: $(echo $undecl)"
else
    echo "INFO abi_every_function_marked skipped: $CC has no -aux-info"
fi

# each header on its own, strict C11 and C++
for h in "${hdrs[@]}"; do
    b=$(basename "$h")
    printf '#include "%s"\nint main(void) { return 0; }\n' "$b" >"$T/one.c"
    if $CC -std=c11 -Wall -Wextra -pedantic -Werror -Iinclude -c "$T/one.c" -o "$T/one.o" 2>"$T/one.log"; then
        pass "abi_header_alone_c11/$b"
    else fail "abi_header_alone_c11/$b" "$(head -3 "$T/one.log")"; fi
    if command -v "${CXX:-c++}" >/dev/null 2>&1; then
        cp "$T/one.c" "$T/one.cc"
        if "${CXX:-c++}" -Wall -Wextra -Werror -Iinclude -c "$T/one.cc" -o "$T/one.o" 2>"$T/one.log"; then
            pass "abi_header_alone_cxx/$b"
        else fail "abi_header_alone_cxx/$b" "$(head -3 "$T/one.log")"; fi
    fi
done

# the usage example at the top of mact.h compiles as it stands (the lines from `#include <mact.h>` to
# `mact_model_free(m);`, in a main() that declares the two frames)
{ printf '#include <stdio.h>\n#include <stdlib.h>\n#include "mact.h"\nint main(void)\n{\n'
  printf '    const uint8_t *top_rgb = NULL, *wrist_rgb = NULL;\n'
  sed -n '/^ \*   #include <mact.h>/,/^ \*   mact_model_free(m);/p' include/mact.h | sed '1d; s/^ \*//; s/^   //'
  printf '    return 0;\n}\n'; } >"$T/example.c"
if grep -q mact_predict "$T/example.c" &&
        $CC -std=c11 -Wall -Wextra -Werror -Iinclude -c "$T/example.c" -o "$T/example.o" 2>"$T/example.log"; then
    pass abi_header_example_compiles
else fail abi_header_example_compiles "$(head -3 "$T/example.log" 2>/dev/null) (extracted to $T/example.c)"; fi

soname=$(readelf -d "$SO" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libmact.so.0" ] && pass abi_soname || fail abi_soname "SONAME is '$soname', not libmact.so.0"

# the library's mact_version() against the header's MACT_VERSION_STRING, through the .so
printf '#include <stdio.h>\n#include <string.h>\n#include "mact.h"\nint main(void) { printf("%%s\\n", mact_version()); return strcmp(mact_version(), MACT_VERSION_STRING) != 0; }\n' >"$T/ver.c"
ln -sf "$(realpath "$SO")" "$T/libmact.so.0"
san=""  # a sanitized library needs the sanitizer runtime in the program too
nm -D "$SO" | grep -q __asan_ && san="-fsanitize=address,undefined"
nm -D "$SO" | grep -q __tsan_ && san="-fsanitize=thread"
if $CC -std=c11 $san -Iinclude "$T/ver.c" -o "$T/ver" "$SO" 2>"$T/ver.log" &&
        v=$(LD_LIBRARY_PATH="$T" "$T/ver" 2>>"$T/ver.log"); then
    pass "abi_version ($v)"
else fail abi_version "mact_version() through $SO does not match MACT_VERSION_STRING: $(cat "$T/ver.log")"; fi
[ "$fails" -eq 0 ]
