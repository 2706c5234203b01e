"""Fixtures shared by tests/python/test_*.py, from the environment tests/test_python.sh sets:
MACT_PY_MODEL (a `mact synth tiny` checkpoint), MACT_PY_DIR (frames and scratch), MACT_BIN, MACT_LIBRARY,
MACT_PY_PACKAGE (the directory `import mact` comes from)."""
import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.environ.get("MACT_PY_PACKAGE", os.path.join(REPO, "python"))
sys.path.insert(0, PACKAGE)
import mact  # noqa: E402

MODEL = os.environ["MACT_PY_MODEL"]
DIR = os.environ["MACT_PY_DIR"]
MACT_BIN = os.environ.get("MACT_BIN", os.path.join(REPO, "build", "mact"))
TASK = "Pick up the blue cube and put it in the box."
STATE = [0.1, -0.2, 0.05, 0.3, -0.1, 0.0, 0.02, 0.04]
H, W = 48, 64


def frame(k, h=H, w=W):
    """A deterministic HxWx3 uint8 test frame, different per k."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 5 + y * 3 + k * 70) % 256, (x * y + 40 * k) % 256, (255 - 4 * x + 9 * y * k) % 256],
                    axis=-1).astype(np.uint8)


def frame_files(k, kinds=("npy", "png")):
    """frame(k) written as .npy (numpy) and .png (PIL); their paths."""
    out = {}
    a = frame(k)
    p = os.path.join(DIR, f"cam{k}.npy")
    if not os.path.exists(p):
        np.save(p, a)
    out["npy"] = p
    if "png" in kinds:
        from PIL import Image
        q = os.path.join(DIR, f"cam{k}.png")
        if not os.path.exists(q):
            Image.fromarray(a).save(q)
        out["png"] = q
    return out


def mact_run(images, task=TASK, state=STATE, model=MODEL, extra=()):
    """`mact run --json` -> (actions float32 [n, d] or None, stderr text, the parsed JSON or None)."""
    cmd = [MACT_BIN, "run", "--model", model]
    for im in images:
        cmd += ["--image", im]
    cmd += ["--task", task, "--state", ",".join(repr(float(s)) for s in state), "--json", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip(), None
    doc = json.loads(r.stdout)
    return np.array(doc["actions"], dtype=np.float64).astype(np.float32), r.stderr, doc


def cli_message(stderr):
    """The library's message in `mact run`'s stderr ("mact: MESSAGE")."""
    line = stderr.strip().splitlines()[-1]
    return line[len("mact: "):] if line.startswith("mact: ") else line


def bitwise_equal(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def check_struct_layouts(test, structs, headers):
    """Sizes and field offsets of every ctypes mirror in structs ({C name: Structure}) equal the C compiler's, with
    headers (include/ names) included; skips when there is no C compiler."""
    import ctypes
    lines = ["#include <stddef.h>", "#include <stdio.h>", *(f'#include "{h}"' for h in headers), "int main(void) {"]
    for cname, py in structs.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        lines += [f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));' for f, _ in py._fields_]
    lines.append("return 0; }")
    src, exe = os.path.join(DIR, f"layout_{len(structs)}.c"), os.path.join(DIR, f"layout_{len(structs)}")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), src, "-o", exe], capture_output=True,
                       text=True)
    if r.returncode:
        test.skipTest(f"no C compiler ({cc}): {r.stderr[:200]}")
    got = dict(x.split() for x in subprocess.run([exe], capture_output=True, text=True).stdout.splitlines())
    for cname, py in structs.items():
        test.assertEqual(int(got[cname]), ctypes.sizeof(py), cname)
        for f, _ in py._fields_:
            test.assertEqual(int(got[f"{cname}.{f}"]), getattr(py, f).offset, f"{cname}.{f}")
