"""ctypes mirror of include/mact.h and include/mact_stages.h, and the search for libmact.so.

Every struct here is laid out field for field as in the headers (tests/python/test_abi_layout.py compares
sizes and offsets against a C compiler's). Array arguments are passed as c_void_p (numpy's .ctypes.data) and
checked for shape and dtype on the Python side before the call, because the C functions trust the sizes they
are given. ctypes.CDLL releases the GIL for the length of every call.
"""
import ctypes
import ctypes.util
import os
import threading
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_uint, c_uint64, c_void_p)

from ._version import __version__

# The header version this binding mirrors (python/mact/_version.py, which make writes from include/mact.h and
# pyproject.toml reads); the library must have the same major.minor.
HEADER_VERSION = tuple(int(x) for x in __version__.split("."))

OK, ERR_IO, ERR_FORMAT, ERR_MODEL, ERR_INPUT, ERR_NOMEM, ERR_UNSUPPORTED = 0, -1, -2, -3, -4, -5, -6

POOL_MASKS = {0: "from_config", 1: "sdpa", 2: "eager", 3: "none"}
ENCODER_MASKS = {0: "from_config", 1: "all", 2: "drop_eos"}
PACK_CACHE = {0: "none", 1: "loaded", 2: "written", 3: "unusable"}


class LoadOptions(Structure):
    _fields_ = [("pooling_mask", c_int), ("encoder_mask", c_int), ("precision", c_int), ("no_pack", c_int),
                ("pack_cache_dir", c_char_p), ("kernels", c_int), ("int8_parts", c_uint)]


class ModelInfo(Structure):
    _fields_ = [(n, c_int) for n in (
        "image_height", "image_width", "patch_size", "n_patches", "patch_dim", "tokens_per_image", "d_model",
        "n_layers", "kv_dim", "ae_hidden", "max_action_dim", "max_action_horizon", "flow_steps", "vocab_total",
        "has_sampler", "pooling_mask", "encoder_mask", "precision", "pack_cache", "kernels")] + [("int8_parts", c_uint),
                                                                                                  ("vit_layers", c_int)]


class NormTagInfo(Structure):
    _fields_ = [("name", c_char_p), ("state_dim", c_int), ("action_dim", c_int), ("action_horizon", c_int),
                ("n_action_steps", c_int), ("n_cameras", c_int), ("camera_keys", c_char_p * 8),
                ("setup_type", c_char_p), ("control_mode", c_char_p), ("joint_frame", c_int), ("lerobot", c_int),
                ("state_names", c_char_p), ("action_names", c_char_p)]


class Image(Structure):
    _fields_ = [("height", c_int64), ("width", c_int64), ("data", c_void_p)]


class SessionOptions(Structure):
    _fields_ = [("max_images", c_size_t), ("max_tokens", c_size_t), ("n_threads", c_int), ("threadpool", c_void_p)]


class Frame(Structure):
    _fields_ = [("rgb", c_void_p), ("height", c_int), ("width", c_int)]


class PredictOptions(Structure):
    _fields_ = [("norm_tag", c_char_p), ("num_steps", c_int), ("n_action_steps", c_int), ("noise", c_void_p),
                ("noise_len", c_size_t), ("seed", c_uint64)]


class RtcOptions(Structure):
    _fields_ = [("prev_actions", c_void_p), ("n_prev", c_size_t), ("prev_dim", c_size_t), ("inference_delay", c_int),
                ("execution_horizon", c_int), ("schedule", c_int), ("max_guidance_weight", c_float),
                ("guidance", c_int)]


class PredictInput(Structure):
    _fields_ = [("frames", POINTER(Frame)), ("n_frames", c_size_t), ("task", c_char_p), ("state", c_void_p),
                ("state_dim", c_size_t), ("options", PredictOptions), ("rtc", RtcOptions)]


class Timings(Structure):
    _fields_ = [("preprocess_ms", c_double), ("vision_ms", c_double), ("llm_ms", c_double), ("action_ms", c_double),
                ("total_ms", c_double), ("n_tokens", c_int), ("horizon", c_int)]


class PredictOutput(Structure):
    _fields_ = [("actions", c_void_p), ("actions_cap", c_size_t), ("n_steps", c_size_t), ("action_dim", c_size_t),
                ("timings", Timings)]


class TensorView(Structure):
    _fields_ = [("data", POINTER(c_float)), ("ndim", c_int), ("shape", c_int64 * 4)]


STRUCTS = {"mact_load_options": LoadOptions, "mact_model_info": ModelInfo, "mact_norm_tag_info": NormTagInfo,
           "mact_image": Image, "mact_session_options": SessionOptions,
           "mact_frame": Frame, "mact_predict_options": PredictOptions, "mact_predict_input": PredictInput,
           "mact_rtc_options": RtcOptions,
           "mact_timings": Timings, "mact_predict_output": PredictOutput, "mact_tensor_view": TensorView}

_P = c_void_p          # an opaque handle or an array's data pointer
_PP = POINTER(c_void_p)

# name: (restype, argtypes)
PROTOTYPES = {
    "mact_version": (c_char_p, []),
    "mact_precision_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "mact_precision_str": (c_char_p, [c_int]),
    "mact_int8_parts_parse": (c_int, [c_char_p, POINTER(c_uint)]),
    "mact_int8_parts_str": (c_char_p, [c_uint, c_char_p, c_size_t]),
    "mact_kernels_str": (c_char_p, [c_int]),
    "mact_threadpool_new": (c_int, [c_int, _PP, c_char_p, c_size_t]),
    "mact_threadpool_free": (None, [_P]),
    "mact_threadpool_size": (c_int, [_P]),
    "mact_model_load": (c_int, [c_char_p, POINTER(LoadOptions), _PP, c_char_p, c_size_t]),
    "mact_model_free": (None, [_P]),
    "mact_model_get_info": (None, [_P, POINTER(ModelInfo)]),
    "mact_model_describe": (c_int, [_P, c_char_p, c_size_t]),
    "mact_model_tags_json": (c_int, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    "mact_model_num_norm_tags": (c_size_t, [_P]),
    "mact_model_norm_tag": (c_int, [_P, c_size_t, POINTER(NormTagInfo)]),
    "mact_model_tag": (c_void_p, [_P, c_char_p, c_char_p, c_size_t]),
    "mact_tag_get_info": (None, [_P, POINTER(NormTagInfo)]),
    "mact_tag_action_stats": (None, [_P, _P, _P, _P]),
    "mact_tag_normalize_actions": (None, [_P, _P, c_size_t, _P]),
    "mact_tag_fingerprint": (c_uint64, [_P]),
    "mact_norm_stats_open": (c_int, [c_char_p, _PP, c_char_p, c_size_t]),
    "mact_norm_stats_close": (None, [_P]),
    "mact_norm_stats_tag": (c_void_p, [_P, c_char_p, c_char_p, c_size_t]),
    "mact_image_load_memory": (c_int, [_P, c_size_t, POINTER(Image), c_char_p, c_size_t]),
    "mact_image_load_path": (c_int, [c_char_p, POINTER(Image), c_char_p, c_size_t]),
    "mact_image_free": (None, [POINTER(Image)]),
    "mact_session_new": (c_int, [_P, POINTER(SessionOptions), _PP, c_char_p, c_size_t]),
    "mact_session_free": (None, [_P]),
    "mact_session_threads": (c_int, [_P]),
    "mact_session_error": (c_char_p, [_P]),
    "mact_predict": (c_int, [_P, POINTER(PredictInput), POINTER(PredictOutput)]),
    "mact_session_tensor": (c_int, [_P, c_char_p, POINTER(TensorView)]),
    "mact_tokenize": (c_int, [_P, c_char_p, _P, c_size_t, POINTER(c_size_t), c_char_p, c_size_t]),
    # mact_stages.h
    "mact_vision": (c_int, [_P, _P, c_int, _P]),
    "mact_attention_bias": (c_int, [_P, _P, c_int, _P]),
    "mact_encoder_mask": (c_int, [_P, _P, c_int, _P]),
    "mact_embed": (c_int, [_P, _P, c_int, _P, c_int, _P]),
    "mact_llm_layers": (c_int, [_P, _P, _P, c_int, c_int, c_int, _P, _P]),
    "mact_action_context": (c_int, [_P, _P, _P, c_int, _P, _P]),
    "mact_action_step": (c_int, [_P, _P, c_int, c_float, c_int, _P, _P, _P, c_int, _P]),
    "mact_action_generate": (c_int, [_P, _P, c_int, c_int, c_int, _P, _P, _P, c_int]),
    "mact_generate_from_ids": (c_int, [_P, _P, c_int, _P, c_int, _P, c_int, c_int, c_int]),
    "mact_action_generate_rtc": (c_int, [_P, _P, c_int, c_int, c_int, _P, _P, _P, c_int, POINTER(RtcOptions)]),
    "mact_rtc_schedule_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "mact_rtc_guidance_parse": (c_int, [c_char_p, POINTER(c_int)]),
    "mact_rtc_schedule_str": (c_char_p, [c_int]),
    "mact_rtc_guidance_str": (c_char_p, [c_int]),
    "mact_rtc_prefix_weights": (c_int, [POINTER(RtcOptions), c_int, _P]),
}


class Library:
    """A loaded mact shared library with its prototypes set (``.path``, ``.version``; the C functions as
    attributes). libmact.so by default; the toolkits' (mact._toolkits) are the same with their own table."""

    PROTOTYPES = PROTOTYPES
    VERSION_FUNCTION = "mact_version"

    def __init__(self, path, handle):
        self.path = path
        self._dll = handle
        for name, (res, args) in self.PROTOTYPES.items():
            f = getattr(handle, name)
            f.restype, f.argtypes = res, args
            setattr(self, name, f)
        self.version = getattr(self, self.VERSION_FUNCTION)().decode()

    def __repr__(self):
        return f"<mact.{type(self).__name__} {self.path} {self.version}>"

    @property
    def kernel_names(self):
        """{MACT_KERNELS_* value: name} ("auto", "ref", "avx2", ...), from the library's own table (mact_kernels_str)."""
        if "_kernel_names" not in self.__dict__:
            names, k = {}, 0
            while (n := self.mact_kernels_str(k)) is not None:
                names[k] = n.decode()
                k += 1
            self._kernel_names = names
        return self._kernel_names


class Spec:
    """How one of mact's shared libraries is found: its file in the build tree, its soname on the loader path, the
    environment variable that names it, and the Library class that binds it."""

    def __init__(self, what, filename, soname, find_name, env, cls):
        self.what, self.filename, self.soname, self.find_name, self.env, self.cls = \
            what, filename, soname, find_name, env, cls


RUNTIME = Spec("libmact", "libmact.so", "libmact.so.0", "mact", "MACT_LIBRARY", Library)


def _package_build_tree(filename="libmact.so"):
    """build/<filename> of the repository this package sits in (python/mact/ -> ../../build), if any."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = os.path.join(repo, "build", filename)
    return p if os.path.isfile(p) else None


_cache = {}
_cache_lock = threading.Lock()


def _open(path, how, spec=RUNTIME):
    from .errors import Error
    try:
        handle = ctypes.CDLL(path)
    except OSError as e:
        raise Error(f"cannot load {spec.what} ({how}): {e}") from None
    missing = [n for n in spec.cls.PROTOTYPES if not hasattr(handle, n)]
    if missing:
        raise Error(f"{path} ({how}) is not {spec.what}: it lacks {', '.join(missing[:4])}")
    lib = spec.cls(path, handle)
    try:
        major, minor = (int(x) for x in lib.version.split(".")[:2])
    except ValueError:
        major = minor = -1
    if (major, minor) != HEADER_VERSION[:2]:
        raise Error(f"{path} ({how}) is {spec.what} {lib.version}; this binding mirrors the {HEADER_VERSION[0]}."
                    f"{HEADER_VERSION[1]} headers")
    return lib


def _load(spec, path=None):
    """spec's library, loaded once per path, found as load_library says."""
    if path is not None:
        key, how = os.fspath(path), "the path given"
    elif os.environ.get(spec.env):
        key, how = os.environ[spec.env], f"${spec.env}"
    elif _package_build_tree(spec.filename):
        key, how = _package_build_tree(spec.filename), "the build tree"
    else:
        key, how = None, "the system loader path"
    with _cache_lock:
        if (spec.what, key) in _cache:
            return _cache[(spec.what, key)]
        if key is not None:
            lib = _open(key, how, spec)
        else:
            from .errors import Error
            lib, errs = None, []
            for name in (spec.soname, ctypes.util.find_library(spec.find_name), spec.filename):
                if not name:
                    continue
                try:
                    lib = _open(name, how, spec)
                    break
                except Error as e:
                    errs.append(str(e))
            if lib is None:
                raise Error(f"{spec.what} not found: pass library=PATH, set {spec.env}, build it with `make` "
                            f"(build/{spec.filename}) or install it (`make install`); tried: " + "; ".join(errs))
        _cache[(spec.what, key)] = lib
        return lib


def load_library(path=None):
    """The libmact shared library, loaded once per path. Found, in this order, at: `path`; $MACT_LIBRARY; the
    build tree this package sits in (<repo>/build/libmact.so when imported from <repo>/python); the system's
    loader path (libmact.so.0: LD_LIBRARY_PATH, ld.so.cache, as `make install` puts it). An explicit path or
    $MACT_LIBRARY that does not load is an error, with no fallback. The toolkits' libraries are found the same
    way (mact.datasets.load_library, mact.prune.load_library)."""
    return _load(RUNTIME, path)
