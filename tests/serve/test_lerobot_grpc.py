"""LeRobot async-inference gRPC transport (src/server/grpc_lerobot.c) against Python's grpcio, the stack
LeRobot's robot client uses. Run by tests/test_lerobot_grpc.sh:

    test_lerobot_grpc.py ECHO_BINARY STUB_DIR

ECHO_BINARY is $BUILD/tests/lr_grpc_echo (tests/c/lr_grpc_echo.c: the transport with recording handlers);
STUB_DIR holds lerobot_services_pb2(_grpc).py generated from src/server/lerobot_services.proto. Each case
prints PASS name / FAIL name: why. Every server started here is stopped by closing its standard input and
must exit 0 with no sanitizer report (under `make asan` that is LeakSanitizer's check of the stop)."""
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib

ECHO, STUBS = sys.argv[1], sys.argv[2]
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
import lerobot_services_pb2 as pb  # noqa: E402
import lerobot_services_pb2_grpc as pbg  # noqa: E402
from lerobot_wire import CHUNK, chunks  # noqa: E402,F401

MiB = 1024 * 1024
T = 30  # seconds: the deadline of every call made here, so that a hang is a failure, not a stuck suite
failed = 0


def hook(t, v, tb):
    traceback.print_exception(t, v, tb)
    print(f"FAIL lr_grpc_harness: {t.__name__}: {v}", flush=True)


sys.excepthook = hook


def ok(name):
    print(f"PASS {name}", flush=True)


def bad(name, why):
    global failed
    failed = 1
    print(f"FAIL {name}: {why}", flush=True)


def check(name, cond, why):
    ok(name) if cond else bad(name, why)


def crc(b):
    return f"{zlib.crc32(b):08x}"




def code_of(f, *a, **kw):
    """(status code, details) of a call; (OK, reply) when it succeeded."""
    try:
        return grpc.StatusCode.OK, f(*a, timeout=T, **kw)
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


class Server:
    def __init__(self, *args):
        self.err = tempfile.NamedTemporaryFile("w+", prefix="lr_echo_", suffix=".log", delete=False)
        self.p = subprocess.Popen([ECHO, "--port", "0", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True)
        line = self.p.stdout.readline()
        m = re.match(r"port (\d+)", line)
        if not m:
            self.p.kill()
            raise RuntimeError(f"lr_grpc_echo did not start: {line!r} {open(self.err.name).read()[-500:]}")
        self.port = int(m.group(1))
        self.addr = f"127.0.0.1:{self.port}"
        self.ch = grpc.insecure_channel(self.addr)
        self.stub = pbg.AsyncInferenceStub(self.ch)

    def channel(self):
        return grpc.insecure_channel(self.addr)

    def log(self):
        return open(self.err.name).read()

    def stop(self, name, within=15):
        """Closes stdin; the server must exit 0 within `within` s with no sanitizer report."""
        self.ch.close()
        t0 = time.time()
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            bad(name, f"did not stop within {within} s")
            return None
        dt = time.time() - t0
        log = self.log()
        os.unlink(self.err.name)
        if rc != 0 or re.search(r"ERROR: (Address|Leak|Thread)Sanitizer|runtime error:", log):
            bad(name, f"exit {rc}: {log[-1500:]}")
        else:
            ok(name)
        return dt


def actions(stub):
    c, r = code_of(stub.GetActions, pb.Empty())
    if c != grpc.StatusCode.OK:
        return None, f"GetActions {c}: {r}"
    return r.data, None


def parse(data):
    return dict(kv.split("=", 1) for kv in data.decode().split())


def send_and_verify(name, srv, payload, n_chunks=None):
    """Sends payload as LeRobot does and checks that GetActions reports its length and hash."""
    msgs = list(chunks(payload))
    if n_chunks is not None and len(msgs) != n_chunks:
        bad(name, f"test bug: {len(msgs)} chunks, expected {n_chunks}")
        return
    c, r = code_of(srv.stub.SendObservations, iter(msgs))
    if c != grpc.StatusCode.OK:
        bad(name, f"SendObservations: {c} {r}")
        return
    d, e = actions(srv.stub)
    if e or not d:
        bad(name, e or "GetActions answered no data after an observation")
        return
    kv = parse(d)
    want = (str(len(payload)), crc(payload))
    check(name, (kv["len"], kv["crc"]) == want,
          f"server got len={kv['len']} crc={kv['crc']}, sent len={want[0]} crc={want[1]}")


def expect_nothing(name, srv):
    d, e = actions(srv.stub)
    check(name, e is None and d == b"", e or f"a payload was delivered: {d!r}")


def stream_status(srv, msgs):
    return code_of(srv.stub.SendObservations, iter(msgs))


def expect_code(name, got, code, pattern=None):
    c, r = got
    if c != code:
        bad(name, f"status {c} ({r!r}), expected {code}")
    elif pattern and not re.search(pattern, r):
        bad(name, f"status {c} but details {r!r} do not match {pattern!r}")
    else:
        ok(name)


rnd = random.Random(1234)


def rbytes(n):
    return rnd.randbytes(n)


# ---------------------------------------------------------------------------------------------- basics
S = Server("--max-payload", str(6 * MiB), "--wait-ms", "300")
c, r = code_of(S.stub.Ready, pb.Empty())
check("lr_ready", c == grpc.StatusCode.OK, f"{c} {r}")
c, r = code_of(S.stub.SendPolicyInstructions, pb.PolicySetup(data=b"p" * 1000))
check("lr_policy_setup", c == grpc.StatusCode.OK, f"{c} {r}")
expect_code("lr_policy_setup_handler_error", code_of(S.stub.SendPolicyInstructions, pb.PolicySetup(data=b"reject")),
            grpc.StatusCode.FAILED_PRECONDITION, "policy setup rejected")

t0 = time.time()
d, e = actions(S.stub)
dt = time.time() - t0
check("lr_get_actions_empty", e is None and d == b"" and dt >= 0.25,
      e or f"data {d!r} after {dt:.2f} s (expected no data after the handler's 0.3 s wait)")

send_and_verify("lr_obs_1_byte", S, b"\x42", n_chunks=1)
send_and_verify("lr_obs_2mib_single_end", S, rbytes(2 * MiB), n_chunks=1)
send_and_verify("lr_obs_5mib_begin_middle_end", S, rbytes(5 * MiB), n_chunks=3)
send_and_verify("lr_obs_2mib_plus_1", S, rbytes(2 * MiB + 1), n_chunks=2)

# the filled answer carries what the handlers saw: the setup length and the Ready count
c, r = code_of(S.stub.SendObservations, iter(chunks(b"abc")))
d, e = actions(S.stub)
kv = parse(d) if d else {}
check("lr_get_actions_filled", kv.get("setup") == "1000" and kv.get("ready") == "1" and kv.get("len") == "3",
      e or f"reply {d!r}")

# END without BEGIN is a whole payload (a single chunk); several payloads may share one stream
c, r = stream_status(S, [pb.Observation(transfer_state=pb.TRANSFER_END, data=b"one"),
                         pb.Observation(transfer_state=pb.TRANSFER_END, data=b"two!")])
d, e = actions(S.stub)
kv = parse(d) if d else {}
check("lr_end_without_begin_two_payloads", c == grpc.StatusCode.OK and kv.get("len") == "4"
      and kv.get("crc") == crc(b'two!'), f"{c} {r} reply {d!r}")

# refused chunk sequences: INVALID_ARGUMENT naming the rule, nothing delivered
B, M, E = pb.TRANSFER_BEGIN, pb.TRANSFER_MIDDLE, pb.TRANSFER_END
IA = grpc.StatusCode.INVALID_ARGUMENT
expect_code("lr_middle_first", stream_status(S, [pb.Observation(transfer_state=M, data=b"x" * 10),
                                                  pb.Observation(transfer_state=E, data=b"y")]), IA, "TRANSFER_MIDDLE without")
expect_nothing("lr_middle_first_nothing_delivered", S)
expect_code("lr_unknown_state", stream_status(S, [pb.Observation(transfer_state=pb.TRANSFER_UNKNOWN, data=b"x")]), IA,
            "TRANSFER_UNKNOWN")
expect_code("lr_unknown_state_after_begin", stream_status(S, [pb.Observation(transfer_state=B, data=b"x"),
                                                               pb.Observation(transfer_state=0, data=b"x")]), IA, "TRANSFER_UNKNOWN")
expect_code("lr_state_out_of_enum", stream_status(S, [pb.Observation(transfer_state=7, data=b"x")]), IA, "unknown transfer_state 7")
expect_code("lr_begin_while_open", stream_status(S, [pb.Observation(transfer_state=B, data=b"a"),
                                                      pb.Observation(transfer_state=B, data=b"b"),
                                                      pb.Observation(transfer_state=E, data=b"c")]), IA, "BEGIN while a payload is open")
expect_code("lr_stream_ends_inside_payload", stream_status(S, [pb.Observation(transfer_state=B, data=b"a" * 100)]), IA,
            "ended inside a payload")
expect_code("lr_empty_stream", stream_status(S, []), IA, "no observation")
expect_nothing("lr_refused_streams_nothing_delivered", S)

# bytes that are not an Observation / PolicySetup / Empty
raw_obs = S.ch.stream_unary("/transport.AsyncInference/SendObservations", request_serializer=lambda b: b,
                            response_deserializer=lambda b: b)
expect_code("lr_obs_not_protobuf", code_of(raw_obs, iter([b"\x12\xff\xff\xff\x7f"])), IA, "not a transport.Observation")
raw_setup = S.ch.unary_unary("/transport.AsyncInference/SendPolicyInstructions", request_serializer=lambda b: b,
                             response_deserializer=lambda b: b)
expect_code("lr_setup_not_protobuf", code_of(raw_setup, b"\x0a\x05ab"), IA, "not a transport.PolicySetup")
raw_ready = S.ch.unary_unary("/transport.AsyncInference/Ready", request_serializer=lambda b: b,
                             response_deserializer=lambda b: b)
expect_code("lr_ready_not_protobuf", code_of(raw_ready, b"\xff"), IA, "not a transport.Empty")
expect_code("lr_unknown_method", code_of(S.ch.unary_unary("/transport.AsyncInference/Nope"), b""),
            grpc.StatusCode.UNIMPLEMENTED, "not served here")
expect_code("lr_learner_service_not_served", code_of(S.ch.unary_unary("/transport.LearnerService/Ready"), b""),
            grpc.StatusCode.UNIMPLEMENTED)
expect_code("lr_observation_handler_error", stream_status(S, list(chunks(b"reject"))), IA, "observation rejected")

# over the payload cap (6 MiB here): RESOURCE_EXHAUSTED naming the cap, nothing delivered; then a good one
RE_ = grpc.StatusCode.RESOURCE_EXHAUSTED
expect_code("lr_over_payload_cap", stream_status(S, list(chunks(rbytes(7 * MiB)))), RE_, str(6 * MiB))
expect_code("lr_far_over_payload_cap", stream_status(S, chunks(rbytes(20 * MiB))), RE_, str(6 * MiB))
expect_nothing("lr_over_cap_nothing_delivered", S)
send_and_verify("lr_after_over_cap_good", S, rbytes(6 * MiB))  # exactly the cap
# one gRPC message over max_message (4 MiB): gRPC's own limit
expect_code("lr_over_max_message", stream_status(S, [pb.Observation(transfer_state=E, data=b"z" * (5 * MiB))]), RE_)
expect_nothing("lr_over_max_message_nothing_delivered", S)

# a stream cut between BEGIN and END by the client (cancel): nothing delivered, then a good request
go = threading.Event()


def cut_gen():
    yield pb.Observation(transfer_state=B, data=rbytes(CHUNK))
    yield pb.Observation(transfer_state=M, data=b"m" * 1000)
    go.wait(T)


fut = S.stub.SendObservations.future(cut_gen(), timeout=T)
time.sleep(0.5)
fut.cancel()
go.set()
check("lr_cancel_mid_stream", fut.cancelled(), f"future not cancelled: {fut}")
expect_nothing("lr_cancel_nothing_delivered", S)
send_and_verify("lr_after_cancel_good", S, rbytes(3 * MiB))

# a client process killed (SIGKILL) between BEGIN and END: nothing delivered, the server goes on
kid = subprocess.Popen([sys.executable, "-c", f"""
import sys, time, threading
sys.path.insert(0, {STUBS!r})
import grpc, lerobot_services_pb2 as pb, lerobot_services_pb2_grpc as pbg
stub = pbg.AsyncInferenceStub(grpc.insecure_channel({S.addr!r}))
def gen():
    yield pb.Observation(transfer_state=pb.TRANSFER_BEGIN, data=b"k" * {CHUNK})
    yield pb.Observation(transfer_state=pb.TRANSFER_MIDDLE, data=b"k" * 1000)
    print("sent", flush=True)
    time.sleep(60)
stub.SendObservations(gen())
"""], stdout=subprocess.PIPE, text=True)
line = kid.stdout.readline()
time.sleep(0.3)  # the MIDDLE reaches the server
kid.send_signal(signal.SIGKILL)
kid.wait()
check("lr_killed_client_started", line.strip() == "sent", f"client printed {line!r}")
expect_nothing("lr_killed_client_nothing_delivered", S)
send_and_verify("lr_after_killed_client_good", S, rbytes(CHUNK + 7))

# a LeRobot-like session: Ready, SendPolicyInstructions, then observations from one thread while another
# polls GetActions (robot_client.py's control loop and action receiver)
c1, _ = code_of(S.stub.Ready, pb.Empty())
c2, _ = code_of(S.stub.SendPolicyInstructions, pb.PolicySetup(data=b"cfg" * 10))
sent = {}
replies = []
stop_poll = threading.Event()


def poller():
    while not stop_poll.is_set():
        d, e = actions(S.stub)
        if e:
            replies.append(("error", e))
        elif d:
            replies.append(("data", parse(d)))


th = threading.Thread(target=poller)
th.start()
errs = []
for i in range(8):
    p = rbytes(rnd.choice([1000, CHUNK, CHUNK + 1, 3 * MiB]))
    sent[crc(p)] = len(p)
    c, r = stream_status(S, chunks(p))
    if c != grpc.StatusCode.OK:
        errs.append(f"{c} {r}")
    time.sleep(0.05)
time.sleep(0.5)
stop_poll.set()
th.join()
wrong = [kv for t, kv in replies if t == "data" and sent.get(kv["crc"]) != int(kv["len"])]
check("lr_session_flow", c1 == c2 == grpc.StatusCode.OK and not errs and replies and not wrong
      and all(t == "data" for t, _ in replies),
      f"errors {errs} replies {replies[:3]} mismatched {wrong[:3]}")
check("lr_session_setup_seen", replies and replies[-1][1].get("setup") == "30", f"last reply {replies[-1:]}")

# two clients at once, each on its own connection, 6 payloads each, distinct content
res = {}


def client(k):
    ch = S.channel()
    st = pbg.AsyncInferenceStub(ch)
    bad_ = []
    for i in range(6):
        p = bytes([k]) * (CHUNK + 1000 * i + k)
        try:
            st.SendObservations(chunks(p), timeout=T)
        except grpc.RpcError as e:
            bad_.append(f"{e.code()} {e.details()}")
    ch.close()
    res[k] = bad_


stream_status(S, chunks(b"marker"))  # the count before: from the reply to a marker payload
d0, _ = actions(S.stub)
base = int(parse(d0)["obs"]) if d0 else -100
ths = [threading.Thread(target=client, args=(k,)) for k in (1, 2)]
[t.start() for t in ths]
[t.join() for t in ths]
stream_status(S, chunks(b"final"))
d, e = actions(S.stub)
kv = parse(d) if d else {}
check("lr_two_clients_at_once", res.get(1) == [] and res.get(2) == [] and int(kv.get("obs", "-1")) == base + 13,
      f"errors {res} obs {kv.get('obs')} base {base}")
S.stop("lr_clean_stop")

# GetActions blocked in its handler does not hold up observation streams (2 workers: exactly the two calls)
W = Server("--threads", "2", "--wait-ms", "5000")
out = {}


def slow_poll():
    t0 = time.time()
    out["r"] = actions(W.stub)
    out["dt"] = time.time() - t0


th = threading.Thread(target=slow_poll)
th.start()
time.sleep(0.5)
c, r = code_of(W.stub.SendObservations, chunks(b"while-blocked"))
th.join()
d, e = out["r"]
check("lr_get_actions_blocks_while_obs_stream", c == grpc.StatusCode.OK and d and parse(d)["len"] == "13"
      and out["dt"] < 3.0, f"obs {c} {r}; GetActions {d!r} {e} after {out.get('dt', 0):.2f} s")
# a client that gives up while GetActions is blocked in the handler (its deadline passes): the worker finishes
# the dead call when the handler returns; the other worker serves meanwhile
try:
    W.stub.GetActions(pb.Empty(), timeout=0.3)
    bad("lr_get_actions_client_gone", "answered within 0.3 s although the handler waits 5 s")
except grpc.RpcError as e:
    check("lr_get_actions_client_gone", e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"{e.code()} {e.details()}")
c, r = code_of(W.stub.SendObservations, chunks(b"after-gone"))
check("lr_after_client_gone_good", c == grpc.StatusCode.OK, f"{c} {r}")
W.stop("lr_threads2_clean_stop")

# the API key: missing / wrong / prefix / longer refused on every method; Bearer, Api-Key and x-api-key accepted
K = Server("--api-key", "s3cret-key", "--wait-ms", "100")
UA = grpc.StatusCode.UNAUTHENTICATED
for name, md in [("none", None), ("wrong", [("authorization", "Bearer nope")]),
                 ("prefix", [("authorization", "Bearer s3cret")]),
                 ("longer", [("x-api-key", "s3cret-key!")]), ("no_scheme", [("authorization", "s3cret-key")]),
                 ("basic", [("authorization", "Basic s3cret-key")])]:
    kw = {"metadata": md} if md else {}
    got = [code_of(K.stub.Ready, pb.Empty(), **kw)[0], code_of(K.stub.GetActions, pb.Empty(), **kw)[0],
           code_of(K.stub.SendPolicyInstructions, pb.PolicySetup(data=b"x"), **kw)[0],
           code_of(K.stub.SendObservations, chunks(b"x"), **kw)[0]]
    check(f"lr_api_key_{name}_refused", got == [UA] * 4, f"{got}")
for name, md in [("bearer", [("authorization", "Bearer s3cret-key")]), ("bearer_lowercase", [("authorization", "bearer s3cret-key")]),
                 ("api_key_scheme", [("authorization", "Api-Key s3cret-key")]), ("x_api_key", [("x-api-key", "s3cret-key")])]:
    got = [code_of(K.stub.Ready, pb.Empty(), metadata=md)[0], code_of(K.stub.SendObservations, chunks(b"x"), metadata=md)[0],
           code_of(K.stub.GetActions, pb.Empty(), metadata=md)[0]]
    check(f"lr_api_key_{name}_accepted", got == [grpc.StatusCode.OK] * 3, f"{got}")
K.stop("lr_api_key_clean_stop")

# a stream stalled past --idle-timeout: DEADLINE_EXCEEDED from the server; then a good request
I = Server("--idle-timeout", "1", "--wait-ms", "100")
stall = threading.Event()


def stall_gen():
    yield pb.Observation(transfer_state=B, data=b"s" * 100)
    stall.wait(5)


t0 = time.time()
got = stream_status(I, stall_gen())
stall.set()
dt = time.time() - t0
expect_code("lr_idle_timeout", got, grpc.StatusCode.DEADLINE_EXCEEDED, "idle timeout")
check("lr_idle_timeout_time", 0.8 < dt < 4, f"{dt:.2f} s")
send_and_verify("lr_after_idle_timeout_good", I, b"fine")
I.stop("lr_idle_clean_stop")

# port in use: the second server refuses to start (gRPC's SO_REUSEPORT is off)
A = Server()
p2 = subprocess.run([ECHO, "--port", str(A.port)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=T)
check("lr_port_in_use", p2.returncode == 1 and "cannot listen" in p2.stderr and "Sanitizer" not in p2.stderr,
      f"rc {p2.returncode} {p2.stderr[-300:]}")
A.stop("lr_port_owner_clean_stop")

# stop with a stream open (BEGIN sent, no END): the drain time passes, the call is cancelled, exit 0
D = Server("--drain-timeout", "1")
hold = threading.Event()


def hold_gen():
    yield pb.Observation(transfer_state=B, data=b"h" * 1000)
    hold.wait(T)


fut = D.stub.SendObservations.future(hold_gen(), timeout=T)
time.sleep(0.5)
dt = D.stop("lr_stop_with_open_stream")
hold.set()
check("lr_stop_with_open_stream_time", dt is not None and dt < 5, f"stop took {dt} s")
try:
    fut.result(timeout=T)
    bad("lr_stop_with_open_stream_client", "the open stream succeeded")
except grpc.RpcError as e:
    check("lr_stop_with_open_stream_client", e.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE),
          f"{e.code()} {e.details()}")
except Exception as e:  # noqa: BLE001
    bad("lr_stop_with_open_stream_client", repr(e))

sys.exit(failed)
