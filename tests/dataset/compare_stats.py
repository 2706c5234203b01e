"""Compares a LeRobot meta/stats.json with the one `mact stats --lerobot-stats` wrote, per statistic: the
largest |difference| relative to (q99 - q01) and relative to the value. For local checks on a real dataset
(docs/datasets.md, "Checking against a real dataset"); real datasets are never committed.

usage: compare_stats.py REAL_STATS.json MACT_STATS.json [FEATURE ...]   (default: action observation.state)
"""
import json
import sys

import numpy as np


def main():
    real, mine = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    feats = sys.argv[3:] or ["action", "observation.state"]
    worst = 0.0
    for f in feats:
        r, m = real[f], mine[f]
        rng = np.maximum(np.array(r["q99"], float) - np.array(r["q01"], float), 1e-12)
        print(f)
        for k in ["min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"]:
            if k not in r or k not in m:
                print(f"  {k:5s} missing in {'the real file' if k not in r else 'mact'}")
                continue
            a, b = np.array(r[k], float), np.array(m[k], float)
            d = np.abs(a - b)
            rel_rng = float((d / rng).max()) if k != "count" else 0.0
            worst = max(worst, rel_rng)
            print(f"  {k:5s} max |diff| {d.max():.3e}   /(q99-q01) {rel_rng:.3e}   /|value| "
                  f"{(d / np.maximum(np.abs(a), 1e-30)).max():.3e}")
    print(f"worst |diff|/(q99-q01): {worst:.3e}")


main()
