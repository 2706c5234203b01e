"""Real-time chunking over each protocol, against `mact run --prev-actions ... --inference-delay ...`.
(a) RTC keys give actions bitwise equal to the CLI's; (b) without them the reply is the plain `mact run` one;
(c) bad RTC keys get the protocol's error naming the key, and the next good request is answered;
(d) vla-eval --replan-steps K (the server must run with --replan-steps K --replan-schedule ones): the second
inference comes after K served rows, bitwise the CLI's guided chunk, and its rows continue the first chunk's row K on.
usage: test_rtc.py MODEL TMPDIR OPENPI_PORT ACT_PORT VLA_PORT K"""
import asyncio, json, os, sys, time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

model, tmp, P_OP, P_ACT, P_VLA, K = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
seed = int(os.environ.get("SEED", int(time.time()) % 1000000007))
print(f"test_rtc: SEED={seed}", flush=True)
R = Report()
rng = np.random.default_rng(seed)
task = "put the bowl on the plate"
state = rng.uniform(-1, 1, size=8).astype(np.float32)
cam0, cam1 = rng_frame(rng, 96, 128), rng_frame(rng, 64, 64)
frames = [save_frame(f"{tmp}/rtc_c0.npy", cam0), save_frame(f"{tmp}/rtc_c1.npy", cam1)]
s_req = int(rng.integers(0, 1 << 31))


def cli(extra=(), s=s_req):
    return mact_run(model, frames, task, state, s, list(extra))


def rtc_cli(prev, delay, horizon=None, schedule=None, weight=None, s=s_req):
    p = f"{tmp}/rtc_prev_{rng.integers(1 << 40)}.npy"
    np.save(p, np.ascontiguousarray(prev, dtype=np.float32))
    ex = ["--prev-actions", p, "--inference-delay", str(delay)]
    if horizon is not None: ex += ["--execution-horizon", str(horizon)]
    if schedule is not None: ex += ["--rtc-schedule", schedule]
    if weight is not None: ex += ["--max-guidance-weight", repr(float(weight))]
    return cli(ex, s)


ref0 = cli()
H, D = ref0.shape
# the previous chunk: another seed's chunk, rows 2.. (what a robot has not executed yet)
prev = cli(s=s_req + 1)[2:].copy()
n_prev = prev.shape[0]
print(f"test_rtc: chunk {H}x{D}, prev rows {n_prev}", flush=True)


def differs(a, b):
    return not bitwise_equal(a, b)


# ---- (a) / (b) openpi ----
def op_obs(**kw):
    o = {"observation/image": cam0, "observation/wrist_image": cam1, "observation/state": state, "prompt": task,
         "seed": s_req}
    o.update(kw)
    return o


async def op_one(obs):
    """(reply dict or None, error text or None, close code)"""
    async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None) as ws:
        await ws.recv()
        await ws.send(op_pack(obs))
        r = await ws.recv()
        if isinstance(r, str):
            try:
                await asyncio.wait_for(ws.recv(), 5)
            except Exception:
                pass
            return None, r, ws.close_code
        return op_unpack(r), None, None


ref_op = rtc_cli(prev, 2, horizon=6, schedule="linear", weight=5.0)
R.check("rtc_cli_guided_differs", differs(ref_op, ref0), "mact run with --prev-actions gave the unguided chunk")
r, e, _ = asyncio.run(op_one(op_obs(prev_actions=prev, inference_delay=2, execution_horizon=np.int64(6),
                                    rtc_schedule="linear", max_guidance_weight=5.0)))
R.check("openpi_rtc_bitwise_mact_run", r is not None and bitwise_equal(r["actions"], ref_op), f"{e or r['actions'][:1]} vs {ref_op[:1]}")
r, e, _ = asyncio.run(op_one(op_obs(prev_actions=prev.astype(np.float64), inference_delay=2, execution_horizon=6,
                                    rtc_schedule="linear", max_guidance_weight=np.float32(5.0))))
R.check("openpi_rtc_f64_rows_bitwise", r is not None and bitwise_equal(r["actions"], ref_op), str(e))
r, e, _ = asyncio.run(op_one(op_obs()))
R.check("openpi_no_rtc_unchanged", r is not None and bitwise_equal(r["actions"], ref0), str(e))
ref_ones = rtc_cli(prev, 0, schedule="ones")
r, e, _ = asyncio.run(op_one(op_obs(prev_actions=prev, inference_delay=0, rtc_schedule="ones", rtc_guidance="identity")))
R.check("openpi_rtc_ones_bitwise", r is not None and bitwise_equal(r["actions"], ref_ones), str(e))

# ---- (a) / (b) /act ----
ref_act = rtc_cli(prev, 1, schedule="exp")
act_base = {"external_cam": jn(cam0), "wrist_cam": jn(cam1), "instruction": task, "state": jn(state), "seed": s_req}
r = act_post(P_ACT, dict(act_base, prev_actions=jn(prev), inference_delay=1, rtc_schedule="exp"))
R.check("act_rtc_bitwise_mact_run", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref_act), r.text[:300])
rows = [[float(x) for x in row] for row in prev]
r = act_post(P_ACT, dict(act_base, prev_actions=rows, inference_delay=1, rtc_schedule="exp"))
R.check("act_rtc_list_rows_bitwise", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref_act), r.text[:300])
r = act_post(P_ACT, act_base)
R.check("act_no_rtc_unchanged", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref0), r.text[:300])
r = act_post(P_ACT, dict(act_base, prev_actions=None, inference_delay=None))
R.check("act_rtc_null_is_absent", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref0), r.text[:300])

# ---- (a) / (b) vla-eval: client rows guide the inference this observation makes; the rows start at its delay ----
ref_vla = rtc_cli(prev, 1, schedule="zeros", horizon=4)


def vobs(**kw):
    o = {"images": {"agentview": cam0, "wrist": cam1}, "task_description": task, "states": state.astype(np.float64),
         "seed": s_req}
    o.update(kw)
    return o


rep = asyncio.run(vla_session(P_VLA, [("episode_start", {}), ("observation", vobs()),
                                      ("observation", vobs(prev_actions=prev, inference_delay=1, rtc_schedule="zeros",
                                                           execution_horizon=4)),
                                      ("observation", vobs())], fmt="raw"))
p1, p2, p3 = (x["payload"] for x in rep[1:4])
R.check("vla_no_rtc_unchanged", bitwise_equal(p1.get("actions"), ref0[0]) and "rtc_prev_rows" not in p1, str(p1)[:200])
R.check("vla_rtc_bitwise_mact_run", bitwise_equal(p2.get("actions"), ref_vla[1]) and bitwise_equal(p3.get("actions"), ref_vla[2]),
        f"{p2.get('actions')} vs {ref_vla[1]}")
R.check("vla_rtc_rows_from_delay", p2.get("chunk_index") == 1 and p2.get("rtc_prev_rows") == n_prev and p3.get("chunk_index") == 2,
        str({k: p2.get(k) for k in ("chunk_index", "rtc_prev_rows")}))

# ---- (c) bad RTC keys: the protocol's error naming the key, then a good request is answered ----
nanp = prev.copy()
nanp[1, 2] = np.nan
bad = [  # (name, keys, words the message must hold)
    ("width", {"prev_actions": prev[:, :D - 2].copy()}, ["prev_actions", str(D - 2)]),
    ("nan", {"prev_actions": nanp}, ["prev_actions", "finite"]),
    ("delay_gt_rows", {"prev_actions": prev, "inference_delay": n_prev + 1}, ["inference_delay"]),
    ("unknown_schedule", {"prev_actions": prev, "rtc_schedule": "cubic"}, ["rtc_schedule", "cubic"]),
    ("unknown_guidance", {"prev_actions": prev, "rtc_guidance": "newton"}, ["rtc_guidance"]),
    ("negative_weight", {"prev_actions": prev, "max_guidance_weight": -1.0}, ["max_guidance_weight"]),
    ("delay_wrong_type", {"prev_actions": prev, "inference_delay": "2"}, ["inference_delay", "integer"]),
    ("delay_fraction", {"prev_actions": prev, "inference_delay": 1.5}, ["inference_delay", "integer"]),
    ("horizon_wrong_type", {"prev_actions": prev, "execution_horizon": [3]}, ["execution_horizon"]),
    ("schedule_wrong_type", {"prev_actions": prev, "rtc_schedule": 2}, ["rtc_schedule"]),
    ("rows_not_2d", {"prev_actions": prev[0].copy()}, ["prev_actions", "2-D"]),
    ("rows_int_dtype", {"prev_actions": np.zeros((3, D), np.int32)}, ["prev_actions", "float"]),
    ("rows_over_model_cap", {"prev_actions": np.zeros((4096, D), np.float32)}, ["prev_actions", "max_action_horizon"]),
    ("rows_over_horizon", {"prev_actions": np.zeros((H + 1, D), np.float32)}, ["previous chunk rows", "horizon"]),
    ("width_over_model_cap", {"prev_actions": np.zeros((2, 4096), np.float32)}, ["prev_actions", "max_action_dim"]),
    ("delay_without_rows", {"inference_delay": 2}, ["inference_delay"]),
]


def has(msg, words):
    return msg is not None and all(w in msg for w in words)


def to_json(keys):
    out = {}
    for k, v in keys.items():
        out[k] = jn(v) if isinstance(v, np.ndarray) else v
    return out


for name, keys, words in bad:
    _, e, code = asyncio.run(op_one(op_obs(**keys)))
    r2, _, _ = asyncio.run(op_one(op_obs()))
    R.check(f"openpi_bad_{name}", has(e, words) and code == 1011 and r2 is not None and bitwise_equal(r2["actions"], ref0),
            f"{e!r} close={code}")
    body = json.dumps(dict(act_base, **to_json(keys))).replace("NaN", "NaN")
    r = act_post(P_ACT, body)
    msg = r.json().get("error") if r.headers.get("content-type", "").startswith("application/json") else r.text
    r2 = act_post(P_ACT, act_base)
    R.check(f"act_bad_{name}", r.status_code == 400 and has(msg, words) and r2.status_code == 200
            and bitwise_equal(jn_dec(r2.json()["actions"]), ref0), f"{r.status_code} {msg!r}")
    rep = asyncio.run(vla_session(P_VLA, [("episode_start", {}), ("observation", vobs(**keys)), ("observation", vobs())], fmt="raw"))
    e1, a2 = rep[1], rep[2]
    R.check(f"vla_bad_{name}", e1["type"] == "error" and e1["payload"]["error"].startswith("observation_failed: ")
            and has(e1["payload"]["error"], words) and a2["type"] == "action" and bitwise_equal(a2["payload"]["actions"], ref0[0]),
            f"{e1} / {a2['type']}")
# a bad key on an observation served from the chunk is refused too, and the chunk goes on
rep = asyncio.run(vla_session(P_VLA, [("episode_start", {}), ("observation", vobs()), ("observation", vobs(rtc_schedule="cubic")),
                                      ("observation", vobs())], fmt="raw"))
R.check("vla_bad_key_mid_chunk", rep[2]["type"] == "error" and "rtc_schedule" in rep[2]["payload"]["error"]
        and bitwise_equal(rep[3]["payload"]["actions"], ref0[1]) and rep[3]["payload"]["chunk_index"] == 1, str(rep[2])[:200])
# the library's vjp guidance: refused as the client's request (not an internal error) while it is not built
_, e, _ = asyncio.run(op_one(op_obs(prev_actions=prev, rtc_guidance="vjp")))
r = act_post(P_ACT, dict(act_base, prev_actions=jn(prev), rtc_guidance="vjp"))
print(f"test_rtc: vjp -> openpi {e!r}; act {r.status_code} {r.text.strip()[:160]}", flush=True)
R.check("vjp_answered_not_internal", (e is None or not e.startswith("mact: internal")) and r.status_code in (200, 400), r.text[:200])

# ---- (d) vla-eval --replan-steps K ----
n_obs = 2 * K + 2
seeds = [s_req + 10 + i for i in range(n_obs)]
rep = asyncio.run(vla_session(P_VLA, [("episode_start", {})] + [("observation", vobs(seed=s)) for s in seeds] +
                              [("episode_start", {}), ("observation", vobs(seed=seeds[0]))], fmt="raw"))
pl = [x["payload"] for x in rep[1:]]
idx = [p.get("chunk_index") for p in pl]
gr = [p.get("rtc_prev_rows") for p in pl]
print(f"test_rtc: replan K={K}: chunk_index {idx}, rtc_prev_rows {gr}", flush=True)
A = cli(s=seeds[0])
exp_idx = [i % K for i in range(n_obs)] + [0]
exp_gr = [None] * K + [H - K] + [None] * (K - 1) + [H - K] + [None] * (n_obs - 2 * K - 1) + [None]
R.check("vla_replan_after_k_rows", idx == exp_idx and gr == exp_gr, f"expected chunk_index {exp_idx}, rtc_prev_rows {exp_gr}")
R.check("vla_replan_first_chunk_rows", all(bitwise_equal(pl[i]["actions"], A[i]) for i in range(K)), "first chunk != mact run")
# the second chunk: inferred on observation K (its seed) guided by A[K:], delay 0, schedule ones
B = rtc_cli(A[K:], 0, schedule="ones", s=seeds[K])
R.check("vla_replan_bitwise_mact_run", all(bitwise_equal(pl[K + i]["actions"], B[i]) for i in range(K)),
        f"{pl[K]['actions']} vs {B[0]}")
C = rtc_cli(B[K:], 0, schedule="ones", s=seeds[2 * K])
R.check("vla_replan_third_chunk_bitwise", all(bitwise_equal(pl[2 * K + i]["actions"], C[i]) for i in range(n_obs - 2 * K)), "")
# continuity: with 2 flow steps and weight 1 (ones, e = min(10, rows left)) the guided rows are the old chunk's rows
e = min(10, H - K)
U = cli(s=seeds[K])  # the same inference unguided
scale = max(1.0, float(np.abs(A).max()))
d_guided = float(np.abs(B[:e] - A[K:K + e]).max())
d_unguided = float(np.abs(U[:e] - A[K:K + e]).max())
d_served = float(np.abs(np.stack([pl[K + i]["actions"] for i in range(K)]) - A[K:2 * K]).max())
print(f"test_rtc: replan continuity over {e} rows: max|B-A[K:]| {d_guided:.3g} (served rows {d_served:.3g}), "
      f"unguided max|U-A[K:]| {d_unguided:.3g}; gate guided <= 1e-4 * {scale:.3g} and unguided >= 100 x guided", flush=True)
R.check("vla_replan_continues_row_k", d_guided <= 1e-4 * scale and d_served <= 1e-4 * scale and d_unguided >= 100 * max(d_guided, 1e-7),
        f"guided {d_guided} unguided {d_unguided}")
R.check("vla_replan_reset_on_episode", idx[-1] == 0 and gr[-1] is None and bitwise_equal(pl[-1]["actions"], A[0]), str(pl[-1])[:200])
cfg = get(P_VLA, "/config").json()
R.check("vla_replan_config", cfg.get("replan_steps") == K and cfg.get("replan_rtc", {}).get("schedule") == "ones", str(cfg.get("replan_rtc")))
sys.exit(1 if R.failed else 0)
