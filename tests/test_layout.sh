#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# asan: skip (static checks of the sources and the built libraries)
# The layout's contracts, checked on the built library and the sources:
#   - no link-level cycle among the objects of libmact.a and the toolkits' archives (a.o needing a symbol of b.o while b.o, directly or around
#     a longer loop, needs one of a.o), read from `nm`;
#   - includes go one way: base <- io, kernels <- model <- stages <- data, server <- compress, export <- synth (and the
#     x86 kernels only from kernels/; a toolkit's public header only from its layer up), no header includes itself
#     around a loop;
#   - the toolkits (src/data, src/compress) are clients of the runtime: besides src/base/ and their own folder they
#     include only the public headers (and compress the safetensors reader it carries for the surgery); their shared
#     libraries need libmact.so.0 and define none of the runtime (one mact_predict in a process);
#   - the runtime library links no toolkit library and none of the libraries only the toolkits use (readelf -d);
#   - docs/design.md names every source folder (src/*, src/*/*, tools/*, include/);
#   - docs/README.md names every doc (docs/*.md, docs/spec/*.md) and every suite (tests/test_*.sh, tests/c/test_*.c);
#   - no source file in src/ over 1100 lines;
#   - the libraries have no mutable global besides the CPU probe (kernels/x86/cpu.c): no writable
#     non-constant data symbol in any other object.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
# the runtime and the toolkits (their objects' names are unique across the three archives)
LIBS="$BUILD/libmact.a $BUILD/libmact_data.a $BUILD/libmact_compress.a $BUILD/libmact_synth.a"
for LIB in $LIBS; do [ -f "$LIB" ] || { echo "FAIL layout_lib: $LIB missing (run make)"; exit 1; }; done
TMPD=${MACT_TMP:-/tmp}
# shellcheck disable=SC2086
nm -A $LIBS >"$TMPD/layout_nm.txt" 2>/dev/null || { echo "FAIL layout_nm: nm failed on $LIBS"; exit 1; }
# shellcheck disable=SC2086
objdump -t $LIBS >"$TMPD/layout_objdump.txt" 2>/dev/null || { echo "FAIL layout_objdump: objdump failed on $LIBS"; exit 1; }
"$PY" - "$TMPD/layout_nm.txt" "$TMPD/layout_objdump.txt" <<'PYEOF'
import collections, os, re, sys

nm = open(sys.argv[1]).read().splitlines()
defs, uses = {}, collections.defaultdict(set)
data, member = collections.defaultdict(set), None
for line in open(sys.argv[2]).read().splitlines():  # objdump -t: the section of every symbol, per member
    m = re.match(r'^(\S+\.o):\s+file format', line)
    if m: member = m.group(1); continue
    m = re.match(r'^[0-9a-f]+ [lgu! ].{5}O (\.\S+)\s+[0-9a-f]+ (?:\.hidden )?(\S+)$', line)  # O: an object
    # writable storage: .data / .bss and thread-locals; .data.rel.ro is a constant table with pointers
    # (the sanitizers' own bookkeeping symbols, __asan_* / __odr_asan*, are not the program's)
    if m and member and re.match(r'\.(data|bss|tdata|tbss)(\.|$)', m.group(1)) and 'rel.ro' not in m.group(1) \
            and not m.group(2).startswith(('__asan', '__odr_asan', '__ubsan', '__tsan')):
        data[member].add(m.group(2))
for line in nm:
    head, _, rest = line.partition(': ') if ': ' in line else (line, '', '')
    parts = line.split()
    if len(parts) < 2:
        continue
    obj = parts[0].split(':')[-2] if parts[0].count(':') >= 2 else parts[0].rstrip(':').split(':')[-1]
    typ, sym = parts[-2], parts[-1]
    if typ == 'U':
        uses[obj].add(sym)
    elif typ in 'TDBRVW':
        defs[sym] = obj
graph = {o: {defs[s] for s in ss if s in defs and defs[s] != o} for o, ss in uses.items()}

# strongly connected components (Tarjan)
index, low, stack, on, sccs = {}, {}, [], set(), []
def strong(v, counter=[0]):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in list(graph):
    if v not in index: strong(v)
objs = len({parts.split(':')[0] for parts in []}) or len(set(defs.values()) | set(uses))
if sccs:
    print("FAIL layout_no_link_cycle: " + "; ".join(" <-> ".join(c) for c in sccs))
else:
    print(f"PASS layout_no_link_cycle ({objs} objects, {sum(len(d) for d in graph.values())} edges)")

# mutable globals: writable data in any object but the CPU probe (string literals and const tables are R)
bad = {o: sorted(s) for o, s in data.items() if o != 'cpu.o' and s}
if bad:
    print("FAIL layout_no_mutable_globals: " + "; ".join(f"{o}: {', '.join(s)}" for o, s in sorted(bad.items())))
else:
    print("PASS layout_no_mutable_globals (writable data only in cpu.o, the CPU probe)")

# include layers
rank = {'base': 0, 'io': 1, 'kernels': 1, 'model': 2, 'stages': 3, 'data': 4, 'server': 4, 'compress': 5, 'export': 5,
        'synth': 6}
# what a toolkit may include besides the public headers: src/base/, its own folder, and what it carries
toolkit_private = {'data': ('base/', 'data/'), 'compress': ('base/', 'compress/', 'io/safetensors.h')}
public = {'mact.h': 0, 'mact_stages.h': 0, 'mact_data.h': 4, 'mact_compress.h': 5}  # the lowest layer that may include it
bad, edges = [], collections.defaultdict(set)
for root, _, files in os.walk('src'):
    for f in files:
        if not f.endswith(('.c', '.h')): continue
        path = os.path.join(root, f)
        layer = path.split('/')[1]
        for m in re.finditer(r'^#include "([^"]+)"', open(path).read(), re.M):
            inc = m.group(1)
            if inc in public:
                if public[inc] > rank.get(layer, 0): bad.append(f"{path} ({layer}) includes the toolkit header {inc}")
                continue
            top = inc.split('/')[0]
            edges[path].add('src/' + inc)
            if layer in toolkit_private and not inc.startswith(toolkit_private[layer]):
                bad.append(f"{path} (the {layer} toolkit) includes the runtime's {inc}: a toolkit calls only its public API")
            if top not in rank:
                bad.append(f"{path} includes {inc} (no such layer)"); continue
            if rank[top] > rank[layer] or (top in ('io', 'kernels') and layer in ('io', 'kernels') and top != layer):
                bad.append(f"{path} ({layer}) includes {inc} ({top})")
            if '/x86/' in inc and not path.startswith('src/kernels/') and 'test' not in path:
                bad.append(f"{path} includes the x86 kernels' {inc}")
print("FAIL layout_include_layers: " + "; ".join(bad) if bad else "PASS layout_include_layers (base <- io, kernels <- model <- stages <- data, server <- compress, export <- synth; the toolkits public headers only)")

# header include cycles
state, cyc = {}, []
def dfs(v, path):
    state[v] = 1
    for w in edges.get(v, ()):
        if state.get(w) == 1: cyc.append(' -> '.join(path + [w]))
        elif not state.get(w): dfs(w, path + [w])
    state[v] = 2
for v in list(edges):
    if not state.get(v): dfs(v, [v])
print("FAIL layout_no_include_cycle: " + "; ".join(cyc[:3]) if cyc else "PASS layout_no_include_cycle")

long = []
for root, _, files in os.walk('src'):
    for f in files:
        p = os.path.join(root, f)
        n = sum(1 for _ in open(p, errors='replace'))
        if n > 1100: long.append(f"{p} ({n})")
print("FAIL layout_file_length: over 1100 lines: " + ", ".join(long) if long else "PASS layout_file_length (every src/ file <= 1100 lines)")

# docs/design.md's layout names every folder that holds sources
design = open('docs/design.md').read()
folders = sorted({root for top in ('src', 'tools', 'include') for root, _, files in os.walk(top)
                  if any(f.endswith(('.c', '.h')) for f in files)})
unnamed = [f for f in folders if f + '/' not in design]
print("FAIL layout_design_names_folders: docs/design.md does not name " + ", ".join(unnamed) if unnamed
      else f"PASS layout_design_names_folders ({len(folders)} source folders in docs/design.md)")

# docs/README.md, the index, names every doc and every test suite (one line each), so neither can be added unlisted
import glob
index = open('docs/README.md').read()
listed = sorted(glob.glob('docs/*.md') + glob.glob('docs/spec/*.md') + glob.glob('tests/test_*.sh') + glob.glob('tests/c/test_*.c'))
listed = [p for p in listed if p != 'docs/README.md']
unnamed = [p for p in listed if f'`{p}`' not in index]
stale = [p for p in re.findall(r'`((?:docs|tests)/[^`]+\.(?:md|sh|c))`', index) if not os.path.exists(p)]
print("FAIL layout_docs_index: docs/README.md " + "; ".join(x for x in (
          "does not name " + ", ".join(unnamed) if unnamed else "", "names missing " + ", ".join(stale) if stale else "") if x)
      if unnamed or stale else f"PASS layout_docs_index ({len(listed)} docs and suites in docs/README.md)")
PYEOF

# the runtime library: no toolkit library, none of the libraries only the toolkits need (FFmpeg, the parquet codecs,
# libzip, cairo)
SO="$BUILD/libmact.so"
if [ -f "$SO" ]; then
    needed=$(readelf -d "$SO" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    extra=$(for n in $needed; do case $n in libmact*|libav*|libsw*|libsnappy*|libzstd*|libzip*|libcairo*|libwebsockets*|libmsgpack*|libprotobuf*) echo "$n";; esac; done | tr '\n' ' ')
    if [ -z "$needed" ]; then echo "FAIL layout_runtime_links: readelf -d $SO lists no NEEDED"
    elif [ -n "$extra" ]; then echo "FAIL layout_runtime_links: $SO needs $extra"
    else echo "PASS layout_runtime_links (NEEDED: $needed)"; fi
else echo "FAIL layout_runtime_links: $SO missing (run make)"; fi

# the toolkits' shared libraries: clients of libmact.so.0, with none of the runtime inside (nm sees hidden and local
# symbols too): a process that loads the runtime and both toolkits holds one mact_predict
for t in data compress; do
    so="$BUILD/libmact_$t.so"
    [ -f "$so" ] || { echo "FAIL layout_toolkit_runtime/$t: $so missing (run make)"; continue; }
    needs=$(readelf -d "$so" 2>/dev/null | grep -c 'NEEDED.*\[libmact\.so\.0\]')
    own=$(nm "$so" 2>/dev/null | awk '$2 ~ /^[TtDdBbRr]$/ && $3 ~ /^(mact_predict|mact_model_load|mact_session_new|mact_pipeline_run|mact_gemm_[a-z0-9_]*)$/ {print $3}' | sort -u | tr '\n' ' ')
    if [ "$needs" = 1 ] && [ -z "$own" ]; then echo "PASS layout_toolkit_runtime/$t ($so needs libmact.so.0 and defines none of the runtime)"
    else echo "FAIL layout_toolkit_runtime/$t: NEEDED libmact.so.0: $needs; defines: ${own:-nothing}"; fi
done
