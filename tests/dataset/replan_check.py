"""Independent check of `mact eval --replan K --delay D` (tests/test_dataset_eval.sh).

From the chunks eval dumps into episodes.jsonl (every replan point's chunk per chain, dataset units), the
dataset's ground truth (`mact dataset dump` of its data files) and the checkpoint's norm_stats.json, this
rebuilds in numpy, without eval's code:
  - the executed trajectory: segment c covers frames cK .. cK+K-1; its first D rows are the old chunk's
    rows K .. K+D-1 (executed while the new chunk was inferred), the rest chunk c's rows D .. K-1; chunk 0
    executes its own first K rows;
  - per join c >= 1 the jump mean_j |n(chunk_c[D]) - n(chunk_{c-1}[K+D-1])|, n the model's normalisation
    (q01/q99 of the tag, masked dims raw, min == max dims 0, clipped to [-1, 1], float32);
  - the old chunk's own step there, mean_j |n(chunk_{c-1}[K+D]) - n(chunk_{c-1}[K+D-1])| (when K+D < H);
  - the jump mean and p95 (numpy's default percentile) over all joins, the executed MAE against action[t]
    (raw, and in eval's unclipped normalised units);
and compares them with result.json, relative tolerance 1e-6.

--ones E: the run used --rtc-schedule ones --steps 2 --execution-horizon E. With two flow steps every row of
weight 1 comes back equal to the guide (the last Euler step lands on it), so each RTC chunk's rows
0 .. e-1 (e = min(E, H - K)) equal the old RTC chunk's rows K .. K+e-1 in normalised units (<= 1e-5), while the
plain chain's chunks do not (their largest difference must exceed 1e-2, or the property says nothing).

usage: replan_check.py RESULT.json EPISODES.jsonl NORM_STATS.json TAG [--ones E] DUMP.json ...
"""
import json
import sys

import numpy as np

args = sys.argv[1:]
res_p, eps_p, ns_p, tag = args[:4]
rest = args[4:]
ones = None
if rest and rest[0] == "--ones":
    ones = int(rest[1])
    rest = rest[2:]
res = json.load(open(res_p))["replan"]
ns = json.load(open(ns_p))
assert ns.get("norm_mode", "q01_q99") == "q01_q99", ns.get("norm_mode")
st = ns["metadata_by_tag"][tag]["action_stats"]
lo, hi = np.array(st["q01"]), np.array(st["q99"])
mn, mx = np.array(st["min"]), np.array(st["max"])
mask = np.array(st.get("mask", [True] * len(lo)), dtype=bool)
zero = mn == mx


def norm(x):  # the model's normalisation of action rows (float32 out)
    y = np.clip(2.0 * (x.astype(np.float64) - lo) / np.maximum(hi - lo, 1e-6) - 1.0, -1, 1)
    y = np.where(mask, y, x)
    y = np.where(zero, 0.0, y)
    return y.astype(np.float32).astype(np.float64)


def norm_eval(x):  # eval's normalised units for MAE: not clipped
    sc = np.maximum(hi - lo, 1e-6)
    return np.where(mask, 2 * (x - lo) / sc - 1, x)


rows = [r for p in rest for r in json.load(open(p))]
gt = {}
for r in rows:
    gt.setdefault(r["episode_index"], []).append((r.get("frame_index", len(gt.get(r["episode_index"], []))), r["action"]))
gt = {e: np.array([a for _, a in sorted(v, key=lambda z: z[0])], dtype=np.float64) for e, v in gt.items()}

K, Dl = res["replan"], res["delay"]
jumps = {"plain": [], "rtc": []}
steps = {"plain": [], "rtc": []}
err_raw = {"plain": [], "rtc": []}
err_norm = {"plain": [], "rtc": []}
worst_ones, plain_min_diff = 0.0, np.inf
n_eps = 0
for line in open(eps_p):
    e = json.loads(line)
    H, A = e["horizon"], e["action_dim"]
    rp = e["replan"]
    C = rp["replan_points"]
    a = gt[e["episode_index"]]
    assert C == (len(a) - H) // K + 1, (C, len(a), H, K)
    n_eps += 1
    for ch in ("plain", "rtc"):
        if ch not in rp:
            continue
        ck = np.array(rp[ch]["chunks"], dtype=np.float32).astype(np.float64).reshape(C, H, A)
        ex = []
        for c in range(C):
            for i in range(K):
                ex.append(ck[c - 1, K + i] if c > 0 and i < Dl else ck[c, i])
        ex = np.array(ex)
        g = a[: C * K]
        err_raw[ch].append(np.abs(ex - g).ravel())
        err_norm[ch].append(np.abs(norm_eval(ex) - norm_eval(g)).ravel())
        for c in range(1, C):
            j = np.abs(norm(ck[c, Dl]) - norm(ck[c - 1, K + Dl - 1])).mean()
            jumps[ch].append(j)
            if K + Dl < H:  # the old chunk's own step at the join
                steps[ch].append(np.abs(norm(ck[c - 1, K + Dl]) - norm(ck[c - 1, K + Dl - 1])).mean())
            # the executed trajectory at the join: the rows either side are those two
            assert np.array_equal(ex[c * K + Dl - 1], ck[c - 1, K + Dl - 1]) and np.array_equal(ex[c * K + Dl], ck[c, Dl])
        if ones is not None:
            eh = min(ones, H - K)
            for c in range(1, C):
                d = np.abs(norm(ck[c, :eh]) - norm(ck[c - 1, K:K + eh])).max()
                if ch == "rtc":
                    worst_ones = max(worst_ones, d)
                else:
                    plain_min_diff = min(plain_min_diff, d)
assert n_eps > 0
out = []
bad = []
for ch in ("plain", "rtc"):
    if ch not in res:
        continue
    j = np.array(jumps[ch])
    want = {"jump_mean": j.mean(), "jump_p95": np.percentile(j, 95), "mae": np.concatenate(err_raw[ch]).mean(),
            "normalized_mae": np.concatenate(err_norm[ch]).mean()}
    if steps[ch]:
        want["old_step_mean"] = np.mean(steps[ch])
    for k, v in want.items():
        have = res[ch][k]
        rel = abs(have - v) / max(abs(v), 1e-30)
        if rel > 1e-6:
            bad.append(f"{ch} {k}: eval {have!r} numpy {v!r} (relative {rel:.2g} > 1e-6)")
    out.append(f"{ch}: jump mean {want['jump_mean']:.6g} p95 {want['jump_p95']:.6g} MAE {want['mae']:.6g} "
               f"old step {want.get('old_step_mean', float('nan')):.6g} "
               f"(numpy == eval to 1e-6 relative)")
    assert res["joins"] == len(j), (res["joins"], len(j))
if ones is not None:
    out.append(f"ones: RTC rows of weight 1 vs old chunk max {worst_ones:.2g} (<= 1e-5), plain chain min {plain_min_diff:.3g} (> 1e-2)")
    if not (worst_ones <= 1e-5 and plain_min_diff > 1e-2):
        bad.append(out[-1])
print("; ".join(out) + f"; {res['joins']} joins over {n_eps} episodes")
if bad:
    print("\n".join(bad))
    sys.exit(1)
