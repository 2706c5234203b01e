#!/usr/bin/env python3
"""PyTorch bf16 baseline for `mact bench`: the same shapes, stage by stage, on the same checkpoint.

usage: /usr/bin/python3 scripts/bench_torch.py [--model DIR | --preset libero|so101] [--threads 2]
           [--iters 5] [--attn bf16|fp32] [--mact CMD] [--mact-precision P[,P...]] [--no-mact]

What runs (torch 1.13, CPU, torch.set_num_threads(--threads)): every weight is loaded as bfloat16 (the
`model.to(torch.bfloat16)` a PyTorch user would run); activations are bf16; LayerNorm/RMSNorm statistics
and the softmax are computed in fp32 (as HF's modules do) and cast back; attention matmuls in bf16
(--attn fp32: q k^T, softmax and p v in fp32). F.linear on bf16 tensors goes to oneDNN's bf16 GEMM.
The work per stage mirrors mact's (tools/bench_cmd.c):
  vision  2 images batched: patch embedding, the ViT blocks up to the deepest tap, 2x2 attention pooling
          (masked padded window), SwiGLU projector, grid token sampler (F.grid_sample)
  llm     embedding rows + image features, the 36 decoder layers (the last one K/V only, which is all the
          action expert reads), qwen3 q/k norm, RoPE, GQA attention under the prompt's bias
  action  context K/V projections + norms, then the Euler steps of the DiT; the modulation vectors depend
          only on t and are computed once per schedule outside the timed loop, as mact caches them
First (unless --no-mact) it runs `CMD bench --model DIR --preset P --threads N --precision P --iters N` (CMD
default build/mact) as a child process for each precision of --mact-precision, so the two never hold the
weights at the same time, then the PyTorch side, and prints the per-stage table mact / PyTorch.

glibc malloc: by default every allocation above 32 MiB is a fresh mmap that is faulted in and zeroed
page by page and unmapped again on free, which on this class of VM costs more than the arithmetic
(x + 1 on a 4096^2 tensor: 0.37 s vs 0.02 s). The script re-executes itself with MALLOC_MMAP_THRESHOLD_ /
MALLOC_TRIM_THRESHOLD_ raised so freed blocks are reused, the usual fix (as jemalloc/tcmalloc would);
--no-malloc-tuning measures stock behaviour. mact allocates nothing per call.

Not a numerical reference (tests/reference/molmoact2_ref.py is): the weights are real, the inputs random.
Peak memory: the checkpoint in bf16 (~10.5 GB for the full-size presets) plus activations.
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

PRESETS = {"libero": dict(N=130, H=10, steps=2), "so101": dict(N=136, H=30, steps=10)}


class Checkpoint:
    """safetensors (single file or sharded index) -> bf16 / fp32 torch tensors, read through np.memmap."""

    def __init__(self, d):
        idx = os.path.join(d, "model.safetensors.index.json")
        files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
        self.where = {}
        for fn in files:
            path = os.path.join(d, fn)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                hdr = json.loads(f.read(n))
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for k, v in hdr.items():
                if k == "__metadata__":
                    continue
                a, b = v["data_offsets"]
                self.where[k] = (mm, 8 + n + a, 8 + n + b, v["dtype"], v["shape"])

    def has(self, name):
        return name in self.where

    def get(self, name, dtype=torch.bfloat16):
        """An owned tensor (one copy, like a loaded model) converted from a zero-copy view of the mapping."""
        mm, a, b, dt, shape = self.where[name]
        raw = mm[a:b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns that the (read-only) mapping is not writable
            if dt == "BF16":
                t = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
            elif dt == "F32":
                t = torch.from_numpy(raw.view(np.float32))
            elif dt == "F16":
                t = torch.from_numpy(raw.view(np.float16))
            else:
                raise ValueError(f"{name}: dtype {dt}")
        t = t.reshape(shape)
        return t.clone() if t.dtype == dtype else t.to(dtype)


def rms(x, w=None, eps=1e-6):
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return y if w is None else y * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rope_tables(n, hd, theta, dtype):
    inv = 1.0 / (float(theta) ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class TorchBF16:
    def __init__(self, model_dir, attn="bf16"):
        self.cfg = c = json.load(open(os.path.join(model_dir, "config.json")))
        self.attn_fp32 = attn == "fp32"
        ck = Checkpoint(model_dir)
        g = ck.get
        V = "model.vision_backbone."
        vc, ac, tc, ec = c["vit_config"], c["adapter_config"], c["text_config"], c["action_expert_config"]
        self.vh, self.vheads, self.vhd = vc["hidden_size"], vc["num_attention_heads"], vc["head_dim"]
        nl = vc["num_hidden_layers"]
        self.taps = [t if t >= 0 else nl + t for t in ac["vit_layers"]]
        self.eps_v = vc.get("layer_norm_eps", 1e-6)
        P = V + "image_vit."
        self.patch_w, self.patch_b = g(P + "patch_embedding.weight"), g(P + "patch_embedding.bias")
        self.pos = g(P + "positional_embedding")
        self.vit = []
        for j in range(max(self.taps) + 1):
            B = P + f"transformer.resblocks.{j}."
            self.vit.append({k: g(B + k) for k in [
                "attention_norm.weight", "attention_norm.bias", "ffn_norm.weight", "ffn_norm.bias",
                "attention.wq.weight", "attention.wq.bias", "attention.wk.weight", "attention.wk.bias",
                "attention.wv.weight", "attention.wv.bias", "attention.wo.weight", "attention.wo.bias",
                "feed_forward.w1.weight", "feed_forward.w1.bias", "feed_forward.w2.weight", "feed_forward.w2.bias"]})
        Q = V + "image_pooling_2d."
        self.pool = {k: g(Q + k) for k in ["wq.weight", "wq.bias", "wk.weight", "wk.bias", "wv.weight", "wv.bias",
                                           "wo.weight", "wo.bias"]}
        self.pheads, self.phd = ac["num_attention_heads"], ac["head_dim"]
        R = V + "image_projector."
        self.proj = {k: g(R + k + ".weight") for k in ["w1", "w2", "w3"]}
        samp = [k for k in ck.where if k.endswith("scout_mlp.0.weight")]
        self.sampler = None
        if samp:
            pre = samp[0][: -len("scout_mlp.0.weight")]
            self.sampler = {k: g(pre + k) for k in [
                "scout_mlp.0.weight", "scout_mlp.0.bias", "scout_mlp.2.weight", "scout_mlp.2.bias",
                "coord_encoder.0.weight", "coord_encoder.0.bias", "coord_encoder.2.weight", "coord_encoder.2.bias"]}
            self.K = self.sampler["scout_mlp.2.weight"].shape[0] // 2
            self.sampler_after = self.sampler["scout_mlp.0.weight"].shape[1] == tc["hidden_size"]
        else:
            self.K = 196
        # LLM
        self.D, self.heads, self.kv, self.hd = tc["hidden_size"], tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
        self.L, self.I, self.eps = tc["num_hidden_layers"], tc["intermediate_size"], tc.get("layer_norm_eps", 1e-6)
        self.theta, self.vocab = tc["rope_theta"], tc["vocab_size"]
        self.wte_mm = ck  # rows are gathered from the mmap (the full table is not needed)
        self.new_emb = g("model.transformer.wte.new_embedding")
        T = "model.transformer.blocks."
        self.llm_w = []
        for l in range(self.L):
            names = ["attn_norm.weight", "self_attn.att_proj.weight", "self_attn.q_norm.weight",
                     "self_attn.k_norm.weight"]
            if l < self.L - 1:
                names += ["self_attn.attn_out.weight", "ff_norm.weight", "mlp.ff_proj.weight", "mlp.ff_out.weight"]
            self.llm_w.append({k: g(T + f"{l}." + k) for k in names if ck.has(T + f"{l}." + k)})
        # action expert
        E = "model.action_expert."
        self.ah, self.aheads = ec["hidden_size"], ec["num_heads"]
        self.ahd = self.ah // self.aheads
        self.tdim = ec.get("timestep_embed_dim", 256)
        self.A = c["max_action_dim"]
        self.ae = {k: g(E + k) for k in ["action_embed.weight", "action_embed.bias", "context_k_proj.weight",
                                          "context_v_proj.weight", "final_layer.linear.weight", "final_layer.linear.bias",
                                          "final_layer.modulation.linear.weight", "final_layer.modulation.linear.bias",
                                          "time_embed.1.weight", "time_embed.1.bias", "time_embed.3.weight",
                                          "time_embed.3.bias"]}
        self.aeb = []
        for l in range(self.L):
            B = E + f"blocks.{l}."
            self.aeb.append({k: g(B + k) for k in [
                "self_attn.qkv.weight", "self_attn.qkv.bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                "cross_attn.q_proj.weight", "cross_attn.q_proj.bias", "cross_attn.out_proj.weight",
                "cross_attn.out_proj.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.weight",
                "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias", "modulation.linear.weight",
                "modulation.linear.bias"]})
        self.ck = ck

    # ---- attention: q [.., h, tq, d], k/v [.., h, tk, d] ----
    def attention(self, q, k, v, bias=None, mask=None):
        dt = q.dtype
        if self.attn_fp32:
            q, k, v = q.float(), k.float(), v.float()
        s = torch.matmul(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-1, -2))
        if bias is not None:
            s = s + bias.to(s.dtype)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(v.dtype)
        return torch.matmul(p, v).to(dt)

    def vision(self, pix):
        n, T, _ = pix.shape
        x = F.linear(pix, self.patch_w, self.patch_b) + self.pos
        H, d = self.vheads, self.vhd
        taps = {}
        for j, b in enumerate(self.vit):
            h = F.layer_norm(x.float(), (self.vh,), b["attention_norm.weight"].float(), b["attention_norm.bias"].float(),
                             self.eps_v).to(x.dtype)
            q = F.linear(h, b["attention.wq.weight"], b["attention.wq.bias"]).view(n, T, H, d).transpose(1, 2)
            k = F.linear(h, b["attention.wk.weight"], b["attention.wk.bias"]).view(n, T, H, d).transpose(1, 2)
            v = F.linear(h, b["attention.wv.weight"], b["attention.wv.bias"]).view(n, T, H, d).transpose(1, 2)
            a = self.attention(q, k, v).transpose(1, 2).reshape(n, T, H * d)
            x = x + F.linear(a, b["attention.wo.weight"], b["attention.wo.bias"])
            h = F.layer_norm(x.float(), (self.vh,), b["ffn_norm.weight"].float(), b["ffn_norm.bias"].float(),
                             self.eps_v).to(x.dtype)
            x = x + F.linear(F.gelu(F.linear(h, b["feed_forward.w1.weight"], b["feed_forward.w1.bias"]),
                                    approximate="tanh"), b["feed_forward.w2.weight"], b["feed_forward.w2.bias"])
            if j in self.taps:
                taps[j] = x
        feats = torch.cat([taps[t] for t in self.taps], dim=-1)  # [n, 729, 2304]
        # 2x2 pooling over the 27x27 grid padded to 28x28 (pad bottom/right)
        g = int(round(math.sqrt(T)))
        gp = (g + 1) // 2 * 2
        Cin = feats.shape[-1]
        grid = torch.zeros(n, gp, gp, Cin, dtype=feats.dtype)
        grid[:, :g, :g] = feats.view(n, g, g, Cin)
        win = grid.view(n, gp // 2, 2, gp // 2, 2, Cin).permute(0, 1, 3, 2, 4, 5).reshape(n, (gp // 2) ** 2, 4, Cin)
        valid = torch.zeros(gp, gp, dtype=torch.bool)
        valid[:g, :g] = True
        valid = valid.view(gp // 2, 2, gp // 2, 2).permute(0, 2, 1, 3).reshape((gp // 2) ** 2, 4)
        cnt = valid.sum(-1).clamp(min=1).to(feats.dtype)
        query = win.sum(2) / cnt[None, :, None]
        p = self.pool
        Tq = win.shape[1]
        Hp, dp = self.pheads, self.phd
        q = F.linear(query, p["wq.weight"], p["wq.bias"]).view(n, Tq, Hp, 1, dp)
        k = F.linear(win, p["wk.weight"], p["wk.bias"]).view(n, Tq, 4, Hp, dp).transpose(2, 3)
        v = F.linear(win, p["wv.weight"], p["wv.bias"]).view(n, Tq, 4, Hp, dp).transpose(2, 3)
        a = self.attention(q, k, v, mask=valid[None, :, None, None, :]).reshape(n, Tq, Hp * dp)
        pooled = F.linear(a, p["wo.weight"], p["wo.bias"])  # [n, 196, 1152]

        def project(z):
            return F.linear(F.silu(F.linear(z, self.proj["w1"])) * F.linear(z, self.proj["w3"]), self.proj["w2"])

        if self.sampler is None:
            return project(pooled).reshape(-1, self.D)
        s = self.sampler
        side = gp // 2
        feat = project(pooled) if self.sampler_after else pooled
        gvec = feat.mean(1)
        pts = torch.sigmoid(F.linear(F.relu(F.linear(gvec, s["scout_mlp.0.weight"], s["scout_mlp.0.bias"])),
                                     s["scout_mlp.2.weight"], s["scout_mlp.2.bias"])).view(n, self.K, 2)
        fm = feat.view(n, side, side, -1).permute(0, 3, 1, 2)
        samp = F.grid_sample(fm.float(), (pts * 2 - 1).float()[:, None], mode="bilinear", align_corners=False,
                             padding_mode="zeros")[:, :, 0].transpose(1, 2).to(feat.dtype)
        samp = samp + F.linear(F.relu(F.linear(pts, s["coord_encoder.0.weight"], s["coord_encoder.0.bias"])),
                               s["coord_encoder.2.weight"], s["coord_encoder.2.bias"])
        out = samp if self.sampler_after else project(samp)
        return out.reshape(-1, self.D)

    def embed(self, ids, image_embeds):
        c = self.cfg
        rows = []
        m = 0
        for t in ids.tolist():
            if t < self.vocab:
                mm, a, b, dt, shape = self.ck.where["model.transformer.wte.embedding"]
                r = np.array(mm[a + 2 * t * self.D: a + 2 * (t + 1) * self.D]).view(np.int16)
                e = torch.from_numpy(r).view(torch.bfloat16).clone()
            else:
                e = self.new_emb[t - self.vocab].clone()
            if t == c["image_patch_id"]:
                e = e + image_embeds[m]
                m += 1
            rows.append(e)
        return torch.stack(rows)[None]

    def bias(self, ids):
        c = self.cfg
        img = {c[k] for k in ["image_patch_id", "image_col_id", "image_start_token_id", "low_res_image_start_token_id",
                              "frame_start_token_id", "image_end_token_id", "frame_end_token_id", "image_low_res_id"]}
        is_img = torch.tensor([t in img for t in ids.tolist()])
        n = len(ids)
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
        ok = causal | (is_img[:, None] & is_img[None, :])
        return torch.zeros(n, n).masked_fill(~ok, torch.finfo(torch.float32).min)

    def llm(self, h, bias):
        n = h.shape[1]
        H, KV, d = self.heads, self.kv, self.hd
        cos, sin = rope_tables(n, d, self.theta, h.dtype)
        keys, values = [], []
        for l, w in enumerate(self.llm_w):
            r = rms(h, w["attn_norm.weight"], self.eps)
            qkv = F.linear(r, w["self_attn.att_proj.weight"])
            q, k, v = qkv.split([H * d, KV * d, KV * d], dim=-1)
            q = rms(q.view(1, n, H, d), w["self_attn.q_norm.weight"], self.eps).transpose(1, 2)
            k = rms(k.view(1, n, KV, d), w["self_attn.k_norm.weight"], self.eps).transpose(1, 2)
            v = v.view(1, n, KV, d).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            keys.append(k)
            values.append(v)
            if l == self.L - 1:
                break
            kr, vr = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
            a = self.attention(q, kr, vr, bias=bias).transpose(1, 2).reshape(1, n, H * d)
            h = h + F.linear(a, w["self_attn.attn_out.weight"])
            r = rms(h, w["ff_norm.weight"], self.eps)
            u = F.linear(r, w["mlp.ff_proj.weight"])
            val, gate = u.split(self.I, dim=-1)
            h = h + F.linear(F.silu(gate) * val, w["mlp.ff_out.weight"])
        return keys, values

    def time_mod(self, t):
        half = self.tdim // 2
        f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / (half - 1))
        emb = torch.cat([torch.sin(t * f), torch.cos(t * f)]).to(torch.bfloat16)[None]
        e = self.ae
        cnd = F.silu(F.linear(F.silu(F.linear(emb, e["time_embed.1.weight"], e["time_embed.1.bias"])),
                              e["time_embed.3.weight"], e["time_embed.3.bias"]))
        mods = [F.linear(cnd, b["modulation.linear.weight"], b["modulation.linear.bias"]).view(9, -1) for b in self.aeb]
        fm = F.linear(cnd, e["final_layer.modulation.linear.weight"], e["final_layer.modulation.linear.bias"]).view(2, -1)
        return mods, fm

    def action(self, keys, values, enc, noise, steps, mods):
        e = self.ae
        AH, Hh, d = self.ah, self.aheads, self.ahd
        n = keys[0].shape[2]
        kc, vc = [], []
        for K, V in zip(keys, values):
            kk = K.transpose(1, 2).reshape(1, n, -1)
            vv = V.transpose(1, 2).reshape(1, n, -1)
            k = rms(rms(F.linear(kk, e["context_k_proj.weight"])).view(1, n, Hh, d)).transpose(1, 2)
            v = rms(F.linear(vv, e["context_v_proj.weight"])).view(1, n, Hh, d).transpose(1, 2)
            kc.append(k)
            vc.append(v)
        x = noise.clone()
        h = x.shape[1]
        cos, sin = rope_tables(h, d, 10000.0, torch.bfloat16)
        mask = enc[None, None, None, :]
        for s in range(steps):
            mod, fm = mods[s]
            z = F.linear(x, e["action_embed.weight"], e["action_embed.bias"])
            for l, b in enumerate(self.aeb):
                m = mod[l]
                u = rms(z) * (1 + m[1]) + m[0]
                qkv = F.linear(u, b["self_attn.qkv.weight"], b["self_attn.qkv.bias"]).view(1, h, 3, Hh, d)
                q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
                q, k = rms(q), rms(k)
                q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
                a = self.attention(q, k, v).transpose(1, 2).reshape(1, h, AH)
                z = z + m[2] * F.linear(a, b["self_attn.out_proj.weight"], b["self_attn.out_proj.bias"])
                u = rms(z) * (1 + m[4]) + m[3]
                q = rms(F.linear(u, b["cross_attn.q_proj.weight"], b["cross_attn.q_proj.bias"]).view(1, h, Hh, d)).transpose(1, 2)
                a = self.attention(q, kc[l], vc[l], mask=mask).transpose(1, 2).reshape(1, h, AH)
                z = z + m[5] * F.linear(a, b["cross_attn.out_proj.weight"], b["cross_attn.out_proj.bias"])
                u = rms(z) * (1 + m[7]) + m[6]
                g = F.silu(F.linear(u, b["mlp.gate_proj.weight"], b["mlp.gate_proj.bias"])) * \
                    F.linear(u, b["mlp.up_proj.weight"], b["mlp.up_proj.bias"])
                z = z + m[8] * F.linear(g, b["mlp.down_proj.weight"], b["mlp.down_proj.bias"])
            u = rms(z) * (1 + fm[1]) + fm[0]
            vel = F.linear(u, e["final_layer.linear.weight"], e["final_layer.linear.bias"])
            x = x + vel / steps
        return x


def run_mact(cmd, model, threads, prec, iters, preset):
    # "int8:PARTS" runs int8 with --int8-parts PARTS (e.g. int8:all, int8:vision,llm is written int8:vision+llm)
    prec, _, parts = prec.partition(":")
    argv = cmd.split() + ["bench", "--model", model, "--preset", preset, "--threads", str(threads), "--precision",
                          prec, "--iters", str(iters)]
    if parts:
        argv += ["--int8-parts", parts.replace("+", ",")]
    print("$ " + " ".join(argv), flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "MACT_BENCH_MALLOC"}
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    sys.stdout.write(out.stdout)
    if out.returncode:
        sys.stdout.write(out.stderr)
        return None
    res = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s+(vision|llm|action|total)\s+([0-9.]+)\s+([0-9.]+)", line)
        if m:
            res[m.group(1)] = float(m.group(2))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--preset", default="libero", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--attn", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--mact", default="build/mact")
    ap.add_argument("--mact-precision", default="bf16",
                    help="bf16, fp32, int8 or int8:PARTS (PARTS: all, or names joined by +, e.g. "
                         "int8:vision+llm), or a comma list: mact runs once per entry, before PyTorch")
    ap.add_argument("--no-mact", action="store_true")
    ap.add_argument("--no-malloc-tuning", action="store_true")
    a = ap.parse_args()
    if not a.no_malloc_tuning and os.environ.get("MACT_BENCH_MALLOC") != "1":
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(16 << 30), MALLOC_TRIM_THRESHOLD_=str(16 << 30),
                   MALLOC_TOP_PAD_=str(1 << 30), MACT_BENCH_MALLOC="1")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    pr = PRESETS[a.preset]
    model = a.model or os.path.join(os.environ.get("MACT_CACHE", os.path.expanduser("~/.cache/mact")),
                                    "bench-" + a.preset)
    res = {}
    precs = [p for p in a.mact_precision.split(",") if p]
    if any(p not in ("bf16", "fp32", "int8") and not p.startswith("int8:") for p in precs):
        print("--mact-precision: bf16, fp32, int8 or int8:PARTS (comma-separated)")
        return 2
    if not a.no_mact:
        for p in precs:
            r = run_mact(a.mact, model, a.threads, p, a.iters, a.preset)
            if not r:
                print("mact bench failed")
                return 1
            res[p] = r
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    t0 = time.time()
    m = TorchBF16(model, attn=a.attn)
    t_load = time.time() - t0
    c = m.cfg
    n_img, K = 2, m.K
    ids = [c["bos_token_id"]]
    for _ in range(n_img):
        ids += [c["image_start_token_id"]] + [c["image_patch_id"]] * K + [c["image_end_token_id"]]
    t = 0
    while len(ids) < pr["N"]:
        ids.append(100 + (t * 37) % 300)
        t += 1
    ids = torch.tensor(ids)
    N, H, steps = len(ids), min(pr["H"], c["max_action_horizon"]), pr["steps"]
    pix = (torch.rand(n_img, 729, 588) * 2 - 1).to(torch.bfloat16)
    noise = torch.randn(1, H, m.A).to(torch.bfloat16)
    enc = torch.ones(N, dtype=torch.bool)
    print(f"PyTorch {torch.__version__} bf16 ({'fp32' if a.attn == 'fp32' else 'bf16'} attention), "
          f"{a.threads} threads; model {model}; N={N} H={H} steps={steps}; load {t_load:.1f} s", flush=True)
    with torch.no_grad():
        mods = [m.time_mod(k / steps) for k in range(steps)]  # once per schedule, as mact caches it
        times = {"vision": [], "llm": [], "action": [], "total": []}
        for it in range(a.iters + 1):
            t0 = time.time()
            emb = m.vision(pix)
            t1 = time.time()
            h = m.embed(ids, emb)
            keys, values = m.llm(h, m.bias(ids))
            t2 = time.time()
            m.action(keys, values, enc, noise, steps, mods)
            t3 = time.time()
            if it == 0:
                continue  # warm-up
            for k, v in zip(["vision", "llm", "action", "total"], [t1 - t0, t2 - t1, t3 - t2, t3 - t0]):
                times[k].append(v)
            print(f"  iter {it}: vision {1e3 * (t1 - t0):.0f} ms, llm {1e3 * (t2 - t1):.0f} ms, "
                  f"action {1e3 * (t3 - t2):.0f} ms", flush=True)
    med = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    print("PyTorch bf16 median ms: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()), flush=True)
    if not res:
        return 0
    print(f"\n{'stage':8s} {'PyTorch ms':>11s}" + "".join(f" {'mact ' + p + ' ms':>14s} {p + '/PyTorch':>13s}" for p in res))
    for k in ["vision", "llm", "action", "total"]:
        print(f"{k:8s} {med[k]:11.1f}" + "".join(f" {r[k]:14.1f} {r[k] / med[k]:13.2f}" for r in res.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
