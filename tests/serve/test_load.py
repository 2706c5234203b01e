"""Load: N concurrent clients x M requests spread over the three protocols; every reply must be bitwise equal
to the same protocol's reference reply (the same frames, task, state and seed). Prints p50/p99.
usage: test_load.py OPENPI_PORT ACT_PORT VLA_PORT [CLIENTS] [REQUESTS]"""
import asyncio, os, sys, time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

P_OP, P_ACT, P_VLA = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
NC = int(sys.argv[4]) if len(sys.argv) > 4 else 16
NR = int(sys.argv[5]) if len(sys.argv) > 5 else 25
R = Report()
rng = np.random.default_rng(3)
TASK = "open the top drawer"
F1, F2 = rng_frame(rng, 240, 320), rng_frame(rng, 224, 224)
STATE = rng.uniform(-1, 1, 8).astype(np.float32)
OP = {"observation/image": F1, "observation/wrist_image": F2, "observation/state": STATE, "prompt": TASK, "seed": 1}
ACT = {"external_cam": jn(F1), "wrist_cam": jn(F2), "instruction": TASK, "state": jn(STATE), "seed": 1}
VLA = {"images": {"agentview": F1, "wrist": F2}, "task_description": TASK, "states": STATE.astype(np.float64), "seed": 1}

_, ref_op = asyncio.run(openpi_infer(P_OP, OP))
ref_op = ref_op["actions"]
ref_act = jn_dec(act_post(P_ACT, ACT).json()["actions"])
ref_vla = asyncio.run(vla_session(P_VLA, [("observation", VLA)]))[1]["payload"]["actions"]
R.check("load_references_agree", bitwise_equal(ref_op, ref_act) and bitwise_equal(ref_op[0], ref_vla), "the protocols disagree")

lat = {"openpi": [], "act": [], "vla-eval": []}
bad = []


async def op_client(i):
    async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None, open_timeout=60) as ws:
        await ws.recv()
        for k in range(NR):
            t = time.perf_counter()
            await ws.send(op_pack(dict(OP, request_id=f"c{i}-{k}")))
            r = await ws.recv()
            lat["openpi"].append(time.perf_counter() - t)
            r = op_unpack(r) if isinstance(r, bytes) else {"err": r}
            if not ("actions" in r and bitwise_equal(r["actions"], ref_op) and r.get("request_id") == f"c{i}-{k}"):
                bad.append(("openpi", i, k, str(r)[:200]))


async def vla_client(i):
    async with websockets.connect(f"ws://{HOST}:{P_VLA}/", max_size=None, compression=None, open_timeout=60) as ws:
        seq = 1
        await ws.send(vla_pack("hello", {}, seq))
        await ws.recv()
        for k in range(NR):
            seq += 1
            await ws.send(vla_pack("episode_start", {}, seq))  # a fresh chunk: every observation runs inference
            seq += 1
            t = time.perf_counter()
            await ws.send(vla_pack("observation", VLA, seq))
            r = vla_unpack(await ws.recv())
            lat["vla-eval"].append(time.perf_counter() - t)
            if not (r["type"] == "action" and r["seq"] == seq and bitwise_equal(r["payload"]["actions"], ref_vla)):
                bad.append(("vla-eval", i, k, str(r)[:200]))


def act_client(i):
    import requests as rq
    s = rq.Session()
    for k in range(NR):
        t = time.perf_counter()
        r = s.post(f"http://{HOST}:{P_ACT}/act", data=json.dumps(dict(ACT, request_id=k)), timeout=120)
        lat["act"].append(time.perf_counter() - t)
        if not (r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref_act) and r.json().get("request_id") == k):
            bad.append(("act", i, k, r.text[:200]))


async def main():
    kinds = [("openpi", "act", "vla-eval")[i % 3] for i in range(NC)]
    loop = asyncio.get_running_loop()
    ex = ThreadPoolExecutor(NC)
    tasks = []
    for i, kd in enumerate(kinds):
        if kd == "openpi":
            tasks.append(op_client(i))
        elif kd == "vla-eval":
            tasks.append(vla_client(i))
        else:
            tasks.append(loop.run_in_executor(ex, act_client, i))
    await asyncio.gather(*tasks)
    return kinds


t0 = time.perf_counter()
kinds = asyncio.run(main())
wall = time.perf_counter() - t0
total = sum(len(v) for v in lat.values())
R.check(f"load_{NC}x{NR}_all_answered", total == NC * NR, f"{total} of {NC * NR}")
R.check(f"load_{NC}x{NR}_all_correct", not bad, f"{len(bad)} wrong: {bad[:3]}")
allv = sorted(x for v in lat.values() for x in v)
def pct(v, q):
    return 1000 * v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
for k, v in lat.items():
    v.sort()
    R.check(f"load_latency_{k} (n={len(v)}, p50 {pct(v, .5):.1f} ms, p99 {pct(v, .99):.1f} ms)", len(v) > 0)
R.check(f"load_latency_all (n={len(allv)}, p50 {pct(allv, .5):.1f} ms, p99 {pct(allv, .99):.1f} ms, wall {wall:.1f} s, "
        f"{total / wall:.1f} req/s)", len(allv) > 0)
sys.exit(1 if R.failed else 0)
