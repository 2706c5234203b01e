#!/usr/bin/env python3
"""Which int8 scheme could int8 vision use? A fake-quantization study on the PyTorch reference.

usage: int8_study.py MODEL_DIR [--seed S] [--n-images N] [--schemes a,b,...] [--part vision|llm]

Every linear layer of one component (default: the vision backbone, "model.vision_backbone.*") is replaced by
an emulation of a quantization scheme; everything else stays fp32 (so do the token sampler's MLPs, which the
reference calls through F.linear directly, while mact's int8 vision quantizes them). The same inputs as
tests/reference/make_golden.py (its seed) go through the whole model, and the study prints, per scheme, the
cosine of image_embeds and the max abs error of the end-to-end actions against fp32, and the actions' error
as a multiple of bf16's. It measures how much error each scheme lets into the actions through that component
alone; mact's own numbers (docs/parity.md) come from `mact parity` on golden files.

Schemes (activations x: per row of the GEMM input; weights W: per output channel):
  bf16         x and W rounded to bf16 (mact's bf16 mode; the stored VLM weights are bf16 already)
  int8         x asymmetric u8 per row, W symmetric int8 per channel, the outlier split (mact's int8 today)
  int8-nosplit the same without the split
  a<G>         x asymmetric u8 per group of G along K (per row), W per channel
  a<G>w<G2>    ... and W symmetric int8 per group of G2 along K
  a16          x 16-bit per row (two u8 passes), W int8 per channel
  a16w<G2>     x 16-bit, W int8 per group of G2
  w8           W int8 per channel, x fp32 (weight-only)
  c8           x centred: mu W in fp32 (mu: the mean of the GEMM's rows), (x - mu) through int8
  cb8          int8, plus the weight's quantization error at the mean: mu (W - Wq) in fp32
  a8           x as int8 (with the split), W fp32 (activation-only)
  x2           W as two int8 planes per channel (s (q1 + q2 / 128)), x fp32
  a8x2         x as int8 (with the split), W as two int8 planes
  c8x2         c8 with W as two int8 planes
  c8i          c8 with mu the mean of each image's rows (each index of x's leading dimension) instead of all rows
               (mact's centring: its vision stage runs one image per GEMM)
  c8ix2        c8i with W as two int8 planes
  sq<alpha>    SmoothQuant: column factors max|x_k|^a / max|W_k|^(1-a) from this very input (an upper bound
               on what calibration could do), then int8
A suffix "-keep:PATTERN" keeps the linears whose name contains PATTERN out of the scheme (fp32), e.g.
int8-keep:image_projector. A suffix "-x2:PATTERN" gives those linears two int8 weight planes within the scheme
(c8 / c8i / int8), e.g. c8i-x2:image_vit.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import molmoact2_ref as R  # noqa: E402
from make_golden import build_input_ids, patchify, random_image  # noqa: E402

PARTS = {"vision": "model.vision_backbone.", "llm": "model.transformer.", "expert": "model.action_expert."}


def bf16(t):
    return t.to(torch.bfloat16).float()


def grouped(t, G):
    """t [..., K] as [..., K / G, G] (zero-padded to a whole group), or [..., 1, K] without G"""
    if not G:
        return t.unsqueeze(-2)
    return F.pad(t, (0, (-t.shape[-1]) % G)).reshape(*t.shape[:-1], -1, G)


def ungrouped(tg, K):
    return tg.reshape(*tg.shape[:-2], -1)[..., :K]


def q_act_u8(x, G=None):
    """asymmetric u8 per row (or per group of G along the last dim), range widened to hold 0, as mact"""
    xp = grouped(x, G)
    mn = xp.amin(-1, keepdim=True).clamp(max=0)
    mx = xp.amax(-1, keepdim=True).clamp(min=0)
    s = (mx - mn) / 255.0
    s = torch.where(s > 0, s, torch.ones_like(s))
    z = torch.round(-mn / s).clamp(0, 255)
    q = (torch.round(xp / s) + z).clamp(0, 255)
    return ungrouped((q - z) * s, x.shape[-1])


def q_act_16(x):
    mx = x.abs().amax(-1, keepdim=True)
    s = torch.where(mx > 0, mx / 32767.0, torch.ones_like(mx))
    return torch.round(x / s).clamp(-32767, 32767) * s


def q_w8(w, G=None):
    wp = grouped(w, G)
    a = wp.abs().amax(-1, keepdim=True)
    s = torch.where(a > 0, a / 127.0, torch.ones_like(a))
    return ungrouped(torch.round(wp / s).clamp(-127, 127) * s, w.shape[-1])


def q_w8x2(w):
    """two int8 planes: W ~ s (q1 + q2 / 128), q2 the rounded residual (|q2| <= 64)"""
    a = w.abs().amax(-1, keepdim=True)
    s = torch.where(a > 0, a / 127.0, torch.ones_like(a))
    q1 = torch.round(w / s).clamp(-127, 127)
    q2 = torch.round((w - q1 * s) / (s / 128)).clamp(-127, 127)
    return (q1 + q2 / 128) * s


def split_cols(x2):
    """mact's outlier split (src/kernels/i8_split.c, mact_i8_find_outliers): none below 64 columns (2 x
    MACT_I8_OUTLIER_MIN_K); else the columns whose max |x| over the rows exceeds 6x the median column maximum
    (the (K/2 + 1)-th smallest, as select_kth(.., K / 2)) when that median is above 0, at most
    min(max(K/32, 1), 64) of them, the largest"""
    K = x2.shape[-1]
    none = torch.zeros(0, dtype=torch.long)
    if x2.shape[0] == 0 or K < 64:
        return none
    cm = x2.abs().amax(0)
    med = cm.kthvalue(K // 2 + 1).values
    if not med > 0:
        return none
    cand = torch.nonzero(cm > 6.0 * med).flatten()
    cap = max(1, min(K // 32, 64))
    if cand.numel() > cap:
        cand = cand[torch.argsort(cm[cand], descending=True)[:cap]]
    return cand


def take_outliers(x2, w, out):
    """the split: out += the outlier columns' fp32 product; returns x2 with those columns zeroed"""
    cols = split_cols(x2)
    if not cols.numel():
        return x2
    out += x2[:, cols] @ w[:, cols].t()
    x2 = x2.clone()
    x2[:, cols] = 0
    return x2


def make_linear(scheme, prefix):
    keep, twin = [], []
    while "-keep:" in scheme or "-x2:" in scheme:
        a, b = scheme.rfind("-keep:"), scheme.rfind("-x2:")
        if a > b:
            scheme, _, pat = scheme.rpartition("-keep:")
            keep.append(pat)
        else:
            scheme, _, pat = scheme.rpartition("-x2:")
            twin.append(pat)
    orig = R.linear

    def lin(x, w, b=None, cache=None, key=None, force_onednn=False):
        if key is None or not key.startswith(prefix) or any(p in key for p in keep):
            return orig(x, w, b, cache, key, force_onednn)
        lin.replaced += 1
        x2 = x.reshape(-1, x.shape[-1]).float()
        if scheme == "bf16":
            return F.linear(bf16(x2), bf16(w), b).reshape(*x.shape[:-1], w.shape[0])
        out = torch.zeros(x2.shape[0], w.shape[0])
        wq, xq = w, x2
        if scheme in ("c8", "cb8", "c8x2", "c8i", "c8ix2"):
            # c8: x = mu + (x - mu), mu the mean of the call's rows: mu W exact (fp32), (x - mu) as int8
            # cb8: the int8 product of x, and the weight's quantization error corrected at the mean: mu (W - Wq)
            mu = x2.mean(0, keepdim=True)
            if scheme in ("c8i", "c8ix2") and x.dim() >= 3:
                xb = x.float().reshape(x.shape[0], -1, x.shape[-1])
                mu = xb.mean(1, keepdim=True).expand_as(xb).reshape(-1, x.shape[-1])
            wq = q_w8x2(w) if scheme.endswith("x2") or any(p in key for p in twin) else q_w8(w)
            if scheme != "cb8":
                out += (mu @ w.t()).expand_as(out) if mu.shape[0] == 1 else mu @ w.t()
                xc = x2 - mu
            else:
                out += (mu @ (w - wq).t()).expand_as(out)
                xc = x2
            xq = q_act_u8(take_outliers(xc, w, out))
        elif scheme in ("a8", "a8x2", "x2"):
            if scheme != "x2":
                xq = q_act_u8(take_outliers(x2, w, out))
            if scheme != "a8":
                wq = q_w8x2(w)
        elif scheme in ("int8", "int8-nosplit") or scheme.startswith("a") or scheme.startswith("sq"):
            if scheme == "int8":
                xq = take_outliers(x2, w, out)
            G = G2 = None
            a16 = False
            if scheme.startswith("sq"):
                alpha = float(scheme[2:])
                sx = x2.abs().amax(0).clamp(min=1e-5)
                sw = w.abs().amax(0).clamp(min=1e-5)
                f = sx.pow(alpha) / sw.pow(1 - alpha)
                xq, wq = x2 / f, w * f
            elif scheme.startswith("a16"):
                a16 = True
                G2 = int(scheme[4:]) if "w" in scheme else None
            elif scheme.startswith("a"):
                g = scheme[1:].split("w")
                G = int(g[0])
                G2 = int(g[1]) if len(g) > 1 else None
            xq = q_act_16(xq) if a16 else q_act_u8(xq, G)
            wq = q_w8x2(wq) if any(p in key for p in twin) else q_w8(wq, G2)
        elif scheme == "w8":
            wq = q_w8(w)
        else:
            raise SystemExit(f"unknown scheme {scheme}")
        out += xq @ wq.t()
        if b is not None:
            out += b
        return out.reshape(*x.shape[:-1], w.shape[0])

    lin.replaced = 0  # linears the scheme took over: 0 would make its row fp32's, not the scheme's
    return lin


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--n-images", type=int, default=2)
    ap.add_argument("--part", default="vision", choices=sorted(PARTS))
    ap.add_argument("--schemes", default="bf16,int8,int8-nosplit,a128,a32,a32w32,a16,a16w32,w8,sq0.5")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    m = R.MolmoAct2Ref(a.model_dir)
    rng = np.random.default_rng(a.seed)
    K = m.sampler_k if m.sampler is not None else R.pooling_index(*m.patch_grid)[0].shape[0]
    pix = torch.from_numpy(np.stack([patchify(random_image(rng)) for _ in range(a.n_images)])[None])
    ids = torch.from_numpy(build_input_ids(m, rng, a.n_images, K, None, True))
    noise = torch.from_numpy(rng.standard_normal((1, m.action_horizon, m.max_action_dim)).astype(np.float32))
    is_pad = m.action_dim_is_pad()
    orig = R.linear

    def run():
        img = m.vision(pix)
        _, keys, values = m.prefill(ids, img)
        act = m.action_loop(keys, values, m.encoder_mask(ids, None), noise, None, is_pad)
        return img, act

    t0 = time.time()
    img0, act0 = run()
    print(f"{a.model_dir}: part {a.part}, seed {a.seed}; fp32 run {time.time() - t0:.1f} s; "
          f"max|actions| {float(act0.abs().max()):.3f}, max|image_embeds| {float(img0.abs().max()):.1f}")
    print(f"{'scheme':28s} {'image_embeds cos':>16s} {'actions max abs':>16s} {'x bf16':>7s}")
    ref_err = None
    for s in a.schemes.split(","):
        R.linear = lin = make_linear(s, PARTS[a.part])
        try:
            img, act = run()
        finally:
            R.linear = orig
        if not lin.replaced:
            raise SystemExit(f"{s}: no linear layer of part {a.part} went through the scheme (a -keep pattern "
                             "that matches every one?)")
        cos = float(F.cosine_similarity(img.flatten(), img0.flatten(), dim=0))
        err = float((act - act0).abs().max())
        if s == "bf16":
            ref_err = err
        ratio = f"{err / ref_err:7.2f}" if ref_err else "      -"
        print(f"{s:28s} {cos:16.6f} {err:16.3e} {ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
