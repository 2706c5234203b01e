"""Open-loop evaluation from Python (`mact eval`, `mact eval merge`; docs/datasets.md): a policy's action chunks
against a LeRobot dataset's recorded ones, by the data toolkit (mact_eval_run / mact_eval_merge in
include/mact_data.h). The result directory is the CLI's (episodes/, episodes.jsonl, result.json).

    from mact import eval as mact_eval
    r = mact_eval.run("/data/so101_pick", "/tmp/ev", model="/models/so101", episodes="0:4", seed=1)
    r.result["mae"], r.per_step_mae, r.hold_per_step_mae
    parts = [mact_eval.run(ds, f"/tmp/s{i}", model=m, policy="hold", shard=(i, 3)) for i in range(3)]
    merged = mact_eval.merge("/tmp/merged", [f"/tmp/s{i}" for i in range(3)])
"""
import ctypes
import json

import numpy as np

from . import _lib
from . import _toolkits as _t
from .datasets import load_library
from .errors import input_error

POLICIES = tuple(_t.EVAL_POLICIES)
_CHAINS = {0: "without_rtc", 1: "with_rtc"}


class EvalResult:
    """What an evaluation wrote: ``result`` (result.json as a dict), ``json`` (its text), ``horizon``,
    ``per_step_mae`` / ``hold_per_step_mae`` (float64 [horizon], raw units: the policy's and the hold-still
    baseline's), ``frames`` (frames evaluated), ``policy`` (its name as result.json states it), ``report`` (the
    result table the CLI prints), ``trajectories`` (with replan: {"without_rtc" / "with_rtc": {"actions" float32
    [frames, dim], "episode_index", "replan", "delay"}}, the executed rows of the first evaluated episode)."""

    def __init__(self, lib, r, report):
        self.json = lib.mact_eval_result_json(r).decode()
        self.result = json.loads(self.json)
        self.horizon = lib.mact_eval_result_horizon(r)
        self.per_step_mae = np.zeros(self.horizon, np.float64)
        self.hold_per_step_mae = np.zeros(self.horizon, np.float64)
        lib.mact_eval_result_per_step(r, self.per_step_mae.ctypes.data, self.hold_per_step_mae.ctypes.data)
        self.frames = lib.mact_eval_result_frames(r)
        self.policy = lib.mact_eval_result_policy(r).decode()
        self.report = report
        self.trajectories = {}
        for chain, name in _CHAINS.items():
            F, D, K, delay, ep = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()
            refs = [ctypes.byref(x) for x in (F, D, ep, K, delay)]
            if lib.mact_eval_result_trajectory(r, chain, None, 0, *refs):
                continue
            rows = np.zeros((F.value, D.value), np.float32)
            lib.mact_eval_result_trajectory(r, chain, rows.ctypes.data, rows.size, *refs)
            self.trajectories[name] = {"actions": rows, "episode_index": ep.value, "replan": K.value,
                                       "delay": delay.value}

    def __repr__(self):
        return f"<mact.eval.EvalResult {self.policy}, horizon {self.horizon}, {self.frames:.0f} frames>"


def _episodes(episodes):
    if episodes is None or isinstance(episodes, str):
        return episodes
    if isinstance(episodes, range) and episodes.step == 1:
        return f"{episodes.start}:{episodes.stop}"
    return ",".join(str(int(e)) for e in episodes)


def _result(lib, call, err, keep):
    """call(report FILE *, mact_eval_result **) -> status; the EvalResult, the C result freed. keep: the arrays the
    options point into, alive until the call returns."""
    r = ctypes.c_void_p()
    with _t.Capture() as report:
        st = call(report.fp, ctypes.byref(r))
    del keep
    _t.check(st, err)
    try:
        return EvalResult(lib, r, report.text)
    finally:
        lib.mact_eval_result_free(r)


def run(dataset, out, model=None, *, norm_stats=None, norm_tag=None, policy="model", episodes=None, horizon=0,
        first_k=None, static_threshold=0.0, seed=0, steps=0, cameras=None, action_key=None, state_key=None,
        tolerance_s=1e-4, so101_transform=False, replan=0, delay=None, rtc_compare=True, rtc_schedule=None,
        execution_horizon=None, max_guidance_weight=None, rtc_guidance=None, shard=None, progress=False,
        library=None):
    """Evaluates ``policy`` ("model", "hold" or "replay") on the episodes of ``dataset`` into ``out`` (its
    episodes/ files, episodes.jsonl, result.json; a rerun skips episodes already there with the same settings), as
    `mact eval` with the same flags does. model: the checkpoint (without it, norm_stats: a norm_stats.json, for
    hold and replay). episodes: "A:B", "I,J,...", a range or a list of episode_index values (None: all).
    horizon, steps: 0 for the tag's / model's. replan K: execute K rows of each chunk, with delay, the RTC options
    (rtc_schedule "linear" | "zeros" | "ones" | "exp", rtc_guidance "identity" | "vjp", execution_horizon,
    max_guidance_weight) and rtc_compare (also the chain without RTC). shard: (i, n) for this task's share
    (shard_from_env() reads a scheduler's). progress: the progress lines to stderr. Returns an EvalResult."""
    lib, err = load_library(library), _t.errbuf()
    if policy not in _t.EVAL_POLICIES:
        raise input_error(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    rtc_given = [n for n, v in (("delay", delay), ("rtc_schedule", rtc_schedule), ("rtc_guidance", rtc_guidance),
                                ("execution_horizon", execution_horizon), ("max_guidance_weight", max_guidance_weight))
                 if v is not None] + ([] if rtc_compare else ["rtc_compare"])
    if rtc_given and not replan:
        raise input_error(f"{rtc_given[0]} needs replan=K")
    o = _t.EvalOptions(dataset=_t.enc(dataset), out=_t.enc(out), model=_t.enc(model), norm_stats=_t.enc(norm_stats),
                       norm_tag=_t.enc(norm_tag), policy=_t.EVAL_POLICIES[policy], episodes=_t.enc(_episodes(episodes)),
                       horizon=int(horizon), static_threshold=float(static_threshold), seed=int(seed),
                       steps=int(steps), action_key=_t.enc(action_key), state_key=_t.enc(state_key),
                       tolerance_s=float(tolerance_s), so101_transform=bool(so101_transform), replan=int(replan),
                       delay=int(delay or 0), no_rtc_compare=not rtc_compare)
    o.first_k, o.n_first_k, keep_fk = _t.ints(first_k, "first_k", _t.EVAL_MAX_FIRST_K)
    o.cameras, o.n_cameras, keep_cams = _t.strs(cameras)
    if o.n_cameras > _t.EVAL_MAX_CAMERAS:
        raise input_error(f"cameras: at most {_t.EVAL_MAX_CAMERAS}")
    rt = _lib.load_library()
    if rtc_schedule is not None:
        v = ctypes.c_int()
        if rt.mact_rtc_schedule_parse(_t.enc(rtc_schedule), ctypes.byref(v)):
            raise input_error(f"rtc_schedule {rtc_schedule!r}: linear, zeros, ones or exp")
        o.rtc.schedule = v.value
    if rtc_guidance is not None:
        v = ctypes.c_int()
        if rt.mact_rtc_guidance_parse(_t.enc(rtc_guidance), ctypes.byref(v)):
            raise input_error(f"rtc_guidance {rtc_guidance!r}: identity or vjp")
        o.rtc.guidance = v.value
    o.rtc.execution_horizon = int(execution_horizon or 0)
    o.rtc.max_guidance_weight = float(max_guidance_weight or 0)
    if shard is not None:
        i, n = (int(x) for x in shard)
        if not 0 <= i < n:
            raise input_error(f"shard {shard!r}: (i, n) with 0 <= i < n")
        o.shard, o.n_shards = i, n
    progress_fp = _t.c_stderr() if progress else None
    return _result(lib, lambda report, r: lib.mact_eval_run(ctypes.byref(o), report, progress_fp, r, err, _t.ERRLEN),
                   err, (keep_fk, keep_cams))


def merge(out, dirs, *, first_k=None, allow_partial=False, library=None):
    """Merges the shards' result dirs into ``out`` (`mact eval merge`), equal to the unsharded run. allow_partial:
    merge even when episodes of the selection are missing. Returns an EvalResult."""
    lib, err = load_library(library), _t.errbuf()
    o = _t.EvalMergeOptions(out=_t.enc(out), allow_partial=bool(allow_partial))
    o.dirs, o.n_dirs, keep_dirs = _t.strs(dirs)
    o.first_k, o.n_first_k, keep_fk = _t.ints(first_k, "first_k", _t.EVAL_MAX_FIRST_K)
    return _result(lib, lambda report, r: lib.mact_eval_merge(ctypes.byref(o), report, r, err, _t.ERRLEN), err,
                   (keep_dirs, keep_fk))


def shard_from_env(library=None):
    """(i, n) from a scheduler's environment (Kubernetes Indexed Jobs, Slurm arrays; docs/cluster.md), or None
    when none is set. InputError when the variables do not name a shard."""
    lib, err = load_library(library), _t.errbuf()
    i, n = ctypes.c_int(-1), ctypes.c_int(-1)
    _t.check(lib.mact_eval_shard_from_env(ctypes.byref(i), ctypes.byref(n), None, err, _t.ERRLEN), err)
    return None if n.value < 0 else (i.value, n.value)


__all__ = ["run", "merge", "shard_from_env", "EvalResult", "POLICIES"]
