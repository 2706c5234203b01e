#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# asan: skip (bit-exact interop with numpy; the npy/npz reader and writer run under ASan in test_npy and fuzz_npy)
# npy/npz interop with numpy, bit-exact in both directions:
#   numpy writes .npy (v1/v2/v3, C and Fortran order) and .npz (savez, savez_compressed, zipfile
#   with data descriptors) -> the C tool reads and rewrites them (stored, deflated, forced zip64)
#   -> numpy compares; the C tool also generates arrays from specs that numpy checks byte by byte,
#   and converts members to float32 for comparison with numpy's astype. zip64: numpy's local zip64
#   extra fields (every savez), the tool's forced zip64 (flags 256) checked for the same layout, and
#   the zip64 end record of a 65536-member archive in both directions.
# Uses $BUILD/tests/npz_roundtrip_tool (built by `make`), $PYTHON (numpy), $MACT_TMP.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
TOOL="$BUILD/tests/npz_roundtrip_tool"
TMP=$(mktemp -d "${MACT_TMP:-/tmp}/npz_numpy.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if [ ! -x "$TOOL" ]; then
    echo "FAIL npz_numpy/build_tool: $TOOL missing (run make BUILD=$BUILD)"
    exit 1
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL npz_numpy/numpy: $PY cannot import numpy"
    exit 1
fi
echo "PASS npz_numpy/build_tool"

"$PY" - "$TMP" "$TOOL" <<'PYEOF'
import io, os, subprocess, sys, zipfile
import numpy as np

tmp, tool = sys.argv[1], sys.argv[2]
failed = 0

def check(name, ok, why=""):
    global failed
    if ok:
        print(f"PASS npz_numpy/{name}")
    else:
        failed += 1
        print(f"FAIL npz_numpy/{name}: {why}")
    sys.stdout.flush()

def run(*args):
    p = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()

def same(a, b):
    """dtype, shape and every byte (so NaN payloads, -0.0 and f16 subnormals count)."""
    return (a.dtype == b.dtype and a.shape == b.shape and
            np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())

def diff(a, b):
    return f"dtype {a.dtype}/{b.dtype} shape {a.shape}/{b.shape}"

rng = np.random.default_rng(1234)
def ints(dt):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=(4, 3), dtype=dt, endpoint=True)

arrays = {
    "f4": rng.standard_normal((3, 4)).astype("<f4"),
    "f4_special": np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -1.5], "<f4"),
    "f8": rng.standard_normal(7),
    "f2_all_bits": np.arange(0, 65536, 37, dtype="<u2").view("<f2"),
    "i8": ints("<i8"), "i4": ints("<i4"), "i2": ints("<i2"), "i1": ints("i1"),
    "u1": ints("u1"), "u2": ints("<u2"), "u4": ints("<u4"), "u8": ints("<u8"),
    "b1": rng.random((5, 3)) > 0.5,
    "zero_d_f4": np.array(3.5, "<f4"),
    "zero_d_i8": np.array(-7, "<i8"),
    "zero_d_bool": np.array(True),
    "empty_1d": np.zeros((0,), "<f4"),
    "empty_3d": np.zeros((3, 0, 2), "<i2"),
    "odd": np.arange(105, dtype="<u2").reshape(1, 7, 1, 3, 1, 5),
    "eight_d": rng.standard_normal((1, 2, 1, 2, 1, 2, 1, 2)),
    "big": rng.standard_normal((300, 1000)).astype("<f4"),
    "fortran": np.asfortranarray(np.arange(24, dtype="<f4").reshape(2, 3, 4)),
    "fortran_2d_i2": np.asfortranarray(np.arange(35, dtype="<i2").reshape(5, 7)),
    "name with spaces/and.slash": np.arange(3, dtype="<i4"),
    "unicode_ünï": np.arange(4, dtype="<u1"),
}

# --- .npy: numpy -> C -> numpy, format versions 1.0, 2.0, 3.0
for ver in [(1, 0), (2, 0), (3, 0)]:
    bad = []
    for k, a in arrays.items():
        if "/" in k:
            continue
        src, dst = f"{tmp}/in.npy", f"{tmp}/out.npy"
        with open(src, "wb") as f:
            np.lib.format.write_array(f, a, version=ver)
        rc, out = run("npy", src, dst)
        if rc != 0:
            bad.append(f"{k}: tool failed: {out}")
            continue
        b = np.load(dst)
        if not same(a, b):
            bad.append(f"{k}: {diff(a, b)}")
    check(f"npy_roundtrip_v{ver[0]}", not bad, "; ".join(bad[:4]))

# --- .npz written by numpy, stored and compressed, rewritten by C with every flag combination
def load_all(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}

def zip_ok(path):
    with zipfile.ZipFile(path) as zf:
        return zf.testzip() is None

np.savez(f"{tmp}/np_stored.npz", **arrays)
np.savez_compressed(f"{tmp}/np_deflate.npz", **arrays)

# numpy forces zip64 extra fields into every local header; note whether that path was exercised.
with open(f"{tmp}/np_stored.npz", "rb") as f:
    head = f.read(30 + 200)
nlen, xlen = int.from_bytes(head[26:28], "little"), int.from_bytes(head[28:30], "little")
zip64_local = xlen >= 4 and head[30 + nlen:32 + nlen] == bytes([1, 0])
print(f"INFO npz_numpy/numpy_local_zip64_extra={'yes' if zip64_local else 'no'}")

# zipfile on an unseekable stream writes data descriptors (flag bit 3, zero sizes in local headers).
class Unseekable(io.RawIOBase):
    def __init__(self, f): self.f = f
    def writable(self): return True
    def write(self, b): return self.f.write(b)
with open(f"{tmp}/np_descriptor.npz", "wb") as raw:
    with zipfile.ZipFile(Unseekable(raw), "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for k in ["f4", "b1", "zero_d_i8", "empty_3d", "fortran"]:
            with zf.open(k + ".npy", "w") as m:
                np.lib.format.write_array(m, arrays[k])
with zipfile.ZipFile(f"{tmp}/np_descriptor.npz") as zf:
    has_dd = all(i.flag_bits & 0x08 for i in zf.infolist())
print(f"INFO npz_numpy/data_descriptor_members={'yes' if has_dd else 'no'}")

for src in ["np_stored", "np_deflate", "np_descriptor"]:
    want = load_all(f"{tmp}/{src}.npz")
    for flags, label in [(0, "stored"), (1, "deflate"), (256, "zip64_stored"), (257, "zip64_deflate")]:
        dst = f"{tmp}/c_{src}_{flags}.npz"
        rc, out = run("npz", f"{tmp}/{src}.npz", dst, flags)
        if rc != 0:
            check(f"npz_{src}_to_{label}", False, f"tool failed: {out}")
            continue
        try:
            ok_zip = zip_ok(dst)
            got = load_all(dst)
        except Exception as e:  # numpy/zipfile refusing our file is the failure being tested
            check(f"npz_{src}_to_{label}", False, f"numpy cannot read it: {e!r}")
            continue
        bad = [k for k in want if k not in got or not same(want[k], got[k])]
        extra = sorted(set(got) - set(want))
        check(f"npz_{src}_to_{label}", ok_zip and not bad and not extra,
              f"zip_ok={ok_zip} differing={bad[:5]} extra={extra[:5]}")

# --- MACT_NPZ_ZIP64 (flags 256): numpy's layout, a zip64 extra field (id 1) in every local header
def local_zip64_everywhere(path):
    with open(path, "rb") as f:
        b = f.read()
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    for i in infos:
        o = i.header_offset
        nlen, xlen = int.from_bytes(b[o + 26:o + 28], "little"), int.from_bytes(b[o + 28:o + 30], "little")
        x = b[o + 30 + nlen:o + 30 + nlen + xlen]
        if len(x) < 20 or x[:2] != bytes([1, 0]):
            return False
    return len(infos) > 0
for src in ["np_stored", "np_deflate", "np_descriptor"]:
    paths = [f"{tmp}/c_{src}_{fl}.npz" for fl in (256, 257)]
    ok = all(os.path.exists(p) and local_zip64_everywhere(p) for p in paths)
    check(f"zip64_flag_local_extras_{src}", ok, f"not every local header of {paths} has a zip64 extra field")

# --- zip64 end record as Python's zipfile writes it (65536 members, over the 16-bit count), read by C,
# and written by C (libzip adds the zip64 end record itself at that count), read back by zipfile/numpy.
# np.load looks members up in a list (quadratic here), so zipfile lists them all and a sample of 1 in 61
# (plus the last) is compared byte for byte; the C side CRC-checked every member when it read them.
many = {f"m{i}": np.array([i, -i], "<i4") for i in range(65536)}
np.savez(f"{tmp}/many.npz", **many)
def has_end64(path):
    with open(path, "rb") as f:
        f.seek(-200, 2)
        return b"PK\x06\x06" in f.read()
rc, out = run("npz", f"{tmp}/many.npz", f"{tmp}/many_c.npz", 1)
if rc != 0:
    check("zip64_end_record_65536_members", False, f"tool failed: {out}")
else:
    try:
        with zipfile.ZipFile(f"{tmp}/many_c.npz") as zf:
            names = [i.filename for i in zf.infolist()]
            sample = [f"m{i}" for i in list(range(0, 65536, 61)) + [65535]]
            bad = [k for k in sample
                   if not same(many[k], np.lib.format.read_array(io.BytesIO(zf.read(k + ".npy"))))]
        e64 = (has_end64(f"{tmp}/many.npz"), has_end64(f"{tmp}/many_c.npz"))
        check("zip64_end_record_65536_members",
              all(e64) and names == [k + ".npy" for k in many] and not bad,
              f"end64 numpy/C={e64} members={len(names)} differing={bad[:5]}")
    except Exception as e:
        check("zip64_end_record_65536_members", False, f"zipfile cannot read it: {e!r}")

# --- C-generated arrays checked by numpy (and read back by C for the last word)
descr = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
         "I8": "|i1", "U8": "|u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "|b1"}
specs = [("a_f32", "F32", (3, 5)), ("a_f64", "F64", (2, 2, 2)), ("a_f16", "F16", (9,)),
         ("a_i64", "I64", (4,)), ("a_i32", "I32", (1, 6)), ("a_i16", "I16", (7,)),
         ("a_i8", "I8", (3, 3)), ("a_u8", "U8", (257,)), ("a_u16", "U16", (2, 3)),
         ("a_u32", "U32", (5,)), ("a_u64", "U64", (1,)), ("a_bool", "BOOL", (4, 4)),
         ("scalar", "F32", ()), ("empty", "I32", (0, 3)), ("deep", "U8", (1, 2, 1, 2, 1, 2, 1, 2)),
         ("wide", "F32", (1, 70000))]

def expected(j, dt, shape):
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(descr[dt]).itemsize
    k = np.arange(n, dtype=np.int64)
    b = ((7 * k + j) % 3 == 0) if dt == "BOOL" else ((31 * k + 17 * j + 5) & 255)
    return np.frombuffer(b.astype(np.uint8).tobytes(), dtype=descr[dt]).reshape(shape)

argv = [f"{n}:{dt}:{','.join(map(str, s))}" for n, dt, s in specs]
for flags, label in [(0, "stored"), (1, "deflate"), (257, "zip64_deflate")]:
    dst = f"{tmp}/gen_{flags}.npz"
    rc, out = run("gen", dst, flags, *argv)
    if rc != 0:
        check(f"c_generated_{label}", False, f"tool failed: {out}")
        continue
    try:
        got = load_all(dst)
        ok_zip = zip_ok(dst)
    except Exception as e:
        check(f"c_generated_{label}", False, f"numpy cannot read it: {e!r}")
        continue
    bad = [n for j, (n, dt, s) in enumerate(specs) if n not in got or not same(got[n], expected(j, dt, s))]
    check(f"c_generated_{label}", ok_zip and not bad and len(got) == len(specs),
          f"zip_ok={ok_zip} differing={bad}")
bad = []
for n, dt, s in specs:
    dst = f"{tmp}/gen_{n}.npy"
    rc, out = run("gen", dst, 0, f"{n}:{dt}:{','.join(map(str, s))}")
    if rc != 0 or not same(np.load(dst), expected(0, dt, s)):
        bad.append(f"{n} ({out})" if rc else n)
check("c_generated_npy", not bad, f"differing={bad}")

# --- float32 conversion agrees with numpy's astype bit for bit
rc, out = run("f32", f"{tmp}/np_deflate.npz", f"{tmp}/f32.npz")
if rc != 0:
    check("to_f32_matches_astype", False, f"tool failed: {out}")
else:
    got = load_all(f"{tmp}/f32.npz")
    want = {k: v.astype(np.float32) for k, v in arrays.items()}
    bad = [k for k in want if not same(want[k], got.get(k, np.zeros(0)))]
    check("to_f32_matches_astype", not bad, f"differing={bad}")

# --- files C must refuse, with a message that says why
np.save(f"{tmp}/be.npy", np.arange(3, dtype=">f4"))
rc, out = run("npy", f"{tmp}/be.npy", f"{tmp}/x.npy")
check("refuse_big_endian", rc != 0 and "big-endian" in out, f"rc={rc} out={out!r}")
np.save(f"{tmp}/obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
rc, out = run("npy", f"{tmp}/obj.npy", f"{tmp}/x.npy")
check("refuse_object_dtype", rc != 0 and "unsupported dtype descr '|O'" in out, f"rc={rc} out={out!r}")
np.save(f"{tmp}/c8.npy", np.arange(3, dtype=np.complex64))
rc, out = run("npy", f"{tmp}/c8.npy", f"{tmp}/x.npy")
check("refuse_complex", rc != 0 and "unsupported dtype descr '<c8'" in out, f"rc={rc} out={out!r}")
with zipfile.ZipFile(f"{tmp}/bz2.npz", "w", compression=zipfile.ZIP_BZIP2) as zf:
    with zf.open("a.npy", "w") as m:
        np.lib.format.write_array(m, arrays["f4"])
rc, out = run("npz", f"{tmp}/bz2.npz", f"{tmp}/x.npz", 0)
check("refuse_bzip2_member", rc != 0 and "unsupported compression method 12" in out, f"rc={rc} out={out!r}")

sys.exit(1 if failed else 0)
PYEOF
