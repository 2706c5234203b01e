"""Hostile and slow clients against mact serve's connection limits (tests/test_serve_limits.sh starts the server
with --max-connections 200 --max-connections-per-ip 50 --header-timeout 3). The hostile clients come from other
loopback addresses (127.0.0.2, .3, ...), the good requests from 127.0.0.1: after each hostile case (and during the
floods) a good request on every protocol must be answered.

usage: test_limits.py PID OPENPI_PORT ACT_PORT VLA_PORT"""
import asyncio
import os
import resource
import socket
import sys
import time

import msgpack
import requests
import websockets

PID, OP, AP, VP = (int(x) for x in sys.argv[1:5])
fails = 0
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))


def check(name, ok, why=""):
    global fails
    print(("PASS " if ok else "FAIL ") + "limits_" + name + ("" if ok else ": " + str(why)[:300]))
    fails += not ok


def fds():
    return len(os.listdir(f"/proc/{PID}/fd"))


def rss_mb():
    with open(f"/proc/{PID}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def metric(name):
    t = requests.get(f"http://127.0.0.1:{AP}/metrics", timeout=5).text
    return sum(float(l.split()[-1]) for l in t.splitlines() if l.startswith(name))


async def good_all(tag):
    """one good exchange per protocol from 127.0.0.1: act's GET /act identity, openpi's metadata frame,
    vla-eval's hello"""
    ok = []
    try:
        ok.append(requests.get(f"http://127.0.0.1:{AP}/act", timeout=10).status_code == 200)
    except Exception as e:
        ok.append(False)
        print("INFO", tag, "act:", e)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{OP}", max_size=None, open_timeout=10) as ws:
            meta = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 10))
            ok.append("server" in meta)
    except Exception as e:
        ok.append(False)
        print("INFO", tag, "openpi:", e)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{VP}", max_size=None, open_timeout=10) as ws:
            await ws.send(msgpack.packb({"type": "hello", "payload": {}, "seq": 1, "timestamp": time.time()}))
            r = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 10))
            ok.append(r.get("type") == "hello")
    except Exception as e:
        ok.append(False)
        print("INFO", tag, "vla-eval:", e)
    check(tag + "_then_good_on_every_protocol", all(ok), ok)


def sockets_from(ip, n, port, first=b""):
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind((ip, 0))
        s.setblocking(True)
        try:
            s.connect(("127.0.0.1", port))
            if first:
                s.send(first)
        except OSError:
            s.close()
            continue
        out.append(s)
    return out


def closed(s):
    s.setblocking(False)
    try:
        while True:
            d = s.recv(65536)
            if d == b"":
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_closed(ss, secs):
    t = time.time()
    while time.time() - t < secs:
        if all(closed(s) for s in ss):
            return True
        time.sleep(0.2)
    return all(closed(s) for s in ss)


async def main():
    fd0 = fds()
    # 1000 idle TCP connections from one address: 50 let in (per-IP limit), the rest refused; all closed by the
    # header deadline; the server's descriptors bounded meanwhile
    ss = sockets_from("127.0.0.2", 1000, AP)
    peak = fds()
    await good_all("idle_flood_during")
    check("idle_flood_fds_bounded", peak <= fd0 + 200 + 200 + 8, f"{peak} fds (before {fd0})")
    check("idle_flood_closed_by_header_deadline", wait_closed(ss, 8), sum(not closed(s) for s in ss))
    [s.close() for s in ss]
    nref = metric('mact_sockets_refused_total{reason="per_ip_limit"}') + metric('mact_sockets_refused_total{reason="past_grace"}')
    check("idle_flood_refused_counted", nref >= 950, nref)
    await good_all("idle_flood")
    # 100 slowloris clients: a request line, then a header byte a second
    ss = sockets_from("127.0.0.3", 100, AP, b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0 = time.time()
    alive = True
    while time.time() - t0 < 8 and alive:
        for s in ss:
            try:
                s.send(b"a")
            except OSError:
                pass
        time.sleep(1)
        alive = not all(closed(s) for s in ss)
    check("slowloris_closed_by_header_deadline", not alive and time.time() - t0 < 7, f"{time.time() - t0:.1f} s")
    [s.close() for s in ss]
    await good_all("slowloris")
    # 300 idle WebSocket connections from one address (upgraded: no header deadline): 50 in, the rest answered
    # 503 naming the limit
    held, refused, other = [], 0, []
    for i in range(300):
        try:
            ws = await websockets.connect(f"ws://127.0.0.1:{VP}", max_size=None, open_timeout=10,
                                          sock=_bound_sock("127.0.0.4", VP))
            held.append(ws)
        except websockets.exceptions.InvalidStatusCode as e:
            refused += e.status_code == 503
        except Exception as e:
            other.append(str(e)[:80])
    check("ws_idle_per_ip_limit", len(held) == 50 and refused == 250, f"{len(held)} held, {refused} refused, {other[:2]}")
    await good_all("ws_idle_held")
    for ws in held:
        await ws.close()
    # a client that sends requests and never reads the replies: memory bounded, the connection dropped
    rss0 = rss_mb()
    s = _bound_sock("127.0.0.5", VP)
    s.setblocking(True)
    s.send(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    time.sleep(0.3)
    bad = _ws_frame(b"\xc1" * 64)  # not msgpack: each one answered with an error message
    s.settimeout(0.5)
    sent = 0
    try:
        for i in range(200000):
            s.send(bad)
            sent += 1
    except OSError:
        pass
    time.sleep(1)
    grow = rss_mb() - rss0
    check("never_reads_memory_bounded", grow < 64, f"RSS grew {grow:.1f} MB")
    drop = metric('mact_sockets_refused_total{reason="replies_unread"}')
    print(f"INFO limits_never_reads: {sent} bad frames sent before the socket blocked; RSS +{grow:.1f} MB; "
          f"dropped connections {drop:.0f}")
    s.close()
    await good_all("never_reads")
    # thousands of tiny frames: 5000 one-byte fragments of one message (a valid hello), then 5000 pings
    async with websockets.connect(f"ws://127.0.0.1:{VP}", max_size=None) as ws:
        msg = msgpack.packb({"type": "hello", "payload": {}, "seq": 7, "timestamp": 0.0})
        await ws.send([msg[i:i + 1] for i in range(len(msg))])   # one fragment per byte
        r = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 10))
        check("fragmented_message_answered", r.get("type") == "hello" and r.get("seq") == 7, r)
        t = time.time()
        for i in range(5000):
            ws.ping(b"%d" % i)   # not awaited: lws may answer only the latest of pings it has not answered
        await asyncio.sleep(0.5)
        pong = await ws.ping(b"after")
        await asyncio.wait_for(pong, 10)
        await ws.send(msgpack.packb({"type": "hello", "payload": {}, "seq": 8, "timestamp": 0.0}))
        r = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 10))
        check("ping_flood_then_pong_and_request_on_the_same_connection", r.get("seq") == 8, r)
        print(f"INFO limits_ping_flood: 5000 pings in {time.time() - t:.2f} s")
    await good_all("tiny_frames_and_pings")
    # permessage-deflate is not offered (no compressed-frame bomb to inflate)
    async with websockets.connect(f"ws://127.0.0.1:{OP}", max_size=None, compression="deflate") as ws:
        check("no_permessage_deflate", not ws.extensions, ws.extensions)
    check("fds_back_after_all", fds() <= fd0 + 4, f"{fds()} fds (before {fd0})")


def _bound_sock(ip, port):
    s = socket.socket()
    s.bind((ip, 0))
    s.connect(("127.0.0.1", port))
    return s


def _ws_frame(payload):
    """a masked binary WebSocket frame (client to server)"""
    n = len(payload)
    hdr = bytes([0x82])
    if n < 126:
        hdr += bytes([0x80 | n])
    elif n < 65536:
        hdr += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        hdr += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = b"\x01\x02\x03\x04"
    return hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


asyncio.run(main())
sys.exit(1 if fails else 0)
