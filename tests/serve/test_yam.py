"""/act with MolmoAct2's YAM keys (top_cam, left_cam, right_cam) on a checkpoint whose tag names three cameras:
bitwise `mact run` with the same frames in that order.
usage: test_yam.py MODEL TMPDIR ACT_PORT"""
import os, sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from wire import *  # noqa

model, tmp, P_ACT = sys.argv[1], sys.argv[2], int(sys.argv[3])
R = Report()
rng = np.random.default_rng(7)
task = "fold the towel"
state = rng.uniform(-1, 1, size=8).astype(np.float32)
yt, yl, yr = rng_frame(rng, 360, 640), rng_frame(rng, 360, 640), rng_frame(rng, 360, 640)
ref_y = mact_run(model, [save_frame(f"{tmp}/y{i}.npy", f) for i, f in enumerate((yt, yl, yr))], task, state, 5)
r = act_post(P_ACT, {"top_cam": jn(yt), "left_cam": jn(yl), "right_cam": jn(yr), "instruction": task, "state": jn(state),
                     "seed": 5})
R.check("act_yam_bitwise", r.status_code == 200 and bitwise_equal(jn_dec(r.json()["actions"]), ref_y), r.text[:300])
sys.exit(1 if R.failed else 0)
