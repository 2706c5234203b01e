"""Independent norm-stats reference (numpy) for tests/test_dataset.sh: reads the frames of LeRobot datasets
from `mact dataset dump` JSON files (the reader itself is cross-checked against hyparquet elsewhere),
computes the statistics with numpy the way LeRobot does (compute_stats.RunningQuantileStats per episode:
np.histogram over np.linspace(min-1e-10, max+1e-10, 5001), np.searchsorted on the cumulative counts, linear
inside the bin; then count-weighted means across episodes, pooled std) or exactly (np.quantile, linear),
and compares them with mact's norm_stats.json tag.

usage: stats_ref.py lerobot|exact NORM_STATS.json TAG DUMP.json [DUMP.json ...]
"""
import json
import sys

import numpy as np

QS = [0.01, 0.10, 0.50, 0.90, 0.99]
QN = ["q01", "q10", "q50", "q90", "q99"]


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
            episodes.setdefault(e, {"action": [], "observation.state": []})
            episodes[e]["action"].append(r["action"])
            episodes[e]["observation.state"].append(r["observation.state"])
    got = json.load(open(ns_path))["metadata_by_tag"][tag]
    worst = 0.0
    for key, sk in (("action", "action_stats"), ("observation.state", "state_stats")):
        eps = [np.array(v[key], dtype=np.float64) for v in episodes.values()]
        allx = np.concatenate(eps)
        N = allx.shape[0]
        ref = {"min": allx.min(0), "max": allx.max(0), "mean": allx.mean(0), "std": allx.std(0)}
        if method == "exact":
            for q, k in zip(QS, QN):
                ref[k] = np.quantile(allx, q, axis=0)
        else:
            st = [episode_stats(x) for x in eps]
            for k in QN:
                ref[k] = sum(s[k] * s["count"] for s in st) / N
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
