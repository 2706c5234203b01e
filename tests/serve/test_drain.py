"""SIGTERM while requests are in flight: each is answered, new connections are refused, the server exits 0.
usage: test_drain.py SERVER_PID ACT_PORT"""
import os, signal, sys, threading, time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

pid, P_ACT = int(sys.argv[1]), int(sys.argv[2])
R = Report()
rng = np.random.default_rng(2)
ACT = {"external_cam": jn(rng_frame(rng, 240, 320)), "wrist_cam": jn(rng_frame(rng, 96, 96)), "instruction": "go",
       "state": jn(np.zeros(8, np.float32))}
codes = []
def one():
    try:
        codes.append(act_post(P_ACT, ACT).status_code)
    except Exception as e:  # noqa
        codes.append(repr(e))
ts = [threading.Thread(target=one) for _ in range(4)]
for t in ts:
    t.start()
# SIGTERM once every request reached the server (held as a job, or already answered) and one is still running,
# so "in flight" is what is tested, not how fast the client threads connect on a loaded machine
in_flight, t_end = -1, time.time() + 20
while time.time() < t_end:
    try:
        m = get(P_ACT, "/metrics", timeout=2).text
        in_flight = int(next(l.split()[1] for l in m.splitlines() if l.startswith("mact_jobs_in_flight ")))
    except Exception:  # noqa
        pass
    if in_flight >= 1 and in_flight + len(codes) >= 4:   # every request reached the server, one still running
        break
    time.sleep(0.002)
os.kill(pid, signal.SIGTERM)
for t in ts:
    t.join(60)
R.check("drain_in_flight_answered", codes == [200] * 4, f"{codes} (jobs in flight at SIGTERM: {in_flight})")
refused = False
for _ in range(100):
    try:
        get(P_ACT, "/livez", timeout=2)
    except Exception:  # noqa
        refused = True
        break
    time.sleep(0.05)
R.check("drain_new_connections_refused", refused)
sys.exit(1 if R.failed else 0)
