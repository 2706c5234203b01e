#!/usr/bin/env python3
"""Golden-file writer for the mact parity gate (docs/design.md "Golden files"). See molmoact2_ref.py.

usage: make_golden.py MODEL_DIR OUT_DIR [--seed S] [--n-images 2] [--seq-len N] [--splits 4] [--steps S]
                      [--horizon H] [--pooling sdpa|eager|none] [--encoder-mask all|drop_eos]
                      [--compressed] [--no-action-span] [--no-rtc] [--rtc-prev N] [--rtc-delay D]
                      [--rtc-horizon E] [--rtc-schedule zeros|ones|linear|exp] [--rtc-beta B]
Inputs are fresh random values (seed printed; default from os.urandom). Every golden file comes from one
consistent chain: vision -> embed -> llm splits -> action_context -> action loop, and e2e_io repeats the
whole path in one call (its actions_norm equals action_loop_io's). action_rtc_io / action_rtc_vjp_io repeat
action_loop_io's inputs with random normalised previous rows (prev_actions_norm [1, n_prev, action_dim] in
[-1, 1]) and RTC guidance (identity / vjp); their settings are trace.json's "rtc".
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from molmoact2_ref import MolmoAct2Ref, pooling_index  # noqa: E402


def patchify(img_u8, patch=14):
    """[H, W, 3] uint8 -> [n_patches, patch*patch*3] fp32, x = u8/255*2-1, inner order (dy, dx, c)."""
    x = img_u8.astype(np.float32) / np.float32(255.0) * np.float32(2.0) - np.float32(1.0)
    H, W, _ = x.shape
    gh, gw = H // patch, W // patch
    return x.reshape(gh, patch, gw, patch, 3).transpose(0, 2, 1, 3, 4).reshape(gh * gw, patch * patch * 3)


def random_image(rng, size=378):
    """Random RGB uint8 image: smooth colour gradients + blocks + noise (not pure noise)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    img = np.zeros((size, size, 3), np.float32)
    for c in range(3):
        a, b, ph = rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(0, 6.3)
        img[..., c] = 127.5 + 80 * np.sin(a * 3 * xx + b * 3 * yy + ph)
    for _ in range(6):
        y0, x0 = rng.integers(0, size - 40, 2)
        h, w = rng.integers(10, 120, 2)
        img[y0:y0 + h, x0:x0 + w] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 20, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def build_input_ids(m, rng, n_img, K, N, action_span=True):
    c = m.config
    V = m.vocab_size
    eos = int(m.eos_id)
    specials = {eos, c.get("pad_token_id"), c.get("action_output_token_id"), c.get("action_start_token_id"),
                c.get("action_end_token_id"), c.get("state_start_token_id"), c.get("state_end_token_id")}
    specials = {int(s) for s in specials if s is not None}

    def text(n):
        out = []
        while len(out) < n:
            t = int(rng.integers(0, V))
            if t not in specials:
                out.append(t)
        return out

    head = [eos]                                    # BOS = eos id (docs/spec/molmoact2.md 4.2)
    for _ in range(n_img):
        head += text(2) + [int(c["image_start_token_id"])] + [m.image_patch_id] * K + [int(c["image_end_token_id"])]
    tail = [eos] + text(3)                          # "<|im_end|>" then "\n<|im_start|>assistant\n"
    final = [int(c["action_output_token_id"])] if c.get("action_output_token_id") is not None else text(1)
    fixed = len(head) + len(tail) + len(final)
    if N is None:
        N = fixed + 24
    middle_n = N - fixed
    if middle_n < 0:
        raise SystemExit(f"--seq-len {N} too short: need at least {fixed} for {n_img} images x {K} tokens")
    middle = text(middle_n)
    # a state block and (optionally) an action_start..action_end span inside the text
    if middle_n >= 6 and c.get("state_start_token_id") is not None:
        s = int(rng.integers(0, middle_n - 5))
        st0 = int(c["state_token_start_id"])
        middle[s] = int(c["state_start_token_id"])
        middle[s + 1:s + 4] = [st0 + int(b) for b in rng.integers(0, int(c.get("num_state_tokens", 256)), 3)]
        middle[s + 4] = int(c["state_end_token_id"])
        free = [i for i in range(middle_n - 3) if i > s + 4 or i + 3 < s]
    else:
        free = list(range(max(middle_n - 3, 0)))
    if action_span and free and c.get("action_start_token_id") is not None:
        a = int(rng.choice(free))
        middle[a] = int(c["action_start_token_id"])
        middle[a + 3] = int(c["action_end_token_id"])
    ids = head + middle + tail + final
    assert len(ids) == N
    return np.array(ids, dtype=np.int64)[None]


def split_ranges(L, n):
    n = max(1, min(n, L))
    b = [round(i * L / n) for i in range(n + 1)]
    return [[b[i], b[i + 1]] for i in range(n)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n-images", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--splits", type=int, default=4)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--horizon", type=int, default=None)
    ap.add_argument("--pooling", choices=["sdpa", "eager", "none"], default=None)
    ap.add_argument("--encoder-mask", choices=["all", "drop_eos"], default=None)
    ap.add_argument("--compressed", action="store_true", help="np.savez_compressed instead of np.savez")
    ap.add_argument("--no-action-span", action="store_true",
                    help="no action_start..action_end span in the prompt")
    ap.add_argument("--no-rtc", action="store_true", help="no action_rtc_io / action_rtc_vjp_io")
    ap.add_argument("--rtc-prev", type=int, default=None, help="previous chunk rows (default H - 2, at least 1)")
    ap.add_argument("--rtc-delay", type=int, default=2, help="inference delay (clamped to the rows and H - 1)")
    ap.add_argument("--rtc-horizon", type=int, default=None, help="execution horizon (default H)")
    ap.add_argument("--rtc-schedule", choices=["zeros", "ones", "linear", "exp"], default="linear")
    ap.add_argument("--rtc-beta", type=float, default=10.0, help="max guidance weight")
    args = ap.parse_args(argv)
    if args.n_images < 1:
        raise SystemExit("--n-images must be >= 1")
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {args.seed}")
    t0 = time.time()
    torch.set_grad_enabled(False)
    m = MolmoAct2Ref(args.model_dir)
    t_load = time.time() - t0
    rng = np.random.default_rng(args.seed)
    save = np.savez_compressed if args.compressed else np.savez
    os.makedirs(args.out_dir, exist_ok=True)

    def out(name, **arrays):
        save(os.path.join(args.out_dir, name), **arrays)

    pooling = args.pooling or m.default_pooling
    enc_mode = args.encoder_mask or m.default_encoder_mask
    steps = args.steps or m.flow_steps
    H = args.horizon or m.action_horizon
    if H > m.max_action_horizon:
        raise SystemExit(f"--horizon {H} > max_action_horizon {m.max_action_horizon}")
    A = m.max_action_dim
    if m.sampler is not None:
        K = m.sampler_k
    else:
        K = pooling_index(*m.patch_grid)[0].shape[0]

    # inputs
    pixel_values = np.stack([patchify(random_image(rng)) for _ in range(args.n_images)])[None]
    input_ids = build_input_ids(m, rng, args.n_images, K, args.seq_len, not args.no_action_span)
    N = input_ids.shape[1]
    noise = rng.standard_normal((1, H, A)).astype(np.float32)
    step_k = int(rng.integers(0, steps))
    is_pad = m.action_dim_is_pad()

    # vision
    t1 = time.time()
    img = m.vision(torch.from_numpy(pixel_values), pooling=pooling)
    out("vision_io.npz", pixel_values=pixel_values.astype(np.float32), image_embeds=img.numpy())
    t_vis = time.time() - t1
    # LLM
    t1 = time.time()
    ids_t = torch.from_numpy(input_ids)
    hidden = m.embed(ids_t, img)
    bias = m.attention_bias(ids_t)
    pos = m.positions(ids_t)
    ranges = split_ranges(m.n_layers, args.splits)
    keys, values = [], []
    max_hidden = float(hidden.abs().max())
    for i, (a, b) in enumerate(ranges):
        h_out, k, v = m.llm_layers(hidden, bias, a, b, positions=pos)
        out(f"llm_split{i}_io.npz", hidden_states=hidden.numpy(), attention_bias=bias.numpy(),
            hidden_out=h_out.numpy(), keys=k.numpy(), values=v.numpy())
        keys.append(k)
        values.append(v)
        hidden = h_out
        max_hidden = max(max_hidden, float(hidden.abs().max()))
    keys = torch.cat(keys)
    values = torch.cat(values)
    t_llm = time.time() - t1
    # action expert
    t1 = time.time()
    k_ctx, v_ctx = m.action_context(keys, values)
    out("action_context_io.npz", keys=keys.numpy(), values=values.numpy(), k_ctx=k_ctx.numpy(),
        v_ctx=v_ctx.numpy())
    enc = m.encoder_mask(ids_t, enc_mode)
    traj0 = torch.from_numpy(noise).masked_fill(is_pad, 0.0)
    tstep = torch.tensor([step_k / steps], dtype=torch.float32)
    nxt = m.action_step(traj0, tstep, k_ctx, v_ctx, enc, is_pad, steps)
    out("action_step_io.npz", trajectory=traj0.numpy(), timestep=tstep.numpy(), k_ctx=k_ctx.numpy(),
        v_ctx=v_ctx.numpy(), encoder_attention_mask=enc.numpy(), action_dim_is_pad=is_pad[None].numpy(),
        next_trajectory=nxt.numpy())
    actions = m.action_loop(keys, values, enc, torch.from_numpy(noise), steps, is_pad)
    out("action_loop_io.npz", keys=keys.numpy(), values=values.numpy(), encoder_attention_mask=enc.numpy(),
        noise=noise, actions_norm=actions.numpy())
    rtc = None
    if not args.no_rtc:
        n_prev = args.rtc_prev if args.rtc_prev is not None else max(1, H - 2)
        if not 1 <= n_prev <= H:
            raise SystemExit(f"--rtc-prev {n_prev} outside 1..{H}")
        rtc = {"inference_delay": max(0, min(args.rtc_delay, n_prev, H - 1)),
               "execution_horizon": args.rtc_horizon if args.rtc_horizon is not None else H,
               "schedule": args.rtc_schedule, "max_guidance_weight": float(args.rtc_beta)}
        if rtc["execution_horizon"] < 1:
            raise SystemExit("--rtc-horizon must be >= 1")
        prev = rng.uniform(-1, 1, (1, n_prev, int(m.action_dim))).astype(np.float32)
        for guid, fname in (("identity", "action_rtc_io.npz"), ("vjp", "action_rtc_vjp_io.npz")):
            a_rtc = m.action_loop_rtc(keys, values, enc, torch.from_numpy(noise), torch.from_numpy(prev),
                                      rtc["inference_delay"], rtc["execution_horizon"], rtc["schedule"],
                                      rtc["max_guidance_weight"], guid, steps, is_pad)
            out(fname, keys=keys.numpy(), values=values.numpy(), encoder_attention_mask=enc.numpy(), noise=noise,
                prev_actions_norm=prev, actions_norm=a_rtc.numpy())
    t_act = time.time() - t1
    # e2e (independent single call through the whole path)
    t1 = time.time()
    e2e = m.e2e(torch.from_numpy(pixel_values), ids_t, torch.from_numpy(noise), steps, pooling=pooling,
                encoder_mask_mode=enc_mode, is_pad=is_pad)
    out("e2e_io.npz", pixel_values=pixel_values.astype(np.float32), input_ids=input_ids, noise=noise,
        actions_norm=e2e.numpy())
    t_e2e = time.time() - t1
    diff = float((e2e - actions).abs().max())

    meta = m.st_meta or {}
    massive = bool(int(meta.get("mact_massive", "0"))) if "mact_massive" in meta else max_hidden >= 1e3
    trace = {
        "preset": meta.get("mact_preset", "unknown"),
        "seed": args.seed,
        "model_dir": os.path.abspath(args.model_dir),
        "n_images": args.n_images,
        "seq_len": N,
        "llm_splits": ranges,
        "num_steps": steps,
        "action_horizon": H,
        "pooling_mask": pooling,
        "encoder_mask": enc_mode,
        "massive_activations": massive,
        # informative extras (not part of the design.md contract)
        "checkpoint_seed": int(meta["mact_seed"]) if "mact_seed" in meta else None,
        "action_dim": int(m.action_dim),
        "tokens_per_image": int(K),
        "action_step_index": step_k,
        "max_abs_hidden": max_hidden,
        "encoder_mask_kept": int(enc.sum()),
        "rtc": rtc,
        "generator": "tests/reference/make_golden.py (torch %s, fp32)" % torch.__version__,
    }
    with open(os.path.join(args.out_dir, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
    print(f"wrote {args.out_dir}: N={N} K={K} n_img={args.n_images} splits={ranges} steps={steps} H={H} "
          f"pooling={pooling} encoder_mask={enc_mode} (kept {int(enc.sum())}/{N}) max|hidden|={max_hidden:.3g} "
          f"e2e-vs-loop maxdiff={diff:.3g}")
    print(f"timing: load {t_load:.2f}s vision {t_vis:.2f}s llm {t_llm:.2f}s action {t_act:.2f}s "
          f"e2e {t_e2e:.2f}s total {time.time() - t0:.2f}s")


if __name__ == "__main__":
    main()
