"""Real pickles for tests/test_pickle.sh, and Python's view of them in the canonical text build/tests/pickle_tool prints.

  pk_cases.py gen DIR            writes DIR/pkg (a fake `lerobot` package whose TimedObservation, TimedAction,
                                 RemotePolicyConfig, PolicyFeature and FeatureType are declared as in LeRobot's
                                 source), DIR/cases/NAME.pkl with NAME.view (Python's view of pickle.loads) or
                                 NAME.err (a substring the reader's error must contain), and DIR/evil/NAME.pkl
                                 (payloads that run a command when Python unpickles them) with NAME.err
  pk_cases.py corpus DIR         small seeds for fuzz/fuzz_pickle.c (its selector byte first) into DIR
  pk_cases.py run-evil FILE      pickle.loads(FILE) as LeRobot's server would (the control: the marker appears)
  pk_cases.py actions FILE F32 ROWS DIM T0 DT I0 pickle|safe [float64]
                                 checks the reply build/tests/pickle_tool wrote, as LeRobot's robot client reads it
Needs numpy; `actions ... pickle` needs torch. Every view follows the same rules as tests/c/pickle_tool.c."""
import dataclasses
import enum
import json
import os
import struct
import subprocess
import sys
import types

import numpy as np

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lerobot_fake")



def write_pkg(root):
    """the fake `lerobot` package (tests/lerobot_fake: LeRobot's payload classes, its module paths) copied to root"""
    import shutil
    shutil.copytree(FAKE, root, dirs_exist_ok=True)
    sys.path.insert(0, root)


# ---- the canonical view ----
def g17(x):
    return "%.17g" % x


def quote(s):
    out = []
    for c in s.encode("utf-8", "surrogatepass"):
        out.append(chr(c) if 0x20 <= c < 0x7F and c not in (0x27, 0x5C) else "\\x%02x" % c)
    return "'" + "".join(out) + "'"


def cks(data):
    a = np.frombuffer(data, np.uint8).astype(np.uint64)
    w = np.arange(1, a.size + 1, dtype=np.uint64)
    return "%016x" % int((a * w).sum(dtype=np.uint64)) if a.size else "%016x" % 0


def raw(b):
    return b.hex() if len(b) <= 64 else "cks=" + cks(b)


def view(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, enum.Enum):
        return "%s.%s%s" % (type(v).__module__, type(v).__qualname__, view((v.value,)))
    if isinstance(v, np.generic):
        return "np(%s %s)" % (v.dtype.str, g17(float(v)))
    if isinstance(v, np.ndarray):
        if v.dtype.byteorder not in "=|":  # the reader gives host byte order (numpy too, except for protocol 5)
            v = v.astype(v.dtype.newbyteorder("="))
        s = "ndarray(%s (%s) cks=%s" % (v.dtype.str, ",".join(str(d) for d in v.shape), cks(v.tobytes()))
        if v.size <= 16:
            s += "".join(" " + g17(float(x)) for x in v.ravel())
        return s + ")"
    if isinstance(v, np.dtype):
        return "dtype(%s)" % v.str
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "f" + g17(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, bytearray):
        return "ba[%d]:%s" % (len(v), raw(bytes(v)))
    if isinstance(v, bytes):
        return "b[%d]:%s" % (len(v), raw(v))
    if isinstance(v, list):
        return "[" + ", ".join(view(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(view(x) for x in v) + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(view(k) + ": " + view(x) for k, x in v.items()) + "}"
    if dataclasses.is_dataclass(v):
        return "%s.%s%s" % (type(v).__module__, type(v).__qualname__, view(vars(v)))
    return "global(%s.%s)" % (v.__module__, v.__qualname__)


# ---- numpy 2's module names, made by numpy 1 (numpy 2 writes numpy._core.* where numpy 1 writes numpy.core.*) ----
class Numpy2Names:
    def __enter__(self):
        import numpy.core.multiarray as ma
        import numpy.core.numeric as nm
        self.ma, self.nm = ma, nm
        core = types.ModuleType("numpy._core")
        core.multiarray, core.numeric = ma, nm
        self.saved = (ma._reconstruct.__module__, ma.scalar.__module__, nm._frombuffer.__module__)
        sys.modules.update({"numpy._core": core, "numpy._core.multiarray": ma, "numpy._core.numeric": nm})
        ma._reconstruct.__module__ = ma.scalar.__module__ = "numpy._core.multiarray"
        nm._frombuffer.__module__ = "numpy._core.numeric"
        return self

    def __exit__(self, *a):
        self.ma._reconstruct.__module__, self.ma.scalar.__module__, self.nm._frombuffer.__module__ = self.saved
        for k in ("numpy._core", "numpy._core.multiarray", "numpy._core.numeric"):
            sys.modules.pop(k, None)


JOINTS = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]


def so101_observation(rng, joint_type, cams=((480, 640),)):
    from lerobot.async_inference.helpers import TimedObservation
    vals = rng.uniform(-100, 100, len(JOINTS))
    obs = {k: joint_type(v) for k, v in zip(JOINTS, vals)}
    for name, (h, w) in zip(("front", "wrist"), cams):
        obs[name] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    obs["task"] = "Pick the red cube and place it in the bin"
    return TimedObservation(timestamp=1724400000.0 + rng.uniform(0, 1), timestep=int(rng.integers(0, 10**6)),
                            observation=obs, must_go=True)


def so101_config(policy_features=False):
    from lerobot.async_inference.helpers import RemotePolicyConfig
    from lerobot.configs.types import FeatureType, PolicyFeature
    if policy_features:
        feats = {"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                 "observation.images.front": PolicyFeature(FeatureType.VISUAL, (3, 480, 640))}
    else:  # hw_to_dataset_features(robot.observation_features, "observation", use_video=False)
        feats = {"observation.state": {"dtype": "float32", "shape": (6,), "names": list(JOINTS)}}
        for cam in ("front", "wrist"):
            feats["observation.images." + cam] = {"dtype": "image", "shape": (480, 640, 3),
                                                  "names": ["height", "width", "channels"],
                                                  "info": {"is_depth_map": False}}
    return RemotePolicyConfig("act", "user/so101_act", feats, 50, "cuda", {"observation.images.front": "top"})


def misc_observation(rng):
    """every numpy and Python form a robot's observation dict may hold"""
    from lerobot.async_inference.helpers import TimedObservation
    ro = np.frombuffer(bytes(range(24)), np.uint8).reshape(2, 4, 3)  # read-only: protocol 5 writes BINBYTES
    obs = {
        "f64": np.float64(-1.25), "f32": np.float32(0.1), "f16": np.float16(3.5), "i64": np.int64(-(2**40)),
        "u8": np.uint8(200), "b": np.bool_(True), "u64": np.uint64(2**63 + 5),
        "be": np.arange(6, dtype=">f4").reshape(2, 3), "bool_arr": np.array([True, False, True]),
        "half_arr": np.array([0.5, -2, 65504], np.float16), "i16": np.array([-3, 7], "<i2"),
        "zero_d": np.array(2.75), "empty": np.zeros((0, 3), np.float32), "readonly": ro,
        "slice": np.arange(40, dtype=np.int32).reshape(5, 8)[::2, 1::3], "depth": rng.integers(0, 4000, (4, 5, 1), dtype=np.uint16),
        "nested": {"list": [1, -2, 2**62, -(2**63), 1.5, None, True], "tuple": (("a", b"\x00\xff"), ()), "empty": {}},
        "bytes_big": bytes(range(256)) * 2, "task": "caf\u00e9 \u2615 \U0001F916 \x00end",
        1: "int key", 2.5: "float key",
    }
    return TimedObservation(timestamp=0.0, timestep=-7, observation=obs, must_go=False)


def save(dirp, name, data, expect_err=None):
    with open(os.path.join(dirp, name + ".pkl"), "wb") as f:
        f.write(data)
    if expect_err is not None:
        with open(os.path.join(dirp, name + ".err"), "w") as f:
            f.write(expect_err + "\n")
    else:
        import pickle
        with open(os.path.join(dirp, name + ".view"), "w") as f:
            f.write(view(pickle.loads(data)) + "\n")


# ---- LeRobot PR #3048's format, as its safe_serialization.py writes it (safetensors written here by hand:
# 8-byte little-endian header length, JSON header padded with spaces to 8 bytes, the tensors' bytes) ----
ST_DTYPES = {"uint8": "U8", "float32": "F32", "float64": "F64", "int64": "I64", "uint16": "U16", "bool": "BOOL"}
ST_BACK = {v: k for k, v in ST_DTYPES.items()}


def st_save(tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        b = a.tobytes()
        header[k] = {"dtype": ST_DTYPES[a.dtype.name], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def st_load(data):
    (hl,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hl])
    out = {}
    for k, e in header.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[k] = np.frombuffer(data[8 + hl + a:8 + hl + b], ST_BACK[e["dtype"]]).reshape(e["shape"])
    return out


def pr_pack(meta, tensors=None):
    j = json.dumps(meta).encode("utf-8")
    return struct.pack(">I", len(j)) + j + (st_save(tensors) if tensors else b"")


def pr_unpack(data):
    (jl,) = struct.unpack(">I", data[:4])
    return json.loads(data[4:4 + jl].decode("utf-8")), (st_load(data[4 + jl:]) if data[4 + jl:] else {})


def pr_serialize_observation(obs):
    tensors, scalars, numpy_keys = {}, {}, []
    for k, v in obs.observation.items():
        if isinstance(v, np.ndarray):
            tensors[k] = v
            numpy_keys.append(k)
        else:
            scalars[k] = v
    return pr_pack({"type": "TimedObservation", "timestamp": obs.timestamp, "timestep": obs.timestep,
                    "must_go": obs.must_go, "scalar_data": scalars, "numpy_keys": numpy_keys}, tensors or None)


def pr_deserialize(data):
    """the PR's deserialize_* functions (numpy arrays stand for its torch tensors)"""
    from lerobot.async_inference.helpers import RemotePolicyConfig, TimedAction, TimedObservation
    from lerobot.configs.types import FeatureType, PolicyFeature
    meta, tensors = pr_unpack(data)
    if meta["type"] == "TimedObservation":
        obs = dict(meta["scalar_data"])
        obs.update(tensors)
        return TimedObservation(timestamp=meta["timestamp"], timestep=meta["timestep"], observation=obs,
                                must_go=meta.get("must_go", False))
    if meta["type"] == "RemotePolicyConfig":
        feats = {k: (PolicyFeature(type=FeatureType(v["type"]), shape=tuple(v["shape"]))
                     if "type" in v and v["type"] in {e.value for e in FeatureType} else v)
                 for k, v in meta["lerobot_features"].items()}
        return RemotePolicyConfig(meta["policy_type"], meta["pretrained_name_or_path"], feats, meta["actions_per_chunk"],
                                  meta.get("device", "cpu"), meta.get("rename_map", {}))
    return [TimedAction(timestamp=a["timestamp"], timestep=a["timestep"], action=tensors["action_%d" % i])
            for i, a in enumerate(meta["actions"])]


def save_pr(dirp, name, data):
    with open(os.path.join(dirp, name + ".pkl"), "wb") as f:
        f.write(data)
    with open(os.path.join(dirp, name + ".view"), "w") as f:
        f.write(view(pr_deserialize(data)) + "\n")


def gen(root):
    import pickle
    write_pkg(os.path.join(root, "pkg"))
    cases, evil = os.path.join(root, "cases"), os.path.join(root, "evil")
    os.makedirs(cases, exist_ok=True)
    os.makedirs(evil, exist_ok=True)
    rng = np.random.default_rng(3048)
    two_cams = ((480, 640), (480, 640))
    for jt, jname in ((float, "float"), (np.float64, "np64"), (np.float32, "np32")):
        o = so101_observation(rng, jt, two_cams)
        for p in (2, 3, 4, 5):
            save(cases, "obs_%s_p%d" % (jname, p), pickle.dumps(o, protocol=p))
        with Numpy2Names():
            for p in (2, 4, 5):
                save(cases, "obs_%s_numpy2_p%d" % (jname, p), pickle.dumps(o, protocol=p))
    small = so101_observation(rng, np.float32, ((4, 5),))
    save(cases, "obs_small_p1", pickle.dumps(small, protocol=1))
    save(cases, "obs_small_default", pickle.dumps(small))  # pickle.DEFAULT_PROTOCOL, what LeRobot's client uses
    import copyreg
    import io
    from lerobot.configs.types import FeatureType
    for p in (2, 3, 4, 5):
        save(cases, "config_p%d" % p, pickle.dumps(so101_config(), protocol=p))
        # Python 3.11+ pickles an enum member as builtins.getattr(cls, name), which the reader refuses; 3.10 wrote
        # REDUCE(cls, (value,)), which it reads (made here with a dispatch table)
        save(cases, "config_pf_p%d" % p, pickle.dumps(so101_config(True), protocol=p),
             "__builtin__.getattr" if p < 3 else "builtins.getattr")
        f = io.BytesIO()
        pk = pickle.Pickler(f, protocol=p)
        pk.dispatch_table = copyreg.dispatch_table.copy()
        pk.dispatch_table[FeatureType] = lambda e: (FeatureType, (e.value,))
        pk.dump(so101_config(True))
        save(cases, "config_pf_py310_p%d" % p, f.getvalue())
        save(cases, "misc_p%d" % p, pickle.dumps(misc_observation(rng), protocol=p))
    with Numpy2Names():
        save(cases, "misc_numpy2_p5", pickle.dumps(misc_observation(rng), protocol=5))
    # refused, with a named error: a Fortran-order frame, out-of-band buffers, a set, an object array
    fort = so101_observation(rng, float, ((6, 8),))
    fort.observation["front"] = np.asfortranarray(fort.observation["front"])
    save(cases, "fortran_p4", pickle.dumps(fort, protocol=4), "Fortran-order ndarray is not supported")
    save(cases, "fortran_p5", pickle.dumps(fort, protocol=5), "Fortran-order ndarray is not supported")
    bufs = []
    save(cases, "out_of_band_p5", pickle.dumps(small, protocol=5, buffer_callback=bufs.append), "out-of-band")
    save(cases, "set_p4", pickle.dumps({"a": {1, 2}}, protocol=4), "EMPTY_SET")
    save(cases, "object_array_p4", pickle.dumps(np.array([1, "a"], dtype=object), protocol=4), "'O8' is not supported")
    # deep nesting as a hostile client would write it (Python's own pickler would hit its recursion limit)
    save(cases, "nested_lists_1e5", b"\x80\x04" + b"]" * 100000 + b"a" * 99999 + b".", "max_depth (32)")
    save(cases, "nested_tuples_1e5", b"\x80\x04" + b"(" * 100000 + b"t" * 100000 + b".", "max_depth (32)")
    laughs = b"\x80\x04]q\x00" + b"".join(b"](h%sh%seq%s" % (bytes([k]), bytes([k]), bytes([k + 1])) for k in range(60)) + b"."
    save(cases, "memo_laughs", laughs, "value tree larger than max_items")
    # LeRobot PR #3048's format
    o = so101_observation(rng, float, two_cams)
    save_pr(cases, "pr3048_obs", pr_serialize_observation(o))
    save_pr(cases, "pr3048_obs_small", pr_serialize_observation(so101_observation(rng, float, ((3, 4),))))
    for pf in (False, True):
        c = so101_config(pf)
        meta = {"type": "RemotePolicyConfig", "policy_type": c.policy_type,
                "pretrained_name_or_path": c.pretrained_name_or_path,
                "lerobot_features": {k: ({"type": v.type.value, "shape": list(v.shape)} if hasattr(v, "type") else v)
                                     for k, v in c.lerobot_features.items()},
                "actions_per_chunk": c.actions_per_chunk, "device": c.device, "rename_map": c.rename_map}
        save_pr(cases, "pr3048_config%s" % ("_pf" if pf else ""), pr_pack(meta))
    acts = rng.standard_normal((3, 6)).astype(np.float32)
    save_pr(cases, "pr3048_actions", pr_pack({"type": "TimedActions", "actions": [
        {"timestamp": 10.5 + i / 30, "timestep": 100 + i} for i in range(3)]}, {"action_%d" % i: acts[i] for i in range(3)}))

    # payloads that run a command in Python's pickle.loads; the marker file they create proves it
    marker = os.path.join(root, "PWNED")

    class System:
        def __reduce__(self):
            return (os.system, ("touch " + marker,))

    class Eval:
        def __reduce__(self):
            return (eval, ("open(%r, 'w').close()" % marker,))

    class Popen:
        def __reduce__(self):
            return (subprocess.Popen, (["touch", marker],))

    from lerobot.async_inference.helpers import TimedObservation
    for p in (2, 4, 5):
        save(evil, "os_system_p%d" % p, pickle.dumps(System(), protocol=p), "posix.system")
        # protocols 0-2 write Python 2 module names (fix_imports)
        save(evil, "eval_p%d" % p, pickle.dumps(Eval(), protocol=p), "__builtin__.eval" if p < 3 else "builtins.eval")
        save(evil, "popen_p%d" % p, pickle.dumps(Popen(), protocol=p), "commands.Popen" if p < 3 else "subprocess.Popen")
        # inside a genuine observation, after the numpy arrays
        o = so101_observation(rng, float, ((4, 4),))
        o.observation["zz_evil"] = System()
        save(evil, "obs_with_os_system_p%d" % p, pickle.dumps(o, protocol=p), "posix.system")
    cmd = ("touch " + marker).encode()
    getattr_chain = (b"\x80\x02cbuiltins\ngetattr\ncbuiltins\n__import__\nX\x02\x00\x00\x00os\x85RX\x06\x00\x00\x00system"
                     b"\x86RX" + struct.pack("<I", len(cmd)) + cmd + b"\x85R.")
    save(evil, "getattr_import_p2", getattr_chain, "builtins.getattr")
    print("marker", marker)


def corpus(out):
    """fuzz/corpus/pickle: real pickles of every form above, kept small (tiny frames)"""
    import pickle
    import tempfile
    write_pkg(tempfile.mkdtemp())
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(29)
    seeds = {}
    for jt, jn in ((float, "float"), (np.float32, "np32")):
        o = so101_observation(rng, jt, ((2, 3), (1, 2)))
        for p in (1, 2, 4, 5):
            seeds["obs_%s_p%d" % (jn, p)] = b"\x01" + pickle.dumps(o, protocol=p)
        with Numpy2Names():
            seeds["obs_%s_numpy2_p5" % jn] = b"\x00" + pickle.dumps(o, protocol=5)
    seeds["config_p4"] = b"\x00" + pickle.dumps(so101_config(), protocol=4)
    seeds["misc_p2"] = b"\x01" + pickle.dumps(misc_observation(rng), protocol=2)
    seeds["misc_p5"] = b"\x00" + pickle.dumps(misc_observation(rng), protocol=5)
    o = so101_observation(rng, float, ((2, 2),))
    seeds["pr3048_obs"] = b"\x02" + pr_serialize_observation(o)
    seeds["pr3048_actions"] = b"\x00" + pr_pack({"type": "TimedActions", "actions": [
        {"timestamp": 1.5 + i, "timestep": i} for i in range(2)]}, {"action_%d" % i: np.ones(3, np.float32) * i for i in range(2)})
    seeds["pr3048_config"] = b"\x02" + pr_pack({"type": "RemotePolicyConfig", "policy_type": "act", "pretrained_name_or_path": "m",
        "lerobot_features": {"observation.images.front": {"type": "VISUAL", "shape": [3, 4, 4]}, "observation.state":
        {"dtype": "float32", "shape": [6], "names": JOINTS}}, "actions_per_chunk": 5, "device": "cpu", "rename_map": {}})
    seeds["writer"] = b"\x03" + bytes([3, 5]) + struct.pack("<dd", 1724400000.5, 1 / 30) + np.arange(15, dtype=np.float32).tobytes()
    for k, v in seeds.items():
        assert len(v) <= 8192, (k, len(v))
        with open(os.path.join(out, k), "wb") as f:
            f.write(v)


def run_evil(path):
    import pickle
    with open(path, "rb") as f:
        r = pickle.loads(f.read())  # nosec: the control, on purpose
    if isinstance(r, subprocess.Popen):
        r.wait()
    for v in getattr(r, "observation", {}).values():
        if isinstance(v, subprocess.Popen):
            v.wait()


def check_actions(path, f32, rows, dim, t0, dt, i0, fmt, default64):
    with open(f32, "rb") as f:
        want = np.frombuffer(f.read(), np.float32).reshape(rows, dim)
    with open(path, "rb") as f:
        data = f.read()
    fails = []
    if fmt == "pickle":
        import pickle
        import torch
        if default64:
            torch.set_default_dtype(torch.float64)
        from lerobot.async_inference.helpers import TimedAction
        got = pickle.loads(data)  # nosec: mact's own reply, as LeRobot's robot client reads it
        acts = []
        for a in got:
            if not isinstance(a.action, torch.Tensor):
                fails.append("action is %s, not a torch.Tensor" % type(a.action))
                break
            if a.action.device.type != "cpu" or a.action.to("cpu").dtype != torch.float32:
                fails.append("action on %s as %s" % (a.action.device.type, a.action.dtype))
            acts.append(a.action.numpy())
    else:
        from lerobot.async_inference.helpers import TimedAction
        got = pr_deserialize(data)
        acts = [a.action for a in got]
    if not isinstance(got, list) or len(got) != rows:
        fails.append("got %s of %s, expected a list of %d" % (type(got), len(got) if hasattr(got, "__len__") else "?", rows))
    else:
        for i, a in enumerate(got):
            if type(a) is not TimedAction:
                fails.append("item %d is %s" % (i, type(a)))
                break
            if a.timestamp != t0 + i * dt or type(a.timestamp) is not float:
                fails.append("row %d timestamp %r != %r" % (i, a.timestamp, t0 + i * dt))
            if a.timestep != i0 + i or type(a.timestep) is not int:
                fails.append("row %d timestep %r" % (i, a.timestep))
            if i < len(acts) and (acts[i].shape != (dim,) or acts[i].tobytes() != want[i].tobytes()):
                fails.append("row %d action not bit-exact: %r vs %r" % (i, acts[i][:4], want[i][:4]))
    print("\n".join(fails[:5]) if fails else "OK")
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif sys.argv[1] == "corpus":
        corpus(sys.argv[2])
    elif sys.argv[1] == "run-evil":
        run_evil(sys.argv[2])
    elif sys.argv[1] == "actions":
        a = sys.argv
        sys.exit(check_actions(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), float(a[7]), int(a[8]), a[9],
                               len(a) > 10 and a[10] == "float64"))
