#!/usr/bin/env python3
"""Reference for the integrator's path (docs/spec/molmoact2.md 4-5): camera frames + task + raw state -> actions.

usage: predict_ref.py MODEL_DIR OUT_DIR [--seed S] [--n-images 2] [--task T] [--steps S]

Writes OUT_DIR/cam{i}.png (random frames of assorted sizes), OUT_DIR/noise.npy, OUT_DIR/case.json (task,
state, norm tag for `mact run`) and OUT_DIR/ref.npz with the reference's input_ids, pixel_values,
actions_norm and actions (robot units). Independent pieces: torch's interpolate for the resize
(torchvision semantics), Hugging Face's Rust tokenizers (Node build, tests/tokenizer/encode_rust.js) for
the ids, MolmoAct2Ref for the model, numpy for the state bins."""
import argparse, json, os, re, subprocess, sys, tempfile
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from molmoact2_ref import MolmoAct2Ref, read_safetensors  # noqa: E402
from image_ref import torch_resize, hf_pixel_values, write_png  # noqa: E402

TOK_DIR = os.path.join(HERE, "..", "tokenizer")


def normalize_task(text):
    """upstream _normalize_question_text as docs/spec/molmoact2.md 4.2 describes it"""
    t = " ".join(text.split())
    pairs = [('"', '"'), ("'", "'"), ("`", "`"), ("(", ")"), ("[", "]"), ("{", "}"), ("\u201c", "\u201d"),
             ("\u2018", "\u2019")]
    prefixes = ["task:", "instruction:", "goal:", "the task is to", "your task is to"]
    tails = [".", ",", "!", "?", ";", ":", ")", "]", "}", '"', "'", "\u2026", "\u201d", "\u2019"]
    openers = {")": "(", "]": "[", "}": "{"}
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            if len(t) >= len(a) + len(b) and t.startswith(a) and t.endswith(b):
                t = t[len(a):len(t) - len(b)]
                changed = True
                break
        for p in prefixes:
            if t.lower().startswith(p):
                t = t[len(p):].strip()
                changed = True
        for c in tails:
            if t.endswith(c):
                if c in openers and openers[c] in t[:-1]:
                    continue
                t = t[:-len(c)].strip()
                changed = True
                break
        t = t.strip()
    parts = [p.strip() for p in re.split(r"[.!?]+", t) if p.strip()]
    return "; ".join(parts).lower()


def prompt_text(n_img, task, setup, control, bins):
    imgs = "<|image|>" if n_img == 1 else "".join(f"Image {i + 1}<|image|>" for i in range(n_img))
    state = "<state_start>" + "".join(f"<state_{b}>" for b in bins) + "<state_end>"
    return (imgs + "<|im_start|>user\nThe task is to " + task + ". The setup is <setup_start>" + setup +
            "<setup_end>." + " The current state of the robot is " + state + "." +
            " The expected control mode is <control_start>" + control + "<control_end>" +
            ". Given these, what action should the robot take to complete the task?" +
            "<|im_end|>\n<|im_start|>assistant\n<action_output>")


def rust_encode(tok_json, text):
    with tempfile.TemporaryDirectory() as d:
        c, o = os.path.join(d, "c.hex"), os.path.join(d, "o.txt")
        open(c, "w").write(text.encode("utf-8").hex() + "\n")
        subprocess.run(["node", os.path.join(TOK_DIR, "encode_rust.js"), tok_json, c, o], check=True,
                       env=dict(os.environ, NODE_PATH=os.path.join(TOK_DIR, "node_modules")))
        return [int(x) for x in open(o).read().split()]


def steps_of(path):
    return {st.get("registry_name"): st for st in json.load(open(path))["steps"]} if os.path.exists(path) else {}


def frame_of(step):
    c = (step or {}).get("config") or {}
    if c.get("joint_signs") is None:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    return np.array(c["joint_signs"], np.float32), np.array(c["joint_offsets"], np.float32)


def hf_frame(model_dir, name, reg):
    """an HF folder's processor file's joint-frame values (none when absent or null)"""
    return frame_of(steps_of(os.path.join(model_dir, name)).get(reg))


def lerobot_policy(d):
    """A LeRobot policy folder's processors as LeRobot applies them (processor_molmoact2.py, normalize_processor.py),
    in float32 torch ops, or None for an HF folder."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    if "type" not in cfg:
        return None
    pre, post = steps_of(os.path.join(d, "policy_preprocessor.json")), steps_of(os.path.join(d, "policy_postprocessor.json"))
    def stats_of(step):
        t, _ = read_safetensors(os.path.join(d, step["state_file"]))
        out = {}
        for k, v in t.items():
            key, stat = k.rsplit(".", 1)
            out.setdefault(key, {})[stat] = torch.from_numpy(np.asarray(v, np.float32))
        return out, float(step["config"].get("eps", 1e-8))
    ns, eps = stats_of(pre["molmoact2_masked_normalizer"])
    ps, peps = stats_of(post["molmoact2_masked_unnormalizer"])
    sf, af = frame_of(pre.get("molmoact2_state_frame_transform")), frame_of(post.get("molmoact2_action_frame_transform"))
    pack = pre["molmoact2_pack_inputs"]["config"]
    def denom(s, e):
        d_ = s["q99"] - s["q01"]
        return torch.where(d_ == 0, torch.tensor(e, dtype=torch.float32), d_)
    def norm_state(x):
        s = ns["observation.state"]
        x = torch.from_numpy(np.asarray(x, np.float32)).clone()
        x[:len(sf[0])] = torch.from_numpy(sf[0]) * x[:len(sf[0])] + torch.from_numpy(sf[1])
        y = 2.0 * (x - s["q01"]) / denom(s, eps) - 1.0
        mask = s["mask"].bool() if "mask" in s else torch.ones_like(y, dtype=torch.bool)
        y = torch.where(mask, y, x)
        y = torch.where(mask, y.clamp(-1.0, 1.0), y)  # molmoact2_clamp_normalized
        return y.numpy()
    def unnorm_actions(a_):
        s = ps["action"]
        t = a_.float().clamp(-1.0, 1.0)  # molmoact2_clamp_action
        y = (t + 1.0) * denom(s, peps) / 2.0 + s["q01"]
        mask = s["mask"].bool() if "mask" in s else torch.ones_like(y[0], dtype=torch.bool)
        y = torch.where(mask, y, t)
        n = len(af[0])
        y[:, :n] = torch.from_numpy(af[0]) * (y[:, :n] - torch.from_numpy(af[1]))
        return y
    st = ns["observation.state"]
    md = {"state_stats": {"q01": st["q01"].tolist(), "q99": st["q99"].tolist(),
                          "mask": (st["mask"].bool().tolist() if "mask" in st else None)},
          "action_stats": {"q01": ps["action"]["q01"].tolist()},
          "setup_type": pack.get("setup_type", ""), "control_mode": pack.get("control_mode", ""),
          "action_horizon": cfg["chunk_size"]}
    if md["state_stats"]["mask"] is None:
        del md["state_stats"]["mask"]
    lora = cfg.get("lora_alpha", 16) / cfg.get("lora_rank", 64) if cfg.get("train_mode_vlm", "lora") == "lora" else None
    return {"base": cfg["checkpoint_path"], "md": md, "lora_scale": lora, "state_frame": sf, "norm_state": norm_state,
            "unnorm_actions": unnorm_actions, "n_action_steps": cfg["n_action_steps"],
            "num_state_tokens": pack.get("num_state_tokens", 256),
            "steps": cfg.get("num_inference_steps"), "encoder_mask": "drop_eos" if cfg.get("action_mode") == "both" else "all"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    ap.add_argument("--n-images", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--task", default="  \"Task: Pick up the RED block.  Then put it in the (wooden) box!\" ")
    a = ap.parse_args()
    print("seed", a.seed)
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    lr = lerobot_policy(a.model_dir)
    base = lr["base"] if lr else a.model_dir
    cfg = json.load(open(os.path.join(base, "config.json")))
    if lr:
        md, tag = lr["md"], None
        m = MolmoAct2Ref(base, weights_dir=a.model_dir, lora_scale=lr["lora_scale"])
    else:
        ns = json.load(open(os.path.join(a.model_dir, "norm_stats.json")))
        tag = sorted(ns["metadata_by_tag"])[0]
        md = ns["metadata_by_tag"][tag]
        m = MolmoAct2Ref(a.model_dir, norm_tag=tag)
    vc = cfg["vit_config"]
    ih, iw = vc.get("image_default_input_size", [378, 378])
    patch = vc.get("image_patch_size", 14)
    # frames of assorted sizes (up- and down-scaling), some structure plus noise
    sizes = [(480, 640), (224, 224), (360, 640), (100, 150)]
    # camera i is stored as PNG, uint8 npy, float32 [0,1] npy in turn (every input format mact run takes)
    pix, files = [], []
    for i in range(a.n_images):
        h, w = sizes[i % len(sizes)]
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) * 7 % 256)], -1).astype(np.int64)
        img = np.clip(img + rng.integers(-40, 41, size=img.shape), 0, 255).astype(np.uint8)
        fmt = ("png", "npy_u8", "npy_f32")[i % 3]
        if fmt == "png":
            files.append(f"cam{i}.png")
            write_png(os.path.join(a.out_dir, files[-1]), img, 2, 8, rng)
        elif fmt == "npy_u8":
            files.append(f"cam{i}.npy")
            np.save(os.path.join(a.out_dir, files[-1]), img)
        else:
            f = rng.random(img.shape, dtype=np.float32)
            f[0, 0, :] = [-0.5, 1.5, 1.0]  # out of range: clipped
            files.append(f"cam{i}_f32.npy")
            np.save(os.path.join(a.out_dir, files[-1]), f)
            img = np.clip(f * np.float32(255), 0, 255).astype(np.uint8)  # LeRobot's float -> uint8 (truncating)
        pix.append(hf_pixel_values(torch_resize(img, ih, iw), patch))
    pixel_values = torch.from_numpy(np.stack(pix).astype(np.float32))
    # state: random within a widened [q01, q99] so some dims clip
    st = md["state_stats"]
    q01, q99 = np.array(st["q01"], np.float32), np.array(st["q99"], np.float32)
    # the joint frame (LeRobot's molmoact2_state_frame_transform, docs/spec/molmoact2.md 4.3): the checkpoint's values
    fs, fo = lr["state_frame"] if lr else hf_frame(a.model_dir, "policy_preprocessor.json", "molmoact2_state_frame_transform")
    nj = len(fs)
    # raw state drawn so that, after the frame transform, it lands in a widened [q01, q99] (some dims clip); a dim
    # passed through raw (mask false) stays within [-1, 1], as LeRobot requires of it
    state_model = (q01 + (q99 - q01) * rng.uniform(-0.2, 1.2, size=q01.shape)).astype(np.float32)
    smask = np.array(st.get("mask", [True] * len(q01)), bool)
    state_model = np.where(smask, state_model, rng.uniform(-1, 1, size=q01.shape)).astype(np.float32)
    state = state_model.copy()
    state[:nj] = ((state_model[:nj] - fo) / fs).astype(np.float32)
    if lr:
        n = lr["norm_state"](state)
    else:
        state_model = state.copy()
        state_model[:nj] = (fs * state[:nj] + fo).astype(np.float32)
        n = np.clip(2 * (state_model - q01) / np.maximum(q99 - q01, np.float32(1e-6)) - 1, -1, 1).astype(np.float32)
        if st.get("mask") is not None:
            n = np.where(np.array(st["mask"], bool), n, state_model).astype(np.float32)
        if "min" in st and "max" in st:
            n = np.where(np.array(st["min"]) == np.array(st["max"]), np.float32(0), n).astype(np.float32)
    nb = int(lr["num_state_tokens"] if lr else cfg.get("num_state_tokens", 256))
    bins = np.clip(np.rint((np.clip(np.nan_to_num(n), -1, 1) + np.float32(1)) / np.float32(2) * np.float32(nb - 1)),
                   0, nb - 1).astype(int)
    task_n = normalize_task(a.task)
    text = prompt_text(a.n_images, task_n, md.get("setup_type", ""), md.get("control_mode", ""), bins)
    tok_json = os.path.join(base, "tokenizer.json")
    raw_ids = rust_encode(tok_json, text)
    tj = json.load(open(tok_json))
    added = {t["content"]: t["id"] for t in tj["added_tokens"]}
    K = m.sampler_k if m.sampler_k else ((ih // patch + 1) // 2) * ((iw // patch + 1) // 2)
    ids = [int(cfg["eos_token_id"])]
    for t in raw_ids:
        if t == added["<|image|>"]:
            ids += [added["<im_start>"]] + [added["<im_patch>"]] * K + [added["<im_end>"]]
        else:
            ids.append(t)
    H = int(md.get("action_horizon") or cfg.get("max_action_horizon", 30))
    A = int(cfg.get("max_action_dim", 32))
    noise = rng.standard_normal((H, A)).astype(np.float32)
    np.save(os.path.join(a.out_dir, "noise.npy"), noise)
    steps = a.steps or (lr and lr["steps"]) or int(cfg.get("flow_matching_num_steps", 10))
    adim = len(md["action_stats"]["q01"])
    is_pad = torch.arange(A) >= adim
    with torch.no_grad():
        an = m.e2e(pixel_values, torch.tensor(ids), torch.from_numpy(noise).reshape(1, H, A), num_steps=steps,
                   encoder_mask_mode=lr["encoder_mask"] if lr else None, is_pad=is_pad)
        if lr:
            act = lr["unnorm_actions"](an.reshape(H, A)[: lr["n_action_steps"], :adim])
        else:
            act = m.unnormalize_actions(an)
            as_, ao = hf_frame(a.model_dir, "policy_postprocessor.json", "molmoact2_action_frame_transform")
            act[:, :len(as_)] = torch.from_numpy(as_) * (act[:, :len(as_)] - torch.from_numpy(ao))
    np.savez(os.path.join(a.out_dir, "ref.npz"), input_ids=np.array(ids, np.int64),
             pixel_values=pixel_values.numpy(), actions_norm=an.reshape(H, A).numpy(), actions=act.numpy())
    json.dump({"task": a.task, "task_normalized": task_n, "state": ",".join(repr(float(x)) for x in state),
               "norm_tag": tag or "", "steps": steps, "n_images": a.n_images, "n_tokens": len(ids), "images": files},
              open(os.path.join(a.out_dir, "case.json"), "w"), indent=1)
    print(f"wrote {a.out_dir}: {len(ids)} tokens, task -> {task_n!r}, bins {bins.tolist()}")


if __name__ == "__main__":
    main()
