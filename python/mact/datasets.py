"""LeRobot datasets from Python: the data toolkit (include/mact_data.h, libmact_data.so) over ctypes, numpy out.

    from mact import datasets
    with datasets.open("/data/so101_pick") as d:
        d.info["n_episodes"], d.features, d.episodes
        actions = d.read(0, "action")                       # float64 [frames, dim] of episode 0 (a position)
        rgb = d.frame(0, 12, "observation.images.top")       # uint8 [H, W, 3], as decoded, before any resize

Episodes are positions 0 .. n_episodes - 1 (the C API's); ``d.episodes[i]["index"]`` is the episode_index and
``d.position(episode_index)`` the way back. `mact dataset info`'s text is ``datasets.report(dir)``.
"""
import ctypes
import json
import threading

import numpy as np

from . import _toolkits as _t
from .errors import ClosedError, input_error


def load_library(path=None):
    """libmact_data, found as mact.load_library finds libmact: ``path``; $MACT_DATA_LIBRARY; the build tree
    (<repo>/build/libmact_data.so); the loader path (libmact_data.so.0)."""
    return _t.data_library(path)


class Dataset:
    """An open LeRobot dataset (mact_dataset_open); the data files are read on demand. Close it (or use ``with``)."""

    def __init__(self, path, library=None):
        self.library = load_library(library)
        self._lock = threading.Lock()
        h, err = ctypes.c_void_p(), _t.errbuf()
        _t.check(self.library.mact_dataset_open(_t.enc(path), ctypes.byref(h), err, _t.ERRLEN), err)
        self._h = h
        lib, d = self.library, h
        di = _t.DatasetInfo()
        lib.mact_dataset_get_info(d, ctypes.byref(di))
        s = lambda b: b.decode() if b is not None else None  # noqa: E731
        self.info = {"dir": s(di.dir), "version": s(di.version), "robot": s(di.robot), "fps": di.fps,
                     "n_episodes": di.n_episodes, "n_tasks": di.n_tasks, "n_features": di.n_features,
                     "n_cameras": di.n_cameras, "n_frames": di.n_frames, "info_total_frames": di.info_total_frames}
        self.features = []
        for i in range(di.n_features):
            f = _t.DatasetFeature()
            _t.check(lib.mact_dataset_feature_at(d, i, ctypes.byref(f)), ctypes.create_string_buffer(b"feature"))
            names = [s(lib.mact_dataset_feature_name(d, i, k)) for k in range(f.n_names)]
            self.features.append({"key": s(f.key), "dtype": s(f.dtype), "shape": list(f.shape[:f.ndim]),
                                  "names": names, "is_camera": bool(f.is_camera), "height": f.height,
                                  "width": f.width, "codec": s(f.codec) or ""})
        self.episodes = []
        for i in range(di.n_episodes):
            e = _t.DatasetEpisode()
            _t.check(lib.mact_dataset_episode_at(d, i, ctypes.byref(e)), ctypes.create_string_buffer(b"episode"))
            self.episodes.append({"index": e.index, "length": e.length, "task": s(e.task)})
        self.cameras = [f["key"] for f in self.features if f["is_camera"]]

    def _handle(self):
        if self._h is None:
            raise ClosedError("the dataset is closed")
        return self._h

    def close(self):
        with self._lock:
            if self._h is not None:
                self.library.mact_dataset_close(self._h)
                self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def __repr__(self):
        return f"<mact.datasets.Dataset {self.info['dir']} {self.info['version']}, {self.info['n_episodes']} episodes>"

    def position(self, episode_index):
        """The position of the episode whose episode_index this is (InputError when none)."""
        for i, e in enumerate(self.episodes):
            if e["index"] == episode_index:
                return i
        raise input_error(f"{self.info['dir']}: no episode {episode_index}")

    def read(self, episode, key):
        """Feature ``key`` of episode ``episode`` (a position) as float64 [frames, dim], in frame order."""
        rows, dim, err = ctypes.c_int64(), ctypes.c_int(), _t.errbuf()
        with self._lock:
            h = self._handle()
            st = self.library.mact_dataset_read(h, int(episode), _t.enc(key), None, 0, ctypes.byref(rows),
                                                ctypes.byref(dim), err, _t.ERRLEN)
            if st and not (rows.value or dim.value):
                _t.check(st, err)
            out = np.empty((rows.value, dim.value), np.float64)
            _t.check(self.library.mact_dataset_read(h, int(episode), _t.enc(key), out.ctypes.data, out.size,
                                                    ctypes.byref(rows), ctypes.byref(dim), err, _t.ERRLEN), err)
        return out

    def frame(self, episode, t, camera, tolerance_s=0.0, threads=1, with_info=False):
        """Frame ``t`` (frame_index) of episode ``episode`` (a position) of ``camera``, decoded, before any resize
        for a model: uint8 [H, W, 3]. Video: the frame within tolerance_s of the query time (0: LeRobot's 1e-4 s),
        decoded on ``threads`` threads. with_info: also a dict of where it came from (height, width, from_video,
        time_s, codec, source)."""
        fi, err = _t.DatasetFrameInfo(), _t.errbuf()
        args = (int(episode), int(t), _t.enc(camera), float(tolerance_s), int(threads))
        with self._lock:
            h = self._handle()
            _t.check(self.library.mact_dataset_frame(h, *args, None, 0, ctypes.byref(fi), err, _t.ERRLEN), err)
            rgb = np.empty((fi.height, fi.width, 3), np.uint8)
            _t.check(self.library.mact_dataset_frame(h, *args, rgb.ctypes.data, rgb.size, ctypes.byref(fi), err,
                                                     _t.ERRLEN), err)
        if not with_info:
            return rgb
        return rgb, {"height": fi.height, "width": fi.width, "from_video": bool(fi.from_video), "time_s": fi.time_s,
                     "codec": fi.codec.decode(errors="replace"), "source": fi.source.decode(errors="replace")}

    def check(self):
        """Every data file and camera video checked against the metadata: a list of problems (empty: none)."""
        with self._lock:
            h = self._handle()
            buf = ctypes.create_string_buffer(1 << 16)
            nc = ctypes.c_int(0)
            _t.check(self.library.mact_dataset_check(h, buf, len(buf), ctypes.byref(nc)),
                     ctypes.create_string_buffer(b"mact_dataset_check: bad arguments"))
            n = nc.value
        lines = [x for x in buf.value.decode(errors="replace").splitlines() if x.strip()]
        return lines if len(lines) >= n else lines + [f"... {n - len(lines)} more"]


def open(path, library=None):  # noqa: A001 (the module's verb, as in datasets.open)
    """The LeRobot dataset at path (a Dataset; close it or use ``with``)."""
    return Dataset(path, library)


def info(path, library=None):
    """The dataset at path as a dict: its info (version, fps, counts), and "features", "episodes", "cameras"."""
    with Dataset(path, library) as d:
        return dict(d.info, features=d.features, episodes=d.episodes, cameras=d.cameras)


def report(path, library=None):
    """`mact dataset info`'s summary of the dataset at path (versions, episodes, features, cameras, problems), as
    text, and the number of problems."""
    lib, n, err = load_library(library), ctypes.c_int(), _t.errbuf()
    lib.mact_data_quiet_logs()
    with _t.Capture() as out:
        st = lib.mact_dataset_report(_t.enc(path), out.fp, ctypes.byref(n), err, _t.ERRLEN)
    _t.check(st, err)
    return out.text, n.value


def dump_parquet(path, library=None):
    """Every row of a parquet file (`mact dataset dump`): a list of dicts."""
    lib, err = load_library(library), _t.errbuf()
    with _t.Capture() as out:
        st = lib.mact_parquet_dump_json(_t.enc(path), out.fp, err, _t.ERRLEN)
    _t.check(st, err)
    return json.loads(out.text)


__all__ = ["Dataset", "open", "info", "report", "dump_parquet", "load_library"]
