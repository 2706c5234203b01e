#!/usr/bin/env python3
"""Writes a LeRobot MolmoAct2 policy folder over an HF-layout base, the way LeRobot's save code writes one, and (with
--hf-twin) the equivalent HF-layout folder. Written from LeRobot's source (commit 7427f31), not from mact's reader:
  - config.json: PreTrainedConfig._save_pretrained (a draccus dump of MolmoAct2Config; norm_tag and norm_stats_path
    nulled by MolmoAct2Config._save_pretrained), every field, "type": "molmoact2";
  - model.safetensors: PreTrainedPolicy._save_pretrained, the policy's state dict in one file: the HF model is
    `self.model`, so every HF key gets "model."; with LoRA (train_mode_vlm lora) `self.model` is a PeftModel:
    "model.base_model.model." + the HF key, each LoRA target (MolmoAct2Policy._lora_target_modules) as
    `.base_layer.weight` (+ `.base_layer.bias`) beside `.lora_A.default.weight` [r, in] and `.lora_B.default.weight`
    [out, r], and no adapter_config.json;
  - policy_preprocessor.json / policy_postprocessor.json: DataProcessorPipeline.get_config (registry names, each
    step's get_config, state_file = "{name}_step_{i}_{registry_name}.safetensors") over the steps of
    make_molmoact2_pre_post_processors, and the normalizers' state_dict (FEATURE.STAT, float32; the mask a float32
    tensor of 0/1, as to_tensor converts the list of bools) in those files.

usage: lerobot_policy.py BASE OUT --seed S [--state-dim D] [--action-dim A] [--joints none|custom] [--lora R]
                         [--lora-alpha A] [--checkpoint-path P] [--hf-twin DIR] [--mask-dtype f32|bool] [--normalize-gripper]
                         [--chunk-size H] [--n-action-steps N] [--action-mode continuous|both] [--shards N]
The policy's weights are the base's plus a small update (a fine-tune); its statistics differ from the base's."""
import argparse, json, math, os, re, shutil, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from molmoact2_ref import (SafetensorsWriter, bf16_bits_to_f32, f32_to_bf16_bits, read_safetensors,  # noqa: E402
                           read_safetensors_header)

# MolmoAct2Policy._lora_target_modules(prefix="model", lm_head_path="lm_head") on the HF model's module names
LORA_TARGET = re.compile(r"(?:model\.(transformer|vision_backbone|image_pooling_2d|image_projector)\.(?:.*\.)?"
                         r"(w1|w2|w3|wq|wk|wv|wo|att_proj|attn_out|ff_proj|ff_out|patch_embedding)|lm_head)$")


def base_tensors(base):
    hdr, _ = read_safetensors_header(os.path.join(base, "model.safetensors"))
    t, _ = read_safetensors(os.path.join(base, "model.safetensors"))
    return {k: (hdr[k]["dtype"], t[k]) for k in t}


def policy_config(a, state_dim, action_dim, cams, names_s, names_a):
    feats_in = {k: {"type": "VISUAL", "shape": [3, 480, 640]} for k in cams}
    feats_in["observation.state"] = {"type": "STATE", "shape": [state_dim]}
    signs, offsets = a.frame if a.frame else (None, None)
    return {
        "type": "molmoact2", "n_obs_steps": 1, "input_features": feats_in,
        "output_features": {"action": {"type": "ACTION", "shape": [action_dim]}},
        "device": "cpu", "use_amp": False, "use_peft": False, "push_to_hub": False, "repo_id": None,
        "private": None, "tags": None, "license": None, "pretrained_path": None,
        "checkpoint_path": a.checkpoint_path or os.path.abspath(a.base), "checkpoint_revision": None,
        "checkpoint_force_download": False, "chunk_size": a.chunk_size, "n_action_steps": a.n_action_steps,
        "action_mode": a.action_mode, "inference_action_mode": "continuous",
        "discrete_action_tokenizer": "allenai/MolmoAct2-FAST-Tokenizer", "discrete_generation_max_steps": None,
        "norm_tag": None, "norm_stats_path": None, "setup_type": "", "control_mode": "", "image_keys": [],
        "normalize_language": True, "add_setup_tokens": True, "add_control_tokens": True, "normalize_gripper": a.normalize_gripper,
        "num_state_tokens": 256, "max_sequence_length": None, "expected_max_action_dim": 32,
        "num_flow_timesteps": 8, "flow_matching_cutoff": 1.0, "flow_matching_time_offset": 0.001,
        "flow_matching_time_scale": 0.999, "flow_matching_beta_alpha": 1.0, "flow_matching_beta_beta": 1.5,
        "num_inference_steps": None, "mask_action_dim_padding": True, "enable_inference_cuda_graph": True,
        "per_episode_seed": False, "eval_seed": None, "rtc_config": None,
        "joint_signs": signs, "joint_offsets": offsets,
        "train_mode_vlm": "lora" if a.lora else "fft", "lora_rank": a.lora or 64, "lora_alpha": a.lora_alpha,
        "lora_dropout": 0.05, "lora_bias": "none", "enable_knowledge_insulation": False, "freeze_embedding": True,
        "gradient_checkpointing": False, "compile_model": False, "dtype": "float32",
        "llm_residual_dropout": 0.1, "softmax_auxiliary_loss": True, "softmax_auxiliary_loss_scale": 0.0001,
        "discrete_loss_token_weighting": "root_subsegments_root_tokens", "optimizer_lr": 1e-05,
        "optimizer_vit_lr": 5e-06, "optimizer_connector_lr": 5e-06, "optimizer_action_expert_lr": 5e-05,
        "optimizer_betas": [0.9, 0.95], "optimizer_eps": 1e-06, "optimizer_weight_decay": 0.0,
        "optimizer_grad_clip_norm": 1.0, "scheduler_warmup_steps": 200, "scheduler_decay_steps": 24000,
        "scheduler_decay_lr": 1e-06,
        "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"},
        "dataset_feature_names": {"action": names_a, "observation.state": names_s},
    }


def random_stats(rng, dim, gripper_last):
    lo = rng.uniform(-60.0, 20.0, dim)
    hi = lo + rng.uniform(10.0, 120.0, dim)
    if gripper_last:  # the gripper passes through raw (mask false): LeRobot requires it within [-1, 1]
        lo[-1], hi[-1] = -1.0, 1.0
    mask = [True] * dim
    if gripper_last:
        mask[-1] = False
    return {"q01": lo, "q99": hi, "min": lo - 3.0, "max": hi + 3.0, "mean": (lo + hi) / 2, "std": (hi - lo) / 4,
            "mask": mask}


def pipelines(a, cams, state_dim, action_dim, base_path):
    feats = {k: {"type": "VISUAL", "shape": [3, 480, 640]} for k in cams}
    feats["observation.state"] = {"type": "STATE", "shape": [state_dim]}
    out_feats = {"action": {"type": "ACTION", "shape": [action_dim]}}
    norm_map = {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"}
    signs, offsets = a.frame if a.frame else (None, None)
    pre_state = "policy_preprocessor_step_3_molmoact2_masked_normalizer.safetensors"
    post_state = "policy_postprocessor_step_1_molmoact2_masked_unnormalizer.safetensors"
    pre = {"name": "policy_preprocessor", "steps": [
        {"registry_name": "rename_observations_processor", "config": {"rename_map": a.rename_map}},
        {"registry_name": "to_batch_processor", "config": {}},
        {"registry_name": "molmoact2_state_frame_transform", "config": {"joint_signs": signs, "joint_offsets": offsets}},
        {"registry_name": "molmoact2_masked_normalizer",
         "config": {"eps": 1e-08, "features": {**feats, **out_feats}, "norm_map": norm_map}, "state_file": pre_state},
        {"registry_name": "molmoact2_clamp_normalized", "config": {"normalization_masks": None}},
        {"registry_name": "molmoact2_pack_inputs", "config": {
            "checkpoint_path": base_path, "checkpoint_revision": None, "checkpoint_force_download": False,
            "action_mode": a.action_mode, "discrete_action_tokenizer": "allenai/MolmoAct2-FAST-Tokenizer",
            "image_keys": cams, "allow_image_key_fallback": False, "setup_type": a.setup_type,
            "control_mode": a.control_mode, "normalize_language": True, "add_setup_tokens": True,
            "add_control_tokens": True, "num_state_tokens": 256, "max_sequence_length": None,
            "chunk_size": a.chunk_size, "max_action_dim": 32, "env_action_dim": action_dim}},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}}]}
    post = {"name": "policy_postprocessor", "steps": [
        {"registry_name": "molmoact2_clamp_action", "config": {}},
        {"registry_name": "molmoact2_masked_unnormalizer",
         "config": {"eps": 1e-08, "features": out_feats, "norm_map": norm_map}, "state_file": post_state},
        {"registry_name": "molmoact2_action_frame_transform", "config": {"joint_signs": signs, "joint_offsets": offsets}},
        {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": None}}]}
    return pre, post, pre_state, post_state


def write_state_file(path, stats, cams, mask_dtype):
    ent, vals = [], []
    for key in ("observation.state", "action"):
        for stat in ("mean", "std", "min", "max", "q01", "q99", "mask"):
            v = np.asarray(stats[key][stat], dtype=np.float32)
            dt = "BOOL" if stat == "mask" and mask_dtype == "bool" else "F32"
            ent.append((f"{key}.{stat}", dt, v.shape))
            vals.append(v.astype(bool) if dt == "BOOL" else v)
    for c in cams:  # dataset image stats: VISUAL is IDENTITY, so they ride along unused
        for stat in ("mean", "std"):
            ent.append((f"{c}.{stat}", "F32", (3, 1, 1)))
            vals.append(np.full((3, 1, 1), 0.5, np.float32))
    w = SafetensorsWriter(path, ent)
    for (n, _, _), v in zip(ent, vals):
        w.write(n, v)
    w.close()


def write_weights(out, tensors, rng, a):
    """the fine-tuned state dict, LeRobot's key forms; returns the merged HF tensors (the twin's) in float64"""
    merged, ent, vals = {}, [], []
    scale = a.lora_alpha / a.lora if a.lora else 0.0
    for k in sorted(tensors):
        dt, w = tensors[k]
        w = w.astype(np.float64)
        mod, leaf = k.rsplit(".", 1)
        lora = a.lora and LORA_TARGET.search(mod) is not None and w.ndim == 2 and leaf == "weight"
        if not lora and w.ndim >= 1 and not k.endswith("inv_freq"):  # fully fine-tuned tensors move a little
            w = w + rng.normal(0.0, 0.02 * (np.abs(w).mean() + 1e-3), w.shape)
        if dt == "BF16":  # what the file will hold
            w = bf16_bits_to_f32(f32_to_bf16_bits(w.astype(np.float32))).astype(np.float64)
        prefix = "model.base_model.model." if a.lora else "model."
        if lora:
            o, i = w.shape
            A = rng.normal(0.0, 1.0 / math.sqrt(i), (a.lora, i)).astype(np.float32)
            # a trained update: scale * B @ A at 0.1x the base weight's spread (PEFT starts lora_B at zero)
            B = rng.normal(0.0, 0.1 * w.std() / (scale * math.sqrt(a.lora / i)), (o, a.lora)).astype(np.float32)
            ent += [(prefix + mod + ".base_layer.weight", dt, w.shape), (prefix + mod + ".lora_A.default.weight", "F32", A.shape),
                    (prefix + mod + ".lora_B.default.weight", "F32", B.shape)]
            vals += [w, A, B]
            merged[k] = w + scale * (B.astype(np.float64) @ A.astype(np.float64))
            a.lora_merged.add(k)
        else:
            bias_of_lora = a.lora and leaf == "bias" and LORA_TARGET.search(mod) is not None
            ent.append((prefix + mod + (".base_layer." if bias_of_lora else ".") + leaf, dt, w.shape))
            vals.append(w)
            merged[k] = w
    order = sorted(range(len(ent)), key=lambda j: ent[j][0])
    n = max(1, a.shards)
    per = -(-len(order) // n)
    wm = {}
    for s in range(n):
        fn = "model.safetensors" if n == 1 else f"model-{s + 1:05d}-of-{n:05d}.safetensors"
        part = order[s * per:(s + 1) * per]
        w = SafetensorsWriter(os.path.join(out, fn), [ent[j] for j in part], {"format": "pt"})
        for j in part:
            w.write(ent[j][0], vals[j].astype(np.float32))
            wm[ent[j][0]] = fn
        w.close()
    if n > 1:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
    return merged


def write_twin(twin, base, merged, stats, a, cams, tensors):
    """the equivalent HF-layout folder: the base's config and tokenizer, the merged weights under HF keys, the policy's
    statistics as its one norm tag, and the joint frame in minimal processor files"""
    os.makedirs(twin, exist_ok=True)
    for f in ("config.json", "tokenizer.json"):
        shutil.copy(os.path.join(base, f), os.path.join(twin, f))
    cfg = json.load(open(os.path.join(base, "config.json")))
    cfg["max_action_horizon"] = a.chunk_size
    cfg["action_mode"] = a.action_mode
    json.dump(cfg, open(os.path.join(twin, "config.json"), "w"), indent=1)
    ent = [(k, "F32" if k in a.lora_merged else tensors[k][0], merged[k].shape) for k in sorted(merged)]
    w = SafetensorsWriter(os.path.join(twin, "model.safetensors"), ent, {"format": "pt"})
    for k, _, _ in ent:
        w.write(k, merged[k].astype(np.float32))
    w.close()
    md = {"state_stats": {s: np.asarray(v).tolist() for s, v in stats["observation.state"].items()},
          "action_stats": {s: np.asarray(v).tolist() for s, v in stats["action"].items()},
          "setup_type": a.setup_type, "control_mode": a.control_mode, "action_horizon": a.chunk_size,
          "n_action_steps": a.n_action_steps, "camera_keys": cams}
    json.dump({"format": "molmoact2_norm_stats.v1", "norm_mode": "q01_q99", "metadata_by_tag": {"policy": md}},
              open(os.path.join(twin, "norm_stats.json"), "w"))
    signs, offsets = a.frame if a.frame else (None, None)
    for name, reg in (("policy_preprocessor", "molmoact2_state_frame_transform"),
                      ("policy_postprocessor", "molmoact2_action_frame_transform")):
        json.dump({"name": name, "steps": [{"registry_name": reg, "config": {"joint_signs": signs,
                                                                            "joint_offsets": offsets}}]},
                  open(os.path.join(twin, name + ".json"), "w"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--state-dim", type=int, default=6)
    ap.add_argument("--action-dim", type=int, default=6)
    ap.add_argument("--joints", choices=["none", "custom"], default="none")
    ap.add_argument("--lora", type=int, default=0)
    ap.add_argument("--lora-alpha", type=float, default=16.0)
    ap.add_argument("--checkpoint-path", default=None)
    ap.add_argument("--hf-twin", default=None)
    ap.add_argument("--mask-dtype", choices=["f32", "bool"], default="f32")
    ap.add_argument("--chunk-size", type=int, default=12)
    ap.add_argument("--n-action-steps", type=int, default=8)
    ap.add_argument("--action-mode", choices=["continuous", "both"], default="continuous")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--cameras", default="observation.images.top,observation.images.wrist")
    ap.add_argument("--rename", default="", help="FROM=TO,... the saved rename_map")
    ap.add_argument("--normalize-gripper", action="store_true",
                    help="LeRobot's normalize_gripper: every dim's mask true (the gripper normalised like the joints)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    cams = a.cameras.split(",")
    a.rename_map = dict(kv.split("=", 1) for kv in a.rename.split(",") if kv)
    a.setup_type, a.control_mode = "a policy's own setup", "absolute joint position"
    a.frame = None
    a.lora_merged = set()
    if a.joints == "custom":  # not SO-101's: every joint but the last (the gripper), signs +-1, offsets in degrees
        n = a.state_dim - 1
        a.frame = ([float(rng.choice([-1.0, 1.0])) for _ in range(n)], [float(rng.uniform(-120, 120)) for _ in range(n)])
        if n > a.action_dim:
            raise SystemExit("--joints custom needs action dims >= state dims - 1")
    stats = {"observation.state": random_stats(rng, a.state_dim, not a.normalize_gripper),
             "action": random_stats(rng, a.action_dim, not a.normalize_gripper)}
    names_s = [f"joint_{i}" for i in range(a.state_dim - 1)] + ["gripper"]
    names_a = [f"joint_{i}" for i in range(a.action_dim - 1)] + ["gripper"]
    base_path = a.checkpoint_path or os.path.abspath(a.base)
    json.dump(policy_config(a, a.state_dim, a.action_dim, cams, names_s, names_a),
              open(os.path.join(a.out, "config.json"), "w"), indent=4)
    tensors = base_tensors(a.base)
    merged = write_weights(a.out, tensors, rng, a)
    pre, post, pre_state, post_state = pipelines(a, cams, a.state_dim, a.action_dim, base_path)
    json.dump(pre, open(os.path.join(a.out, "policy_preprocessor.json"), "w"), indent=2)
    json.dump(post, open(os.path.join(a.out, "policy_postprocessor.json"), "w"), indent=2)
    write_state_file(os.path.join(a.out, pre_state), stats, cams, a.mask_dtype)
    write_state_file(os.path.join(a.out, post_state), stats, cams, a.mask_dtype)
    if a.hf_twin:
        write_twin(a.hf_twin, a.base, merged, stats, a, cams, tensors)
    print(f"wrote {a.out}: state {a.state_dim}, action {a.action_dim}, joints {a.joints}, lora {a.lora}, "
          f"base {base_path}")


if __name__ == "__main__":
    main()
