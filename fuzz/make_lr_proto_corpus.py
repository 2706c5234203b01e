#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_lr_proto (fuzz/fuzz_lr_proto.c) into fuzz/corpus/lr_proto/: chunk sequences
LeRobot's sender makes, the ones the rules refuse, and the other message types, protobuf-encoded by hand
(no protobuf package needed). Run from the repository root."""
import os
import struct


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def obs(state, data):
    m = b""
    if state:
        m += b"\x08" + varint(state)
    if data:
        m += b"\x12" + varint(len(data)) + data
    return m


def bytes_msg(data):  # PolicySetup / Actions: field 1, bytes
    return b"\x0a" + varint(len(data)) + data if data else b""


def rec(kind, msg):
    return bytes([kind]) + struct.pack("<H", len(msg)) + msg


B, M, E = 1, 2, 3
seeds = {
    "single_end": b"\x10" + rec(0, obs(E, b"hello")),
    "begin_middle_end": b"\x10" + rec(0, obs(B, b"a" * 100)) + rec(1, obs(M, b"b" * 100)) + rec(0, obs(E, b"c" * 50)),
    "two_payloads": b"\x10" + rec(0, obs(E, b"one")) + rec(0, obs(B, b"x")) + rec(0, obs(E, b"y")),
    "middle_first": b"\x10" + rec(0, obs(M, b"m" * 10)) + rec(0, obs(E, b"e")),
    "unknown_state": b"\x10" + rec(0, obs(0, b"u")) + rec(0, obs(7, b"v")),
    "over_cap": b"\x00" + rec(0, obs(B, b"z" * 10)) + rec(0, obs(M, b"z" * 10)) + rec(0, obs(E, b"z")),
    "begin_twice": b"\x10" + rec(0, obs(B, b"a")) + rec(0, obs(B, b"b")) + rec(0, obs(E, b"c")),
    "open_at_end": b"\x10" + rec(0, obs(B, b"a" * 30)),
    "empty_end": b"\x10" + rec(0, obs(E, b"")),
    "not_protobuf": b"\x10" + rec(0, b"\x12\xff\xff\xff\x7f") + rec(0, obs(E, b"after")),
    "other_types": b"\x10" + rec(2, bytes_msg(b"setup" * 4)) + rec(3, b"") + rec(7, bytes_msg(b"actions")) + rec(3, b"\x0a\x01x"),
}
d = "fuzz/corpus/lr_proto"
os.makedirs(d, exist_ok=True)
for name, b in seeds.items():
    with open(os.path.join(d, name), "wb") as f:
        f.write(b)
print(f"{len(seeds)} seeds in {d}")
