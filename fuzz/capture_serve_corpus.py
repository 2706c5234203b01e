#!/usr/bin/python3
"""Seed corpora of the server fuzz targets from the test clients' real traffic.

    MACT_WIRE_CAPTURE=/tmp/cap tests/run.sh test_serve.sh     # tests/serve/wire.py writes every message it encodes
    fuzz/capture_serve_corpus.py /tmp/cap     # -> fuzz/corpus/{serve_openpi,serve_act,serve_vla,wire,serve_route}
    fuzz/capture_serve_corpus.py /tmp/cap serve_route    # only the targets named

Keeps messages up to MAX bytes (the fuzz runs' -max_len), at most PER (16) of them per protocol, chosen to spread over
sizes (smallest first within each distinct leading 48 bytes, so the key sets differ). fuzz_wire gets each message
behind its selector byte (0 msgpack, 1 JSON), plus base64 and dtype strings. fuzz_serve_route gets one HTTP request
head (DIR/http) of each shape (method, path, header names; the numbers and WebSocket keys in them aside) behind
its configuration byte: the protocol the head was sent to (act for /act, openpi and vla-eval for an upgrade, act for
the probes), ready, and an API key configured and required when the head carries one."""
import hashlib, os, re, sys

MAX, PER = 65536, 16
src = sys.argv[1]
only = set(sys.argv[2:])
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def say(target, line):
    if not only or target in only:
        print(line)


def put(target, data):
    if only and target not in only:
        return
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


wire = []
for proto, target, sel in (("openpi", "serve_openpi", 0), ("act", "serve_act", 1), ("vla", "serve_vla", 0)):
    d = os.path.join(src, proto)
    files = sorted(os.listdir(d)) if os.path.isdir(d) else []
    msgs = []
    for n in files:
        b = open(os.path.join(d, n), "rb").read()
        if len(b) <= MAX:
            msgs.append(b)
    msgs.sort(key=len)
    seen, keep = set(), []
    for b in msgs:               # one per distinct head first, then the rest by size
        if b[:48] not in seen:
            seen.add(b[:48])
            keep.append(b)
    for b in msgs:
        if len(keep) >= PER:
            break
        if b not in keep:
            keep.append(b)
    for b in keep[:PER]:
        put(target, b)
    wire += [bytes([sel]) + b for b in keep[:PER // 4]]
    say(target, f"{target}: {len(keep[:PER])} seeds of {len(files)} captured ({len(msgs)} <= {MAX} bytes)")
for b in wire:
    put("wire", b)
for s in (b"AACAPw==", b"AAECAwQFBgc=", b"", b"QQ==", b"QUI=", b"QUJD"):
    put("wire", b"\x02" + s)
for s in (b"<f4", b"<f8", b"|u1", b"<i8", b"|b1", b"float32", b"uint8", b">f4"):
    put("wire", b"\x03" + s)
say("wire", f"wire: {len(wire) + 14} seeds")

# fuzz_serve_route: byte 0 = protocol (0 openpi, 1 act, 2 vla-eval) | 4 key configured | 8 required | 16 ready
heads = {}
hd = os.path.join(src, "http")
for n in sorted(os.listdir(hd)) if os.path.isdir(hd) else []:
    b = open(os.path.join(hd, n), "rb").read()
    lines = b.split(b"\r\n")
    shape = (lines[0], tuple(sorted(l.split(b":")[0].lower() for l in lines[1:] if b":" in l)))
    if shape not in heads or len(b) < len(heads[shape]):
        heads[shape] = b
n_route = 0
for shape, b in sorted(heads.items()):
    key = 12 if b"\nauthorization:" in b.lower() else 0
    protos = (0, 2) if b"\nupgrade: websocket" in b.lower() else (1,)
    for p in protos:
        put("serve_route", bytes([p | key | 16]) + b)
        n_route += 1
put("serve_route", bytes([1 | 12 | 16]) + b"POST /act HTTP/1.1\r\nAuthorization: Bearer sekret\r\nContent-Length: 2\r\n\r\n")
put("serve_route", bytes([1]) + b"GET /readyz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n")   # not ready, a query
say("serve_route", f"serve_route: {n_route + 2} seeds ({len(heads)} head shapes of {len(os.listdir(hd)) if os.path.isdir(hd) else 0} captured)")

