#!/usr/bin/env python3
"""The server's own overhead: reply latency measured by the client minus the inference time the server reports
(mact_predict, resize included), at the robot's duty cycle (one request per --period-ms), for 640x480 frames sent
raw and as JPEG over each protocol. Starts `mact serve` itself on free loopback ports.

    scripts/bench_serve.py --model DIR [--mact build/mact] [--n 50] [--period-ms 200] [--cams 2] [-- serve args]

Prints one row per case: p50/p99 of the latency, the inference and the overhead, and the first request after ready
against the steady median. Clients: tests/serve/wire.py (written independently of the server)."""
import argparse, asyncio, base64, json, os, socket, subprocess, sys, time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from wire import HOST, jn, jn_dec, jpeg_bytes, op_pack, op_unpack, vla_pack, vla_unpack  # noqa
import requests
import websockets

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--mact", default=os.environ.get("MACT_BIN", "build/mact"))
ap.add_argument("--n", type=int, default=50)
ap.add_argument("--period-ms", type=float, default=200.0)
ap.add_argument("--cams", type=int, default=2)
ap.add_argument("rest", nargs="*")
a = ap.parse_args()


def free_ports(k):
    ss = [socket.socket() for _ in range(k)]
    for s in ss:
        s.bind((HOST, 0))
    p = [s.getsockname()[1] for s in ss]
    for s in ss:
        s.close()
    return p


P_OP, P_ACT, P_VLA = free_ports(3)
t_start = time.time()
srv = subprocess.Popen([a.mact, "serve", "--model", a.model, "--openpi", str(P_OP), "--act", str(P_ACT), "--vla-eval", str(P_VLA),
                        "--quiet", *a.rest], stderr=subprocess.PIPE, text=True)
while True:
    try:
        if requests.get(f"http://{HOST}:{P_OP}/readyz", timeout=1).status_code == 200:
            break
    except requests.RequestException:
        pass
    if srv.poll() is not None:
        sys.exit("server exited: " + srv.stderr.read())
    time.sleep(0.05)
print(f"ready after {time.time() - t_start:.1f} s")
rng = np.random.default_rng(0)
frames = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(a.cams)]
jpegs = [jpeg_bytes(f, 90) for f in frames]
STATE = np.zeros(8, np.float32)
ident = requests.get(f"http://{HOST}:{P_ACT}/act").json()
STATE = np.zeros(ident["state_dim"], np.float32)
TASK = "put the bowl on the plate"
OPK = ["observation/image", "observation/wrist_image", "observation/image_2"][:a.cams]
ACK = ["external_cam", "wrist_cam", "cam_3"][:a.cams]


async def run_openpi(n):
    out = []
    async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None) as ws:
        await ws.recv()
        for i in range(n):
            obs = {k: f for k, f in zip(OPK, frames)}  # openpi carries ndarrays only
            obs.update({"observation/state": STATE, "prompt": TASK, "seed": i})
            msg = op_pack(obs)
            t = time.perf_counter()
            await ws.send(msg)
            r = op_unpack(await ws.recv())
            out.append(((time.perf_counter() - t) * 1e3, r["server_timing"]["infer_ms"], r["server_timing"]["server_ms"]))
            await asyncio.sleep(max(0, a.period_ms / 1e3 - (time.perf_counter() - t)))
    return out


def run_act(n, jpeg):
    out = []
    s = requests.Session()
    for i in range(n):
        body = {"instruction": TASK, "state": jn(STATE), "seed": i}
        if jpeg:
            body["images_jpeg"] = {k: base64.b64encode(j).decode() for k, j in zip(ACK, jpegs)}
        else:
            body.update({k: jn(f) for k, f in zip(ACK, frames)})
        data = json.dumps(body)
        t = time.perf_counter()
        r = s.post(f"http://{HOST}:{P_ACT}/act", data=data).json()
        out.append(((time.perf_counter() - t) * 1e3, r["infer_ms"], r["dt_ms"]))
        time.sleep(max(0, a.period_ms / 1e3 - (time.perf_counter() - t)))
    return out


async def run_vla(n, jpeg):
    out = []
    names = ["agentview", "wrist", "third"][:a.cams]
    async with websockets.connect(f"ws://{HOST}:{P_VLA}/", max_size=None, compression=None) as ws:
        await ws.send(vla_pack("hello", {}, 1))
        await ws.recv()
        seq = 1
        for i in range(n):
            seq += 1
            await ws.send(vla_pack("episode_start", {}, seq))  # every observation runs inference
            seq += 1
            obs = {"images": dict(zip(names, frames)), "task_description": TASK, "states": STATE.astype(np.float64), "seed": i}
            msg = vla_pack("observation", obs, seq, fmt="jpeg" if jpeg else "raw")
            t = time.perf_counter()
            await ws.send(msg)
            r = vla_unpack(await ws.recv())
            out.append(((time.perf_counter() - t) * 1e3, r["payload"]["infer_ms"], r["payload"]["server_ms"]))
            await asyncio.sleep(max(0, a.period_ms / 1e3 - (time.perf_counter() - t)))
    return out


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


cases = [("openpi", "raw", lambda n: asyncio.run(run_openpi(n))),
         ("act", "raw", lambda n: run_act(n, False)), ("act", "jpeg", lambda n: run_act(n, True)),
         ("vla-eval", "raw", lambda n: asyncio.run(run_vla(n, False))), ("vla-eval", "jpeg", lambda n: asyncio.run(run_vla(n, True)))]
print(f"{a.cams} x 640x480 frames, one request per {a.period_ms:.0f} ms, n={a.n} per case (ms)")
print("lat: client send -> reply; inf: mact_predict (resize included); ovh = lat - inf (client + transport + server);")
print("srv = the server's own part: from the whole message received to the reply encoded, minus inf")
print(f"{'protocol':9s} {'frames':6s} {'lat p50':>8s} {'lat p99':>8s} {'inf p50':>8s} {'ovh p50':>8s} {'ovh p99':>8s} {'srv p50':>8s} {'srv p99':>8s} {'first':>8s} {'first/steady':>12s}")
first_done = False
for proto, kind, fn in cases:
    res = fn(a.n + 1)
    first, steady = res[0], res[1:]
    lat = [x[0] for x in steady]
    ovh = [x[0] - x[1] for x in steady]
    inf = [x[1] for x in steady]
    so = [x[2] - x[1] for x in steady]
    tag = "" if first_done else " (first after ready)"
    first_done = True
    print(f"{proto:9s} {kind:6s} {pct(lat, .5):8.2f} {pct(lat, .99):8.2f} {pct(inf, .5):8.2f} {pct(ovh, .5):8.2f} {pct(ovh, .99):8.2f} {pct(so, .5):8.2f} {pct(so, .99):8.2f} "
          f"{first[0]:8.2f} {first[0] / pct(lat, .5):12.3f}{tag}")
srv.terminate()
srv.wait(60)
