"""Client-side codecs and helpers for the mact serve tests, written from the protocols' public descriptions
(openpi_client's msgpack-numpy, json_numpy, vla-evaluation-harness's messages); nothing here imports the server."""
import asyncio, base64, io, json, os, socket, subprocess, time

import msgpack
import numpy as np
import requests
import websockets
from PIL import Image

HOST = "127.0.0.1"
MACT = os.environ.get("MACT_BIN", "build/mact")


# ---- openpi: msgpack-numpy with bin-typed keys ----
def _op_default(o):
    if isinstance(o, np.ndarray):
        return {b"__ndarray__": True, b"data": o.tobytes(), b"dtype": o.dtype.str, b"shape": o.shape}
    if isinstance(o, np.generic):
        return {b"__npgeneric__": True, b"data": o.item(), b"dtype": o.dtype.str}
    return o


def _op_hook(o):
    if b"__ndarray__" in o:
        return np.ndarray(buffer=o[b"data"], dtype=np.dtype(o[b"dtype"]), shape=o[b"shape"])
    if b"__npgeneric__" in o:
        return np.dtype(o[b"dtype"]).type(o[b"data"])
    return o


# MACT_WIRE_CAPTURE=DIR: every message the clients encode is also written to DIR/<protocol>/<sha1>, and the head of
# every HTTP request any client in the process sends (requests, websockets' upgrade, raw sockets) to
# DIR/http/<sha1> (the fuzz seed corpora, fuzz/corpus/serve_* and route, are captured this way:
# fuzz/capture_serve_corpus.py)
_CAPTURE = os.environ.get("MACT_WIRE_CAPTURE")


def capture(proto, data):
    if _CAPTURE:
        import hashlib
        b = data.encode() if isinstance(data, str) else bytes(data)
        d = os.path.join(_CAPTURE, proto)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, hashlib.sha1(b).hexdigest()), "wb") as f:
            f.write(b)
    return data


if _CAPTURE:
    import re as _re

    def _capture_head(data):
        b = bytes(data[:65536])
        end = b.find(b"\r\n\r\n")
        if end > 0 and _re.match(rb"[A-Z]+ \S+ HTTP/1\.[01]\r\n", b):
            capture("http", b[:end + 4])

    def _wrap(f):
        def send(self, data, *a, **k):
            try:
                _capture_head(data)
            except Exception:   # capturing must never change what the client does
                pass
            return f(self, data, *a, **k)
        return send
    socket.socket.send = _wrap(socket.socket.send)
    socket.socket.sendall = _wrap(socket.socket.sendall)


def op_pack(x):
    return capture("openpi", msgpack.packb(x, default=_op_default, use_bin_type=True))


def op_unpack(b):
    return msgpack.unpackb(b, object_hook=_op_hook, raw=False)


# ---- vla-eval: envelopes, str-keyed ndarrays, __image__ frames (PNG by default) ----
def encode_image(img, fmt="png"):
    if fmt == "raw":
        return {"__image__": True, "format": "raw", "data": img.tobytes(), "dtype": img.dtype.str, "shape": list(img.shape)}
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG" if fmt == "png" else "JPEG", **({"quality": 95} if fmt == "jpeg" else {}))
    return {"__image__": True, "format": fmt, "data": buf.getvalue(), "shape": list(img.shape)}


def _vla_default(o, fmt="png"):
    if isinstance(o, np.ndarray):
        if o.ndim == 3 and o.dtype == np.uint8 and o.shape[2] in (1, 3, 4) and fmt != "raw":
            return encode_image(o, fmt)
        return {"__ndarray__": True, "data": o.tobytes(), "dtype": o.dtype.str, "shape": list(o.shape)}
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    return o


def _vla_hook(o):
    if "__ndarray__" in o:
        return np.frombuffer(o["data"], dtype=np.dtype(o["dtype"])).reshape(o["shape"]).copy()
    return o


def vla_pack(type_, payload, seq, fmt="png"):
    raw = {"type": type_, "payload": payload, "seq": seq, "timestamp": time.time()}
    return capture("vla", msgpack.packb(raw, default=lambda o: _vla_default(o, fmt), use_bin_type=True))


def vla_unpack(b):
    return msgpack.unpackb(b, object_hook=_vla_hook, raw=False)


# ---- json_numpy ----
def jn(a):
    a = np.ascontiguousarray(a)
    return {"__numpy__": base64.b64encode(a.tobytes()).decode(), "dtype": a.dtype.str, "shape": list(a.shape)}


def jn_dec(d):
    return np.frombuffer(base64.b64decode(d["__numpy__"]), dtype=np.dtype(d["dtype"])).reshape(d["shape"])


def jpeg_bytes(img, q=90):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=q)
    return buf.getvalue()


def png_bytes(img):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


# ---- the reference: mact run with the same frames, task, state and seed ----
def fmt_state(state):
    return ",".join(repr(float(x)) for x in np.asarray(state).ravel())


def mact_run(model, image_paths, task, state, seed, extra=()):
    cmd = [MACT, "run", "--model", model]
    for p in image_paths:
        cmd += ["--image", p]
    cmd += ["--task", task, "--state", fmt_state(state), "--seed", str(seed), "--json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return np.array(json.loads(out)["actions"], dtype=np.float32)


def save_frame(path, img):
    np.save(path, img)
    return path


def bitwise_equal(a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


# ---- clients ----
async def openpi_infer(port, obs, headers=None, conn=None):
    """One request on a fresh connection (or conn): returns (metadata, result)."""
    async with websockets.connect(f"ws://{HOST}:{port}/", max_size=None, compression=None,
                                  extra_headers=headers or {}) as ws:
        meta = op_unpack(await ws.recv())
        await ws.send(op_pack(obs))
        r = await ws.recv()
        if isinstance(r, str):
            raise RuntimeError("server error: " + r)
        return meta, op_unpack(r)


def act_post(port, body, headers=None, timeout=60):
    data = capture("act", body if isinstance(body, (bytes, str)) else json.dumps(body))
    return requests.post(f"http://{HOST}:{port}/act", data=data, headers=headers or {}, timeout=timeout)


async def vla_session(port, msgs, fmt="png"):
    """Sends hello then each (type, payload); returns the replies (hello reply first)."""
    out = []
    async with websockets.connect(f"ws://{HOST}:{port}/", max_size=None, compression=None) as ws:
        seq = 1
        await ws.send(vla_pack("hello", {"harness_version": "test", "protocol_version": 1}, seq, fmt))
        out.append(vla_unpack(await ws.recv()))
        for t, p in msgs:
            seq += 1
            await ws.send(vla_pack(t, p, seq, fmt))
            if t in ("observation", "hello"):
                out.append(vla_unpack(await ws.recv()))
    return out


def get(port, path, timeout=10):
    return requests.get(f"http://{HOST}:{port}{path}", timeout=timeout)


def livez_all(ports):
    return all(get(p, "/livez").status_code == 200 for p in ports)


def rng_frame(rng, h, w):
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, name, ok, why=""):
        if ok:
            print(f"PASS {name}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}: {why}", flush=True)
        return ok
