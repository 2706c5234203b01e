"""API key (per protocol), busy and deadline answers. The server runs with --api-key-file (key 'sekret'),
--api-key-protocols openpi,act, --queue 1 --deadline-ms 5.
usage: test_auth_busy.py OPENPI_PORT ACT_PORT VLA_PORT"""
import asyncio, os, sys, time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

P_OP, P_ACT, P_VLA = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
R = Report()
rng = np.random.default_rng(1)
F1, F2 = rng_frame(rng, 64, 64), rng_frame(rng, 64, 64)
ST = np.zeros(8, np.float32)
OP = {"observation/image": F1, "observation/wrist_image": F2, "observation/state": ST, "prompt": "go"}
ACT = {"external_cam": jn(F1), "wrist_cam": jn(F2), "instruction": "go", "state": jn(ST)}
VLA = {"images": {"agentview": F1, "wrist": F2}, "task_description": "go", "states": ST.astype(np.float64)}


def until_ok(f, tries=10):
    """The server runs with --deadline-ms 5: under a sanitizer or a loaded machine a lone request can miss it
    (503 deadline); a request that is not refused for its key is retried until one runs."""
    c = None
    for _ in range(tries):
        c = f()
        if c != 503:
            return c
        time.sleep(0.2)
    return c


def openpi_status(headers):
    try:
        asyncio.run(openpi_infer(P_OP, OP, headers=headers))
        return 200
    except websockets.InvalidStatusCode as e:
        return e.status_code
    except RuntimeError as e:  # an error frame: deadline / busy
        return 503 if "deadline" in str(e) or "busy" in str(e) else 500


R.check("openpi_no_key_401", openpi_status({}) == 401)
R.check("openpi_wrong_key_401", openpi_status({"Authorization": "Api-Key sekreT"}) == 401)
R.check("openpi_api_key_ok", until_ok(lambda: openpi_status({"Authorization": "Api-Key sekret"})) == 200)
R.check("openpi_bearer_ok", until_ok(lambda: openpi_status({"Authorization": "Bearer sekret"})) == 200)
R.check("act_no_key_401", act_post(P_ACT, ACT).status_code == 401)
R.check("act_get_no_key_401", get(P_ACT, "/act").status_code == 401)
R.check("act_bearer_ok", until_ok(lambda: act_post(P_ACT, ACT, headers={"Authorization": "Bearer sekret"}).status_code) == 200)
R.check("probes_need_no_key", all(get(p, q).status_code == 200 for p in (P_OP, P_ACT, P_VLA) for q in ("/livez", "/readyz", "/metrics")))
v = None
for _ in range(10):
    v = asyncio.run(vla_session(P_VLA, [("observation", VLA)]))
    if v[1]["type"] == "action" or "deadline" not in str(v[1]):
        break
    time.sleep(0.2)
R.check("vla_key_not_required_here", v[1]["type"] == "action", str(v[1])[:200])


def busy_count():
    m = get(P_ACT, "/metrics").text
    return sum(float(l.split()[-1]) for l in m.splitlines()
               if l.startswith('mact_requests_total{protocol="act",outcome="busy"}') or
               l.startswith('mact_requests_total{protocol="act",outcome="deadline"}'))


before = busy_count()

H = {"Authorization": "Api-Key sekret"}
with ThreadPoolExecutor(12) as ex:
    rs = list(ex.map(lambda i: act_post(P_ACT, ACT, headers=H), range(12)))
codes = [r.status_code for r in rs]
errs = [r.json().get("error", "") for r in rs if r.status_code != 200]
R.check("busy_or_deadline_answered_503", set(codes) <= {200, 503} and 503 in codes and 200 in codes, str(codes))
R.check("busy_or_deadline_messages", all(e.startswith("busy") or e.startswith("deadline") for e in errs), str(errs[:3]))
after = busy_count()
R.check("metrics_busy_deadline_counted", after - before == codes.count(503), f"{after - before} counted, {codes.count(503)} answered")
R.check("after_busy_good_request", until_ok(lambda: act_post(P_ACT, ACT, headers=H).status_code) == 200)
R.check("after_busy_livez", livez_all((P_OP, P_ACT, P_VLA)))
sys.exit(1 if R.failed else 0)
