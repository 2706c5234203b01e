"""mact.Policy and mact.Session: a MolmoAct2 checkpoint loaded by libmact, and the sessions that run it.

A Policy is the read-only model (mact_model); a Session holds every mutable buffer of an inference
(mact_session) and is used by one thread at a time. ``policy.predict_action(...)`` runs on a session of the
calling thread's own (made on its first call), so one Policy may be shared by any number of threads;
``policy.session()`` makes an explicit one (a context manager). The GIL is released for the length of every
library call (ctypes.CDLL), so threads predicting on one Policy run in parallel.
"""
import contextlib
import ctypes
import dataclasses
import json
import operator
import os
import threading
import weakref

import numpy as np

from . import _lib
from .errors import ClosedError, Status, error, input_error

_ERRLEN = 1024
_INT_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """Sizes read from the checkpoint and what the load resolved (mact_model_get_info)."""
    image_height: int
    image_width: int
    patch_size: int
    n_patches: int          # per image
    patch_dim: int
    tokens_per_image: int   # K
    d_model: int
    n_layers: int
    kv_dim: int
    ae_hidden: int
    max_action_dim: int     # A
    max_action_horizon: int
    flow_steps: int
    vocab_total: int
    has_sampler: bool
    pooling_mask: str       # "sdpa", "eager" or "none"
    encoder_mask: str       # "all" or "drop_eos"
    precision: str          # "fp32", "bf16" or "int8"
    pack_cache: str         # "none", "loaded", "written" or "unusable"
    kernels: str            # "ref", "avx2", "avx512", "avx512bf16", "neon", "neon-dotprod" or "neon-i8mm"
    int8_parts: str = ""    # int8: the components quantized ("llm", "llm,vision", ...); "" otherwise


@dataclasses.dataclass(frozen=True)
class NormTag:
    """One entry of the checkpoint's norm_stats.json (metadata_by_tag), as the library reads it."""
    name: str
    state_dim: int
    action_dim: int
    action_horizon: int     # 0: the model's max_action_horizon
    n_action_steps: int     # 0: the horizon
    camera_keys: tuple      # the checkpoint's camera order ("observation.images.<camera>"); () when not listed
    setup_type: str = ""
    control_mode: str = ""
    state_names: tuple = ()   # the state's dims named in order; () when the checkpoint names none
    action_names: tuple = ()
    joint_frame: int = 0      # joints the checkpoint's joint frame maps (0: none)


@dataclasses.dataclass
class ActionOutput:
    """What predict_action returns: ``actions`` float32 [1, n_action_steps, action_dim] in robot units (the
    model card's ``out.actions``) and ``timings``, milliseconds per stage (preprocess, vision, llm, action,
    total)."""
    actions: np.ndarray
    timings: dict
    n_tokens: int           # prompt length
    horizon: int            # action rows generated before the first n_action_steps were kept


def _names(joined):
    return tuple(joined.decode("utf-8", "replace").split("\n")) if joined else ()


def _read_norm_tags(lib, model):
    """The checkpoint's norm_stats.json tags as the library parsed them (mact_model_norm_tag); {} when the
    file is missing or unreadable (mact_predict then reports it)."""
    out = {}
    for i in range(lib.mact_model_num_norm_tags(model)):
        t = _lib.NormTagInfo()
        if lib.mact_model_norm_tag(model, i, ctypes.byref(t)):
            continue
        name = t.name.decode("utf-8", "replace")
        cams = tuple(t.camera_keys[c].decode("utf-8", "replace") for c in range(min(t.n_cameras, 8)))
        out[name] = NormTag(name=name, state_dim=t.state_dim, action_dim=t.action_dim,
                            action_horizon=t.action_horizon, n_action_steps=t.n_action_steps, camera_keys=cams,
                            setup_type=(t.setup_type or b"").decode("utf-8", "replace"),
                            control_mode=(t.control_mode or b"").decode("utf-8", "replace"),
                            state_names=_names(t.state_names), action_names=_names(t.action_names),
                            joint_frame=t.joint_frame)
    return out


class _State:
    """The model handle and every session handle made on it, apart from the Policy and Session objects (no
    reference cycles: the garbage collector may free them in any order and this still frees the sessions
    before the model). Calls in progress are counted; close() waits for them."""

    def __init__(self, lib, ptr, info, norm_tags, model_dir):
        self.lib, self.ptr, self.info, self.norm_tags, self.model_dir = lib, ptr, info, norm_tags, model_dir
        self.cond = threading.Condition(threading.RLock())  # re-entrant: a GC finalizer may run under it
        self.inflight = 0
        self.closed = False
        self.sessions = {}      # id(holder) -> holder, a one-item list [session pointer or None]

    def enter(self, what="mact.Policy"):
        with self.cond:
            if self.closed:
                raise ClosedError(f"this {what} is closed", Status.ERR_INPUT)
            self.inflight += 1

    def leave(self):
        with self.cond:
            self.inflight -= 1
            if not self.inflight:
                self.cond.notify_all()

    def free_session(self, holder):
        with self.cond:
            self.sessions.pop(id(holder), None)
            if holder[0]:
                self.lib.mact_session_free(holder[0])
                holder[0] = None

    def close(self):
        with self.cond:
            self.closed = True
            while self.inflight:
                self.cond.wait()
            for h in list(self.sessions.values()):
                self.free_session(h)
            if self.ptr:
                self.lib.mact_model_free(self.ptr)
                self.ptr = None

    def resolve_tag(self, name):
        if name is None:
            return next(iter(self.norm_tags.values())) if len(self.norm_tags) == 1 else None
        return self.norm_tags.get(name)


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _text(s, what):
    if not isinstance(s, str):
        raise TypeError(f"{what} must be a str, not {type(s).__name__}")
    if "\0" in s:
        raise input_error(f"{what} contains a NUL character")
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise input_error(f"{what} is not valid UTF-8 text: {e}") from None


def _opt_int(v, what, zero_ok=False):
    """None -> 0 (the library's default); an int in C int range; 0 rejected (it would silently mean the default)."""
    if v is None:
        return 0
    if isinstance(v, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(v).__name__}") from None
    if v == 0 and not zero_ok:
        raise input_error(f"{what} 0: pass None for the default, or a positive number")
    if not -_INT_MAX - 1 <= v <= _INT_MAX:
        raise input_error(f"{what} {v} is out of range")
    return v


def _array(x, what, dtype, ndim=None, dims=None):
    """x as a C-contiguous array of dtype; dims: the expected shape, None for a free dimension."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:
        raise input_error(f"{what}: not an array ({e})") from None
    if a.dtype.kind not in ("b", "i", "u", "f") or (a.dtype.kind == "b" and dtype != np.uint8):
        raise input_error(f"{what}: dtype {a.dtype}; expected numbers")
    if np.dtype(dtype).kind in "iu" and a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
            raise input_error(f"{what}: dtype {a.dtype} with non-integer values; expected integers")
    if dims is not None:
        ndim = len(dims)
    if ndim is not None and a.ndim != ndim:
        raise input_error(f"{what}: shape {tuple(a.shape)}; expected {_shape_str(dims, ndim)}")
    if dims is not None and any(d is not None and d != s for d, s in zip(dims, a.shape)):
        raise input_error(f"{what}: shape {tuple(a.shape)}; expected {_shape_str(dims, ndim)}")
    return np.ascontiguousarray(a, dtype=dtype)


def _shape_str(dims, ndim):
    if dims is None:
        return f"{ndim} dimensions"
    return "[" + ", ".join("n" if d is None else str(d) for d in dims) + "]"


def _frame(img, i):
    """One camera frame -> C-contiguous HxWx3 uint8 RGB. PIL images are converted to RGB."""
    mod = type(img).__module__ or ""
    if mod.startswith("PIL.") or (hasattr(img, "convert") and hasattr(img, "mode") and hasattr(img, "size")):
        if img.mode != "RGB":
            img = img.convert("RGB")
        return np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
    try:
        a = np.asarray(img)
    except (ValueError, TypeError) as e:
        raise input_error(f"camera frame {i}: not an image or array ({e})") from None
    if a.dtype != np.uint8:
        hint = " (floats in [0, 1]: (x * 255).round().astype(np.uint8))" if a.dtype.kind == "f" else ""
        raise input_error(f"camera frame {i}: dtype {a.dtype}; mact takes HxWx3 uint8 RGB{hint}")
    if a.ndim != 3 or a.shape[2] != 3:
        raise input_error(f"camera frame {i}: shape {tuple(a.shape)}; mact takes HxWx3 RGB (channels last)")
    if a.shape[0] > _INT_MAX or a.shape[1] > _INT_MAX:
        raise input_error(f"camera frame {i}: {a.shape[0]}x{a.shape[1]} is too large")
    return np.ascontiguousarray(a)


def _frames(images):
    if isinstance(images, np.ndarray) and images.ndim == 4:
        images = list(images)
    if isinstance(images, (str, bytes)) or not isinstance(images, (list, tuple)):
        raise TypeError("images must be a list of camera frames (PIL images or HxWx3 uint8 arrays) in the "
                        f"checkpoint's camera order, not {type(images).__name__}")
    return [_frame(im, i) for i, im in enumerate(images)]


def _check_modes(inference_action_mode, enable_depth_reasoning):
    if inference_action_mode not in (None, "continuous"):
        raise NotImplementedError(f"inference_action_mode={inference_action_mode!r}: mact implements only "
                                  "'continuous' (the flow-matching action expert)")
    if enable_depth_reasoning:
        raise NotImplementedError(f"enable_depth_reasoning={enable_depth_reasoning!r}: mact does not implement "
                                  "depth reasoning (pass False)")


_RTC_SCHEDULES = ("linear", "zeros", "ones", "exp")
_RTC_GUIDANCES = ("identity", "vjp")


def _rtc_name(lib, fn, v, what, names):
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {type(v).__name__}")
    out = ctypes.c_int()
    if "\0" in v or getattr(lib, fn)(v.encode("utf-8", "replace"), ctypes.byref(out)):
        raise input_error(f"{what} {v!r}: unknown; expected one of {', '.join(names)}")
    return out.value


def _rtc_options(prev_actions, inference_delay, execution_horizon, schedule, max_guidance_weight, guidance, lib):
    """predict_action's real-time chunking arguments -> (mact_rtc_options, the float32 rows it points into, to
    be kept alive for the call). prev_actions None: n_prev 0, RTC off (the library still checks the numbers
    given and refuses a delay without rows)."""
    sched = 0 if schedule is None else _rtc_name(lib, "mact_rtc_schedule_parse", schedule, "rtc_schedule", _RTC_SCHEDULES)
    guid = _rtc_name(lib, "mact_rtc_guidance_parse", guidance, "rtc_guidance", _RTC_GUIDANCES)
    delay = _opt_int(inference_delay, "inference_delay", zero_ok=True)
    eh = _opt_int(execution_horizon, "execution_horizon")
    if max_guidance_weight is not None and (isinstance(max_guidance_weight, bool) or
                                            not isinstance(max_guidance_weight, (int, float, np.number))):
        raise TypeError(f"max_guidance_weight must be a number, not {type(max_guidance_weight).__name__}")
    beta = 0.0 if max_guidance_weight is None else float(max_guidance_weight)
    if max_guidance_weight is not None and beta == 0.0:
        # the library reads 0 as its default (10): refused rather than silently meaning 10
        raise input_error("max_guidance_weight 0: must be > 0 (10.0 is LeRobot's default)")
    rows = None
    if prev_actions is not None:
        rows = _array(prev_actions, "prev_actions", np.float32)
        if rows.ndim == 3 and rows.shape[0] == 1:
            rows = rows[0]
        if rows.ndim != 2:
            raise input_error(f"prev_actions: shape {tuple(np.shape(prev_actions))}; expected [n, action_dim] "
                              "(the previous chunk's rows not executed yet)")
        if rows.shape[0] == 0:
            raise input_error(f"prev_actions: shape {tuple(rows.shape)} has no rows; pass None to predict "
                              "without real-time chunking")
        rows = np.ascontiguousarray(rows)
    rtc = _lib.RtcOptions(prev_actions=None if rows is None else rows.ctypes.data,
                          n_prev=0 if rows is None else rows.shape[0], prev_dim=0 if rows is None else rows.shape[1],
                          inference_delay=delay, execution_horizon=eh, schedule=sched,
                          max_guidance_weight=beta, guidance=guid)
    return rtc, rows


class Session:
    """One mact_session: the buffers, threads and error string of inferences run by one thread at a time.

    Made by ``policy.session(max_images=None, max_tokens=None, threads=None)``; a context manager that closes
    it on exit. Calls on one Session from several threads are serialized (a lock), never run at once. Every
    method that takes arrays checks their dtype and shape here (the C functions trust the sizes they are
    given); everything else is checked by the library, whose message the raised mact.Error carries."""

    def __init__(self, policy, max_images=None, max_tokens=None, threads=None):
        st = policy._state
        self._state = st
        self._lock = threading.Lock()
        mi = _opt_int(max_images, "max_images")
        mt = _opt_int(max_tokens, "max_tokens")
        nt = _opt_int(threads, "threads")
        for v, what in ((mi, "max_images"), (mt, "max_tokens"), (nt, "threads")):
            if v < 0:
                raise input_error(f"{what} {v}: expected a positive number or None")
        opts = _lib.SessionOptions(max_images=mi, max_tokens=mt, n_threads=nt, threadpool=None)
        err = ctypes.create_string_buffer(_ERRLEN)
        out = ctypes.c_void_p()
        st.enter()
        try:
            rc = st.lib.mact_session_new(st.ptr, ctypes.byref(opts), ctypes.byref(out), err, _ERRLEN)
            if rc:
                raise error(rc, err.value.decode("utf-8", "replace"))
            holder = [out.value]
            with st.cond:
                st.sessions[id(holder)] = holder
        finally:
            st.leave()
        self._holder = holder
        self._finalizer = weakref.finalize(self, st.free_session, holder)

    # ---- lifetime ----
    def close(self):
        """Frees the session (waits for a call in progress on it). Idempotent."""
        with self._lock:
            self._finalizer()

    @property
    def closed(self):
        return not self._holder[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def _use(self):
        with self._lock:
            self._state.enter()
            try:
                p = self._holder[0]
                if not p:
                    raise ClosedError("this mact.Session is closed", Status.ERR_INPUT)
                yield p
            finally:
                self._state.leave()

    def _check(self, p, rc):
        if rc:
            raise error(rc, self._state.lib.mact_session_error(p).decode("utf-8", "replace"))

    def _call(self, fn, *args):
        with self._use() as p:
            self._check(p, getattr(self._state.lib, fn)(p, *args))

    @property
    def threads(self):
        """Threads this session's kernels run on."""
        with self._use() as p:
            return self._state.lib.mact_session_threads(p)

    # ---- the integrator's call ----
    def predict_action(self, images, task, state, norm_tag=None, num_steps=None, seed=None, noise=None,
                       n_action_steps=None, inference_action_mode="continuous", enable_depth_reasoning=False,
                       processor=None, prev_actions=None, inference_delay=0, execution_horizon=None,
                       rtc_schedule=None, max_guidance_weight=None, rtc_guidance="identity"):
        """Camera frames + task + raw state -> ActionOutput (``.actions`` float32 [1, n, action_dim], robot units).

        images: PIL images or HxWx3 uint8 RGB arrays, in the checkpoint's camera order (the norm tag's
            camera_keys, ``policy.camera_keys()``); a checkpoint whose tag lists its cameras must get that many.
            Any size: the library resizes.
        task: the instruction (str). state: the robot's joint state in raw robot units (a sequence or array of
            the norm tag's state_dim numbers; a leading batch dimension of 1 is accepted).
        norm_tag: which norm_stats.json entry; None: the checkpoint's only one.
        num_steps: flow-matching Euler steps; None: the config's flow_matching_num_steps.
        seed / noise: the initial noise, from a seed (an int in [0, 2**64); None: the library's default seed,
            0, so a call is deterministic; pass a fresh seed per call for diverse samples) or given as an
            array [horizon, max_action_dim] (not both).
        n_action_steps: rows returned; None: the tag's n_action_steps, else the horizon.
        inference_action_mode: only "continuous"; others raise NotImplementedError.
        enable_depth_reasoning: only False; True raises NotImplementedError.
        processor: accepted for the model card's call and ignored: the engine does its own preprocessing
            (resize, normalisation, patching, prompt and tokenizer from the checkpoint's files), so a
            transformers AutoProcessor has nothing to do here.

        Real-time chunking (RTC, mact_rtc_options; mact.RealTimeRunner drives it for a control loop): the flow
        loop is guided toward the previous chunk's rows the robot has not executed yet, so the new chunk
        continues the one being executed.
        prev_actions: those rows, [n, action_dim] (a leading batch dimension of 1 is accepted), in robot units
            exactly as predict_action returned them, first the next row the robot executes; 1..horizon rows,
            finite. None: RTC off, bit for bit the result without it. Never pad them: rows past the ones given
            are not guided (a zero row would mean the dataset's mean).
        inference_delay: d, rows the robot executes while this call runs (0..n, below the horizon): the new
            chunk's rows [0, d) are guided to equal prev_actions[0:d] and are already in the past when it
            returns; the caller continues at the row it has reached.
        execution_horizon: rows guided (None: the library's default, 10), capped at the rows given.
        rtc_schedule: the prefix weights past d: "linear" (LeRobot's default), "zeros", "ones" or "exp" (None: the
        checkpoint's rtc_config, else "linear").
        max_guidance_weight: the cap of the guidance weight (finite, > 0; None: the checkpoint's rtc_config, else
        10.0 as LeRobot's).
        rtc_guidance: "identity" (LeRobot's: the Jacobian taken as the identity) or "vjp" (the paper's
            vector-Jacobian product).
        The library checks these (row width, finiteness, delay against the rows and the horizon, ...) and its
        message is the raised mact.Error's; unknown schedule or guidance names are refused before the call.
        """
        _check_modes(inference_action_mode, enable_depth_reasoning)
        st = self._state
        info = st.info
        frames = _frames(images)
        sv = _array(state, "state", np.float64)
        if sv.ndim == 2 and sv.shape[0] == 1:
            sv = sv[0]
        if sv.ndim != 1:
            raise input_error(f"state: shape {tuple(np.shape(state))}; expected [state_dim]")
        sv = np.ascontiguousarray(sv, dtype=np.float32)
        task_b = _text(task, "task")
        tag_b = None if norm_tag is None else _text(norm_tag, "norm_tag")
        steps = _opt_int(num_steps, "num_steps")
        nas = _opt_int(n_action_steps, "n_action_steps")
        if seed is not None and noise is not None:
            raise input_error("pass seed or noise, not both")
        if seed is None:
            seed_v = 0
        else:
            if isinstance(seed, bool):
                raise TypeError("seed must be an int, not bool")
            seed_v = operator.index(seed)
            if not 0 <= seed_v < 2**64:
                raise input_error(f"seed {seed_v} is outside [0, 2**64)")
        noise_a = None
        if noise is not None:
            noise_a = _array(noise, "noise", np.float32)
            if noise_a.ndim == 3 and noise_a.shape[0] == 1:
                noise_a = noise_a[0]
            if noise_a.ndim != 2 or noise_a.shape[1] != info.max_action_dim:
                raise input_error(f"noise: shape {tuple(np.shape(noise))}; expected [horizon, "
                                  f"{info.max_action_dim}] (max_action_dim)")
            noise_a = np.ascontiguousarray(noise_a)
        cap = info.max_action_horizon * info.max_action_dim
        buf = np.empty(cap, np.float32)
        cams = (_lib.Frame * len(frames))(*[_lib.Frame(f.ctypes.data, f.shape[0], f.shape[1]) for f in frames])
        opts = _lib.PredictOptions(norm_tag=tag_b, num_steps=steps, n_action_steps=nas,
                                   noise=None if noise_a is None else noise_a.ctypes.data,
                                   noise_len=0 if noise_a is None else noise_a.size, seed=seed_v)
        rtc, prev_a = _rtc_options(prev_actions, inference_delay, execution_horizon, rtc_schedule,
                                   max_guidance_weight, rtc_guidance, st.lib)
        inp = _lib.PredictInput(frames=cams, n_frames=len(frames), task=task_b, state=sv.ctypes.data,
                                state_dim=sv.size, options=opts, rtc=rtc)
        out = _lib.PredictOutput(actions=buf.ctypes.data, actions_cap=cap)
        with self._use() as p:
            self._check(p, st.lib.mact_predict(p, ctypes.byref(inp), ctypes.byref(out)))
        del prev_a  # the rows rtc.prev_actions points into: alive until here
        n, d = out.n_steps, out.action_dim
        t = out.timings
        timings = {"preprocess": t.preprocess_ms, "vision": t.vision_ms, "llm": t.llm_ms, "action": t.action_ms,
                   "total": t.total_ms}
        return ActionOutput(actions=buf[: n * d].reshape(1, n, d).copy(), timings=timings, n_tokens=t.n_tokens,
                            horizon=t.horizon)

    def tensor(self, name):
        """After predict_action: a copy of an intermediate tensor ("pixel_values", "image_embeds", "keys",
        "values", "noise", "actions_norm", "input_ids" as float)."""
        nb = _text(name, "name")
        with self._use() as p:
            v = _lib.TensorView()
            rc = self._state.lib.mact_session_tensor(p, nb, ctypes.byref(v))
            if rc:
                raise error(rc, f"no tensor \"{name}\" (an unknown name, or no successful predict_action on this "
                                "session yet)")
            shape = tuple(v.shape[i] for i in range(v.ndim))
            n = int(np.prod(shape)) if shape else 0
            return np.ctypeslib.as_array(v.data, shape=(n,)).reshape(shape).copy() if n else np.zeros(shape, np.float32)

    # ---- the stage boundaries (mact_stages.h) ----
    def vision(self, pixel_values):
        """pixel_values [n_img, n_patches, patch_dim] -> image_embeds [n_img * K, d_model]."""
        i = self._state.info
        pv = _array(pixel_values, "pixel_values", np.float32, dims=(None, i.n_patches, i.patch_dim))
        out = np.empty((pv.shape[0] * i.tokens_per_image, i.d_model), np.float32)
        self._call("mact_vision", _ptr(pv), _cint(pv.shape[0]), _ptr(out))
        return out

    def attention_bias(self, ids):
        """Token ids [n] -> attention bias [n, n] (0 or -FLT_MAX)."""
        a = _array(ids, "ids", np.int64, dims=(None,))
        out = np.empty((a.size, a.size), np.float32)
        self._call("mact_attention_bias", _ptr(a), _cint(a.size), _ptr(out))
        return out

    def encoder_mask(self, ids):
        """Token ids [n] -> the action expert's encoder mask [n] (uint8, 1 = visible)."""
        a = _array(ids, "ids", np.int64, dims=(None,))
        out = np.empty(a.size, np.uint8)
        self._call("mact_encoder_mask", _ptr(a), _cint(a.size), _ptr(out))
        return out

    def embed(self, ids, image_embeds):
        """ids [n] + image_embeds [n_image_patch_tokens, d_model] -> hidden [n, d_model]."""
        i = self._state.info
        a = _array(ids, "ids", np.int64, dims=(None,))
        e = _array(image_embeds, "image_embeds", np.float32, dims=(None, i.d_model))
        out = np.empty((a.size, i.d_model), np.float32)
        self._call("mact_embed", _ptr(a), _cint(a.size), _ptr(e), _cint(e.shape[0]), _ptr(out))
        return out

    def llm_layers(self, hidden, bias, a=0, b=None):
        """LLM layers [a, b) on hidden [n, d_model] under bias [n, n] -> (hidden after layer b-1, keys, values),
        keys/values [b - a, n, kv_dim] (post-norm, post-RoPE K and V). The input array is not modified."""
        i = self._state.info
        b = i.n_layers if b is None else b
        a, b = _opt_int(a, "a", zero_ok=True), _opt_int(b, "b", zero_ok=True)
        h = _array(hidden, "hidden", np.float32, dims=(None, i.d_model)).copy()
        n = h.shape[0]
        bb = _array(bias, "bias", np.float32, dims=(n, n))
        rows = max(b - a, 0) if 0 <= a and b <= i.n_layers else 0
        keys = np.empty((rows, n, i.kv_dim), np.float32)
        values = np.empty((rows, n, i.kv_dim), np.float32)
        self._call("mact_llm_layers", _ptr(h), _ptr(bb), _cint(n), a, b, _ptr(keys), _ptr(values))
        return h, keys, values

    def action_context(self, keys, values):
        """keys/values [n_layers, n, kv_dim] -> (k_ctx, v_ctx) [n_layers, n, ae_hidden]."""
        i = self._state.info
        k = _array(keys, "keys", np.float32, dims=(i.n_layers, None, i.kv_dim))
        v = _array(values, "values", np.float32, dims=k.shape)
        kc = np.empty((i.n_layers, k.shape[1], i.ae_hidden), np.float32)
        vc = np.empty_like(kc)
        self._call("mact_action_context", _ptr(k), _ptr(v), _cint(k.shape[1]), _ptr(kc), _ptr(vc))
        return kc, vc

    def action_step(self, traj, t, num_steps, k_ctx, v_ctx, enc_mask, is_pad=None):
        """One Euler step at time t (dt = 1 / num_steps) on traj [h, max_action_dim] -> the new traj.
        k_ctx/v_ctx [n_layers, n, ae_hidden]; enc_mask [n] (nonzero = visible); is_pad [max_action_dim]
        (nonzero = padded dim, zeroed; None: none padded)."""
        i = self._state.info
        x = _array(traj, "traj", np.float32, dims=(None, i.max_action_dim)).copy()
        kc = _array(k_ctx, "k_ctx", np.float32, dims=(i.n_layers, None, i.ae_hidden))
        vc = _array(v_ctx, "v_ctx", np.float32, dims=kc.shape)
        n = kc.shape[1]
        m = _array(enc_mask, "enc_mask", np.uint8, dims=(n,))
        pad = np.zeros(i.max_action_dim, np.uint8) if is_pad is None else \
            _array(is_pad, "is_pad", np.uint8, dims=(i.max_action_dim,))
        self._call("mact_action_step", _ptr(x), _cint(x.shape[0]), ctypes.c_float(t), _cint(num_steps), _ptr(kc),
                   _ptr(vc), _ptr(m), _cint(n), _ptr(pad))
        return x

    def action_generate(self, noise, action_dim, num_steps, keys, values, enc_mask):
        """The whole flow loop: noise [h, max_action_dim] -> normalised actions [h, max_action_dim] (dims >=
        action_dim zeroed), from the raw per-layer keys/values [n_layers, n, kv_dim]."""
        i = self._state.info
        x = _array(noise, "noise", np.float32, dims=(None, i.max_action_dim)).copy()
        k = _array(keys, "keys", np.float32, dims=(i.n_layers, None, i.kv_dim))
        v = _array(values, "values", np.float32, dims=k.shape)
        n = k.shape[1]
        m = _array(enc_mask, "enc_mask", np.uint8, dims=(n,))
        self._call("mact_action_generate", _ptr(x), _cint(x.shape[0]), _cint(action_dim), _cint(num_steps), _ptr(k),
                   _ptr(v), _ptr(m), _cint(n))
        return x

    def generate_from_ids(self, pixel_values, ids, noise, action_dim, num_steps):
        """pixel_values [n_img, n_patches, patch_dim] + prompt ids [n] + noise [h, max_action_dim] ->
        normalised actions [h, max_action_dim]: the whole path from preprocessed inputs."""
        i = self._state.info
        pv = _array(pixel_values, "pixel_values", np.float32, dims=(None, i.n_patches, i.patch_dim))
        a = _array(ids, "ids", np.int64, dims=(None,))
        x = _array(noise, "noise", np.float32, dims=(None, i.max_action_dim)).copy()
        self._call("mact_generate_from_ids", _ptr(pv), _cint(pv.shape[0]), _ptr(a), _cint(a.size), _ptr(x),
                   _cint(x.shape[0]), _cint(action_dim), _cint(num_steps))
        return x


def _cint(v):
    v = operator.index(v)
    if not -_INT_MAX - 1 <= v <= _INT_MAX:
        raise input_error(f"{v} does not fit a C int")
    return v


_PRECISIONS = ("fp32", "bf16", "int8", "default")


class Policy:
    """A MolmoAct2 checkpoint loaded by libmact: ``Policy.from_pretrained(model_dir)``, then
    ``policy.predict_action(images=[...], task=..., state=...)``, as on the model card.

    Shared by threads: each thread's calls run on a session of its own (made on its first call), or on an
    explicit ``policy.session()``. ``close()`` (or ``with Policy.from_pretrained(...) as policy:``) frees the
    model and every session made on it, after waiting for calls in progress; any later call raises
    mact.ClosedError."""

    def __init__(self, *a, **k):
        raise TypeError("use mact.Policy.from_pretrained(model_dir, ...)")

    @classmethod
    def from_pretrained(cls, model_dir, precision=None, threads=None, pack_cache=None, *, kernels=None,
                        max_images=None, max_tokens=None, int8_parts=None, library=None):
        """Loads a checkpoint: an HF-layout folder (config.json, model.safetensors or shards, tokenizer.json,
        norm_stats.json), a LeRobot policy folder (its base named by checkpoint_path), or a Hugging Face hub repo id
        ORG/NAME[@REVISION] resolved offline in the hub cache. precision: "bf16", "fp32" (the exact parity mode) or
        "int8" (None: the library's default, bf16, or a LeRobot policy's dtype); the weights are repacked once for it. threads: threads per session (None: every CPU this process may run on).
        pack_cache: a directory for a cache of the repacked weights (None: $MACT_PACK_CACHE if set, else
        none). kernels: None/"auto", "ref", "avx2", "avx512", "avx512bf16" (x86-64) or "neon", "neon-dotprod", "neon-i8mm" (ARM64). max_images / max_tokens: the
        sessions' limits (None: the library's defaults, 4 frames and 512 tokens). int8_parts: with "int8", the
        components quantized, "llm", "vision", "expert" comma-separated or "all" (None: the library's default, the
        LLM; docs/parity.md has each choice's accuracy). library: a path to
        libmact.so (else $MACT_LIBRARY, the build tree, the system loader path)."""
        lib = _lib.load_library(library)
        model_dir = os.fspath(model_dir)
        opts = _lib.LoadOptions()
        if precision is not None:
            if not isinstance(precision, str) or precision not in _PRECISIONS:
                raise input_error(f"precision {precision!r}: expected \"bf16\", \"fp32\" or \"int8\"")
            p = ctypes.c_int()
            if lib.mact_precision_parse(precision.encode(), ctypes.byref(p)):
                raise input_error(f"precision {precision!r}: the library does not know it")
            opts.precision = p.value
        if kernels is not None:
            names = {v: k for k, v in lib.kernel_names.items()}
            if kernels not in names:
                raise input_error(f"kernels {kernels!r}: expected one of {', '.join(names)}")
            opts.kernels = names[kernels]
        if pack_cache is not None:
            opts.pack_cache_dir = os.fsencode(pack_cache)
        if int8_parts is not None:
            bits = ctypes.c_uint()
            if not isinstance(int8_parts, str) or lib.mact_int8_parts_parse(int8_parts.encode(), ctypes.byref(bits)):
                raise input_error(f"int8_parts {int8_parts!r}: expected \"llm\", \"vision\", \"expert\" "
                                  "comma-separated, or \"all\"")
            opts.int8_parts = bits.value
        self = object.__new__(cls)
        self._threads, self._max_images, self._max_tokens = threads, max_images, max_tokens
        for v, what in ((threads, "threads"), (max_images, "max_images"), (max_tokens, "max_tokens")):
            if _opt_int(v, what) < 0:
                raise input_error(f"{what} {v}: expected a positive number or None")
        err = ctypes.create_string_buffer(_ERRLEN)
        out = ctypes.c_void_p()
        rc = lib.mact_model_load(os.fsencode(model_dir), ctypes.byref(opts), ctypes.byref(out), err, _ERRLEN)
        if rc:
            raise error(rc, err.value.decode("utf-8", "replace"))
        ci = _lib.ModelInfo()
        lib.mact_model_get_info(out, ctypes.byref(ci))
        info = ModelInfo(
            **{f: getattr(ci, f) for f in ("image_height", "image_width", "patch_size", "n_patches", "patch_dim",
                                           "tokens_per_image", "d_model", "n_layers", "kv_dim", "ae_hidden",
                                           "max_action_dim", "max_action_horizon", "flow_steps", "vocab_total")},
            has_sampler=bool(ci.has_sampler), pooling_mask=_lib.POOL_MASKS.get(ci.pooling_mask, "?"),
            encoder_mask=_lib.ENCODER_MASKS.get(ci.encoder_mask, "?"),
            precision=lib.mact_precision_str(ci.precision).decode(), pack_cache=_lib.PACK_CACHE.get(ci.pack_cache, "?"),
            kernels=lib.kernel_names.get(ci.kernels, "?"),
            int8_parts=lib.mact_int8_parts_str(ci.int8_parts, ctypes.create_string_buffer(64), 64).decode())
        self._state = _State(lib, out.value, info, _read_norm_tags(lib, out), model_dir)
        self._tls = threading.local()
        self._finalizer = weakref.finalize(self, self._state.close)
        return self

    # ---- lifetime ----
    def close(self):
        """Frees every session and the model (waits for calls in progress in other threads). Idempotent."""
        self._finalizer()

    @property
    def closed(self):
        return self._state.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        st = self._state
        return f"<mact.Policy {st.model_dir!r} {st.info.precision}{' closed' if st.closed else ''}>"

    # ---- what the checkpoint is ----
    @property
    def info(self):
        """ModelInfo: sizes from the checkpoint (mact_model_get_info)."""
        return self._state.info

    @property
    def library(self):
        return self._state.lib

    @property
    def model_dir(self):
        return self._state.model_dir

    @property
    def norm_tags(self):
        """{name: NormTag} from the checkpoint's norm_stats.json (mact_model_norm_tag)."""
        return dict(self._state.norm_tags)

    def camera_keys(self, norm_tag=None):
        """The checkpoint's camera order for a tag (None: the only tag): its camera_keys, () if it lists none."""
        t = self._state.resolve_tag(norm_tag)
        if t is None:
            raise input_error(f"norm tag {norm_tag!r}: " + (f"unknown; valid tags: {' '.join(self._state.norm_tags)}"
                                                           if norm_tag is not None else
                                                           f"required; valid tags: {' '.join(self._state.norm_tags)}"))
        return t.camera_keys

    def describe(self, as_json=False):
        """The library's summary: config, parameters and bytes per component, dtype mix (mact inspect). as_json: what a
        caller must send and gets back per norm tag, as a list of dicts (mact_model_tags_json: `mact inspect --json`'s
        "norm_tags" and GET /act's)."""
        st = self._state
        n = 1 << 14
        st.enter()
        try:
            if as_json:
                need = ctypes.c_size_t()
                st.lib.mact_model_tags_json(st.ptr, None, 0, ctypes.byref(need))
                buf = ctypes.create_string_buffer(need.value + 1)
                if st.lib.mact_model_tags_json(st.ptr, buf, need.value + 1, None):
                    return []
                return json.loads(buf.value.decode("utf-8"))
            while True:
                buf = ctypes.create_string_buffer(n)
                if not st.lib.mact_model_describe(st.ptr, buf, n) or n >= 1 << 26:
                    return buf.value.decode("utf-8", "replace")
                n *= 4
        finally:
            st.leave()

    def tokenize(self, text):
        """Token ids (int64 array) of text with the checkpoint's tokenizer (no BOS, specials matched)."""
        tb = _text(text, "text")
        st = self._state
        err = ctypes.create_string_buffer(_ERRLEN)
        n = ctypes.c_size_t()
        st.enter()
        try:
            rc = st.lib.mact_tokenize(st.ptr, tb, None, 0, ctypes.byref(n), err, _ERRLEN)
            if rc and (rc != Status.ERR_INPUT or not n.value):  # INPUT with a count: it only did not fit
                raise error(rc, err.value.decode("utf-8", "replace"))
            ids = np.zeros(n.value, np.int64)
            if n.value:
                rc = st.lib.mact_tokenize(st.ptr, tb, _ptr(ids), ids.size, ctypes.byref(n), err, _ERRLEN)
                if rc:
                    raise error(rc, err.value.decode("utf-8", "replace"))
            return ids
        finally:
            st.leave()

    # ---- sessions ----
    def session(self, max_images=None, max_tokens=None, threads=None):
        """A new Session on this model (a context manager); None: the values given to from_pretrained."""
        return Session(self, self._max_images if max_images is None else max_images,
                       self._max_tokens if max_tokens is None else max_tokens,
                       self._threads if threads is None else threads)

    def _thread_session(self):
        s = getattr(self._tls, "session", None)
        if s is None or s.closed:
            if self._state.closed:
                raise ClosedError("this mact.Policy is closed", Status.ERR_INPUT)
            s = self._tls.session = self.session()
        return s

    def predict_action(self, images, task, state, norm_tag=None, num_steps=None, seed=None, noise=None,
                       n_action_steps=None, inference_action_mode="continuous", enable_depth_reasoning=False,
                       processor=None, prev_actions=None, inference_delay=0, execution_horizon=None,
                       rtc_schedule=None, max_guidance_weight=None, rtc_guidance="identity"):
        return self._thread_session().predict_action(
            images, task, state, norm_tag=norm_tag, num_steps=num_steps, seed=seed, noise=noise,
            n_action_steps=n_action_steps, inference_action_mode=inference_action_mode,
            enable_depth_reasoning=enable_depth_reasoning, processor=processor, prev_actions=prev_actions,
            inference_delay=inference_delay, execution_horizon=execution_horizon, rtc_schedule=rtc_schedule,
            max_guidance_weight=max_guidance_weight, rtc_guidance=rtc_guidance)

    predict_action.__doc__ = ("On the calling thread's own session: " + Session.predict_action.__doc__)


def _delegate(name):
    def f(self, *args, **kwargs):
        return getattr(self._thread_session(), name)(*args, **kwargs)
    f.__name__ = name
    f.__qualname__ = f"Policy.{name}"
    f.__doc__ = "On the calling thread's own session: " + getattr(Session, name).__doc__
    return f


for _n in ("tensor", "vision", "attention_bias", "encoder_mask", "embed", "llm_layers", "action_context",
           "action_step", "action_generate", "generate_from_ids"):
    setattr(Policy, _n, _delegate(_n))
del _n
