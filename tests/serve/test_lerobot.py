"""mact serve --lerobot: LeRobot's asynchronous-inference protocol from a client that speaks it as LeRobot's
robot_client does (gRPC transport.AsyncInference, stubs generated from src/server/lerobot_services.proto; the
pickles Python's own pickle makes of LeRobot's dataclasses, tests/lerobot_fake; payloads split as
transport/utils.py's send_bytes_in_chunks; actions aggregated latest_only).

usage: test_lerobot.py MODEL_DIR TMP PORT PROBE_PORT SERVER_LOG PB_DIR

Checked: the first chunk bit for bit = `mact run` on the same frames, task and state (seed 0, the server's); a
30 fps control loop of a few hundred ticks where every action arrives and runs in timestep order; a real-time
chunking splice bit for bit = `mact run --prev-actions ... --inference-delay D` with the rows and delay the server
logged; faults, each followed by a good request; a second client at the same time. INFO lines: the server's own
time per request beside inference (decode + encode) and the first request after ready against the steady ones.
"""
import os
import pickle
import re
import subprocess
import sys
import threading
import time

import numpy as np
import torch  # noqa: F401  (imported before any timing: unpickling the replies needs it)

MODEL, TMP, PORT, PROBE, LOG, PB = sys.argv[1:7]
sys.path.insert(0, PB)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lerobot_fake"))
import grpc  # noqa: E402
import lerobot_services_pb2 as pb  # noqa: E402
import lerobot_services_pb2_grpc as pbg  # noqa: E402
from lerobot_wire import CHUNK, chunks  # noqa: E402,F401
from lerobot.async_inference.helpers import RemotePolicyConfig, TimedObservation  # noqa: E402

MACT = os.environ.get("MACT_BIN", "build/mact")
fails = 0


def check(name, ok, why=""):
    global fails
    print(("PASS " if ok else "FAIL ") + "lerobot_" + name + ("" if ok else ": " + str(why)[:400]))
    if not ok:
        fails += 1


def channel():
    # LeRobot's grpc_channel_options: 4 MiB messages each way; a connection of its own (grpcio shares one between
    # channels to the same address in a process, which robot clients, each its own process, do not)
    opts = [("grpc.max_receive_message_length", 4 * 1024 * 1024), ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ("grpc.use_local_subchannel_pool", 1)]
    ch = grpc.insecure_channel(f"127.0.0.1:{PORT}", options=opts)
    return ch, pbg.AsyncInferenceStub(ch)




JOINTS = [f"joint_{i}.pos" for i in range(8)]  # the tiny checkpoint's tag: 8 state dims
CAMS = ["image", "wrist_image"]                # its camera_keys: observation.images.image, .wrist_image
H, W = 96, 128


def features(h=H, w=W):
    f = {"observation.state": {"dtype": "float32", "shape": (len(JOINTS),), "names": list(JOINTS)}}
    for c in CAMS:
        f["observation.images." + c] = {"dtype": "image", "shape": (h, w, 3), "names": ["height", "width", "channels"]}
    return f


def setup(stub, apc=10, ptype="molmoact2", feats=None, rename=None):
    cfg = RemotePolicyConfig(policy_type=ptype, pretrained_name_or_path=os.path.join(TMP, "never_opened"),
                             lerobot_features=feats or features(), actions_per_chunk=apc, device="cpu",
                             rename_map=rename or {})
    return stub.SendPolicyInstructions(pb.PolicySetup(data=pickle.dumps(cfg)))


def frames(t, h=H, w=W):
    rng = np.random.default_rng(1000 + t)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in CAMS]


def state_of(t):
    return [float(np.float32(0.1 * ((t * 7 + i * 3) % 11) - 0.5 + 2.0 * (t % 2))) for i in range(len(JOINTS))]


def observation(t, must_go=False, h=H, w=W, task="pick up the cube", state=None):
    raw = {k: v for k, v in zip(JOINTS, state if state is not None else state_of(t))}
    for c, f in zip(CAMS, frames(t, h, w)):
        raw[c] = f
    raw["task"] = task
    return TimedObservation(timestamp=time.time(), timestep=t, observation=raw, must_go=must_go)


def send(stub, obs_or_bytes):
    b = obs_or_bytes if isinstance(obs_or_bytes, bytes) else pickle.dumps(obs_or_bytes)
    return stub.SendObservations(chunks(b))


def get(stub, timeout=60):
    r = stub.GetActions(pb.Empty(), timeout=timeout)
    return pickle.loads(r.data) if len(r.data) else None


def err_of(fn):
    try:
        fn()
        return None
    except grpc.RpcError as e:
        return e


def mact_run(t, extra=(), rows=10):
    imgs = []
    from PIL import Image
    for c, f in zip(CAMS, frames(t)):
        p = os.path.join(TMP, f"lr_{t}_{c}.png")
        Image.fromarray(f).save(p)
        imgs += ["--image", p]
    st = ",".join("%.9g" % v for v in state_of(t))
    out = subprocess.run([MACT, "run", "--model", MODEL, *imgs, "--task", "pick up the cube", "--state", st,
                          "--seed", "0", "--n-action-steps", str(rows), "--json", *extra],
                         capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr
    import json
    return np.array(json.loads(out.stdout)["actions"], dtype=np.float32), ""


def actions_of(chunk):
    return np.stack([a.action.numpy() for a in chunk]).astype(np.float32)


def log_text():
    with open(LOG, errors="replace") as f:
        return f.read()


ch, stub = channel()
# ---- set-up and the first chunk ----
e = err_of(lambda: send(stub, observation(0, must_go=True)))
check("observation_before_setup_refused", e is not None and e.code() == grpc.StatusCode.FAILED_PRECONDITION,
      e and e.details())
stub.Ready(pb.Empty())
e = err_of(lambda: setup(stub, ptype="act"))
check("other_policy_type_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT
      and "molmoact2" in e.details() and "'act'" in e.details(), e and e.details())
bad = features()
bad["observation.state"]["names"] = JOINTS[:5]
e = err_of(lambda: setup(stub, feats=bad))
check("state_width_mismatch_refused", e is not None and "5 joints" in e.details(), e and e.details())
e = err_of(lambda: setup(stub, apc=1000))
check("actions_per_chunk_over_horizon_refused", e is not None and "actions_per_chunk" in e.details(), e and e.details())
setup(stub)
check("pretrained_path_never_opened", not os.path.exists(os.path.join(TMP, "never_opened")))
send(stub, observation(0, must_go=True))
t0 = time.perf_counter()
first_raw = stub.GetActions(pb.Empty(), timeout=60)
first_ms = (time.perf_counter() - t0) * 1000
first = pickle.loads(first_raw.data) if len(first_raw.data) else None
ok = first is not None and len(first) == 10 and [a.timestep for a in first] == list(range(10))
check("first_chunk_shape_and_timesteps", ok, first and [a.timestep for a in first])
check("actions_are_cpu_float32_tensors", ok and all(isinstance(a.action, torch.Tensor) and a.action.device.type == "cpu"
                                                      and a.action.dtype == torch.float32 for a in first))
ref, why = mact_run(0)
got = actions_of(first) if ok else None
check("first_chunk_bitwise_mact_run", ref is not None and got is not None and got.shape == ref.shape
      and np.array_equal(got.view(np.uint32), ref.view(np.uint32)),
      why or (None if got is None else float(np.abs(got - ref).max())))
# t0 + i * dt in double, as LeRobot's server computes them (t0 ~1.7e9: steps are not exactly 1/30 apart)
check("timestamps_t0_plus_i_dt", ok and all(a.timestamp == first[0].timestamp + i * (1 / 30) for i, a in enumerate(first)),
      [a.timestamp for a in first[:3]] if ok else None)

# ---- a 30 fps control loop, LeRobot's client logic (latest_only aggregation, chunk_size_threshold 0.5) ----
queue = {}          # timestep -> action
lock = threading.Lock()
latest = [-1]
executed = []
errors = []
running = [True]
chunks_seen = []
got_event = threading.Event()


def receiver():
    _, s2 = ch, stub
    while running[0]:
        try:
            c = get(s2, timeout=10)
        except grpc.RpcError as ex:
            errors.append(ex.details())
            continue
        if not c:
            continue
        chunks_seen.append([a.timestep for a in c])
        with lock:
            for a in c:
                if a.timestep > latest[0]:
                    queue[a.timestep] = a.action   # latest_only: the newer chunk's action wins
        got_event.set()


rt = threading.Thread(target=receiver, daemon=True)
stub.Ready(pb.Empty())
setup(stub)
rt.start()
TICKS = 240
must = True
for tick in range(TICKS):
    ts0 = time.perf_counter()
    with lock:
        if queue:
            k = min(queue)
            queue.pop(k)
            latest[0] = k
            executed.append(k)
        qn = len(queue)
    if qn / 10 <= 0.5:
        send(stub, observation(max(latest[0], 0), must_go=must and qn == 0))
        must = qn != 0
    time.sleep(max(0, 1 / 30 - (time.perf_counter() - ts0)))
running[0] = False
rt.join(timeout=15)
check("control_loop_no_errors", not errors, errors[:3])
check("control_loop_actions_in_timestep_order", len(executed) > TICKS // 2 and executed == sorted(executed)
      and len(set(executed)) == len(executed), f"{len(executed)} executed, first {executed[:12]}")
gaps = [b - a for a, b in zip(executed, executed[1:]) if b - a != 1]
check("control_loop_no_skipped_timesteps", not gaps, gaps[:5])
check("control_loop_chunks_consecutive", all(c == list(range(c[0], c[0] + len(c))) for c in chunks_seen),
      chunks_seen[:3])
print(f"INFO lerobot_control_loop: {TICKS} ticks at 30 fps, {len(executed)} actions executed, {len(chunks_seen)} chunks")

# ---- real-time chunking: a splice reproduced by mact run ----
ch3, s3 = channel()
s3.Ready(pb.Empty())
setup(s3)
send(s3, observation(0, must_go=True))
c0 = get(s3)
k = 4
send(s3, observation(k))
c1 = get(s3)
m = re.findall(r"lerobot peer=\S+ id=%d outcome=ok .*detail=rtc_prev_rows=(\d+) delay=(\d+)" % k, log_text())
check("rtc_logged", bool(m), "no rtc_prev_rows in the log line")
if m and c0 and c1:
    rows, d = int(m[-1][0]), int(m[-1][1])
    prev = actions_of(c0)[k:]
    check("rtc_guide_is_unexecuted_rest", rows == len(prev) == 10 - k, (rows, len(prev)))
    pf = os.path.join(TMP, "lr_prev.npy")
    np.save(pf, prev)
    ref, why = mact_run(k, ["--prev-actions", pf, "--inference-delay", str(d)])
    got = actions_of(c1)
    check("rtc_chunk_bitwise_mact_run", ref is not None and np.array_equal(got.view(np.uint32), ref.view(np.uint32)),
          why or float(np.abs(got - ref).max()))
    check("rtc_chunk_timesteps_from_k", [a.timestep for a in c1] == list(range(k, k + 10)))
    plain, _ = mact_run(k)
    check("rtc_changes_the_chunk", plain is not None and not np.array_equal(plain, got))
ch3.close()

# ---- skipping: a repeated timestep, a too-similar state, must_go ----
ch4, s4 = channel()
s4.Ready(pb.Empty())
setup(s4)
send(s4, observation(0, must_go=True))
get(s4)
send(s4, observation(0))
r = s4.GetActions(pb.Empty(), timeout=10)
check("predicted_timestep_skipped", len(r.data) == 0)
st = state_of(0)
send(s4, observation(1, state=[x + 0.1 for x in st]))
r = s4.GetActions(pb.Empty(), timeout=10)
check("similar_state_skipped", len(r.data) == 0)
send(s4, observation(2, state=[x + 0.1 for x in st], must_go=True))
check("must_go_not_skipped", get(s4) is not None)

# ---- faults, each followed by a good request ----
good_t = [100]


def good(name, s=None):
    s = s or s4
    good_t[0] += 3
    try:
        send(s, observation(good_t[0], must_go=True))
        c = get(s)
        check(name + "_then_good", c is not None and c[0].timestep == good_t[0])
    except grpc.RpcError as ex:
        check(name + "_then_good", False, ex.details())


def cut_stream():
    b = pickle.dumps(observation(7, h=1024, w=1024))   # > 2 MiB: BEGIN, MIDDLE, END

    def gen():
        it = chunks(b)
        yield next(it)
        raise RuntimeError("cut")
    return err_of(lambda: s4.SendObservations(gen()))


e = cut_stream()
check("stream_cut_after_begin", e is not None)
good("stream_cut")
e = err_of(lambda: s4.SendObservations(iter([pb.Observation(transfer_state=pb.TRANSFER_MIDDLE, data=b"x"),
                                             pb.Observation(transfer_state=pb.TRANSFER_END, data=b"y")])))
check("middle_without_begin_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT, e and e.details())
good("middle_without_begin")
big = pickle.dumps(observation(8, h=1600, w=1100))    # ~10.6 MB, over --max-message-mb 4
e = err_of(lambda: send(s4, big))
check("payload_over_cap_refused", e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e and e.details())
good("payload_over_cap")
marker = os.path.join(TMP, "lr_pwned")


class Evil:
    def __init__(self, f, a):
        self.f, self.a = f, a

    def __reduce__(self):
        return (self.f, self.a)


import builtins  # noqa: E402
import subprocess as sp  # noqa: E402
for name, obj in [("os_system", Evil(os.system, ("touch " + marker,))),
                  ("builtins_eval", Evil(builtins.eval, ("open(%r, 'w')" % marker,))),
                  ("subprocess_popen", Evil(sp.Popen, (["touch", marker],)))]:
    o = observation(9)
    o.observation["task"] = obj
    e = err_of(lambda: send(s4, pickle.dumps(o)))
    check(f"pickle_{name}_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT
          and re.search(r"(posix|os|nt|builtins|subprocess)\.(system|eval|Popen)", e.details() or ""), e and e.details())
    good(f"pickle_{name}")
check("pickle_nothing_ran", not os.path.exists(marker))
deep = []
for _ in range(100000):
    deep = [deep]
o = observation(10)
o.observation["task"] = deep
try:
    payload = pickle.dumps(o)
except RecursionError:
    payload = b"\x80\x04" + b"]" * 200000 + b"."
e = err_of(lambda: send(s4, payload))
check("deep_nesting_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT, e and e.details())
good("deep_nesting")
o = observation(11, must_go=True)
o.observation[CAMS[0]] = o.observation[CAMS[0]].astype(np.float64)
send(s4, o)
e = err_of(lambda: get(s4))
check("wrong_dtype_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and CAMS[0] in e.details(),
      e and e.details())
good("wrong_dtype")
o = observation(12, must_go=True)
o.observation[JOINTS[2]] = float("nan")
send(s4, o)
e = err_of(lambda: get(s4))
check("nan_joint_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and JOINTS[2] in e.details()
      and "not finite" in e.details(), e and e.details())
good("nan_joint")
o = observation(13, must_go=True)
del o.observation[CAMS[1]]
send(s4, o)
e = err_of(lambda: get(s4))
check("missing_camera_refused", e is not None and CAMS[1] in e.details(), e and e.details())
good("missing_camera")
e = err_of(lambda: send(s4, b"\x80\x04garbage"))
check("garbage_refused", e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT, e and e.details())
good("garbage")

# ---- a second client at the same time ----
res = {}


def client(name, base):
    c_, s_ = channel()
    try:
        s_.Ready(pb.Empty())
        setup(s_)
        out = []
        for i in range(4):
            send(s_, observation(base + 3 * i, must_go=True))
            c = get(s_)
            out.append(c[0].timestep if c else None)
        res[name] = out
    except grpc.RpcError as ex:
        res[name] = ex.details()
    c_.close()


ths = [threading.Thread(target=client, args=(n, b)) for n, b in (("a", 200), ("b", 300))]
[t.start() for t in ths]
[t.join(timeout=120) for t in ths]
check("two_clients_at_once", res.get("a") == [200, 203, 206, 209] and res.get("b") == [300, 303, 306, 309], res)

# ---- the server's own time per request (decode + encode) and the first request after ready ----
ch5, s5 = channel()
s5.Ready(pb.Empty())
setup(s5)
lat = []   # the first request's size, steady
for i in range(8):
    send(s5, observation(400 + 5 * i, must_go=True))
    t1 = time.perf_counter()
    s5.GetActions(pb.Empty(), timeout=60)
    lat.append((time.perf_counter() - t1) * 1000)
setup(s5, feats=features(480, 640))
for i in range(12):
    send(s5, observation(500 + 5 * i, must_go=True, h=480, w=640))
    get(s5)
over = []
for line in log_text().splitlines():
    mm = re.search(r" lerobot peer=\S+ id=(\d+) outcome=ok queue_ms=([\d.]+) decode_ms=([\d.]+) infer_ms=([\d.]+) "
                   r"total_ms=([\d.]+)", line)
    if mm and 500 <= int(mm.group(1)) < 560:
        over.append(float(mm.group(5)) - float(mm.group(4)) - float(mm.group(2)))
if over:
    print("INFO lerobot_server_overhead: decode + encode per request on 640x480 x 2 cameras: p50 %.2f ms, max %.2f ms "
          "over %d requests (total_ms - infer_ms - queue_ms of the log lines)" % (float(np.median(over)), max(over), len(over)))
check("server_overhead_measured", len(over) >= 10, len(over))
srv_total = [float(x) for x in re.findall(r" lerobot peer=\S+ id=(?:0|4\d\d) outcome=ok .*? total_ms=([\d.]+)", log_text())]
print("INFO lerobot_first_request: the first GetActions after ready %.1f ms, steady median %.1f ms (ratio %.2f); the "
      "server's own total_ms: first %.1f, steady median %.1f" % (first_ms, float(np.median(lat[2:])),
                                                                 first_ms / float(np.median(lat[2:])),
                                                                 srv_total[0] if srv_total else -1,
                                                                 float(np.median(srv_total[3:])) if len(srv_total) > 3 else -1))
ch5.close()
ch4.close()
ch.close()
sys.exit(1 if fails else 0)
