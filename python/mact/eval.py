"""Open-loop evaluation from Python (`mact eval`, `mact eval merge`; docs/datasets.md): a policy's action chunks
against a LeRobot dataset's recorded ones, by the data toolkit (mact_eval_run / mact_eval_merge in
include/mact_data.h). The result directory is the CLI's (episodes/, episodes.jsonl, result.json).

    from mact import eval as mact_eval
    r = mact_eval.run("/data/so101_pick", "/tmp/ev", model="/models/so101", episodes="0:4", seed=1)
    with mact.Policy.from_pretrained("/models/so101", precision="int8") as p:   # the policy as deployed
        r = mact_eval.run("/data/so101_pick", "/tmp/ev_int8", policy=p)
    r.result["mae"], r.per_step_mae, r.hold_per_step_mae
    parts = [mact_eval.run(ds, f"/tmp/s{i}", model=m, policy="hold", shard=(i, 3)) for i in range(3)]
    merged = mact_eval.merge("/tmp/merged", [f"/tmp/s{i}" for i in range(3)])
"""
import ctypes
import json
import os

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


def _fnv1a(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _config_id(model_dir):
    """the checkpoint's config.json hash, as `mact eval` writes it into the episode files' fingerprint"""
    try:
        with open(os.path.join(os.fspath(model_dir), "config.json"), "rb") as f:
            return f"{_fnv1a(f.read()):016x}"
    except OSError:
        return f"{0:016x}"


def _callable_predict(fn, keep):
    """A Python callable as a mact_eval_predict_fn: fn(images=[HxWx3 uint8, ...], task=str, state=float32 [d],
    seed=int, n_action_steps=H, num_steps=N|None, norm_tag=str, prev_actions=float32 [n, d]|None,
    inference_delay=int, execution_horizon=int|None) -> actions [H, action_dim] (or an object with .actions);
    an exception becomes the evaluation's error."""
    def predict(user, inp, outp, err, errlen):
        try:
            i, o = inp.contents, outp.contents
            imgs = [np.ctypeslib.as_array(ctypes.cast(i.frames[k].rgb, ctypes.POINTER(ctypes.c_uint8)),
                                          shape=(i.frames[k].height, i.frames[k].width, 3)).copy()
                    for k in range(i.n_frames)]
            state = np.ctypeslib.as_array(ctypes.cast(i.state, ctypes.POINTER(ctypes.c_float)), shape=(i.state_dim,)).copy()
            r, prev = i.rtc, None
            if r.n_prev:
                prev = np.ctypeslib.as_array(ctypes.cast(r.prev_actions, ctypes.POINTER(ctypes.c_float)),
                                             shape=(r.n_prev, r.prev_dim)).copy()
            a = fn(images=imgs, task=i.task.decode("utf-8", "replace"), state=state, seed=int(i.options.seed),
                   n_action_steps=int(i.options.n_action_steps), num_steps=int(i.options.num_steps) or None,
                   norm_tag=i.options.norm_tag.decode() if i.options.norm_tag else None, prev_actions=prev,
                   inference_delay=int(r.inference_delay), execution_horizon=int(r.execution_horizon) or None)
            a = np.asarray(getattr(a, "actions", a), np.float32)
            a = a.reshape(a.shape[-2], a.shape[-1]) if a.ndim >= 2 else a.reshape(1, -1)
            if a.size > o.actions_cap:
                raise ValueError(f"the policy returned {a.shape[0]}x{a.shape[1]} actions; at most {o.actions_cap} values fit")
            ctypes.memmove(o.actions, np.ascontiguousarray(a).ctypes.data, a.nbytes)
            o.n_steps, o.action_dim = a.shape
            return 0
        except Exception as e:  # noqa: BLE001 (any failure of the caller's policy is the evaluation's error)
            msg = f"the policy raised {type(e).__name__}: {e}".encode("utf-8", "replace")[: max(0, errlen - 1)]
            ctypes.memmove(err, msg + b"\0", len(msg) + 1)
            return _lib.ERR_MODEL
    f = _t.EVAL_PREDICT_FN(predict)
    keep.append(f)
    return ctypes.cast(f, ctypes.c_void_p).value


class _PolicySide:
    """What one run evaluates: the predict function, its user pointer, the tag and the policy's id; closes what it
    opened."""

    def __init__(self):
        self.keep, self.closers = [], []
        self.predict = self.user = self.tag = None
        self.policy_id = ""

    def close(self):
        for c in reversed(self.closers):
            c()


def _policy_side(kind, pol, model, norm_stats, norm_tag, precision, int8_parts, threads, policy_id, data_lib):
    from .policy import Policy
    from .realtime import RealTimeRunner
    rt, side = _lib.load_library(), _PolicySide()
    err = ctypes.create_string_buffer(_t.ERRLEN)
    if isinstance(pol, RealTimeRunner):
        pol = pol.policy
    if kind == "model" and pol is None:
        if model is None:
            raise input_error("the model policy needs model=PATH (or a mact.Policy, a RealTimeRunner or a callable as policy)")
        if isinstance(model, Policy):
            pol = model
        else:
            pol = Policy.from_pretrained(model, precision=precision, threads=threads, int8_parts=int8_parts,
                                         max_images=_t.EVAL_MAX_CAMERAS)
            side.closers.append(pol.close)
    tag_owner = pol if isinstance(pol, Policy) else model if isinstance(model, Policy) else None
    if tag_owner is not None:
        side.tag = rt.mact_model_tag(tag_owner._state.ptr, _t.enc(norm_tag), err, _t.ERRLEN)
        side.policy_id = _config_id(tag_owner.model_dir)
    elif model is not None:  # a path, for its tags only: loaded without packing the weights
        opts, h = _lib.LoadOptions(no_pack=1), ctypes.c_void_p()
        _t.check(rt.mact_model_load(_t.enc(model), ctypes.byref(opts), ctypes.byref(h), err, _t.ERRLEN), err)
        side.closers.append(lambda h=h: rt.mact_model_free(h))
        side.tag = rt.mact_model_tag(h, _t.enc(norm_tag), err, _t.ERRLEN)
        side.policy_id = _config_id(model)
    elif norm_stats is not None:
        h = ctypes.c_void_p()
        _t.check(rt.mact_norm_stats_open(_t.enc(norm_stats), ctypes.byref(h), err, _t.ERRLEN), err)
        side.closers.append(lambda h=h: rt.mact_norm_stats_close(h))
        side.tag = rt.mact_norm_stats_tag(h, _t.enc(norm_tag), err, _t.ERRLEN)
    else:
        raise input_error("norm stats needed: model= (a checkpoint or a mact.Policy) or norm_stats=FILE")
    if not side.tag:
        raise input_error(err.value.decode("utf-8", "replace"))
    if kind == "model":
        if isinstance(pol, Policy):
            s = pol.session(max_images=_t.EVAL_MAX_CAMERAS, threads=threads)
            side.closers.append(s.close)
            side.user = s._holder[0]
            side.predict = ctypes.cast(data_lib._dll.mact_eval_session_predict, ctypes.c_void_p).value
        elif callable(pol):
            side.predict = _callable_predict(pol, side.keep)
            side.policy_id = policy_id or f"{getattr(pol, '__module__', '')}.{getattr(pol, '__qualname__', type(pol).__name__)}"
        else:
            raise input_error(f"policy {pol!r}: \"model\", \"hold\", \"replay\", a mact.Policy, a RealTimeRunner or a callable")
    if policy_id is not None:
        side.policy_id = policy_id
    return side


def run(dataset, out, model=None, *, policy="model", norm_stats=None, norm_tag=None, precision=None, int8_parts=None,
        threads=None, policy_id=None, episodes=None, horizon=0, first_k=None, static_threshold=0.0, seed=0, steps=0,
        cameras=None, action_key=None, state_key=None, tolerance_s=1e-4, joint_signs=None, joint_offsets=None,
        replan=0, delay=None, rtc_compare=True, rtc_schedule=None, execution_horizon=None, max_guidance_weight=None,
        rtc_guidance=None, shard=None, progress=False, library=None):
    """Evaluates ``policy`` on the episodes of ``dataset`` into ``out`` (its episodes/ files, episodes.jsonl,
    result.json; a rerun skips episodes already there with the same settings), as `mact eval` with the same flags does.

    policy: "model" (the checkpoint ``model``, a path or a mact.Policy, loaded at ``precision`` / ``int8_parts`` /
    ``threads``), a mact.Policy or a mact.RealTimeRunner (its policy: the one deployed, at its precision), any callable
    with predict_action's keywords (images, task, state, seed, n_action_steps, num_steps, norm_tag, prev_actions,
    inference_delay, execution_horizon) returning actions [H, action_dim], or the baselines "hold" and "replay". The
    norm tag (``norm_tag``; None: the default) comes from the policy's model, else ``model``, else ``norm_stats`` (a
    norm_stats.json). policy_id: what names the policy in the episode files' fingerprint (a checkpoint: its config's
    hash, as the CLI's). episodes: "A:B", "I,J,...", a range or a list of episode_index values (None: all). horizon,
    steps: 0 for the tag's / model's. joint_signs / joint_offsets: a joint frame between the dataset and a checkpoint
    trained in another calibration (refused when the checkpoint's own processors carry one). replan K: execute K rows
    of each chunk, with delay, the RTC options (rtc_schedule "linear" | "zeros" | "ones" | "exp", rtc_guidance
    "identity" | "vjp", execution_horizon, max_guidance_weight) and rtc_compare (also the chain without RTC). shard:
    (i, n) for this task's share (shard_from_env() reads a scheduler's). progress: the progress lines to stderr.
    Returns an EvalResult."""
    lib, err = load_library(library), _t.errbuf()
    kind, pol = (policy, None) if isinstance(policy, str) else ("model", policy)
    if kind not in _t.EVAL_POLICIES:
        raise input_error(f"policy {policy!r}: expected one of {', '.join(POLICIES)}, a mact.Policy, a RealTimeRunner or a "
                          "callable")
    rtc_given = [n for n, v in (("delay", delay), ("rtc_schedule", rtc_schedule), ("rtc_guidance", rtc_guidance),
                                ("execution_horizon", execution_horizon), ("max_guidance_weight", max_guidance_weight))
                 if v is not None] + ([] if rtc_compare else ["rtc_compare"])
    if rtc_given and not replan:
        raise input_error(f"{rtc_given[0]} needs replan=K")
    if model is not None and norm_stats is not None:
        raise input_error("norm_stats is for the baselines without a model: with model= the model's norm tags are used")
    js = np.ascontiguousarray(joint_signs if joint_signs is not None else [], np.float32).ravel()
    jo = np.ascontiguousarray(joint_offsets if joint_offsets is not None else [], np.float32).ravel()
    if js.size != jo.size:
        raise input_error(f"joint_signs has {js.size} values but joint_offsets {jo.size}")
    o = _t.EvalOptions(dataset=_t.enc(dataset), out=_t.enc(out), policy=_t.EVAL_POLICIES[kind],
                       episodes=_t.enc(_episodes(episodes)), horizon=int(horizon),
                       static_threshold=float(static_threshold), seed=int(seed), steps=int(steps),
                       action_key=_t.enc(action_key), state_key=_t.enc(state_key), tolerance_s=float(tolerance_s),
                       n_joints=js.size, replan=int(replan), delay=int(delay or 0), no_rtc_compare=not rtc_compare)
    o.joint_signs = js.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    o.joint_offsets = jo.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
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
    side = _policy_side(kind, pol, model, norm_stats, norm_tag, precision, int8_parts, threads, policy_id, lib)
    try:
        o.predict, o.predict_user, o.tag = side.predict, side.user, side.tag
        o.policy_id = _t.enc(side.policy_id)
        progress_fp = _t.c_stderr() if progress else None
        return _result(lib, lambda report, r: lib.mact_eval_run(ctypes.byref(o), report, progress_fp, r, err, _t.ERRLEN),
                       err, (keep_fk, keep_cams, js, jo, side.keep))
    finally:
        side.close()


def merge(out, dirs, *, first_k=None, allow_partial=False, library=None):
    """Merges the shards' result dirs into ``out`` (`mact eval merge`), equal to the unsharded run. allow_partial:
    merge even when episodes of the selection are missing. Returns an EvalResult."""
    lib, err = load_library(library), _t.errbuf()
    o = _t.EvalMergeOptions(out=_t.enc(out), allow_partial=bool(allow_partial))
    o.dirs, o.n_dirs, keep_dirs = _t.strs(dirs)
    o.first_k, o.n_first_k, keep_fk = _t.ints(first_k, "first_k", _t.EVAL_MAX_FIRST_K)
    return _result(lib, lambda report, r: lib.mact_eval_merge(ctypes.byref(o), report, r, err, _t.ERRLEN), err,
                   (keep_dirs, keep_fk))


def shard_from_env():
    """(i, n) from a scheduler's environment (Kubernetes Indexed Jobs: JOB_COMPLETION_INDEX / _COUNT; Slurm arrays:
    SLURM_ARRAY_TASK_ID / _COUNT / _MIN / _STEP; docs/cluster.md), or None when none is set; as `mact eval` reads it.
    InputError when the variables do not name a shard."""
    env = os.environ

    def num(name, lo):
        v = env.get(name)
        if v is None or not v.isdigit() or int(v) < lo or int(v) > 2**31 - 1:
            raise input_error(f"{name}={v} is not an integer >= {lo}")
        return int(v)
    if "JOB_COMPLETION_INDEX" in env:
        if "JOB_COMPLETION_COUNT" not in env:
            raise input_error("JOB_COMPLETION_INDEX is set but not JOB_COMPLETION_COUNT (Kubernetes sets the index only): "
                              "set it to the Job's completions, or pass shard=(i, n)")
        i, n = num("JOB_COMPLETION_INDEX", 0), num("JOB_COMPLETION_COUNT", 1)
        if i >= n:
            raise input_error(f"JOB_COMPLETION_INDEX={i} / JOB_COMPLETION_COUNT={n} is not an index below a count")
        return i, n
    if "SLURM_ARRAY_TASK_ID" not in env:
        return None
    if "SLURM_ARRAY_TASK_COUNT" not in env:
        raise input_error("SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT: pass shard=(i, n)")
    i, n = num("SLURM_ARRAY_TASK_ID", 0), num("SLURM_ARRAY_TASK_COUNT", 1)
    mn = num("SLURM_ARRAY_TASK_MIN", 0) if "SLURM_ARRAY_TASK_MIN" in env else 0
    st = num("SLURM_ARRAY_TASK_STEP", 1) if "SLURM_ARRAY_TASK_STEP" in env else 1
    if i < mn or (i - mn) % st or (i - mn) // st >= n:
        raise input_error(f"SLURM_ARRAY_TASK_ID={i} (COUNT={n} MIN={mn} STEP={st}) does not name one of COUNT evenly spaced "
                          "tasks: pass shard=(i, n)")
    return (i - mn) // st, n


__all__ = ["run", "merge", "shard_from_env", "EvalResult", "POLICIES"]
