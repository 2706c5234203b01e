#!/usr/bin/env python3
"""Random MolmoAct2 checkpoint writer (layout of docs/design.md). See molmoact2_ref.py docstring.

usage: gen_checkpoint.py PRESET OUT_DIR [--seed S] [--dtype mixed|f32] [--no-sampler]
                         [--sampler-place after|before] [--qkv-bias] [--qk-norm qwen3|olmo|none]
                         [--pooling sdpa|eager|none] [--action-mode continuous|both]
                         [--norm-tag libero|so101] [--lerobot] [--lora R] [--lora-alpha A] [--massive]
                         [--ae-no-qk-norm] [--ae-no-rope]
PRESET: tiny | wide. Every tensor is random and non-zero; tensor values depend only on (seed, HF name),
so the HF, LeRobot and LeRobot+LoRA layouts of one seed share their base weights.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from molmoact2_ref import SafetensorsWriter, stable_seed  # noqa: E402

PRESETS = {
    "tiny": dict(vit_hidden=64, vit_heads=4, vit_head_dim=16, vit_inter=96, vit_layers_stored=3,
                 vit_taps=[-1, -2], pool_hidden=64, pool_heads=4, pool_head_dim=16, proj_inter=128,
                 text_hidden=96, n_heads=4, n_kv=2, head_dim=24, n_layers=3, text_inter=160, vocab=512,
                 add_vocab=128, ae_hidden=64, ae_heads=4, mlp_ratio=4.0, ffn_multiple_of=64, t_dim=32,
                 sampler_k=16, scout_hidden=512, coord_hidden=256, flow_steps=2, norm_tag="libero"),
    "wide": dict(vit_hidden=1152, vit_heads=16, vit_head_dim=72, vit_inter=4304, vit_layers_stored=2,
                 vit_taps=[-1, -2], pool_hidden=1152, pool_heads=16, pool_head_dim=72, proj_inter=9728,
                 text_hidden=2560, n_heads=32, n_kv=8, head_dim=128, n_layers=2, text_inter=9728, vocab=1024,
                 add_vocab=128, ae_hidden=768, ae_heads=8, mlp_ratio=4.0, ffn_multiple_of=256, t_dim=256,
                 sampler_k=16, scout_hidden=512, coord_hidden=256, flow_steps=10, norm_tag="so101"),
}

NORM_TAGS = {
    "libero": dict(tag="libero", action_dim=7, state_dim=8, horizon=10, n_action_steps=10,
                   setup_type="single franka robotic arm in libero", control_mode="delta end-effector pose",
                   camera_keys=["observation.images.image", "observation.images.wrist_image"]),
    "so101": dict(tag="so100_so101_molmoact2", action_dim=6, state_dim=6, horizon=30, n_action_steps=30,
                  setup_type="single so101 robotic arm", control_mode="absolute joint position",
                  camera_keys=["observation.images.top", "observation.images.wrist"]),
}


def round_up(v, m):
    return v if m <= 0 else -(-v // m) * m


def token_ids(V):
    """Top-level special ids. Image tokens follow docs/spec/molmoact2.md 4.2: id = vocab_size + index."""
    return dict(
        image_start_token_id=V + 0, image_end_token_id=V + 1, image_patch_id=V + 2, image_high_res_id=V + 2,
        image_col_id=V + 3, low_res_image_start_token_id=V + 4, image_low_res_id=V + 6,
        frame_start_token_id=V + 7, frame_end_token_id=V + 8,
        pad_token_id=V - 13, eos_token_id=V - 12, bos_token_id=V - 12,
        action_output_token_id=V - 10, action_start_token_id=V - 9, action_end_token_id=V - 8,
        state_start_token_id=V - 7, state_end_token_id=V - 6, state_token_start_id=V - 12 - 256 - 4,
        num_state_tokens=256,
    )


def make_config(p, args):
    ae_inner = round_up(int(p["ae_hidden"] * p["mlp_ratio"]), p["ffn_multiple_of"])
    use_mask = args.pooling != "none"
    cfg = {
        "model_type": "molmoact2",
        "architectures": ["MolmoAct2ForConditionalGeneration"],
        "torch_dtype": "float32" if args.dtype == "f32" else "bfloat16",
        "vit_config": {
            "hidden_size": p["vit_hidden"], "intermediate_size": p["vit_inter"],
            "num_hidden_layers": p["vit_layers_stored"], "num_attention_heads": p["vit_heads"],
            "num_key_value_heads": p["vit_heads"], "head_dim": p["vit_head_dim"],
            "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
            "image_default_input_size": [378, 378], "image_patch_size": 14, "image_num_pos": 729,
            "float32_attention": True, "attn_implementation": "sdpa",
        },
        "adapter_config": {
            "vit_layers": list(p["vit_taps"]), "pooling_attention_mask": use_mask,
            "hidden_size": p["pool_hidden"], "num_attention_heads": p["pool_heads"],
            "num_key_value_heads": p["pool_heads"], "head_dim": p["pool_head_dim"],
            "float32_attention": True, "hidden_act": "silu", "intermediate_size": p["proj_inter"],
            "text_hidden_size": p["text_hidden"],
            "attn_implementation": "eager" if args.pooling == "eager" else "sdpa",
        },
        "text_config": {
            "hidden_size": p["text_hidden"], "num_attention_heads": p["n_heads"],
            "num_key_value_heads": p["n_kv"], "head_dim": p["head_dim"], "vocab_size": p["vocab"],
            "additional_vocab_size": p["add_vocab"], "qkv_bias": bool(args.qkv_bias),
            "num_hidden_layers": p["n_layers"], "intermediate_size": p["text_inter"], "hidden_act": "silu",
            "max_position_embeddings": 4096, "rope_theta": 5000000.0, "rope_scaling": None,
            "use_qk_norm": args.qk_norm != "none",
            "qk_norm_type": "olmo" if args.qk_norm == "olmo" else "qwen3",
            "layer_norm_eps": 1e-6, "norm_after": False, "tie_word_embeddings": False,
        },
        "action_expert_config": {
            "hidden_size": p["ae_hidden"], "num_layers": p["n_layers"], "num_heads": p["ae_heads"],
            "mlp_ratio": p["mlp_ratio"], "ffn_multiple_of": p["ffn_multiple_of"],
            "timestep_embed_dim": p["t_dim"], "dropout": 0.0, "attn_dropout": 0.0,
            "context_layer_norm": True, "qk_norm": not args.ae_no_qk_norm, "qk_norm_eps": 1e-6,
            "rope": not args.ae_no_rope,
            "causal_attn": False,
        },
        "use_frame_special_tokens": True, "add_action_expert": True, "max_action_dim": 32,
        "max_action_horizon": 30, "n_obs_steps": 1, "action_mode": args.action_mode,
        "state_format": "discrete", "flow_matching_num_steps": p["flow_steps"],
        "mask_action_dim_padding": True, "enable_depth_reasoning": False, "action_expert_depth_gate": False,
        "add_setup_tokens": True, "add_control_tokens": True, "norm_stats_filename": "norm_stats.json",
        "tie_word_embeddings": False,
        "use_grid_token_sampler": not args.no_sampler,
    }
    if not args.no_sampler:
        cfg["grid_token_sampler_num_tokens"] = p["sampler_k"]
    cfg.update(token_ids(p["vocab"]))
    return cfg, ae_inner


def tensor_specs(p, args, ae_inner):
    """-> list of (hf_name, shape, big, init). big: BF16 under --dtype mixed. init:
    ('lin', fan_in) N(0,1)/sqrt(fan_in); ('bias',) N(0,0.1); ('norm',) U(0.5,1.5); ('pos',) N(0,0.5);
    ('emb',) N(0,1); ('scout_b',) N(0,2) (spreads the sample points over the grid, incl. borders)."""
    S = []

    def lin(name, out, inp, bias=True, big=True):
        S.append((name + ".weight", (out, inp), big, ("lin", inp)))
        if bias:
            S.append((name + ".bias", (out,), False, ("bias",)))

    V = "model.vision_backbone."
    D = p["vit_hidden"]
    lin(V + "image_vit.patch_embedding", D, 14 * 14 * 3)
    S.append((V + "image_vit.positional_embedding", (729, D), True, ("pos",)))
    for j in range(p["vit_layers_stored"]):
        B = V + f"image_vit.transformer.resblocks.{j}."
        S.append((B + "attention_norm.weight", (D,), False, ("norm",)))
        S.append((B + "attention_norm.bias", (D,), False, ("bias",)))
        hd = p["vit_heads"] * p["vit_head_dim"]
        lin(B + "attention.wq", hd, D)
        lin(B + "attention.wk", hd, D)
        lin(B + "attention.wv", hd, D)
        lin(B + "attention.wo", D, hd)
        S.append((B + "ffn_norm.weight", (D,), False, ("norm",)))
        S.append((B + "ffn_norm.bias", (D,), False, ("bias",)))
        lin(B + "feed_forward.w1", p["vit_inter"], D)
        lin(B + "feed_forward.w2", D, p["vit_inter"])
    pin = D * len(p["vit_taps"])
    ph = p["pool_heads"] * p["pool_head_dim"]
    lin(V + "image_pooling_2d.wq", ph, pin)
    lin(V + "image_pooling_2d.wk", ph, pin)
    lin(V + "image_pooling_2d.wv", ph, pin)
    lin(V + "image_pooling_2d.wo", p["pool_hidden"], ph)
    lin(V + "image_projector.w1", p["proj_inter"], p["pool_hidden"], bias=False)
    lin(V + "image_projector.w3", p["proj_inter"], p["pool_hidden"], bias=False)
    lin(V + "image_projector.w2", p["text_hidden"], p["proj_inter"], bias=False)
    if not args.no_sampler:
        C = p["text_hidden"] if args.sampler_place == "after" else p["pool_hidden"]
        T = V + "token_sampler."
        S.append((T + "scout_mlp.0.weight", (p["scout_hidden"], C), False, ("lin", C)))
        S.append((T + "scout_mlp.0.bias", (p["scout_hidden"],), False, ("bias",)))
        S.append((T + "scout_mlp.2.weight", (2 * p["sampler_k"], p["scout_hidden"]), False,
                  ("lin", p["scout_hidden"])))
        S.append((T + "scout_mlp.2.bias", (2 * p["sampler_k"],), False, ("scout_b",)))
        S.append((T + "coord_encoder.0.weight", (p["coord_hidden"], 2), False, ("lin", 2)))
        S.append((T + "coord_encoder.0.bias", (p["coord_hidden"],), False, ("bias",)))
        S.append((T + "coord_encoder.2.weight", (C, p["coord_hidden"]), False, ("lin", p["coord_hidden"])))
        S.append((T + "coord_encoder.2.bias", (C,), False, ("bias",)))
    L = "model.transformer."
    Dt = p["text_hidden"]
    S.append((L + "wte.embedding", (p["vocab"], Dt), True, ("emb",)))
    S.append((L + "wte.new_embedding", (p["add_vocab"], Dt), True, ("emb",)))
    H, KV, hd = p["n_heads"], p["n_kv"], p["head_dim"]
    for i in range(p["n_layers"]):
        B = L + f"blocks.{i}."
        S.append((B + "attn_norm.weight", (Dt,), False, ("norm",)))
        lin(B + "self_attn.att_proj", (H + 2 * KV) * hd, Dt, bias=bool(args.qkv_bias))
        if args.qk_norm == "qwen3":
            S.append((B + "self_attn.q_norm.weight", (hd,), False, ("norm",)))
            S.append((B + "self_attn.k_norm.weight", (hd,), False, ("norm",)))
        elif args.qk_norm == "olmo":
            S.append((B + "self_attn.q_norm.weight", (H * hd,), False, ("norm",)))
            S.append((B + "self_attn.k_norm.weight", (KV * hd,), False, ("norm",)))
        lin(B + "self_attn.attn_out", Dt, H * hd, bias=False)
        S.append((B + "ff_norm.weight", (Dt,), False, ("norm",)))
        lin(B + "mlp.ff_proj", 2 * p["text_inter"], Dt, bias=False)
        lin(B + "mlp.ff_out", Dt, p["text_inter"], bias=False)
    S.append((L + "ln_f.weight", (Dt,), False, ("norm",)))
    S.append(("lm_head.weight", (p["vocab"], Dt), True, ("lin", Dt)))
    A = "model.action_expert."
    E = p["ae_hidden"]
    lin(A + "time_embed.1", E, p["t_dim"], big=False)
    lin(A + "time_embed.3", E, E, big=False)
    lin(A + "action_embed", E, 32, big=False)
    lin(A + "context_k_proj", E, KV * hd, bias=False, big=False)
    lin(A + "context_v_proj", E, KV * hd, bias=False, big=False)
    for i in range(p["n_layers"]):
        B = A + f"blocks.{i}."
        lin(B + "self_attn.qkv", 3 * E, E, big=False)
        lin(B + "self_attn.out_proj", E, E, big=False)
        lin(B + "cross_attn.q_proj", E, E, big=False)
        lin(B + "cross_attn.out_proj", E, E, big=False)
        lin(B + "mlp.gate_proj", ae_inner, E, big=False)
        lin(B + "mlp.up_proj", ae_inner, E, big=False)
        lin(B + "mlp.down_proj", E, ae_inner, big=False)
        lin(B + "modulation.linear", 9 * E, E, big=False)
    lin(A + "final_layer.modulation.linear", 2 * E, E, big=False)
    lin(A + "final_layer.linear", 32, E, big=False)
    return S


def massive_channels(Dt):
    return [Dt // 3, (2 * Dt) // 3 + 1]


def gen_tensor(name, shape, init, seed, p, args, cfg):
    g = torch.Generator().manual_seed(stable_seed(seed, name))
    kind = init[0]
    if kind == "norm":
        t = torch.rand(shape, generator=g) + 0.5
    else:
        t = torch.randn(shape, generator=g)
        if kind == "lin":
            t.mul_(1.0 / float(init[1]) ** 0.5)
        elif kind == "bias":
            t.mul_(0.1)
        elif kind == "pos":
            t.mul_(0.5)
        elif kind == "scout_b":
            t.mul_(2.0)
    if args.massive:
        # A few LLM residual channels reach 1e3..1e4 (as in the real model): large wte entries on
        # those channels for the BOS/EOS row and a couple of other rows, plus 100x ff_out rows of
        # layer 0 for the same channels (moderately large for every token).
        ch = massive_channels(p["text_hidden"])
        if name == "model.transformer.wte.embedding":
            g2 = torch.Generator().manual_seed(stable_seed(seed, name + "#massive"))
            rows = [cfg["eos_token_id"], 1, 7]
            for r in rows:
                for c in ch:
                    sgn = 1.0 if torch.rand(1, generator=g2).item() < 0.5 else -1.0
                    t[r, c] = sgn * (2000.0 + 6000.0 * torch.rand(1, generator=g2).item())
        elif name == "model.transformer.blocks.0.mlp.ff_out.weight":
            t[ch, :] *= 100.0
    return t


def write_norm_stats(path, tag_key, seed):
    nt = NORM_TAGS[tag_key]
    rng = np.random.default_rng(stable_seed(seed, "norm_stats"))

    def stats(dim, names, gripper_last):
        lo = rng.uniform(-2.0, 0.0, dim)
        hi = lo + rng.uniform(0.2, 3.0, dim)
        mn = lo - rng.uniform(0.0, 0.5, dim)
        mx = hi + rng.uniform(0.0, 0.5, dim)
        mask = [True] * dim
        if gripper_last:
            mask[-1] = False
        return {"q01": lo.tolist(), "q99": hi.tolist(), "min": mn.tolist(), "max": mx.tolist(),
                "mean": ((lo + hi) / 2).tolist(), "std": ((hi - lo) / 4).tolist(), "mask": mask,
                "names": names}

    ad, sd = nt["action_dim"], nt["state_dim"]
    md = {
        "action_stats": stats(ad, [f"action_{i}" for i in range(ad - 1)] + ["gripper"], True),
        "state_stats": stats(sd, [f"state_{i}" for i in range(sd)], False),
        "setup_type": nt["setup_type"], "control_mode": nt["control_mode"],
        "action_horizon": nt["horizon"], "n_action_steps": nt["n_action_steps"],
        "camera_keys": nt["camera_keys"], "normalize_gripper": False,
    }
    ns = {"format": "molmoact2_norm_stats.v1", "norm_mode": "q01_q99", "metadata_by_tag": {nt["tag"]: md}}
    with open(path, "w") as f:
        json.dump(ns, f, indent=1)


LORA_LEAVES = ("self_attn.att_proj.weight", "self_attn.attn_out.weight", "mlp.ff_proj.weight",
               "mlp.ff_out.weight")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("preset", choices=sorted(PRESETS))
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dtype", choices=["mixed", "f32"], default="mixed")
    ap.add_argument("--no-sampler", action="store_true")
    ap.add_argument("--sampler-place", choices=["after", "before"], default="after",
                    help="after: C = text hidden (default, docs/spec/molmoact2.md 7.1); before: C = adapter hidden")
    ap.add_argument("--qkv-bias", action="store_true")
    ap.add_argument("--qk-norm", choices=["qwen3", "olmo", "none"], default="qwen3")
    ap.add_argument("--pooling", choices=["sdpa", "eager", "none"], default="sdpa",
                    help="writes adapter_config.pooling_attention_mask / attn_implementation")
    ap.add_argument("--action-mode", choices=["continuous", "both"], default="continuous")
    ap.add_argument("--norm-tag", choices=sorted(NORM_TAGS), default=None)
    ap.add_argument("--lerobot", action="store_true", help="LeRobot key form (prefix model.)")
    ap.add_argument("--lora", type=int, default=0, metavar="R",
                    help="add PEFT LoRA adapters (rank R) on LLM att_proj/attn_out/ff_proj/ff_out; implies --lerobot")
    ap.add_argument("--lora-alpha", type=float, default=16.0)
    ap.add_argument("--massive", action="store_true", help="massive LLM activations (1e3..1e4)")
    ap.add_argument("--ae-no-qk-norm", action="store_true", help="action_expert_config.qk_norm false")
    ap.add_argument("--ae-no-rope", action="store_true", help="action_expert_config.rope false")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    t0 = time.time()
    print(f"seed {args.seed}")
    p = dict(PRESETS[args.preset])
    if args.norm_tag:
        p["norm_tag"] = args.norm_tag
    os.makedirs(args.out_dir, exist_ok=True)
    cfg, ae_inner = make_config(p, args)
    specs = tensor_specs(p, args, ae_inner)
    lora = args.lora > 0
    lerobot = args.lerobot or lora

    def stored_name(hf, leaf=None):
        if lora:
            base = "model.base_model.model." + hf
            if hf.endswith(LORA_LEAVES) and hf.startswith("model.transformer.blocks."):
                base = base[: -len(".weight")] + ".base_layer.weight"
            return base
        return ("model." + hf) if lerobot else hf

    entries = []
    plan = []  # (stored name, hf name, kind)
    for hf, shape, big, init in specs:
        dt = "BF16" if (big and args.dtype == "mixed") else "F32"
        entries.append((stored_name(hf), dt, shape))
        plan.append((stored_name(hf), hf, shape, init, None))
        if lora and hf.startswith("model.transformer.blocks.") and hf.endswith(LORA_LEAVES):
            mod = "model.base_model.model." + hf[: -len(".weight")]
            out, inp = shape
            entries.append((mod + ".lora_A.default.weight", "F32", (args.lora, inp)))
            plan.append((mod + ".lora_A.default.weight", hf + "#lora_A", (args.lora, inp), ("lin", inp), "A"))
            entries.append((mod + ".lora_B.default.weight", "F32", (out, args.lora)))
            plan.append((mod + ".lora_B.default.weight", hf + "#lora_B", (out, args.lora), ("lin", args.lora), "B"))
    meta = {"format": "pt", "mact_generator": "tests/reference/gen_checkpoint.py", "mact_preset": args.preset,
            "mact_seed": args.seed, "mact_massive": int(args.massive), "mact_dtype": args.dtype,
            "mact_layout": "lerobot+lora" if lora else ("lerobot" if lerobot else "hf")}
    wr = SafetensorsWriter(os.path.join(args.out_dir, "model.safetensors"), entries, meta)
    for stored, hf, shape, init, _ in plan:
        t = gen_tensor(hf, shape, init, args.seed, p, args, cfg)
        wr.write(stored, t.numpy())
        del t
    wr.close()
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    stale = os.path.join(args.out_dir, "adapter_config.json")
    if not lora and os.path.exists(stale):
        os.remove(stale)
    if lora:
        acfg = {"peft_type": "LORA", "r": args.lora, "lora_alpha": args.lora_alpha,
                "target_modules": ["att_proj", "attn_out", "ff_proj", "ff_out"], "lora_dropout": 0.0,
                "bias": "none", "base_model_name_or_path": None}
        with open(os.path.join(args.out_dir, "adapter_config.json"), "w") as f:
            json.dump(acfg, f, indent=2)
    write_norm_stats(os.path.join(args.out_dir, "norm_stats.json"), p["norm_tag"], args.seed)
    print(f"wrote {args.out_dir}: preset {args.preset}, {len(entries)} tensors, "
          f"{wr.total / 2**20:.1f} MiB, {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
