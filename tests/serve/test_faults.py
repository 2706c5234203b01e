"""Hostile and broken clients; after each fault a good request on every protocol succeeds and /livez answers.
The server under test runs with --max-message-mb 4 --idle-timeout 3. Loopback only, bounded loops.
usage: test_faults.py MODEL TMPDIR OPENPI_PORT ACT_PORT VLA_PORT"""
import asyncio, base64, os, socket, struct, sys, time, zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

model, tmp, P_OP, P_ACT, P_VLA = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
PORTS = (P_OP, P_ACT, P_VLA)
R = Report()
rng = np.random.default_rng(7)
TASK = "put the cube in the box"
F1, F2 = rng_frame(rng, 120, 160), rng_frame(rng, 96, 96)
STATE = np.zeros(8, np.float32)
OP_OBS = {"observation/image": F1, "observation/wrist_image": F2, "observation/state": STATE, "prompt": TASK}
ACT_BODY = {"external_cam": jn(F1), "wrist_cam": jn(F2), "instruction": TASK, "state": jn(STATE)}
VLA_OBS = {"images": {"agentview": F1, "wrist": F2}, "task_description": TASK, "states": STATE.astype(np.float64)}


def good_all():
    try:
        _, r = asyncio.run(openpi_infer(P_OP, OP_OBS))
        ok1 = r["actions"].ndim == 2 and np.isfinite(r["actions"]).all()
        a = act_post(P_ACT, ACT_BODY)
        ok2 = a.status_code == 200 and jn_dec(a.json()["actions"]).ndim == 2
        v = asyncio.run(vla_session(P_VLA, [("observation", VLA_OBS)]))
        ok3 = v[1]["type"] == "action" and v[1]["payload"]["actions"].ndim == 1
        return ok1 and ok2 and ok3, f"openpi {ok1} act {ok2} vla {ok3}"
    except Exception as e:  # noqa
        return False, repr(e)


def after(name):
    ok, why = good_all()
    R.check(f"{name}_then_good_request", ok, why)
    R.check(f"{name}_then_livez", livez_all(PORTS))


async def openpi_raw(payload, text=False):
    """Sends one message; returns (text_frame, close_code)."""
    async with websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None) as ws:
        await ws.recv()
        await ws.send(payload if not text else payload.decode("latin1"))
        msg = await asyncio.wait_for(ws.recv(), 10)
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as e:
            return msg, e.code
        return msg, None


def openpi_expect_error(name, payload, must_contain=""):
    try:
        msg, code = asyncio.run(openpi_raw(payload))
        R.check(name, isinstance(msg, str) and code == 1011 and must_contain in msg, f"{msg!r:.200} code {code}")
    except Exception as e:  # noqa
        R.check(name, False, repr(e))
    after(name)


async def vla_raw(frames):
    """hello, then raw frames (bytes); returns the replies to them."""
    out = []
    async with websockets.connect(f"ws://{HOST}:{P_VLA}/", max_size=None, compression=None) as ws:
        await ws.send(vla_pack("hello", {}, 1))
        await ws.recv()
        for f in frames:
            await ws.send(f)
            out.append(vla_unpack(await asyncio.wait_for(ws.recv(), 10)))
    return out


def vla_expect_error(name, obs_payload, must_contain=""):
    try:
        r = asyncio.run(vla_raw([vla_pack("observation", obs_payload, 2), vla_pack("observation", VLA_OBS, 3)]))
        e = r[0]
        ok = e["type"] == "error" and e["seq"] == 2 and e["payload"]["error"].startswith("observation_failed:") and must_contain in e["payload"]["error"]
        R.check(name, ok, str(e)[:300])
        R.check(name + "_connection_stays_open", r[1]["type"] == "action" and r[1]["seq"] == 3, str(r[1])[:200])
    except Exception as e:  # noqa
        R.check(name, False, repr(e))
    after(name)


def act_expect(name, body, status=400, must_contain=""):
    try:
        r = act_post(P_ACT, body)
        err = r.json().get("error", "") if r.headers.get("content-type", "").startswith("application/json") else ""
        R.check(name, r.status_code == status and must_contain in err, f"{r.status_code} {r.text[:300]}")
    except Exception as e:  # noqa
        R.check(name, False, repr(e))
    after(name)


def png_header_only(w, h):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def jpeg_with_size(w, h):
    b = bytearray(jpeg_bytes(F1))
    i = b.find(b"\xff\xc0")
    if i < 0:
        i = b.find(b"\xff\xc2")
    b[i + 5:i + 9] = struct.pack(">HH", h, w)
    return bytes(b)


def b64(x):
    return base64.b64encode(x).decode()


# ---- malformed messages ----
openpi_expect_error("openpi_malformed_msgpack", b"\xc1\x00\x01garbage", "msgpack")
openpi_expect_error("openpi_truncated_msgpack", op_pack(OP_OBS)[:1000], "msgpack")
openpi_expect_error("openpi_array_count_bomb", b"\xdd\xff\xff\xff\xff", "msgpack")
openpi_expect_error("openpi_deep_nesting", b"\x91" * 5000 + b"\xc0", "nesting")
try:
    r = asyncio.run(vla_raw([b"\x84\xa4type\xabobserv", vla_pack("observation", VLA_OBS, 3)]))
    R.check("vla_malformed_msgpack", r[0]["type"] == "error" and "observation_failed" in r[0]["payload"]["error"], str(r[0])[:200])
    R.check("vla_malformed_msgpack_connection_stays_open", r[1]["type"] == "action", str(r[1])[:200])
except Exception as e:  # noqa
    R.check("vla_malformed_msgpack", False, repr(e))
after("vla_malformed_msgpack")
act_expect("act_malformed_json", '{"external_cam": {"__numpy__": ', 400, "JSON")
act_expect("act_json_not_object", '[1, 2, 3]', 400, "object")
act_expect("act_bad_base64", dict(ACT_BODY, external_cam={"__numpy__": "!!!!", "dtype": "|u1", "shape": [1, 1, 3]}), 400, "base64")

# ---- wrong dtype / shape / missing key ----
act_expect("act_wrong_dtype", dict(ACT_BODY, state={"__numpy__": b64(b"\0" * 64), "dtype": "<c8", "shape": [8]}), 400, "dtype")
openpi_expect_error("openpi_wrong_dtype", op_pack(dict(OP_OBS, **{"observation/image": {b"__ndarray__": True, b"data": b"\0" * 12,
                                                                                   b"dtype": "<U1", b"shape": [1, 1, 3]}})), "dtype")
vla_expect_error("vla_wrong_dtype", dict(VLA_OBS, states={"__ndarray__": True, "data": b"\0" * 8, "dtype": "|O", "shape": [1]}), "dtype")
act_expect("act_wrong_shape", dict(ACT_BODY, external_cam=jn(np.zeros((10, 10), np.uint8))), 400, "HxWx3")
act_expect("act_shape_data_mismatch", dict(ACT_BODY, external_cam={"__numpy__": b64(b"\0" * 30), "dtype": "|u1", "shape": [10, 10, 3]}), 400, "bytes")
act_expect("act_wrong_state_dim", dict(ACT_BODY, state=jn(np.zeros(5, np.float32))), 400, "state")
openpi_expect_error("openpi_wrong_shape", op_pack(dict(OP_OBS, **{"observation/image": np.zeros((4, 4, 2), np.uint8)})), "HxWx3")
act_expect("act_missing_key", {k: v for k, v in ACT_BODY.items() if k != "instruction"}, 400, "instruction")
openpi_expect_error("openpi_missing_key", op_pack({k: v for k, v in OP_OBS.items() if k != "observation/state"}), "observation/state")
vla_expect_error("vla_missing_key", {k: v for k, v in VLA_OBS.items() if k != "task_description"}, "task_description")

# ---- hostile image headers, truncated images ----
vla_expect_error("vla_png_100000x100000_header", dict(VLA_OBS, images={"agentview": {"__image__": True, "format": "png",
                 "data": png_header_only(100000, 100000), "shape": [100000, 100000, 3]}, "wrist": F2}), "agentview")
act_expect("act_png_100000x100000_header", {"images_jpeg": {"external_cam": b64(png_header_only(100000, 100000)), "wrist_cam": b64(jpeg_bytes(F2))},
                                            "instruction": TASK, "state": jn(STATE)}, 400, "external_cam")
openpi_expect_error("openpi_raw_100000x100000_header", op_pack(dict(OP_OBS, **{"observation/image": {b"__ndarray__": True, b"data": b"\0" * 12,
                                                                                                 b"dtype": "|u1", b"shape": [100000, 100000, 3]}})), "observation/image")
act_expect("act_jpeg_65535x65535", {"images_jpeg": {"external_cam": b64(jpeg_with_size(65535, 65535)), "wrist_cam": b64(jpeg_bytes(F2))},
                                    "instruction": TASK, "state": jn(STATE)}, 400, "external_cam")
vla_expect_error("vla_jpeg_65535x65535", dict(VLA_OBS, images={"agentview": {"__image__": True, "format": "jpeg",
                 "data": jpeg_with_size(65535, 65535), "shape": [65535, 65535, 3]}, "wrist": F2}), "agentview")
tj = jpeg_bytes(F1)
act_expect("act_truncated_jpeg", {"images_jpeg": {"external_cam": b64(tj[:len(tj) // 2]), "wrist_cam": b64(jpeg_bytes(F2))},
                                  "instruction": TASK, "state": jn(STATE)}, 400, "external_cam")
tp = png_bytes(F1)
vla_expect_error("vla_truncated_png", dict(VLA_OBS, images={"agentview": {"__image__": True, "format": "png", "data": tp[:len(tp) // 2],
                                                                          "shape": [120, 160, 3]}, "wrist": F2}), "agentview")
act_expect("act_truncated_png", {"images_jpeg": {"external_cam": b64(tp[:len(tp) // 2]), "wrist_cam": b64(jpeg_bytes(F2))},
                                 "instruction": TASK, "state": jn(STATE)}, 400, "external_cam")

# ---- over the size cap (the server runs with --max-message-mb 4) ----
openpi_expect_error("openpi_frame_over_cap", b"\x00" * (5 << 20), "limit")


async def vla_big():
    async with websockets.connect(f"ws://{HOST}:{P_VLA}/", max_size=None, compression=None) as ws:
        await ws.send(vla_pack("hello", {}, 1))
        await ws.recv()
        await ws.send(b"\x00" * (5 << 20))
        m = vla_unpack(await asyncio.wait_for(ws.recv(), 10))
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as e:
            return m, e.code
        return m, None


try:
    m, code = asyncio.run(vla_big())
    R.check("vla_frame_over_cap", m["type"] == "error" and "limit" in m["payload"]["error"] and code == 1009, f"{m} {code}")
except Exception as e:  # noqa
    R.check("vla_frame_over_cap", False, repr(e))
after("vla_frame_over_cap")


def raw_http(port, head, body=b"", read=True, timeout=10):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.sendall(head + body)
    data = b""
    if read:
        try:
            while b"\r\n\r\n" not in data:
                c = s.recv(65536)
                if not c:
                    break
                data += c
        except socket.timeout:
            pass
    return s, data


s, resp = raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (5 << 20))
R.check("act_body_over_cap_413", resp.startswith(b"HTTP/1.1 413"), resp[:100])
s.close()
after("act_body_over_cap")
# Content-Length that is not one decimal number (src/server/route.c): 400 naming it, the body never run


def with_body(s, resp):
    """resp (a head read by raw_http) and the JSON body after it, up to its closing brace"""
    while b"}" not in resp.split(b"\r\n\r\n", 1)[-1]:
        c = s.recv(4096)
        if not c:
            break
        resp += c
    s.close()
    return resp.split(b"\r\n\r\n", 1)[0], resp.split(b"\r\n\r\n", 1)[-1]


for name, cl in (("sign", b"+2"), ("junk", b"2x"), ("quote", b'1"2'), ("repeated", b"2\r\nContent-Length: 2")):
    hd, body = with_body(*raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: " + cl + b"\r\n\r\n", b"{}"))
    R.check(f"act_content_length_{name}_400", hd.startswith(b"HTTP/1.1 400") and b"Content-Length" in body, hd[:40] + body[:100])
hd, body = with_body(*raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"))
R.check("act_content_length_past_2_64_413", hd.startswith(b"HTTP/1.1 413") and b"limit of 4194304" in body, hd[:40] + body[:100])
s, resp = raw_http(P_ACT, b"PUT /act HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n", b"{}")
s.close()
R.check("act_put_404", resp.startswith(b"HTTP/1.1 404"), resp[:100])
after("act_content_length_refused")

# ---- clients that vanish or stall ----
async def openpi_vanish():
    ws = await websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None)
    await ws.recv()
    await ws.send(op_pack(OP_OBS))
    ws.transport.abort()  # gone before the reply


asyncio.run(openpi_vanish())
time.sleep(0.3)
after("openpi_client_disconnects_mid_request")
import json as _json
body = _json.dumps(ACT_BODY).encode()
s, _ = raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body), body, read=False)
s.close()
s, _ = raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body), body[:len(body) // 2], read=False)
s.close()
time.sleep(0.3)
after("act_client_disconnects_mid_request")


def ws_handshake(port):
    s = socket.create_connection((HOST, port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        c = s.recv(4096)
        if not c:
            break
        data += c
    return s, data


def masked_header(n, opcode=0x2):
    return bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", n) + b"\x01\x02\x03\x04"


stalled = []
for port in (P_OP, P_VLA):
    s, hs = ws_handshake(port)
    R.check(f"ws{port}_raw_handshake", hs.startswith(b"HTTP/1.1 101"), hs[:80])
    s.sendall(masked_header(100000) + b"\x00" * 5000)  # half (less) of a frame, then silence
    stalled.append(s)
s, _ = raw_http(P_ACT, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", b"{" * 1000, read=False)
stalled.append(s)
ok, why = good_all()
R.check("half_frame_stall_others_served", ok, why)


def closed_within(s, secs):
    s.settimeout(secs)
    t = time.time()
    try:
        while time.time() - t < secs:
            if not s.recv(65536):
                return True
    except (socket.timeout, ConnectionResetError):
        return False
    return True


R.check("half_frame_stall_closed_by_idle_timeout", all(closed_within(s, 8) for s in stalled), "a stalled connection stayed open")
for s in stalled:
    s.close()
after("half_frame_stall")

# ---- garbage on every port ----
for port in PORTS:
    for junk in (os.urandom(4096), b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(200), b"\r\n" * 3000):
        s = socket.create_connection((HOST, port), timeout=10)
        try:
            s.sendall(junk)
            closed_within(s, 8)
        except (ConnectionResetError, BrokenPipeError):
            pass
        s.close()
after("non_http_garbage")

# ---- 200 connections at once ----
async def many():
    conns = await asyncio.gather(*[websockets.connect(f"ws://{HOST}:{P_OP}/", max_size=None, compression=None, open_timeout=30)
                                   for _ in range(200)])
    metas = await asyncio.gather(*[c.recv() for c in conns])
    return conns, metas


async def many_and_good():
    conns, metas = await many()
    loop = asyncio.get_running_loop()
    ok, why = await loop.run_in_executor(None, good_all)
    await asyncio.gather(*[c.close() for c in conns])
    return len(metas), ok, why


n, ok, why = asyncio.run(many_and_good())
R.check("200_ws_connections_open", n == 200, str(n))
R.check("200_ws_connections_good_request_meanwhile", ok, why)
with ThreadPoolExecutor(50) as ex:
    codes = list(ex.map(lambda i: get(PORTS[i % 3], "/livez").status_code, range(200)))
R.check("200_http_livez_at_once", codes.count(200) == 200, str(set(codes)))
after("200_connections")
# float32 frames in [0, 1] (an unaligned buffer inside the message) are accepted
_, r = asyncio.run(openpi_infer(P_OP, dict(OP_OBS, **{"observation/image": (F1 / 255.0).astype(np.float32)})))
R.check("openpi_float32_frame", r["actions"].ndim == 2)
# every connection the faults opened is gone again (no connection state kept)
n = -1
for _ in range(50):
    m = get(P_OP, "/metrics").text
    n = int(float([l for l in m.splitlines() if l.startswith("mact_connections ")][0].split()[1]))
    if n <= 1:
        break
    time.sleep(0.1)
R.check("connections_released", n <= 1, f"mact_connections {n}")
sys.exit(1 if R.failed else 0)
