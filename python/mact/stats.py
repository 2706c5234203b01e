"""Norm statistics from Python (`mact stats`): MolmoAct2's molmoact2_norm_stats.v1 statistics of a LeRobot
dataset's action and state, by the data toolkit (mact_stats_compute in include/mact_data.h).

    from mact import stats
    r = stats.compute(["/data/so101_pick"], tag="so101", out="/models/so101/norm_stats.json")
    r["frames"], r["norm_stats"]["metadata_by_tag"]["so101"]["action_stats"]["q01"]
"""
import ctypes
import json
import os
import tempfile

from . import _toolkits as _t
from .datasets import load_library
from .errors import input_error

METHODS = ("lerobot", "lerobot-f64", "exact")


def compute(datasets, tag, out=None, *, action_key=None, state_key=None, method="lerobot", horizon=None,
            control_mode=None, setup_type=None, normalize_gripper=None, lerobot_stats=None, library=None):
    """The statistics of the datasets pooled (a path or a list), under ``tag``, written to ``out`` (created, or
    its tag replaced in place, atomically; None: a temporary file, removed). method: "lerobot" (LeRobot's
    per-episode histograms), "lerobot-f64" or "exact". horizon, control_mode, setup_type, normalize_gripper
    (True / False): None keeps the tag's in out, else the defaults (30, "absolute joint pose", "", True).
    lerobot_stats: also LeRobot's meta/stats.json layout at this path. Returns {"out", "tag", "method",
    "frames", "norm_stats"} (norm_stats: the file written, parsed)."""
    lib, err = load_library(library), _t.errbuf()
    if not isinstance(method, str) or method not in METHODS:
        raise input_error(f"method {method!r}: expected one of {', '.join(METHODS)}")
    m = ctypes.c_int()
    _t.check(lib.mact_stats_method_parse(method.encode(), ctypes.byref(m)), ctypes.create_string_buffer(b"method"))
    ds, n, keep = _t.strs(datasets)
    if not n:
        raise input_error("datasets: at least one dataset dir")
    if tag is None:
        raise input_error("tag: required")
    if horizon is not None and int(horizon) <= 0:
        raise input_error(f"horizon {horizon}: must be positive")
    tmp = tempfile.TemporaryDirectory() if out is None else None
    path = os.path.join(tmp.name, "norm_stats.json") if tmp else os.fspath(out)
    try:
        o = _t.StatsOptions(datasets=ds, n_datasets=n, tag=_t.enc(tag), out=_t.enc(path), action_key=_t.enc(action_key),
                            state_key=_t.enc(state_key), method=m.value, horizon=int(horizon or 0),
                            control_mode=_t.enc(control_mode), setup_type=_t.enc(setup_type),
                            normalize_gripper=0 if normalize_gripper is None else 1 if normalize_gripper else 2,
                            lerobot_stats=_t.enc(lerobot_stats))
        frames = ctypes.c_double()
        _t.check(lib.mact_stats_compute(ctypes.byref(o), ctypes.byref(frames), err, _t.ERRLEN), err)
        del keep
        with open(path) as f:
            doc = json.load(f)
    finally:
        if tmp:
            tmp.cleanup()
    return {"out": None if tmp else path, "tag": tag, "method": method, "frames": frames.value, "norm_stats": doc}


__all__ = ["compute", "METHODS"]
