"""ctypes mirror of the toolkits' headers, include/mact_data.h (libmact_data.so) and include/mact_compress.h
(libmact_compress.so), and what the toolkit modules (datasets, stats, eval, prune) share: finding the libraries
(as _lib.load_library finds libmact.so), turning a failed call into the package's exception with the C error
string, and the C FILE * a report is printed to (an in-memory stream read back as text).

The structs are laid out field for field as in the headers (tests/python/test_toolkits.py compares sizes and
offsets against a C compiler's). Each toolkit library is a client of libmact.so (it needs libmact.so.0): the runtime is
loaded first, so a process holds one runtime, which the toolkits' calls share (a Policy's session is evaluated as is).
"""
import ctypes
from ctypes import POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p  # noqa: E501

from . import _lib
from ._lib import RtcOptions
from .errors import error

_P = c_void_p
_PP = POINTER(c_void_p)
_STRS = POINTER(c_char_p)
_FILE = c_void_p
_ERR = (c_char_p, c_size_t)


# ---- include/mact_data.h ----

class DatasetInfo(Structure):
    _fields_ = [("dir", c_char_p), ("version", c_char_p), ("robot", c_char_p), ("fps", c_int), ("n_episodes", c_int),
                ("n_tasks", c_int), ("n_features", c_int), ("n_cameras", c_int), ("n_frames", c_int64),
                ("info_total_frames", c_int64)]


class DatasetFeature(Structure):
    _fields_ = [("key", c_char_p), ("dtype", c_char_p), ("ndim", c_int), ("shape", c_int * 4), ("n_names", c_int),
                ("is_camera", c_int), ("height", c_int), ("width", c_int), ("codec", c_char_p)]


class DatasetEpisode(Structure):
    _fields_ = [("index", c_int64), ("length", c_int64), ("task", c_char_p)]


class DatasetFrameInfo(Structure):
    _fields_ = [("height", c_int), ("width", c_int), ("from_video", c_int), ("time_s", c_double),
                ("codec", c_char * 32), ("source", c_char * 4096)]


class StatsOptions(Structure):
    _fields_ = [("datasets", _STRS), ("n_datasets", c_int), ("tag", c_char_p), ("out", c_char_p),
                ("action_key", c_char_p), ("state_key", c_char_p), ("method", c_int), ("horizon", c_int),
                ("control_mode", c_char_p), ("setup_type", c_char_p), ("normalize_gripper", c_int),
                ("lerobot_stats", c_char_p)]


# mact_eval_predict_fn: (user, const mact_predict_input *, mact_predict_output *, err, errlen) -> mact_status
EVAL_PREDICT_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(_lib.PredictInput), POINTER(_lib.PredictOutput), c_void_p,
                                   c_size_t)


class EvalOptions(Structure):
    _fields_ = [("dataset", c_char_p), ("out", c_char_p), ("policy", c_int), ("predict", c_void_p),
                ("predict_user", c_void_p), ("tag", c_void_p), ("policy_id", c_char_p), ("episodes", c_char_p),
                ("horizon", c_int), ("first_k", POINTER(c_int)), ("n_first_k", c_int), ("static_threshold", c_double),
                ("seed", c_uint64), ("steps", c_int), ("cameras", _STRS), ("n_cameras", c_int),
                ("action_key", c_char_p), ("state_key", c_char_p), ("tolerance_s", c_double), ("n_joints", c_int),
                ("joint_signs", POINTER(c_float)), ("joint_offsets", POINTER(c_float)), ("replan", c_int),
                ("delay", c_int), ("no_rtc_compare", c_int), ("rtc", RtcOptions), ("shard", c_int),
                ("n_shards", c_int)]


class EvalMergeOptions(Structure):
    _fields_ = [("out", c_char_p), ("dirs", _STRS), ("n_dirs", c_int), ("first_k", POINTER(c_int)),
                ("n_first_k", c_int), ("allow_partial", c_int)]


class DatasetSample(Structure):
    _fields_ = [("img", _lib.Image), ("name", c_char * 96)]


EVAL_MAX_HORIZON, EVAL_MAX_CAMERAS, EVAL_MAX_FIRST_K = 256, 8, 16
EVAL_POLICIES = {"model": 0, "hold": 1, "replay": 2}

DATA_PROTOTYPES = {
    "mact_data_version": (c_char_p, []),
    "mact_dataset_open": (c_int, [c_char_p, _PP, *_ERR]),
    "mact_dataset_close": (None, [_P]),
    "mact_dataset_get_info": (None, [_P, POINTER(DatasetInfo)]),
    "mact_dataset_feature_at": (c_int, [_P, c_int, POINTER(DatasetFeature)]),
    "mact_dataset_find_feature": (c_int, [_P, c_char_p]),
    "mact_dataset_feature_name": (c_char_p, [_P, c_int, c_int]),
    "mact_dataset_episode_at": (c_int, [_P, c_int, POINTER(DatasetEpisode)]),
    "mact_dataset_read": (c_int, [_P, c_int, c_char_p, _P, c_size_t, POINTER(c_int64), POINTER(c_int), *_ERR]),
    "mact_dataset_frame": (c_int, [_P, c_int, c_int64, c_char_p, c_double, c_int, _P, c_size_t,
                                   POINTER(DatasetFrameInfo), *_ERR]),
    "mact_dataset_check": (c_int, [_P, c_char_p, c_size_t, POINTER(c_int)]),
    "mact_dataset_report": (c_int, [c_char_p, _FILE, POINTER(c_int), *_ERR]),
    "mact_parquet_dump_json": (c_int, [c_char_p, _FILE, *_ERR]),
    "mact_data_quiet_logs": (None, []),
    "mact_stats_compute": (c_int, [POINTER(StatsOptions), POINTER(c_double), *_ERR]),
    "mact_stats_method_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "mact_eval_run": (c_int, [POINTER(EvalOptions), _FILE, _FILE, _PP, *_ERR]),
    "mact_eval_merge": (c_int, [POINTER(EvalMergeOptions), _FILE, _PP, *_ERR]),
    "mact_eval_result_json": (c_char_p, [_P]),
    "mact_eval_result_horizon": (c_int, [_P]),
    "mact_eval_result_per_step": (None, [_P, _P, _P]),
    "mact_eval_result_frames": (c_double, [_P]),
    "mact_eval_result_policy": (c_char_p, [_P]),
    "mact_eval_result_trajectory": (c_int, [_P, c_int, _P, c_size_t, POINTER(c_int), POINTER(c_int), POINTER(c_int64),
                                            POINTER(c_int), POINTER(c_int)]),
    "mact_eval_result_free": (None, [_P]),
    "mact_eval_session_predict": (c_int, [_P, POINTER(_lib.PredictInput), POINTER(_lib.PredictOutput), *_ERR]),
    "mact_dataset_sample_frames": (c_int, [c_char_p, c_int, POINTER(POINTER(DatasetSample)), POINTER(c_int), *_ERR]),
    "mact_dataset_samples_free": (None, [POINTER(DatasetSample), c_int]),
}


# ---- include/mact_compress.h ----

class SnrOptions(Structure):
    _fields_ = [("session", c_void_p), ("model", c_char_p), ("images", _STRS), ("n_images", c_int),
                ("dataset", c_char_p), ("n_frames", c_int), ("target_depth", c_int)]


class DistillOptions(Structure):
    _fields_ = [("teacher", c_void_p), ("student", c_void_p), ("teacher_name", c_char_p), ("student_name", c_char_p),
                ("images", _STRS), ("n_images", c_int), ("dataset", c_char_p), ("n_frames", c_int), ("json", c_char_p)]


class DistillResult(Structure):
    _fields_ = [("cos_token", c_double), ("cos_flat", c_double), ("rel_mse", c_double), ("max_abs", c_double),
                ("n_images", c_int), ("identical", c_int)]


PRUNE_MAX_TAPS, PRUNE_MAX_BLOCKS = 8, 4096

COMPRESS_PROTOTYPES = {
    "mact_compress_version": (c_char_p, []),
    "mact_snr_analyze": (c_int, [POINTER(SnrOptions), _FILE, _PP, *_ERR]),
    "mact_snr_write_json": (c_int, [_P, c_char_p, *_ERR]),
    "mact_snr_blocks": (c_int, [_P]),
    "mact_snr_images": (c_int, [_P]),
    "mact_snr_values": (None, [_P, _P, _P, _P]),
    "mact_snr_keep": (c_int, [_P, _P, _P, POINTER(c_int)]),
    "mact_snr_free": (None, [_P]),
    "mact_prune": (c_int, [c_char_p, _P, c_int, _P, c_int, c_char_p, _FILE, *_ERR]),
    "mact_distill_eval": (c_int, [POINTER(DistillOptions), _FILE, POINTER(DistillResult), *_ERR]),
}

# struct name in the headers -> its mirror (the layout test)
STRUCTS = {"mact_dataset_info": DatasetInfo, "mact_dataset_feature": DatasetFeature,
           "mact_dataset_episode": DatasetEpisode, "mact_dataset_frame_info": DatasetFrameInfo,
           "mact_stats_options": StatsOptions, "mact_eval_options": EvalOptions,
           "mact_eval_merge_options": EvalMergeOptions, "mact_dataset_sample": DatasetSample,
           "mact_snr_options": SnrOptions, "mact_distill_options": DistillOptions,
           "mact_distill_result": DistillResult}


class DataLibrary(_lib.Library):
    """libmact_data.so with its prototypes set."""
    PROTOTYPES = DATA_PROTOTYPES
    VERSION_FUNCTION = "mact_data_version"


class CompressLibrary(_lib.Library):
    """libmact_compress.so with its prototypes set."""
    PROTOTYPES = COMPRESS_PROTOTYPES
    VERSION_FUNCTION = "mact_compress_version"


DATA = _lib.Spec("libmact_data", "libmact_data.so", "libmact_data.so.0", "mact_data", "MACT_DATA_LIBRARY",
                 DataLibrary)
COMPRESS = _lib.Spec("libmact_compress", "libmact_compress.so", "libmact_compress.so.0", "mact_compress",
                     "MACT_COMPRESS_LIBRARY", CompressLibrary)


def data_library(path=None):
    # the runtime first: the toolkit needs libmact.so.0, and the loader then takes the one already loaded (one
    # runtime in the process, whichever path it came from)
    _lib.load_library()
    return _lib._load(DATA, path)


def compress_library(path=None):
    _lib.load_library()
    return _lib._load(COMPRESS, path)


# ---- shared helpers ----

ERRLEN = 4096


def errbuf():
    return ctypes.create_string_buffer(ERRLEN)


def check(status, err):
    """Raises the package's exception for a failed call, with the library's message."""
    if status:
        raise error(status, err.value.decode(errors="replace"))


def enc(s):
    """A path or string for a const char * (None stays NULL)."""
    if s is None:
        return None
    import os
    return os.fsencode(s) if not isinstance(s, bytes) else s


def strs(items):
    """A list of paths / strings as a const char *const * array (kept alive by the caller) and its count."""
    items = [] if items is None else [items] if isinstance(items, (str, bytes)) else list(items)
    arr = (c_char_p * (len(items) + 1))(*[enc(x) for x in items], None)
    return ctypes.cast(arr, _STRS), len(items), arr


def ints(values, what, cap):
    values = [] if values is None else list(values)
    if len(values) > cap:
        from .errors import input_error
        raise input_error(f"{what}: at most {cap} values")
    arr = (c_int * (len(values) + 1))(*[int(v) for v in values], 0)
    return ctypes.cast(arr, POINTER(c_int)), len(values), arr


_libc = None


def _c():
    global _libc
    if _libc is None:
        # the process's own symbols, not a handle on libc.so.6: under a sanitizer's preloaded runtime, malloc /
        # free / open_memstream are its interceptors, and the buffer open_memstream made must be freed by the
        # same allocator (libc's own free on it aborted: "munmap_chunk(): invalid pointer")
        libc = ctypes.CDLL(None)
        libc.open_memstream.restype, libc.open_memstream.argtypes = c_void_p, [POINTER(c_void_p), POINTER(c_size_t)]
        libc.fclose.restype, libc.fclose.argtypes = c_int, [c_void_p]
        libc.fflush.restype, libc.fflush.argtypes = c_int, [c_void_p]
        libc.free.restype, libc.free.argtypes = None, [c_void_p]
        _libc = libc
    return _libc


def c_stderr():
    """The C library's stderr (a FILE *), for progress lines."""
    libc = _c()
    return c_void_p.in_dll(libc, "stderr").value


class Capture:
    """A C FILE * writing into memory (open_memstream); .text after the with block: what was printed."""

    def __init__(self, enabled=True):
        self.enabled, self.fp, self.text = enabled, None, ""

    def __enter__(self):
        if self.enabled:
            self._buf, self._size = c_void_p(), c_size_t()
            self.fp = _c().open_memstream(ctypes.byref(self._buf), ctypes.byref(self._size))
            if not self.fp:
                from .errors import NoMemoryError
                raise NoMemoryError("open_memstream failed")
        return self

    def __exit__(self, *exc):
        if self.fp:
            libc = _c()
            libc.fclose(self.fp)
            self.fp = None
            if self._buf.value:
                self.text = ctypes.string_at(self._buf.value, self._size.value).decode(errors="replace")
                libc.free(self._buf)
        return False
