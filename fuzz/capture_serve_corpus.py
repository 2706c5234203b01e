#!/usr/bin/python3
"""Seed corpora of the server fuzz targets from the test clients' real traffic.

    MACT_WIRE_CAPTURE=/tmp/cap tests/run.sh test_serve.sh     # tests/serve/wire.py writes every message it encodes
    fuzz/capture_serve_corpus.py /tmp/cap                     # -> fuzz/corpus/{serve_openpi,serve_act,serve_vla,wire}

Keeps messages up to MAX bytes (the fuzz runs' -max_len), at most PER (16) of them per protocol, chosen to spread over
sizes (smallest first within each distinct leading 48 bytes, so the key sets differ). fuzz_wire gets each message
behind its selector byte (0 msgpack, 1 JSON), plus base64 and dtype strings."""
import hashlib, os, sys

MAX, PER = 65536, 16
src = sys.argv[1]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, data):
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
    print(f"{target}: {len(keep[:PER])} seeds of {len(files)} captured ({len(msgs)} <= {MAX} bytes)")
for b in wire:
    put("wire", b)
for s in (b"AACAPw==", b"AAECAwQFBgc=", b"", b"QQ==", b"QUI=", b"QUJD"):
    put("wire", b"\x02" + s)
for s in (b"<f4", b"<f8", b"|u1", b"<i8", b"|b1", b"float32", b"uint8", b">f4"):
    put("wire", b"\x03" + s)
print(f"wire: {len(wire) + 14} seeds")
