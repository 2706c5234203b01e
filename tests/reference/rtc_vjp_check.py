#!/usr/bin/env python3
"""Direct check of mact's RTC vjp (src/stages/action_vjp.c) against torch.autograd on the reference.

usage: rtc_vjp_check.py MODEL_DIR [--lib build/libmact.so] [--seed S] [--tokens N] [--horizon H] [--beta B]
                        [--cos-min C] [--rel-tol R]

Fresh random inputs (seed printed): keys / values [L, 1, N, kv_dim], an encoder mask with some tokens hidden, a
trajectory x [H, A] (padded dims zero) and previous rows in [-1, 1]. mact_action_generate_rtc runs ONE flow step
(t = 0, time = 1, g = beta) with identity and with vjp guidance; their outputs differ by g * (dv/dx)^T err on the
real action dims, so (out_vjp - out_identity) / beta is mact's vector-Jacobian product, compared with
autograd.grad(v(x), x, err) of the reference (err = W * (Y - x1), x1 = x + v). Prints one PASS/FAIL line with the
cosine and the max abs error against max|ref| beside the thresholds.
"""
import argparse
import ctypes
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from molmoact2_ref import MolmoAct2Ref  # noqa: E402
from mact._lib import LoadOptions, RtcOptions, SessionOptions, load_library  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "..", "build", "libmact.so"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=37)
    ap.add_argument("--horizon", type=int, default=None)
    ap.add_argument("--beta", type=float, default=10.0)
    ap.add_argument("--cos-min", type=float, default=0.99999)
    ap.add_argument("--rel-tol", type=float, default=1e-4)
    ap.add_argument("--name", default="rtc_vjp_direct")
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    print(f"INFO {a.name}: seed {a.seed}")
    torch.set_grad_enabled(False)
    m = MolmoAct2Ref(a.model_dir)
    rng = np.random.default_rng(a.seed)
    L, A, N = m.n_layers, m.max_action_dim, a.tokens
    H = a.horizon or m.action_horizon
    adim = int(m.action_dim)
    kvd = m.kv_dim
    keys = rng.standard_normal((L, 1, N, kvd)).astype(np.float32)
    values = rng.standard_normal((L, 1, N, kvd)).astype(np.float32)
    enc = rng.random(N) < 0.8
    enc[int(rng.integers(0, N))] = True
    x = rng.standard_normal((1, H, A)).astype(np.float32)
    x[..., adim:] = 0
    n_prev = int(rng.integers(max(1, H // 2), H + 1))
    delay = int(rng.integers(0, min(n_prev, H - 1) + 1))
    horizon = int(rng.integers(delay + 1, H + 1)) if delay < H else H
    prev = rng.uniform(-1, 1, (n_prev, adim)).astype(np.float32)
    print(f"INFO {a.name}: H={H} A={A} action_dim={adim} N={N} (visible {int(enc.sum())}) n_prev={n_prev} "
          f"delay={delay} execution_horizon={horizon} beta={a.beta}")

    # mact: one flow step each way
    lib = load_library(os.path.abspath(a.lib))
    err = ctypes.create_string_buffer(1024)
    model, sess = ctypes.c_void_p(), ctypes.c_void_p()
    prec = ctypes.c_int()
    if lib.mact_precision_parse(b"fp32", ctypes.byref(prec)):
        print(f"FAIL {a.name}: mact_precision_parse fp32")
        return 1
    lo = LoadOptions(precision=prec.value)
    rc = lib.mact_model_load(a.model_dir.encode(), ctypes.byref(lo), ctypes.byref(model), err, 1024)
    if rc:
        print(f"FAIL {a.name}: model load: {err.value.decode()}")
        return 1
    so = SessionOptions(max_tokens=max(N, 64))
    if lib.mact_session_new(model, ctypes.byref(so), ctypes.byref(sess), err, 1024):
        print(f"FAIL {a.name}: session: {err.value.decode()}")
        return 1
    kc, vc, em = np.ascontiguousarray(keys), np.ascontiguousarray(values), enc.astype(np.uint8)
    outs = {}
    for name, guid in (("identity", 0), ("vjp", 1)):
        traj = x.copy()
        ro = RtcOptions(prev_actions=prev.ctypes.data, n_prev=n_prev, prev_dim=adim, inference_delay=delay,
                        execution_horizon=horizon, schedule=0, max_guidance_weight=a.beta, guidance=guid)
        rc = lib.mact_action_generate_rtc(sess, traj.ctypes.data, H, adim, 1, kc.ctypes.data, vc.ctypes.data,
                                          em.ctypes.data, N, ctypes.byref(ro))
        if rc:
            print(f"FAIL {a.name}: mact_action_generate_rtc ({name}) returned {rc}: "
                  f"{lib.mact_session_error(sess).decode()}")
            return 1
        outs[name] = traj
    lib.mact_session_free(sess)
    # the vjp does not depend on the thread count: one thread against the default pool, bit for bit
    sess1 = ctypes.c_void_p()
    so1 = SessionOptions(max_tokens=max(N, 64), n_threads=1)
    if lib.mact_session_new(model, ctypes.byref(so1), ctypes.byref(sess1), err, 1024):
        print(f"FAIL {a.name}: session: {err.value.decode()}")
        return 1
    traj1 = x.copy()
    ro = RtcOptions(prev_actions=prev.ctypes.data, n_prev=n_prev, prev_dim=adim, inference_delay=delay,
                    execution_horizon=horizon, schedule=0, max_guidance_weight=a.beta, guidance=1)
    rc = lib.mact_action_generate_rtc(sess1, traj1.ctypes.data, H, adim, 1, kc.ctypes.data, vc.ctypes.data,
                                      em.ctypes.data, N, ctypes.byref(ro))
    lib.mact_session_free(sess1)
    lib.mact_model_free(model)
    same = rc == 0 and np.array_equal(traj1, outs["vjp"])
    print(f"{'PASS' if same else 'FAIL'} {a.name}_threads: vjp with 1 thread vs the default pool: "
          f"max |diff| {float(np.abs(traj1 - outs['vjp']).max()) if rc == 0 else float('nan'):.3g} (== 0)")
    got = ((outs["vjp"] - outs["identity"]) / np.float32(a.beta))[0, :, :adim].astype(np.float64)

    # reference: autograd at the same x, t = 0 (time = 1)
    k_ctx, v_ctx = m.action_context(torch.from_numpy(keys), torch.from_numpy(values))
    is_pad = m.action_dim_is_pad()
    t = torch.tensor([0.0])
    xt = torch.from_numpy(x)
    v = m.velocity(xt, t, k_ctx, v_ctx, torch.from_numpy(enc)[None]).masked_fill(is_pad, 0.0)
    Y = torch.zeros(1, H, A)
    Y[0, :n_prev, :adim] = torch.from_numpy(prev)
    W = m.rtc_prefix_weights(delay, horizon, n_prev, H, "linear")[None, :, None]
    e = (W * (Y - (xt + v))).masked_fill(is_pad, 0.0)
    jte = m.rtc_velocity_vjp(xt, t, k_ctx, v_ctx, torch.from_numpy(enc)[None], e, is_pad)
    ref = jte[0, :, :adim].double().numpy()
    cos = float((got * ref).sum() / (np.linalg.norm(got) * np.linalg.norm(ref) + 1e-300))
    mx = float(np.abs(got - ref).max())
    mr = float(np.abs(ref).max())
    ok = cos >= a.cos_min and mx <= a.rel_tol * mr and np.isfinite(got).all() and mr > 0
    print(f"{'PASS' if ok else 'FAIL'} {a.name}: cosine={cos:.9f} (>= {a.cos_min}) max_abs={mx:.3e} "
          f"(<= {a.rel_tol} x max|ref| = {a.rel_tol * mr:.3e}) max_ref={mr:.3e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
