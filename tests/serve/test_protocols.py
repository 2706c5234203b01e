"""Each protocol's actions bitwise equal to `mact run` with the same frames, task, state and seed.
usage: test_protocols.py MODEL TMPDIR OPENPI_PORT ACT_PORT VLA_PORT"""
import asyncio, base64, json, os, subprocess, sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

model, tmp, P_OP, P_ACT, P_VLA = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
R = Report()
rng = np.random.default_rng(5)
task = "pick up the black bowl and place it on the plate"
state = rng.uniform(-1, 1, size=8).astype(np.float32)

# ---- openpi: raw uint8 frames of two sizes, float32 state, numpy-scalar seed ----
top, wrist = rng_frame(rng, 480, 640), rng_frame(rng, 224, 224)
ref = mact_run(model, [save_frame(f"{tmp}/op_top.npy", top), save_frame(f"{tmp}/op_wrist.npy", wrist)], task, state, 11)
obs = {"observation/image": top, "observation/wrist_image": wrist, "observation/state": state, "prompt": task,
       "seed": np.int64(11), "request_id": "op-1"}


async def openpi_two():
    async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None) as ws:
        meta = op_unpack(await ws.recv())
        await ws.send(op_pack(obs))
        r1 = op_unpack(await ws.recv())
        await ws.send(op_pack(obs))
        r2 = op_unpack(await ws.recv())
        return meta, r1, r2


meta, r1, r2 = asyncio.run(openpi_two())
R.check("openpi_metadata_first", isinstance(meta, dict) and "server" in meta, str(meta)[:200])
a = r1.get("actions")
R.check("openpi_actions_f32", isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 2, repr(a)[:200])
R.check("openpi_bitwise_mact_run", bitwise_equal(a, ref), f"{a[:1]} vs {ref[:1]}")
R.check("openpi_server_timing", "infer_ms" in r1["server_timing"] and "queue_ms" in r1["server_timing"]
        and "prev_total_ms" not in r1["server_timing"] and "prev_total_ms" in r2["server_timing"], str(r1["server_timing"]))
R.check("openpi_request_id_echoed", r1.get("request_id") == "op-1", str(r1.get("request_id")))
R.check("openpi_repeatable", bitwise_equal(r2["actions"], ref), "second call differs")
# a plain Python float / int list state and a float seed scalar of numpy type: the same numbers
obs2 = dict(obs, **{"observation/state": [float(x) for x in state], "seed": 11})
_, r3 = asyncio.run(openpi_infer(P_OP, obs2))
R.check("openpi_list_state_plain_seed", bitwise_equal(r3["actions"], ref), "differs")
R.check("openpi_healthz", get(P_OP, "/healthz").status_code == 200)


async def openpi_path():  # openpi serves any path
    async with websockets.connect(f"ws://{HOST}:{P_OP}/some/policy", max_size=None, compression=None) as ws:
        await ws.recv()
        await ws.send(op_pack(obs))
        return op_unpack(await ws.recv())


R.check("openpi_any_path", bitwise_equal(asyncio.run(openpi_path())["actions"], ref), "differs")

# ---- /act: DROID raw frames, then images_jpeg, then YAM (three cameras) ----
ext, wr = rng_frame(rng, 360, 640), rng_frame(rng, 180, 320)
ref = mact_run(model, [save_frame(f"{tmp}/a_ext.npy", ext), save_frame(f"{tmp}/a_wr.npy", wr)], task, state, 3)
r = act_post(P_ACT, {"external_cam": jn(ext), "wrist_cam": jn(wr), "instruction": task, "state": jn(state), "seed": 3,
                     "request_id": 42})
R.check("act_status_200", r.status_code == 200, f"{r.status_code} {r.text[:300]}")
j = r.json() if r.status_code == 200 else {}
a = jn_dec(j["actions"]) if "actions" in j else None
R.check("act_bitwise_mact_run", a is not None and a.dtype == np.float32 and bitwise_equal(a, ref), f"{a} vs {ref[:1]}")
R.check("act_dt_ms_queue_ms_id", "dt_ms" in j and "queue_ms" in j and j.get("request_id") == 42, str({k: j.get(k) for k in ("dt_ms", "queue_ms", "request_id")}))
je, jw = jpeg_bytes(ext), jpeg_bytes(wr)
open(f"{tmp}/a_ext.jpg", "wb").write(je)
open(f"{tmp}/a_wr.jpg", "wb").write(jw)
ref_j = mact_run(model, [f"{tmp}/a_ext.jpg", f"{tmp}/a_wr.jpg"], task, state, 4)
r = act_post(P_ACT, {"images_jpeg": {"external_cam": base64.b64encode(je).decode(), "wrist_cam": base64.b64encode(jw).decode()},
                     "instruction": task, "state": jn(state.astype(np.float64)), "seed": 4})
R.check("act_images_jpeg_bitwise", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref_j), r.text[:300])
# three YAM cameras on this two-camera tag: refused by the one input rule, naming the tag's cameras (test_yam.py
# serves them on a checkpoint whose tag names three)
yt, yl, yr = rng_frame(rng, 36, 64), rng_frame(rng, 36, 64), rng_frame(rng, 36, 64)
r = act_post(P_ACT, {"top_cam": jn(yt), "left_cam": jn(yl), "right_cam": jn(yr), "instruction": task, "state": jn(state),
                     "normalization_tag": "libero", "seed": 5})
R.check("act_yam_on_two_camera_tag_refused", r.status_code == 400 and "3 camera frames" in r.text and "takes 2" in r.text,
        f"{r.status_code} {r.text[:300]}")
ident = get(P_ACT, "/act").json()
R.check("act_get_identity", all(k in ident for k in ("status", "repo_id", "norm_tag", "num_cameras", "state_dim", "device", "dtype")), str(ident))
# the callers' contract GET /act gives is `mact inspect --json`'s, tag for tag
inspect = json.loads(subprocess.run([MACT, "inspect", model, "--json"], check=True, capture_output=True, text=True).stdout)
R.check("act_get_norm_tags_as_inspect", ident.get("norm_tags") == inspect["norm_tags"] and len(inspect["norm_tags"]) >= 1,
        f"{ident.get('norm_tags')} vs {inspect['norm_tags']}")
# Python's json writes NaN for a float('nan'): the server reads it and rejects the state (not a parse error)
body = '{"external_cam": %s, "wrist_cam": %s, "instruction": "x", "state": [NaN, 0, 0, 0, 0, 0, 0, Infinity]}' % (
    json.dumps(jn(ext)), json.dumps(jn(wr)))
r = act_post(P_ACT, body)
R.check("act_nan_state_400", r.status_code == 400 and "finite" in r.json().get("error", ""), r.text[:200])

# ---- vla-eval: hello, episode_start, PNG frames, f64 states, one row per observation ----
ag, wri = rng_frame(rng, 256, 256), rng_frame(rng, 256, 256)
st64 = state.astype(np.float64) + 1e-9
open(f"{tmp}/v_ag.png", "wb").write(png_bytes(ag))
open(f"{tmp}/v_wr.png", "wb").write(png_bytes(wri))
ref_v = mact_run(model, [f"{tmp}/v_ag.png", f"{tmp}/v_wr.png"], task, st64, 9)
vobs = {"images": {"agentview": ag, "wrist": wri}, "task_description": task, "states": st64, "seed": 9}
replies = asyncio.run(vla_session(P_VLA, [("episode_start", {"task": task}), ("observation", vobs), ("observation", vobs),
                                          ("observation", vobs), ("episode_start", {}), ("observation", vobs),
                                          ("episode_end", {})]))
h = replies[0]
R.check("vla_hello", h["type"] == "hello" and h["seq"] == 1 and h["payload"].get("protocol_version") == 1
        and h["payload"].get("observation_params") == {"send_state": True, "send_wrist_image": True}
        and all(k in h["payload"] for k in ("harness_version", "model_server", "capabilities")), str(h)[:300])
acts = [x["payload"].get("actions") for x in replies[1:]]
R.check("vla_action_type_seq", [x["type"] for x in replies[1:]] == ["action"] * 4 and [x["seq"] for x in replies[1:]] == [3, 4, 5, 7],
        str([(x["type"], x["seq"]) for x in replies[1:]]))
R.check("vla_one_row_per_observation", all(isinstance(x, np.ndarray) and x.shape == (ref_v.shape[1],) for x in acts), str(acts)[:200])
R.check("vla_rows_bitwise_mact_run", all(bitwise_equal(acts[i], ref_v[i]) for i in range(3)), f"{acts[0]} vs {ref_v[0]}")
R.check("vla_episode_start_clears_chunk", bitwise_equal(acts[3], ref_v[0]), f"{acts[3]} vs {ref_v[0]}")
# raw and jpeg __image__ formats
open(f"{tmp}/v_ag.jpg", "wb").write(encode_image(ag, "jpeg")["data"])
open(f"{tmp}/v_wr.jpg", "wb").write(encode_image(wri, "jpeg")["data"])
ref_vj = mact_run(model, [f"{tmp}/v_ag.jpg", f"{tmp}/v_wr.jpg"], task, st64, 9)
rj = asyncio.run(vla_session(P_VLA, [("observation", vobs)], fmt="jpeg"))
R.check("vla_jpeg_bitwise", bitwise_equal(rj[1]["payload"]["actions"], ref_vj[0]), str(rj[1])[:200])
rr = asyncio.run(vla_session(P_VLA, [("observation", vobs)], fmt="raw"))
R.check("vla_raw_bitwise", bitwise_equal(rr[1]["payload"]["actions"], ref_v[0]), str(rr[1])[:200])
hh = get(P_VLA, "/health")
R.check("vla_health_200", hh.status_code == 200 and hh.json() == {"status": "ok"}, hh.text)
R.check("vla_config", "queue_capacity" in get(P_VLA, "/config").json())
for p in (P_OP, P_ACT, P_VLA):
    m = get(p, "/metrics")
    R.check(f"port{p}_livez_readyz_metrics", get(p, "/livez").status_code == 200 and get(p, "/readyz").status_code == 200
            and m.status_code == 200 and "mact_requests_total{protocol=\"openpi\",outcome=\"ok\"}" in m.text
            and "mact_queue_wait_seconds_bucket" in m.text and "mact_cold_start_seconds" in m.text, m.text[:200])
sys.exit(1 if R.failed else 0)
