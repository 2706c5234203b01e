"""Independent norm-stats reference (numpy) for tests/test_dataset.sh: reads the frames of LeRobot datasets
from `mact dataset dump` JSON files (the reader itself is cross-checked against hyparquet elsewhere),
computes the statistics with numpy the way LeRobot does (compute_stats.RunningQuantileStats per episode:
np.histogram over np.linspace(min-1e-10, max+1e-10, 5001), np.searchsorted on the cumulative counts, linear
inside the bin; then count-weighted means across episodes, pooled std) or exactly (np.quantile, linear),
and compares them with mact's norm_stats.json tag.

lerobot: the per-episode part as LeRobot runs under NumPy 2 on float32 features: numpy's own float32
reductions (np.mean over axis 0 of the [n, d] array, np.histogram on float32 values and edges) with the
float32 scalar arithmetic NEP 50 implies written out explicitly (Debian's NumPy 1.24 would promote
`np.float32(min) - 1e-10` and np.linspace of float32 scalars to float64). lerobot-f64: all in float64.

usage: stats_ref.py lerobot|lerobot-f64|exact NORM_STATS.json TAG DUMP.json [DUMP.json ...]
  AKEY / SKEY (environment): the action and state keys (default action, observation.state)
"""
import os
import json
import sys

import numpy as np

QS = [0.01, 0.10, 0.50, 0.90, 0.99]
QN = ["q01", "q10", "q50", "q90", "q99"]
AKEY = os.environ.get("AKEY", "action")
SKEY = os.environ.get("SKEY", "observation.state")


def single_quantile(hist, edges, target):
    cumsum = np.cumsum(hist)
    idx = np.searchsorted(cumsum, target)
    if idx == 0:
        return edges[0]
    if idx >= len(cumsum):
        return edges[-1]
    before = cumsum[idx - 1]
    in_bin = cumsum[idx] - before
    if in_bin == 0:
        return edges[idx]
    return edges[idx] + (target - before) / in_bin * (edges[idx + 1] - edges[idx])


F32 = np.float32


def linspace_f32(start, stop, num=5001):
    """np.linspace(start, stop, num) for float32 start/stop under NumPy 2: delta, step, i*step and + start
    each rounded to float32, the last edge = stop."""
    start, stop = F32(start), F32(stop)
    step = F32(F32(stop - start) / F32(num - 1))
    y = (np.arange(0, num, dtype=F32) * step).astype(F32)
    y = (y + start).astype(F32)
    y[-1] = stop
    return y


def single_quantile_f32(hist, edges, target):
    cumsum = np.cumsum(hist)
    idx = np.searchsorted(cumsum, target)
    if idx == 0:
        return float(edges[0])
    if idx >= len(cumsum):
        return float(edges[-1])
    before = cumsum[idx - 1]
    in_bin = cumsum[idx] - before
    if in_bin == 0:
        return float(edges[idx])
    return float(edges[idx]) + (target - before) / in_bin * float(F32(edges[idx + 1] - edges[idx]))


def episode_stats_f32(x):
    x = np.asarray(x, dtype=F32)
    n, d = x.shape
    m = np.mean(x, axis=0)
    m2 = np.mean(x * x, axis=0)
    sd = np.sqrt(np.maximum(F32(0), (m2 - m * m).astype(F32))).astype(F32) if n >= 2 else np.zeros(d, F32)
    out = {"min": x.min(0).astype(np.float64), "max": x.max(0).astype(np.float64), "mean": m.astype(np.float64),
           "var": (sd * sd).astype(F32).astype(np.float64), "count": n}
    if n < 2:
        for k in QN:
            out[k] = m.astype(np.float64)
        return out
    for q, k in zip(QS, QN):
        vals = []
        for j in range(d):
            col = x[:, j]
            edges = linspace_f32(F32(col.min() - F32(1e-10)), F32(col.max() + F32(1e-10)))
            hist, _ = np.histogram(col, bins=edges)
            vals.append(single_quantile_f32(hist.astype(np.float64), edges, q * n))
        out[k] = np.array(vals)
    return out


def episode_stats(x):
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "var": x.var(0), "count": n}
    if n < 2:
        for k in QN:
            out[k] = x.mean(0)
        return out
    for q, k in zip(QS, QN):
        vals = []
        for j in range(d):
            edges = np.linspace(x[:, j].min() - 1e-10, x[:, j].max() + 1e-10, 5001)
            hist, _ = np.histogram(x[:, j], bins=edges)
            vals.append(single_quantile(hist, edges, q * n))
        out[k] = np.array(vals)
    return out


def main():
    method, ns_path, tag = sys.argv[1:4]
    episodes = {}  # (file group, episode) -> {key: rows}
    for di, path in enumerate(sys.argv[4:]):
        rows = json.load(open(path))
        for r in rows:
            e = (di, r["episode_index"])  # episodes never span files in these trees
            episodes.setdefault(e, {AKEY: [], SKEY: []})
            for key in (AKEY, SKEY):
                v = r[key]
                episodes[e][key].append(v if isinstance(v, list) else [v])
    got = json.load(open(ns_path))["metadata_by_tag"][tag]
    worst = 0.0
    for key, sk in ((AKEY, "action_stats"), (SKEY, "state_stats")):
        eps = [np.array(v[key], dtype=np.float64) for v in episodes.values()]
        allx = np.concatenate(eps)
        N = allx.shape[0]
        ref = {"min": allx.min(0), "max": allx.max(0), "mean": allx.mean(0), "std": allx.std(0)}
        if method == "exact":
            for q, k in zip(QS, QN):
                ref[k] = np.quantile(allx, q, axis=0)
        else:
            st = [episode_stats_f32(x) if method == "lerobot" else episode_stats(x) for x in eps]
            for k in QN:
                ref[k] = sum(s[k] * s["count"] for s in st) / N
            # aggregate_stats: count-weighted mean, pooled variance of the per-episode moments
            ref["mean"] = sum(s["mean"] * s["count"] for s in st) / N
            ref["std"] = np.sqrt(sum((s["var"] + (s["mean"] - ref["mean"]) ** 2) * s["count"] for s in st) / N)
        assert got[sk]["count"] == [N], (sk, got[sk]["count"], N)
        for k, v in ref.items():
            g = np.array(got[sk][k], dtype=np.float64)
            scale = np.maximum(ref["max"] - ref["min"], 1e-12)
            err = float(np.max(np.abs(g - v) / scale))
            worst = max(worst, err)
            if err > 1e-9:
                print(f"MISMATCH {sk}.{k}: max |diff|/(max-min) = {err:.3g}\n  mact  {g}\n  numpy {v}")
                sys.exit(1)
    print(f"EQUAL {method} frames={N} episodes={len(episodes)} worst_rel={worst:.3g}")


main()
