#!/usr/bin/env python3
"""Self-check of the PyTorch reference, its checkpoint generator and golden writer.
usage: selftest.py TMP_DIR    -- prints `PASS name` / `FAIL name: why` lines (tests/run.sh format)."""
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_checkpoint  # noqa: E402
import make_golden  # noqa: E402
import molmoact2_ref as R  # noqa: E402

torch.set_grad_enabled(False)
N_FAIL = 0


def check(name, fn):
    global N_FAIL
    try:
        why = fn()
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    if why:
        N_FAIL += 1
        print(f"FAIL {name}: {why}", flush=True)
    else:
        print(f"PASS {name}", flush=True)


def maxrel(a, b):
    a = torch.as_tensor(np.asarray(a), dtype=torch.float64)
    b = torch.as_tensor(np.asarray(b), dtype=torch.float64)
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-30))


def quiet(fn, *a):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fn(*a)
    return buf.getvalue()


def main():
    tmp = sys.argv[1] if len(sys.argv) > 1 else "/tmp/mact-ref-selftest"
    os.makedirs(tmp, exist_ok=True)
    t0 = time.time()
    ck = os.path.join(tmp, "ck_tiny")
    gd = os.path.join(tmp, "golden_tiny")
    st = {}

    # ---- generation + golden through the real entry points ----
    def gen():
        quiet(gen_checkpoint.main, ["tiny", ck, "--seed", "11"])
        for f in ("config.json", "model.safetensors", "norm_stats.json"):
            if not os.path.exists(os.path.join(ck, f)):
                return f"missing {f}"
        st["m"] = R.MolmoAct2Ref(ck)
    check("gen_checkpoint_tiny", gen)
    if "m" not in st:
        return
    m = st["m"]

    def golden():
        st["golden_log"] = quiet(make_golden.main, [ck, gd, "--seed", "12"])
        with open(os.path.join(gd, "trace.json")) as f:
            st["trace"] = json.load(f)
    check("make_golden_tiny", golden)
    if "trace" not in st:
        return
    tr = st["trace"]
    G = {}

    def load(name):
        if name not in G:
            G[name] = dict(np.load(os.path.join(gd, name + ".npz")))
        return G[name]

    # ---- golden files follow docs/design.md ----
    def contract():
        need = {"preset", "seed", "model_dir", "n_images", "seq_len", "llm_splits", "num_steps",
                "action_horizon", "pooling_mask", "encoder_mask", "massive_activations"}
        if need - set(tr):
            return f"trace.json lacks {sorted(need - set(tr))}"
        N, H, A, L = tr["seq_len"], tr["action_horizon"], m.max_action_dim, m.n_layers
        n_img, K, D, kv, ae = tr["n_images"], m.sampler_k, m.text_hidden, m.kv_dim, m.ae_hidden
        spec = {
            "vision_io": {"pixel_values": (1, n_img, 729, 588), "image_embeds": (n_img * K, D)},
            "action_context_io": {"keys": (L, 1, N, kv), "values": (L, 1, N, kv), "k_ctx": (L, 1, N, ae),
                                  "v_ctx": (L, 1, N, ae)},
            "action_step_io": {"trajectory": (1, H, A), "timestep": (1,), "k_ctx": (L, 1, N, ae),
                               "v_ctx": (L, 1, N, ae), "encoder_attention_mask": (1, N),
                               "action_dim_is_pad": (1, A), "next_trajectory": (1, H, A)},
            "action_loop_io": {"keys": (L, 1, N, kv), "values": (L, 1, N, kv), "encoder_attention_mask": (1, N),
                               "noise": (1, H, A), "actions_norm": (1, H, A)},
            "e2e_io": {"pixel_values": (1, n_img, 729, 588), "input_ids": (1, N), "noise": (1, H, A),
                       "actions_norm": (1, H, A)},
        }
        rt = tr.get("rtc")
        if not isinstance(rt, dict) or set(rt) != {"inference_delay", "execution_horizon", "schedule",
                                                   "max_guidance_weight"}:
            return f"trace.json rtc {rt!r}"
        n_prev = H - 2 if H > 2 else 1
        for f in ("action_rtc_io", "action_rtc_vjp_io"):
            spec[f] = dict(spec["action_loop_io"], prev_actions_norm=(1, n_prev, m.action_dim))
        for i, (a, b) in enumerate(tr["llm_splits"]):
            spec[f"llm_split{i}_io"] = {"hidden_states": (1, N, D), "attention_bias": (1, 1, N, N),
                                        "hidden_out": (1, N, D), "keys": (b - a, 1, N, kv),
                                        "values": (b - a, 1, N, kv)}
        for fname, keys in spec.items():
            z = load(fname)
            if set(z) != set(keys):
                return f"{fname}: keys {sorted(z)} != {sorted(keys)}"
            for k, shp in keys.items():
                if tuple(z[k].shape) != shp:
                    return f"{fname}.{k}: shape {z[k].shape} != {shp}"
                if z[k].dtype.kind == "f" and z[k].dtype != np.float32:
                    return f"{fname}.{k}: dtype {z[k].dtype}"
                if z[k].dtype.kind == "f" and not np.isfinite(z[k]).all():
                    return f"{fname}.{k}: non-finite values"
        if load("e2e_io")["input_ids"].dtype != np.int64:
            return "input_ids not int64"
        if [r[1] for r in tr["llm_splits"]][-1] != L or tr["llm_splits"][0][0] != 0:
            return f"splits {tr['llm_splits']} do not cover {L} layers"
    check("golden_contract", contract)

    def e2e_vs_loop():
        e = load("e2e_io")["actions_norm"]
        lo = load("action_loop_io")
        if not np.array_equal(e, lo["actions_norm"]):
            return f"golden e2e vs action_loop rel diff {maxrel(e, lo['actions_norm']):.3g}"
        # recompute: e2e KV through the loop again
        ids = torch.from_numpy(load("e2e_io")["input_ids"])
        img = m.vision(torch.from_numpy(load("e2e_io")["pixel_values"]), pooling=tr["pooling_mask"])
        _, k, v = m.prefill(ids, img)
        enc = m.encoder_mask(ids, tr["encoder_mask"])
        a = m.action_loop(k, v, enc, torch.from_numpy(lo["noise"]), tr["num_steps"])
        if maxrel(a, e) > 1e-6:
            return f"recomputed loop on e2e KV differs: {maxrel(a, e):.3g}"
        if maxrel(k, lo["keys"]) > 1e-6 or maxrel(v, lo["values"]) > 1e-6:
            return "e2e KV differs from the chained split KV"
    check("e2e_equals_loop_on_e2e_kv", e2e_vs_loop)

    def rtc_reference():
        w = m.rtc_prefix_weights(3, 8, 9, 10, "linear").tolist()
        want = [1, 1, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0, 0]
        if max(abs(a - b) for a, b in zip(w, want)) > 1e-6:
            return f"linear weights {w}"
        w = m.rtc_prefix_weights(3, 8, 9, 10, "exp").tolist()
        want = [1, 1, 1, .631, .368, .189, .077, .018, 0, 0]
        if max(abs(a - b) for a, b in zip(w, want)) > 1e-3:
            return f"exp weights {w}"
        lo = load("action_loop_io")
        z = load("action_rtc_io")
        a0 = m.action_loop_rtc(lo["keys"], lo["values"], lo["encoder_attention_mask"], torch.from_numpy(lo["noise"]),
                               torch.from_numpy(z["prev_actions_norm"]), 0, 10, "zeros", 0.0, "identity",
                               tr["num_steps"])
        if maxrel(a0, lo["actions_norm"]) > 1e-6:
            return f"RTC with zero weights differs from the plain loop: {maxrel(a0, lo['actions_norm']):.3g}"
        # the autograd vjp against central differences (float64 would be exact; fp32 steps of 1e-2)
        kc, vc = m.action_context(lo["keys"], lo["values"])
        g = torch.Generator().manual_seed(5)
        x = torch.randn(1, H := tr["action_horizon"], m.max_action_dim, generator=g).masked_fill(m.action_dim_is_pad(), 0)
        e = torch.randn(x.shape, generator=g).masked_fill(m.action_dim_is_pad(), 0)
        t = torch.tensor([0.3])
        jte = m.rtc_velocity_vjp(x, t, kc, vc, lo["encoder_attention_mask"], e)
        d = torch.randn(x.shape, generator=g).masked_fill(m.action_dim_is_pad(), 0)
        eps = 1e-2
        vp = m.velocity(x + eps * d, t, kc, vc, lo["encoder_attention_mask"]).masked_fill(m.action_dim_is_pad(), 0)
        vm = m.velocity(x - eps * d, t, kc, vc, lo["encoder_attention_mask"]).masked_fill(m.action_dim_is_pad(), 0)
        fd = float(((vp - vm) / (2 * eps) * e).sum())
        ad = float((jte * d).sum())
        print(f"INFO rtc reference: e^T J d autograd {ad:.6g} central difference {fd:.6g}")
        if abs(ad - fd) > 1e-2 * max(1.0, abs(fd)):
            return f"autograd vjp {ad} vs central difference {fd}"
    check("rtc_reference_weights_zero_guidance_vjp_fd", rtc_reference)

    def splits_chain():
        L = m.n_layers
        s0 = load("llm_split0_io")
        last = load(f"llm_split{len(tr['llm_splits']) - 1}_io")
        hid, k, v = m.llm_layers(torch.from_numpy(s0["hidden_states"]), torch.from_numpy(s0["attention_bias"]), 0, L)
        ks = np.concatenate([load(f"llm_split{i}_io")["keys"] for i in range(len(tr["llm_splits"]))])
        vs = np.concatenate([load(f"llm_split{i}_io")["values"] for i in range(len(tr["llm_splits"]))])
        for i in range(1, len(tr["llm_splits"])):
            if not np.array_equal(load(f"llm_split{i}_io")["hidden_states"], load(f"llm_split{i-1}_io")["hidden_out"]):
                return f"split {i} input != split {i-1} output"
        for nm, a, b in (("hidden_out", hid, last["hidden_out"]), ("keys", k, ks), ("values", v, vs)):
            r = maxrel(a, b)
            if r > 1e-6:
                return f"one full run vs chained splits: {nm} rel diff {r:.3g}"
        # a different split point gives the same result too
        h1, k1, v1 = m.llm_layers(torch.from_numpy(s0["hidden_states"]), torch.from_numpy(s0["attention_bias"]), 0, 2)
        h2, k2, v2 = m.llm_layers(h1, torch.from_numpy(s0["attention_bias"]), 2, L)
        if maxrel(h2, hid) > 1e-6 or maxrel(torch.cat([k1, k2]), k) > 1e-6:
            return "split [0,2)+[2,L) differs from the full run"
    check("llm_splits_chain_equals_full_run", splits_chain)

    def grid_sample_vs_spec():
        g = torch.Generator().manual_seed(3)
        M = torch.randn(5, 14, 14, generator=g)
        pts = [((3 + 0.5) / 14, (7 + 0.5) / 14),      # cell centre (3,7): exact value
               (0.0, 0.5), (1.0, 0.5),                # ix = -0.5 and 13.5 (half outside)
               (0.5, 0.0), (0.3, 1.0), (0.0, 0.0), (1.0, 1.0),
               (0.25, 0.6), (4.0 / 14, 9.0 / 14),     # between cells / on a cell border
               (0.013, 0.987), (0.5 / 14, 13.5 / 14)]
        pts += [tuple(float(u) for u in torch.rand(2, generator=g)) for _ in range(20)]
        p = torch.tensor(pts, dtype=torch.float32)
        grid = (p * 2 - 1).view(1, 1, -1, 2)
        s = F.grid_sample(M[None], grid, mode="bilinear", padding_mode="zeros", align_corners=False)[0, :, 0, :]
        for j, (px, py) in enumerate(pts):
            ref = R.bilinear_spec(M, float(p[j, 0]), float(p[j, 1]))
            if (s[:, j] - ref).abs().max() > 1e-5:
                return f"point {px, py}: grid_sample {s[:3, j].tolist()} vs spec {ref[:3].tolist()}"
        if (s[:, 0] - M[:, 7, 3]).abs().max() > 1e-6:
            return "cell centre (x=3,y=7) does not return M[:, 7, 3] (x is the width index)"
        if (s[:, 1] - 0.5 * M[:, 6:8, 0].mean(1)).abs().max() > 1e-5:
            return "border ix=-0.5 is not half of the in-range column"
        if (s[:, 2] - 0.5 * M[:, 6:8, 13].mean(1)).abs().max() > 1e-5:
            return "border ix=13.5 is not half of the in-range column"
        if s[:, 5].abs().max() > 0 and (s[:, 5] - 0.25 * M[:, 0, 0]).abs().max() > 1e-6:
            return "corner (-0.5,-0.5) is not M[0,0]/4"
    check("grid_sample_matches_spec_bilinear", grid_sample_vs_spec)

    def sampler_in_vision():
        pv = torch.from_numpy(load("vision_io")["pixel_values"])
        out, aux = m.vision(pv, pooling=tr["pooling_mask"], return_aux=True)
        if maxrel(out, load("vision_io")["image_embeds"]) > 1e-6:
            return "vision() differs from golden"
        s = m.sampler
        K = m.sampler_k
        for i in range(pv.shape[1]):
            E = m.project(aux["pooled"][i])
            M = E.t().reshape(-1, 14, 14)
            p = aux["coords"][i]
            ce = F.linear(F.relu(F.linear(p, s["coord_encoder.0.weight"], s["coord_encoder.0.bias"])),
                          s["coord_encoder.2.weight"], s["coord_encoder.2.bias"])
            for k in range(K):
                ref = R.bilinear_spec(M, float(p[k, 0]), float(p[k, 1])) + ce[k]
                if maxrel(out[i * K + k], ref) > 1e-5:
                    return f"image {i} token {k} at p={p[k].tolist()} differs from the spec formula"
        allp = torch.cat(aux["coords"])
        if not ((allp < 1.0 / 14).any() or (allp > 13.0 / 14).any()):
            print("INFO no sample point near the border in this draw")
    check("sampler_tokens_match_spec_formula", sampler_in_vision)

    def padded_zero():
        pad = m.action_dim_is_pad().numpy()
        d = m.action_dim
        if pad.sum() != m.max_action_dim - d:
            return "action_dim_is_pad wrong"
        if not np.array_equal(load("action_step_io")["action_dim_is_pad"][0], pad):
            return "golden action_dim_is_pad wrong"
        for fname, key in (("action_loop_io", "actions_norm"), ("e2e_io", "actions_norm"),
                           ("action_step_io", "next_trajectory"), ("action_step_io", "trajectory")):
            a = load(fname)[key]
            if np.any(a[..., pad] != 0):
                return f"{fname}.{key}: padded dims not exactly zero"
            if np.any(np.all(a[..., ~pad] == 0, axis=(0, 1))):
                return f"{fname}.{key}: a real action dim is all zero"
        if np.all(load("action_loop_io")["noise"][..., pad] == 0):
            return "golden noise should keep non-zero padded dims (the loop must zero them)"
    check("padded_action_dims_exactly_zero", padded_zero)

    def action_step_check():
        z = load("action_step_io")
        nxt = m.action_step(torch.from_numpy(z["trajectory"]), torch.from_numpy(z["timestep"]),
                            torch.from_numpy(z["k_ctx"]), torch.from_numpy(z["v_ctx"]),
                            torch.from_numpy(z["encoder_attention_mask"]), torch.from_numpy(z["action_dim_is_pad"]),
                            tr["num_steps"])
        if maxrel(nxt, z["next_trajectory"]) > 1e-6:
            return "recomputed action_step differs"
        v = m.velocity(torch.from_numpy(z["trajectory"]), torch.from_numpy(z["timestep"]),
                       torch.from_numpy(z["k_ctx"]), torch.from_numpy(z["v_ctx"]),
                       torch.from_numpy(z["encoder_attention_mask"]))
        pad = torch.from_numpy(z["action_dim_is_pad"][0])
        exp = (torch.from_numpy(z["trajectory"]) + v / tr["num_steps"]).masked_fill(pad, 0)
        if maxrel(exp, z["next_trajectory"]) > 1e-6:
            return "next != x + v/num_steps"
        k = round(float(z["timestep"][0]) * tr["num_steps"])
        if abs(float(z["timestep"][0]) - k / tr["num_steps"]) > 1e-7:
            return "timestep is not k/num_steps"
        # the first loop step from the same noise equals action_step at t=0
        lo = load("action_loop_io")
        ctx = load("action_context_io")
        x1 = m.action_step(torch.from_numpy(z["trajectory"]), torch.zeros(1), torch.from_numpy(ctx["k_ctx"]),
                           torch.from_numpy(ctx["v_ctx"]), torch.from_numpy(lo["encoder_attention_mask"]), None,
                           tr["num_steps"])
        if tr["num_steps"] == 1 and maxrel(x1, lo["actions_norm"]) > 1e-6:
            return "1-step loop differs from action_step"
        # velocity depends on t (modulation is live) and on the context (cross-attention is live)
        v2 = m.velocity(torch.from_numpy(z["trajectory"]), torch.tensor([0.37]), torch.from_numpy(z["k_ctx"]),
                        torch.from_numpy(z["v_ctx"]), torch.from_numpy(z["encoder_attention_mask"]))
        v3 = m.velocity(torch.from_numpy(z["trajectory"]), torch.from_numpy(z["timestep"]),
                        torch.from_numpy(z["k_ctx"]) * 0.5 + 0.1, torch.from_numpy(z["v_ctx"]),
                        torch.from_numpy(z["encoder_attention_mask"]))
        if maxrel(v2, v) < 1e-3 or maxrel(v3, v) < 1e-3:
            return "velocity insensitive to t or to the context"
    check("action_step_consistent", action_step_check)

    def context_check():
        z = load("action_context_io")
        kc, vc = m.action_context(torch.from_numpy(z["keys"]), torch.from_numpy(z["values"]))
        if maxrel(kc, z["k_ctx"]) > 1e-6 or maxrel(vc, z["v_ctx"]) > 1e-6:
            return "recomputed context differs"
        hd = m.ae_head_dim
        kh = kc.reshape(*kc.shape[:-1], -1, hd)
        if (kh.pow(2).mean(-1) - 1).abs().max() > 1e-3:
            return "k_ctx heads are not unit-RMS"
        if (vc.pow(2).mean(-1) - 1).abs().max() > 1e-3:
            return "v_ctx rows are not unit-RMS"
    check("action_context_norms", context_check)

    def bias_and_masks():
        ids = torch.from_numpy(load("e2e_io")["input_ids"])[0]
        b = m.attention_bias(ids)[0, 0]
        if not np.array_equal(b.numpy(), load("llm_split0_io")["attention_bias"][0, 0]):
            return "attention_bias differs from golden"
        img = torch.zeros_like(ids, dtype=torch.bool)
        for t in m.image_token_ids:
            img |= ids == t
        allowed = b == 0
        N = ids.shape[0]
        tri = torch.tril(torch.ones(N, N, dtype=torch.bool))
        if not torch.equal(allowed, tri | (img[:, None] & img[None, :])):
            return "bias pattern is not causal + image-bidirectional"
        if not torch.all(b[~allowed] == torch.finfo(torch.float32).min):
            return "masked entries are not finfo(float32).min"
        first_img = int(img.nonzero()[0])
        last_img = int(img.nonzero()[-1])
        if not bool(allowed[first_img, last_img]):
            return "first image token cannot see the last image token"
        ea = m.encoder_mask(ids, "all")[0]
        ed = m.encoder_mask(ids, "drop_eos")[0]
        if not bool(ea.all()):
            return "encoder mask 'all' drops tokens"
        if bool(ed[ids == int(m.eos_id)].any()):
            return "drop_eos keeps an eos token"
        s = int((ids == int(m.action_start_id)).nonzero()[0])
        e = int((ids == int(m.action_end_id)).nonzero()[0])
        if bool(ed[s:e + 1].any()) or not bool(ed[e + 1]) or not bool(ed[s - 1]):
            return "drop_eos action span handling wrong"
        if int((~ed).sum()) != int((ids == int(m.eos_id)).sum()) + (e - s + 1):
            return "drop_eos drops extra tokens"
    check("attention_bias_and_encoder_masks", bias_and_masks)

    def pooling_modes():
        pv = torch.from_numpy(load("vision_io")["pixel_values"])[0]
        feats = torch.cat([h for h in [m.vit(R.canonicalize_pixels(pv))[t] for t in m.vit_taps]], -1)
        out = {mode: m.pool(feats, mode)[0] for mode in ("sdpa", "eager", "none")}
        idx, (gh, gw) = R.pooling_index(27, 27)
        if idx.shape != (196, 4) or (gh, gw) != (14, 14):
            return f"pooling index shape {tuple(idx.shape)}"
        edge = (idx < 0).any(-1)
        # 13 bottom-edge + 13 right-edge tokens with 2 invalid rows each, the corner with 3 -> 55
        if int(edge.sum()) != 27 or int((idx < 0).sum()) != 55:
            return f"pooling index: {int(edge.sum())} edge tokens, {int((idx < 0).sum())} invalid"
        if idx[0].tolist() != [0, 1, 27, 28] or idx[195].tolist() != [27 * 26 + 26, -1, -1, -1]:
            return f"pooling index rows {idx[0].tolist()} {idx[195].tolist()}"
        for a in ("eager", "none"):
            if maxrel(out[a][:, ~edge], out["sdpa"][:, ~edge]) > 1e-6:
                return f"interior tokens differ between sdpa and {a}"
            if maxrel(out[a][:, edge], out["sdpa"][:, edge]) < 1e-4:
                return f"edge tokens identical between sdpa and {a} (mask not live)"
        # sdpa edge token == attention over the valid rows only (explicit reference)
        P = "model.vision_backbone.image_pooling_2d."
        t = 195
        rows = feats[0, idx[t][idx[t] >= 0]]
        H, d = m.pool_heads, m.pool_head_dim
        q = F.linear(rows.mean(0, keepdim=True), m.w[P + "wq.weight"], m.w[P + "wq.bias"]).view(1, H, d).transpose(0, 1)
        k = F.linear(rows, m.w[P + "wk.weight"], m.w[P + "wk.bias"]).view(-1, H, d).transpose(0, 1)
        v = F.linear(rows, m.w[P + "wv.weight"], m.w[P + "wv.bias"]).view(-1, H, d).transpose(0, 1)
        o = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ v
        o = F.linear(o.transpose(0, 1).reshape(1, H * d), m.w[P + "wo.weight"], m.w[P + "wo.bias"])
        if maxrel(o[0], out["sdpa"][0, t]) > 1e-5:
            return "sdpa corner token != attention over its single valid row"
    check("pooling_modes_differ_only_on_edges", pooling_modes)

    def bf16_and_safetensors():
        g = torch.Generator().manual_seed(5)
        x = torch.randn(10000, generator=g) * 100
        ties = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 3.0e38, 1e-40, 0.0, -0.0],
                            dtype=torch.float32)
        x = torch.cat([x, ties])
        ours = R.f32_to_bf16_bits(x.numpy())
        theirs = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        if not np.array_equal(ours, theirs):
            return f"bf16 RNE differs from torch at {int((ours != theirs).sum())} values"
        path = os.path.join(tmp, "rt.safetensors")
        ents = [("a", "F32", (3, 4)), ("b", "BF16", (5,)), ("c", "F16", (2, 2))]
        w = R.SafetensorsWriter(path, ents, {"k": "v"})
        a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
        b = np.array([1.5, -2.25, 3.0e-3, 7.0, 1e5], np.float32)
        c = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
        w.write("a", a)
        w.write("b", b)
        w.write("c", c)
        w.close()
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        if n % 8:
            return "header length not 8-aligned"
        t, meta = R.read_safetensors(path)
        if meta != {"k": "v"} or not np.array_equal(t["a"], a) or not np.array_equal(t["c"], c):
            return "safetensors roundtrip failed"
        if not np.array_equal(t["b"], torch.from_numpy(b).to(torch.bfloat16).float().numpy()):
            return "bf16 roundtrip failed"
        # the tiny checkpoint stores big matrices as BF16, the rest F32
        hdr, _ = R.read_safetensors_header(os.path.join(ck, "model.safetensors"))
        dts = {k: v["dtype"] for k, v in hdr.items() if k != "__metadata__"}
        if dts["model.transformer.blocks.0.mlp.ff_proj.weight"] != "BF16" or \
                dts["model.action_expert.blocks.0.modulation.linear.weight"] != "F32" or \
                dts["model.transformer.blocks.0.attn_norm.weight"] != "F32":
            return "dtype policy not as docs/design.md"
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            arr = m.w[R.canonical_key(k)]
            if float(arr.abs().min()) == 0.0 and arr.numel() > 4 and float((arr == 0).float().mean()) > 0.01:
                return f"{k} has many zeros"
            if float(arr.abs().max()) == 0.0:
                return f"{k} is all zero"
    check("bf16_rne_and_safetensors_io", bf16_and_safetensors)

    def onednn_linear():
        g = torch.Generator().manual_seed(9)
        x = torch.randn(3, 70, 300, generator=g)
        w = torch.randn(500, 300, generator=g) / 17
        b = torch.randn(500, generator=g)
        y0 = F.linear(x, w, b)
        y1 = R.linear(x, w, b, force_onednn=True)
        if maxrel(y1, y0) > 1e-5:
            return f"oneDNN linear vs F.linear rel diff {maxrel(y1, y0):.3g}"
    check("onednn_linear_matches_f_linear", onednn_linear)

    def pixels():
        u8 = torch.randint(0, 256, (1000,))
        x = (u8.float() / 255 * 2 - 1)
        if not torch.equal(R.canonicalize_pixels(x), x):
            return "canonicalisation not identity on uint8-derived values"
        y = R.canonicalize_pixels(x + 0.003)
        if not torch.equal(y, x):
            return "canonicalisation does not snap back to the uint8 grid"
        pv = load("vision_io")["pixel_values"]
        back = np.rint((pv + 1) / 2 * 255)
        if np.abs((back / 255 * 2 - 1).astype(np.float32) - pv).max() > 0:
            return "golden pixel_values are not uint8-derived"
    check("pixel_canonicalisation", pixels)

    # ---- checkpoint variants ----
    def layouts():
        ck2 = os.path.join(tmp, "ck_tiny_lerobot")
        ck3 = os.path.join(tmp, "ck_tiny_lora")
        quiet(gen_checkpoint.main, ["tiny", ck2, "--seed", "11", "--lerobot"])
        quiet(gen_checkpoint.main, ["tiny", ck3, "--seed", "11", "--lora", "4"])
        m2 = R.MolmoAct2Ref(ck2)
        if set(m2.w) != set(m.w) or any(not torch.equal(m2.w[k], m.w[k]) for k in m.w):
            return "LeRobot layout loads different tensors than the HF layout"
        hdr2, _ = R.read_safetensors_header(os.path.join(ck2, "model.safetensors"))
        if "model.model.transformer.wte.embedding" not in hdr2 or "model.lm_head.weight" not in hdr2:
            return "LeRobot keys not prefixed with model."
        m3 = R.MolmoAct2Ref(ck3)
        raw, _ = R.read_safetensors(os.path.join(ck3, "model.safetensors"))
        with open(os.path.join(ck3, "adapter_config.json")) as f:
            ac = json.load(f)
        scale = ac["lora_alpha"] / ac["r"]
        nm = 0
        for k in m.w:
            if k.startswith("model.transformer.blocks.") and k.endswith(gen_checkpoint.LORA_LEAVES):
                base = "model.base_model.model." + k[:-len(".weight")]
                w0 = raw[base + ".base_layer.weight"].astype(np.float64)
                if not np.array_equal(w0, m.w[k].numpy()):
                    return f"{k}: LoRA base differs from the plain checkpoint"
                A = raw[base + ".lora_A.default.weight"].astype(np.float64)
                B = raw[base + ".lora_B.default.weight"].astype(np.float64)
                if A.shape[0] != ac["r"] or B.shape[1] != ac["r"] or not np.abs(A).min() > 0:
                    return f"{k}: bad LoRA shapes or zero A"
                exp = w0 + scale * (B @ A)
                if maxrel(m3.w[k], exp) > 1e-6:
                    return f"{k}: merged weight != W0 + alpha/r B A"
                nm += 1
            elif not torch.equal(m3.w[k], m.w[k]):
                return f"{k}: non-LoRA tensor differs"
        if nm != 4 * m.n_layers:
            return f"merged {nm} LoRA modules"
        ids = torch.from_numpy(load("e2e_io")["input_ids"])
        img = torch.from_numpy(load("vision_io")["image_embeds"])
        h, _, _ = m3.prefill(ids, img)
        h0, _, _ = m.prefill(ids, img)
        if maxrel(h, h0) < 1e-3:
            return "LoRA merge has no visible effect"
    check("lerobot_and_lora_layouts", layouts)

    def variants():
        msgs = []
        for name, extra, want in (("olmo_qkvbias", ["--qk-norm", "olmo", "--qkv-bias"], None),
                                  ("nosampler", ["--no-sampler", "--dtype", "f32"], 196),
                                  ("before", ["--sampler-place", "before", "--pooling", "eager"], 16),
                                  ("massive", ["--massive", "--action-mode", "both"], None)):
            d = os.path.join(tmp, "ck_" + name)
            quiet(gen_checkpoint.main, ["tiny", d, "--seed", "21"] + extra)
            mv = R.MolmoAct2Ref(d)
            if name == "olmo_qkvbias":
                if mv.w["model.transformer.blocks.0.self_attn.q_norm.weight"].shape[0] != mv.n_heads * mv.head_dim:
                    return "olmo q_norm shape"
                if "model.transformer.blocks.0.self_attn.att_proj.bias" not in mv.w:
                    return "qkv bias missing"
            if name == "before" and (mv.sampler_place != "before" or mv.default_pooling != "eager"):
                return f"sampler place {mv.sampler_place}, pooling {mv.default_pooling}"
            if name == "nosampler" and mv.sampler is not None:
                return "sampler present"
            gdir = os.path.join(tmp, "golden_" + name)
            quiet(make_golden.main, [d, gdir, "--seed", "22", "--splits", "2", "--n-images", "1"] +
                        (["--compressed"] if name == "nosampler" else []))
            with open(os.path.join(gdir, "trace.json")) as f:
                t = json.load(f)
            z = np.load(os.path.join(gdir, "vision_io.npz"))
            if want and z["image_embeds"].shape[0] != want:
                return f"{name}: {z['image_embeds'].shape[0]} image tokens, want {want}"
            if t["llm_splits"] != [[0, 2], [2, 3]]:
                return f"{name}: splits {t['llm_splits']}"
            e = np.load(os.path.join(gdir, "e2e_io.npz"))["actions_norm"]
            lo = np.load(os.path.join(gdir, "action_loop_io.npz"))["actions_norm"]
            if not np.array_equal(e, lo) or not np.isfinite(e).all():
                return f"{name}: e2e != loop"
            if name == "massive":
                if not t["massive_activations"] or t["max_abs_hidden"] < 1e3:
                    return f"massive: max|hidden| {t['max_abs_hidden']:.3g}"
                if t["encoder_mask"] != "drop_eos" or t["encoder_mask_kept"] >= t["seq_len"]:
                    return "action_mode both should default to drop_eos"
            msgs.append(f"{name}: max|hidden| {t['max_abs_hidden']:.3g}")
        print("INFO " + "; ".join(msgs))
    check("checkpoint_variants_olmo_nosampler_before_massive", variants)

    def guards():
        d = os.path.join(tmp, "ck_guard")
        quiet(gen_checkpoint.main, ["tiny", d, "--seed", "31"])
        cp = os.path.join(d, "config.json")
        with open(cp) as f:
            c = json.load(f)
        c["use_grid_token_sampler"] = False
        with open(cp, "w") as f:
            json.dump(c, f)
        try:
            R.MolmoAct2Ref(d)
            return "loads sampler tensors although the config disables the sampler"
        except ValueError:
            pass
        d2 = os.path.join(tmp, "ck_guard2")
        quiet(gen_checkpoint.main, ["tiny", d2, "--seed", "31", "--no-sampler"])
        cp = os.path.join(d2, "config.json")
        with open(cp) as f:
            c = json.load(f)
        c["use_grid_token_sampler"] = True
        with open(cp, "w") as f:
            json.dump(c, f)
        try:
            R.MolmoAct2Ref(d2)
            return "loads although the config asks for a sampler that is missing"
        except ValueError:
            pass
    check("sampler_config_guards", guards)
    print(f"INFO reference self-test took {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
    sys.exit(1 if N_FAIL else 0)
