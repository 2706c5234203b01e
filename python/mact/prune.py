"""The compression toolkit from Python (include/mact_compress.h, libmact_compress.so; docs/compression.md): the
per-block ViT SNR analysis and the keep-set it proposes (`mact prune-analyze`), the surgery (`mact prune`), the
student-vs-teacher check of the connector output (`mact distill-eval`).

    from mact import prune
    a = prune.analyze("/models/so101", dataset="/data/so101_pick", frames=64, target_depth=16)
    a.snr_db, a.keep, a.student_taps
    prune.prune("/models/so101", a.keep, "/models/so101_d16", taps=a.student_taps)
    prune.distill_eval("/models/so101", "/models/so101_d16", dataset="/data/so101_pick")["cos_token"]

Calibration frames are image files (PNG, JPEG, HxWx3 .npy) or frames spread over a LeRobot dataset. The analyses run
a model: a checkpoint (loaded here at ``precision``, fp32 by default: the exact mode) or a mact.Policy (at its own
precision), on a session of their own.
"""
import ctypes
import json
import os
import tempfile

import numpy as np

from . import _toolkits as _t
from .errors import input_error


def load_library(path=None):
    """libmact_compress, found as mact.load_library finds libmact: ``path``; $MACT_COMPRESS_LIBRARY; the build
    tree (<repo>/build/libmact_compress.so); the loader path (libmact_compress.so.0)."""
    return _t.compress_library(path)


def _frames(images, dataset, frames):
    if (not images) == (dataset is None):
        raise input_error("calibration frames: give images (files) or a dataset, one of the two")
    if frames and dataset is None:
        raise input_error("frames: only with a dataset")
    if frames and not 1 <= int(frames) <= 1000000:
        raise input_error(f"frames {frames}: an integer in 1..1000000")
    return _t.strs(images)


class SnrResult:
    """The SNR analysis: ``snr_db`` (float64 [blocks], +inf where a block changes nothing), ``tapped`` / ``kept``
    (bool [blocks]: an adapter tap reads it, the proposed keep-set keeps it), ``keep`` and ``student_taps`` (the
    proposal; empty without a target depth), ``blocks``, ``images``, ``result`` (the CLI's --json, parsed: snr_db
    with null for +inf, in_energy, delta_energy, taps, ...), ``report`` (the table the CLI prints)."""

    def __repr__(self):
        return f"<mact.prune.SnrResult {self.blocks} blocks, {self.images} images, keep {self.keep}>"


class _Session:
    """A session on model (a folder, loaded here at precision; or a mact.Policy), closed with what it opened."""

    def __init__(self, model, precision, threads):
        from .policy import Policy
        self._policy = model if isinstance(model, Policy) else Policy.from_pretrained(
            model, precision=precision, threads=int(threads) or None, max_images=1)
        self._owned = self._policy is not model
        self._session = self._policy.session(max_images=1, threads=int(threads) or None)
        self.ptr = self._session._holder[0]
        self.dir = self._policy.model_dir

    def close(self):
        self._session.close()
        if self._owned:
            self._policy.close()


def analyze(model, images=None, *, dataset=None, frames=0, target_depth=0, threads=0, precision="fp32", json_path=None,
            library=None):
    """Runs the teacher's ViT (model: its folder, or a mact.Policy) over the calibration frames and measures each
    block's SNR = 10 log10(E||in||^2 / E||out - in||^2); target_depth D > 0: also the keep-set of D blocks it proposes
    and the student's taps. json_path: also the CLI's --json file. Returns an SnrResult."""
    lib, err = load_library(library), _t.errbuf()
    imgs, n_img, keep_imgs = _frames(images, dataset, frames)
    if target_depth and not 1 <= int(target_depth) <= _t.PRUNE_MAX_BLOCKS:
        raise input_error(f"target_depth {target_depth}: a positive integer")
    sess = _Session(model, precision, threads)
    try:
        o = _t.SnrOptions(session=sess.ptr, model=_t.enc(sess.dir), images=imgs, n_images=n_img, dataset=_t.enc(dataset),
                          n_frames=int(frames), target_depth=int(target_depth or 0))
        r = ctypes.c_void_p()
        with _t.Capture() as report:
            st = lib.mact_snr_analyze(ctypes.byref(o), report.fp, ctypes.byref(r), err, _t.ERRLEN)
    finally:
        sess.close()
    del keep_imgs
    _t.check(st, err)
    try:
        a = SnrResult()
        a.report, a.blocks, a.images = report.text, lib.mact_snr_blocks(r), lib.mact_snr_images(r)
        snr, tapped, kept = (np.zeros(a.blocks, np.float64), np.zeros(a.blocks, np.intc), np.zeros(a.blocks, np.intc))
        lib.mact_snr_values(r, snr.ctypes.data, tapped.ctypes.data, kept.ctypes.data)
        a.snr_db, a.tapped, a.kept = snr, tapped.astype(bool), kept.astype(bool)
        keep, taps, nt = np.zeros(max(a.blocks, 1), np.intc), np.zeros(_t.PRUNE_MAX_TAPS, np.intc), ctypes.c_int()
        nk = lib.mact_snr_keep(r, keep.ctypes.data, taps.ctypes.data, ctypes.byref(nt))
        a.keep = keep[:nk].tolist()
        a.student_taps = taps[:nt.value].tolist() if nk else []
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "snr.json")
            _t.check(lib.mact_snr_write_json(r, _t.enc(p), err, _t.ERRLEN), err)
            with open(p, "rb") as f:
                text = f.read()
        a.result = json.loads(text)
        if json_path is not None:
            _t.check(lib.mact_snr_write_json(r, _t.enc(json_path), err, _t.ERRLEN), err)
        return a
    finally:
        lib.mact_snr_free(r)


def prune(model, keep, out, taps=None, *, library=None):
    """Writes the pruned checkpoint to ``out`` (which must not exist; a refusal leaves nothing): student block j =
    teacher block keep[j]; taps: the student's vit_layers (negative: from len(keep); None: each teacher tap moves
    to the student block holding its layer). Returns the log (one line per file written, the tap mapping)."""
    lib, err = load_library(library), _t.errbuf()
    k, nk, keep_k = _t.ints(keep, "keep", _t.PRUNE_MAX_BLOCKS)
    if taps is not None:
        t, nt, keep_t = _t.ints(taps, "taps", _t.PRUNE_MAX_TAPS)
    else:
        t, nt, keep_t = None, 0, None
    with _t.Capture() as log:
        st = lib.mact_prune(_t.enc(model), k, nk, t, nt, _t.enc(out), log.fp, err, _t.ERRLEN)
    del keep_k, keep_t
    _t.check(st, err)
    return log.text


def distill_eval(teacher, student, images=None, *, dataset=None, frames=0, json_path=None, threads=0,
                 precision="fp32", library=None):
    """The cosine and relative MSE of the student's connector output against the teacher's (each a folder or a
    mact.Policy), over the frames: {"cos_token", "cos_flat", "rel_mse", "max_abs", "n_images", "identical", "report"}
    (report: the per-image table the CLI prints). json_path: also the CLI's --json file."""
    lib, err = load_library(library), _t.errbuf()
    imgs, n_img, keep_imgs = _frames(images, dataset, frames)
    if frames and int(frames) > 4096:
        raise input_error(f"frames {frames}: an integer in 1..4096")
    st_t = _Session(teacher, precision, threads)
    try:
        st_s = _Session(student, precision, threads)
    except BaseException:
        st_t.close()
        raise
    try:
        o = _t.DistillOptions(teacher=st_t.ptr, student=st_s.ptr, teacher_name=_t.enc(st_t.dir),
                              student_name=_t.enc(st_s.dir), images=imgs, n_images=n_img, dataset=_t.enc(dataset),
                              n_frames=int(frames), json=_t.enc(json_path))
        res = _t.DistillResult()
        with _t.Capture() as report:
            st = lib.mact_distill_eval(ctypes.byref(o), report.fp, ctypes.byref(res), err, _t.ERRLEN)
    finally:
        st_s.close()
        st_t.close()
    del keep_imgs
    _t.check(st, err)
    return {"cos_token": res.cos_token, "cos_flat": res.cos_flat, "rel_mse": res.rel_mse, "max_abs": res.max_abs,
            "n_images": res.n_images, "identical": bool(res.identical), "report": report.text}


__all__ = ["analyze", "prune", "distill_eval", "SnrResult", "load_library"]
