"""A soak of mact serve: mixed traffic on every protocol for SECONDS (good requests, faults, reconnects, busy
answers), with the server's resident memory, open descriptors and threads sampled from /proc.

usage: soak.py PID MODEL TMP OPENPI_PORT ACT_PORT VLA_PORT SECONDS LOG

Checked: every good request answered and bitwise equal to the first answer of the same input (seeded); every
fault answered with the protocol's error; RSS, fds and threads flat after warm-up (the first 20% of the run, at
most 120 s; after it RSS within 5% of its median, threads exactly, fds within a dozen); nothing in the log but
request lines. Printed (INFO lines): requests per protocol answered and equal, busy answers and faults by kind;
peak RSS (the kernel's VmHWM) and RSS, open fds and threads at the warm-up's end against the run's end (the
medians of a window of 10% of the rest of the run, at most 60 s, each side); latency p50 / p99 per protocol in
the first and second half and in the first and last 10%; the log's request lines by protocol and outcome; a
progress line every max(60 s, SECONDS / 12)."""
import asyncio
import os
import random
random.seed(11)
import re
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

PID = int(sys.argv[1])
MODEL, TMP = sys.argv[2], sys.argv[3]
P_OP, P_ACT, P_VLA = (int(x) for x in sys.argv[4:7])
SECONDS = float(sys.argv[7])
LOG = sys.argv[8]
R = Report()
rng = np.random.default_rng(3)
INPUTS = []
for k in range(3):
    INPUTS.append((rng_frame(rng, 96, 128), rng_frame(rng, 64, 64), rng.uniform(-1, 1, 8).astype(np.float32),
                   f"task number {k}"))
ref = {}          # (protocol, input) -> first actions
lat = {"openpi": [], "act": [], "vla-eval": []}
busy = {"openpi": 0, "act": 0, "vla-eval": 0}
fault_kinds = {}
bad = []
counts = {"good": 0, "fault": 0, "busy": 0}
samples = []
stop = [False]


def sample():
    while not stop[0]:
        try:
            with open(f"/proc/{PID}/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            fds = len(os.listdir(f"/proc/{PID}/fd"))
            with open(f"/proc/{PID}/status") as f:
                thr = int(re.search(r"Threads:\s+(\d+)", f.read()).group(1))
            samples.append((time.time(), rss, fds, thr))
        except Exception:
            pass
        time.sleep(0.5)


def record(proto, k, acts, t):
    lat[proto].append((time.time(), t))
    key = (proto, k)
    if key not in ref:
        ref[key] = acts
    elif not bitwise_equal(acts, ref[key]):
        bad.append(f"{proto} input {k}: actions differ from the first answer")
    counts["good"] += 1


async def openpi_good(k):
    top, wr, st, task = INPUTS[k]
    t = time.perf_counter()
    _, r = await openpi_infer(P_OP, {"observation/image": top, "observation/wrist_image": wr, "observation/state": st,
                                     "prompt": task, "seed": 5})
    record("openpi", k, r["actions"], time.perf_counter() - t)


def act_good(k):
    top, wr, st, task = INPUTS[k]
    t = time.perf_counter()
    r = act_post(P_ACT, {"external_cam": jn(top), "wrist_cam": jn(wr), "state": jn(st), "instruction": task, "seed": 5})
    if r.status_code == 503:
        counts["busy"] += 1
        busy["act"] += 1
        return
    if r.status_code != 200:
        bad.append(f"act: {r.status_code} {r.text[:100]}")
        return
    record("act", k, jn_dec(r.json()["actions"]), time.perf_counter() - t)


async def vla_good(k):
    top, wr, st, task = INPUTS[k]
    t = time.perf_counter()
    obs = {"images": {"agentview": top, "wrist": wr}, "states": st, "task_description": task, "seed": 5}
    out = await vla_session(P_VLA, [("episode_start", {}), ("observation", obs), ("episode_end", {})], fmt="raw")
    a = out[1].get("payload", {}).get("actions")
    if a is None:
        bad.append(f"vla-eval: {str(out[1])[:120]}")
        return
    record("vla-eval", k, a, time.perf_counter() - t)


async def faults():
    kind = random.choice(["op_garbage", "act_garbage", "vla_garbage", "op_disconnect", "act_deep"])
    counts["fault"] += 1
    fault_kinds[kind] = fault_kinds.get(kind, 0) + 1
    if kind == "op_garbage":
        async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None) as ws:
            await ws.recv()
            await ws.send(b"\xc1\xc1\xc1")
            r = await ws.recv()
            if not (isinstance(r, str) and r.startswith("mact: ")):
                bad.append("openpi garbage: no error frame")
    elif kind == "act_garbage":
        r = act_post(P_ACT, b"{not json")
        if r.status_code != 400:
            bad.append(f"act garbage: {r.status_code}")
    elif kind == "vla_garbage":
        async with websockets.connect(f"ws://{HOST}:{P_VLA}/", max_size=None, compression=None) as ws:
            await ws.send(b"\x93\x01")
            r = vla_unpack(await ws.recv())
            if r.get("type") != "error":
                bad.append(f"vla garbage: {r}")
    elif kind == "op_disconnect":
        top, wr, st, task = INPUTS[0]
        ws = await websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None)
        await ws.recv()
        await ws.send(op_pack({"observation/image": top, "observation/wrist_image": wr, "observation/state": st,
                               "prompt": task}))
        ws.transport.abort()   # gone before the reply
    else:   # JSON nested past the depth limit
        r = act_post(P_ACT, b"[" * 100 + b"]" * 100)
        if r.status_code != 400:
            bad.append(f"act deep: {r.status_code}")


async def burst():
    """8 concurrent openpi requests on their own connections: some may be answered busy at a small queue"""
    top, wr, st, task = INPUTS[1]

    async def one():
        try:
            await openpi_good(1)
        except RuntimeError as e:
            if "busy" in str(e):
                counts["busy"] += 1
                busy["openpi"] += 1
            else:
                bad.append(f"burst: {e}")
    await asyncio.gather(*[one() for _ in range(8)])


async def main():
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.time()
    t_end = t0 + SECONDS
    every = max(60.0, SECONDS / 12)
    t_next = t0 + every
    loop = asyncio.get_running_loop()
    i = 0
    while time.time() < t_end:
        if time.time() >= t_next:   # progress, for a long run: the last sample and the counts so far
            t_next += every
            if samples:
                _, rss, fds, thr = samples[-1]
                print(f"INFO soak_progress t={time.time() - t0:.0f} s: {counts['good']} good, {counts['fault']} faults, "
                      f"{counts['busy']} busy, {len(bad)} wrong; RSS {rss / 2**20:.1f} MiB, fds {fds}, threads {thr}",
                      flush=True)
        k = i % 3
        r = i % 10
        try:
            if r in (0, 3, 6):
                await openpi_good(k)
            elif r in (1, 4, 7):
                await loop.run_in_executor(None, act_good, k)
            elif r in (2, 5):
                await vla_good(k)
            elif r == 8:
                await faults()
            else:
                await burst()
        except Exception as e:
            bad.append(f"step {i}: {type(e).__name__}: {str(e)[:120]}")
        i += 1
    stop[0] = True
    th.join(timeout=3)


asyncio.run(main())
try:   # the kernel's peak resident set of the server, warm-up and load included
    with open(f"/proc/{PID}/status") as f:
        hwm = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) * 1024
except Exception:
    hwm = 0
R.check("soak_every_good_request_answered_and_equal", not bad, bad[:5])
R.check("soak_traffic", counts["good"] > 30 and counts["fault"] > 3, counts)
print(f"INFO soak: {SECONDS:.0f} s, {counts['good']} good requests, {counts['fault']} faults, {counts['busy']} busy answers")
print("INFO soak_requests: " + "; ".join(f"{p} {len(v)} answered and equal to the first answer of their input, "
                                         f"{busy[p]} busy" for p, v in lat.items()))
print("INFO soak_faults: " + ", ".join(f"{k} {v}" for k, v in sorted(fault_kinds.items())) + " (each answered with the protocol's error)")
t0 = samples[0][0] if samples else 0
WARM = min(0.2 * SECONDS, 120.0)
warm = [s for s in samples if s[0] - t0 >= WARM]
if len(warm) >= 10:
    rss = np.array([s[1] for s in warm], dtype=float)
    fds = [s[2] for s in warm]
    thr = [s[3] for s in warm]
    med = float(np.median(rss))
    if os.environ.get("MACT_SOAK_SANITIZED"):
        print("INFO soak_rss_flat: not checked under AddressSanitizer (its quarantine keeps freed memory resident; "
              "LeakSanitizer checks the exit instead)")
    else:
        R.check("soak_rss_flat", rss.max() <= 1.05 * med and rss.min() >= 0.95 * med,
                f"RSS {rss.min() / 2**20:.1f}..{rss.max() / 2**20:.1f} MiB, median {med / 2**20:.1f}")
    # descriptors and threads between requests: the idle value must come back (a connection open at the sample
    # instant adds one or two)
    R.check("soak_fds_flat", max(fds) - min(fds) <= 12 and fds[-1] <= min(fds) + 4, f"fds {min(fds)}..{max(fds)}, last {fds[-1]}")
    R.check("soak_threads_flat", max(thr) == min(thr), f"threads {min(thr)}..{max(thr)}")
    print(f"INFO soak_process: RSS {rss.min() / 2**20:.1f}..{rss.max() / 2**20:.1f} MiB (median {med / 2**20:.1f}), "
          f"fds {min(fds)}..{max(fds)}, threads {min(thr)}..{max(thr)}, {len(warm)} samples after a {WARM:.0f} s warm-up; "
          f"peak RSS (VmHWM) {hwm / 2**20:.1f} MiB")
    span = warm[-1][0] - warm[0][0]
    win = min(60.0, 0.1 * span)
    early = [s for s in warm if s[0] - warm[0][0] <= win]
    late = [s for s in warm if warm[-1][0] - s[0] <= win]

    def cmp(i, name, scale=1.0, unit=""):
        a = float(np.median([s[i] for s in early])) / scale
        b = float(np.median([s[i] for s in late])) / scale
        return f"{name} {a:.1f}{unit} -> {b:.1f}{unit} ({(b - a) / a * 100 if a else 0:+.1f}%)"
    print(f"INFO soak_warm_vs_end: medians of the first {win:.0f} s after warm-up and the last {win:.0f} s: "
          f"{cmp(1, 'RSS', 2**20, ' MiB')}, {cmp(2, 'fds')}, {cmp(3, 'threads')}")
else:
    R.check("soak_samples", False, f"{len(samples)} samples")


def pct(v):
    a = np.array([x[1] for x in v]) * 1000
    return f"p50 {np.percentile(a, 50):.1f} ms p99 {np.percentile(a, 99):.1f} ms ({len(a)})"


for p, v in lat.items():
    if len(v) >= 20:
        v = sorted(v)
        h, d = len(v) // 2, max(1, len(v) // 10)
        print(f"INFO soak_latency {p}: first half {pct(v[:h])}; second half {pct(v[h:])}; "
              f"first 10% {pct(v[:d])}; last 10% {pct(v[-d:])}")
with open(LOG, errors="replace") as f:
    lines = f.read().splitlines()
req_re = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z (openpi|act|vla-eval|lerobot) peer=\S+ id=\S* outcome=(\w+)")
by = {}
other = []
n_srv = 0
for l in lines:
    m = req_re.match(l)
    if m:
        by[m.groups()] = by.get(m.groups(), 0) + 1
    elif l.startswith("mact serve: "):
        n_srv += 1
    else:
        other.append(l)
print(f"INFO soak_log: {len(lines)} lines: " + ", ".join(f"{p} {o} {n}" for (p, o), n in sorted(by.items())) +
      f"; {n_srv} 'mact serve:' lines; {len(other)} others")
R.check("soak_log_only_request_lines", not other, other[:3])
sys.exit(1 if R.failed else 0)
