#!/usr/bin/env python3
"""PyTorch reference for mact's ViT pruning tools (docs/compression.md), driven by tests/test_prune.sh.
Independent of the C code: its own safetensors byte reader, its own ViT loop (on molmoact2_ref.py's weights and
torch functions), its own reading of the surgery's contract.

usage: prune_ref.py gen OUT --seed S [--vit-layers 8] [--vit-config-layers 10] [--taps=-3,-6] [--lora R]
                        [--vit-lora R] [--shards N] [--order spec|name|width]
           a tiny random checkpoint (tests/reference/gen_checkpoint.py's tiny preset) with a deeper ViT that stores
           fewer blocks than it configures, as the real teacher does (27 configured, 25 stored); --vit-lora adds
           PEFT LoRA on every ViT block's attention.wq and feed_forward.w1 (implies --lora); --shards writes an
           HF sharded checkpoint (model-0000i-of-0000N.safetensors + index); extra files to be copied verbatim.
       prune_ref.py images OUT --n N --seed S    random RGB frames: imK.png (for mact) and imK.npy (uint8, for here)
       prune_ref.py snr MODEL --images A.npy ... [--target-depth D] --json OUT
           per-block SNR 10 log10(E||in||^2 / E||out - in||^2) (E: per-token squared L2 norms averaged over tokens
           and images) and the keep-set / student taps rule of docs/compression.md
       prune_ref.py identity TEACHER --keep L --taps L --images ... --golden DIR [--student DIR]
           the teacher's vision output with the dropped blocks replaced by the identity and the taps read at
           teacher layers keep[student tap]: DIR/vision_io.npz + trace.json for `mact parity`; with --student,
           also the reference run on the pruned checkpoint itself and the max abs error between the two
       prune_ref.py distill TEACHER STUDENT --images ... --json OUT     cos_token, cos_flat, rel_mse per image
       prune_ref.py check TEACHER STUDENT --keep L [--taps L]   the surgery's contract, PASS/FAIL lines
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_checkpoint  # noqa: E402
from image_ref import hf_pixel_values, torch_resize, write_png  # noqa: E402
from make_golden import random_image  # noqa: E402
from molmoact2_ref import MolmoAct2Ref, attention, canonicalize_pixels  # noqa: E402

BLOCKS = "image_vit.transformer.resblocks."
ELT = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
FAILS = 0


def report(ok, name, detail):
    global FAILS
    if not ok:
        FAILS += 1
    print(f"{'PASS' if ok else 'FAIL'} {name} ({detail})" if ok else f"FAIL {name}: {detail}")
    sys.stdout.flush()


def ints(s):
    return [int(x) for x in s.replace("[", "").replace("]", "").split(",") if x.strip()]


# ------------------------------------------------------------------------------- raw safetensors (bytes)
def st_read_raw(path):
    """-> (header dict in file order incl. __metadata__, data-start offset, raw bytes of the file)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    return header, 8 + n, blob


def st_tensors(path):
    """-> list of (name, dtype, shape, raw bytes) in data order, metadata (or None), metadata-first flag."""
    header, base, blob = st_read_raw(path)
    keys = list(header)
    meta = header.get("__metadata__")
    items = [(k, v) for k, v in header.items() if k != "__metadata__"]
    items.sort(key=lambda kv: kv[1]["data_offsets"][0])
    out = [(k, v["dtype"], list(v["shape"]), blob[base + v["data_offsets"][0]: base + v["data_offsets"][1]])
           for k, v in items]
    return out, meta, bool(keys) and keys[0] == "__metadata__"


def st_write_raw(path, tensors, meta=None, meta_first=False):
    header = {}
    if meta is not None and meta_first:
        header["__metadata__"] = meta
    off = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    if meta is not None and not meta_first:
        header["__metadata__"] = meta
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for t in tensors:
            f.write(t[3])


def order_rule(names_dtypes):
    """The order rule a list of (name, dtype) in data order follows: 'width' (widest dtype, then name: the
    safetensors packages), 'name', or 'other'."""
    w = [(-ELT[d], n) for n, d in names_dtypes]
    if w == sorted(w):
        return "width"
    n = [x for x, _ in names_dtypes]
    return "name" if n == sorted(n) else "other"


def block_of(name):
    i = name.find(BLOCKS)
    if i < 0:
        return None
    rest = name[i + len(BLOCKS):]
    num = rest.split(".", 1)[0]
    return int(num) if num.isdigit() else None


def renamed(name, student_of):
    """-> student name, or None when the block is dropped; non-block names unchanged."""
    b = block_of(name)
    if b is None:
        return name
    if student_of.get(b) is None:
        return None
    i = name.find(BLOCKS) + len(BLOCKS)
    return name[:i] + str(student_of[b]) + name[i + len(str(b)):]


# ------------------------------------------------------------------------------- gen
LORA_REL = 0.1  # the LoRA update's spread relative to the base weight's (see cmd_gen)


def cmd_gen(a):
    p = gen_checkpoint.PRESETS["tiny"]
    p["vit_layers_stored"] = a.vit_layers
    p["vit_taps"] = [-1, -2]
    argv = ["tiny", a.out, "--seed", str(a.seed)]
    lora = a.lora or a.vit_lora
    if lora:
        argv += ["--lora", str(lora)]
    gen_checkpoint.main(argv)
    cfg_path = os.path.join(a.out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["vit_config"]["num_hidden_layers"] = a.vit_config_layers
    cfg["adapter_config"]["vit_layers"] = ints(a.taps)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    st = os.path.join(a.out, "model.safetensors")
    tensors, meta, meta_first = st_tensors(st)
    if a.vit_lora:
        # A trained adapter is a small update: PEFT starts lora_B at zero, and fine-tuning moves the merged
        # weight by a fraction of W0. B's spread is set so scale * B @ A has LORA_REL x W0's spread (A and W0
        # are both N(0, 1/in)). A delta as large as W0 (B ~ N(0, 1/r) at scale alpha/r = 4) grew the image
        # embeddings about 10x, and the grid sampler's bilinear read turned fp32's rounding of its positions
        # into errors near the parity gate, the fp32 reference's own error included (docs/bugs.md).
        with open(os.path.join(a.out, "adapter_config.json")) as f:
            acfg = json.load(f)
        scale = float(acfg["lora_alpha"]) / float(acfg["r"])
        sd_b = LORA_REL / (scale * math.sqrt(a.vit_lora))
        rng = np.random.default_rng(a.seed + 17)
        out = []
        for name, dt, shape, raw in tensors:
            b = block_of(name)
            if b is not None and (name.endswith(".attention.wq.weight") or name.endswith(".feed_forward.w1.weight")):
                mod = name[: -len(".weight")]
                o, i = shape
                out.append((mod + ".base_layer.weight", dt, shape, raw))
                A = (rng.standard_normal((a.vit_lora, i)) / math.sqrt(i)).astype(np.float32)
                B = (rng.standard_normal((o, a.vit_lora)) * sd_b).astype(np.float32)
                out.append((mod + ".lora_A.default.weight", "F32", [a.vit_lora, i], A.tobytes()))
                out.append((mod + ".lora_B.default.weight", "F32", [o, a.vit_lora], B.tobytes()))
            else:
                out.append((name, dt, shape, raw))
        tensors = out
    if a.order == "name":
        tensors.sort(key=lambda t: t[0])
    elif a.order == "width":
        tensors.sort(key=lambda t: (-ELT[t[1]], t[0]))
    if a.shards > 1:
        os.remove(st)
        tensors.sort(key=lambda t: t[0])
        per = -(-len(tensors) // a.shards)
        wm, total = {}, 0
        for k in range(a.shards):
            fn = f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
            part = tensors[k * per:(k + 1) * per]
            st_write_raw(os.path.join(a.out, fn), part, meta, meta_first)
            for t in part:
                wm[t[0]] = fn
                total += len(t[3])
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2, sort_keys=True) + "\n")
    else:
        st_write_raw(st, tensors, meta, meta_first)
    # files a real checkpoint carries next to the weights: copied byte for byte
    with open(os.path.join(a.out, "preprocessor_config.json"), "w") as f:
        json.dump({"image_processor_type": "MolmoAct2ImageProcessor", "size": {"height": 378, "width": 378}}, f)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("# tiny test checkpoint\nÜnïcödé bytes stay as they are.\n")
    print(f"gen: {a.out}: ViT {a.vit_layers} stored / {a.vit_config_layers} configured, taps {a.taps}, "
          f"{len(tensors)} tensors, shards {a.shards}, order {a.order}")


# ------------------------------------------------------------------------------- images
def cmd_images(a):
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for k in range(a.n):
        h, w = int(rng.integers(200, 480)), int(rng.integers(200, 640))
        img = random_image(rng, max(h, w))[:h, :w].copy()
        write_png(os.path.join(a.out, f"im{k}.png"), img, 2, 8, rng)
        np.save(os.path.join(a.out, f"im{k}.npy"), img)
    print(f"images: {a.n} frames in {a.out}")


def pixels(m, paths):
    """uint8 frames (.npy) -> pixel_values [n, P, patch_dim] through HF's preprocessing (image_ref.py)."""
    ih, iw = m.config["vit_config"].get("image_default_input_size", [378, 378])
    patch = int(m.config["vit_config"].get("image_patch_size", 14))
    return torch.from_numpy(np.stack([hf_pixel_values(torch_resize(np.load(p), ih, iw), patch) for p in paths]))


# ------------------------------------------------------------------------------- the ViT, every block
def vit_streams(m, pv, skip=()):
    """pv [n, P, 588] -> list over stored blocks j of (input stream, output stream); blocks in skip are the
    identity."""
    P = "model.vision_backbone.image_vit."
    x = canonicalize_pixels(pv)
    n, T, _ = x.shape
    x = m._lin(x, P + "patch_embedding") + m.w[P + "positional_embedding"][None]
    H, d = m.vit_heads, m.vit_head_dim
    out = []
    for j in range(m.vit_stored_layers):
        xin = x
        if j not in skip:
            B = P + f"transformer.resblocks.{j}."
            h = F.layer_norm(x, (x.shape[-1],), m.w[B + "attention_norm.weight"], m.w[B + "attention_norm.bias"], m.vit_eps)
            q, k, v = (m._lin(h, B + f"attention.{w}").view(n, T, H, d).transpose(1, 2) for w in ("wq", "wk", "wv"))
            x = x + m._lin(attention(q, k, v).transpose(1, 2).reshape(n, T, H * d), B + "attention.wo")
            h = F.layer_norm(x, (x.shape[-1],), m.w[B + "ffn_norm.weight"], m.w[B + "ffn_norm.bias"], m.vit_eps)
            x = x + m._lin(m.vit_act(m._lin(h, B + "feed_forward.w1")), B + "feed_forward.w2")
        out.append((xin, x))
    return out


def connector(m, feats):
    """tapped features [n, P, n_taps*VH] -> image_embeds [n*K, D] (molmoact2_ref's pooling, projector, sampler)."""
    pooled, grid = m.pool(feats, m.default_pooling)
    outs = []
    for i in range(pooled.shape[0]):
        o = pooled[i]
        if m.sampler is None:
            outs.append(m.project(o))
        elif m.sampler_place == "after":
            outs.append(m.grid_sample_tokens(m.project(o), grid)[0])
        else:
            outs.append(m.project(m.grid_sample_tokens(o, grid)[0]))
    return torch.cat(outs, 0)


def snr_db(m, pv):
    ein = np.zeros(m.vit_stored_layers)
    ed = np.zeros(m.vit_stored_layers)
    for i in range(pv.shape[0]):  # one image at a time, float64 sums
        for j, (xi, xo) in enumerate(vit_streams(m, pv[i:i + 1])):
            ein[j] += (xi.double() ** 2).sum().item()
            ed[j] += ((xo.double() - xi.double()) ** 2).sum().item()
    cnt = pv.shape[0] * pv.shape[1]
    return [10 * math.log10(a / b) if b > 0 else math.inf for a, b in zip(ein, ed)], ein / cnt, ed / cnt


def propose(snr, taps_raw, taps_abs, depth):
    """docs/compression.md: the deepest tapped layer pinned, then the depth-1 lowest-SNR blocks below it (ties:
    the shallower); each tap on the student block of the deepest kept teacher layer at or below its own."""
    deep = max(taps_abs)
    cand = sorted(range(deep), key=lambda j: (snr[j], j))[: depth - 1]
    keep = sorted(cand + [deep])
    st = []
    for t_raw, t in zip(taps_raw, taps_abs):
        sj = max([j for j, k in enumerate(keep) if k <= t], default=0)
        st.append(sj - len(keep) if t_raw < 0 else sj)
    return keep, st


def cmd_snr(a):
    m = MolmoAct2Ref(a.model)
    pv = pixels(m, a.images)
    snr, ein, ed = snr_db(m, pv)
    taps_raw = [int(x) for x in m.config["adapter_config"].get("vit_layers", [-3, -9])]
    res = {"snr_db": snr, "in_energy": ein.tolist(), "delta_energy": ed.tolist(), "taps": m.vit_taps}
    if a.target_depth:
        res["keep"], res["student_taps"] = propose(snr, taps_raw, m.vit_taps, a.target_depth)
    with open(a.json, "w") as f:
        json.dump(res, f)
    print("snr_db " + " ".join(f"{v:.4f}" for v in snr))


# ------------------------------------------------------------------------------- identity-replaced teacher
def cmd_identity(a):
    m = MolmoAct2Ref(a.teacher)
    keep = ints(a.keep)
    st_taps = ints(a.taps)
    K = len(keep)
    pv = pixels(m, a.images)
    skip = set(range(m.vit_stored_layers)) - set(keep)
    streams = vit_streams(m, pv, skip)
    layers = [keep[t if t >= 0 else K + t] for t in st_taps]  # the teacher layers the student taps land on
    ref = connector(m, torch.cat([streams[L][1] for L in layers], dim=-1))
    os.makedirs(a.golden, exist_ok=True)
    np.savez(os.path.join(a.golden, "vision_io.npz"), pixel_values=pv[None].numpy().astype(np.float32),
             image_embeds=ref.numpy().astype(np.float32))
    with open(os.path.join(a.golden, "trace.json"), "w") as f:
        json.dump({"preset": "prune_identity", "keep": keep, "student_taps": st_taps, "teacher_layers": layers,
                   "n_images": int(pv.shape[0])}, f)
    print(f"identity: teacher layers {sorted(skip)} as the identity, taps on teacher layers {layers}")
    if a.student:
        s = MolmoAct2Ref(a.student)
        got = s.vision(pv)
        err = (got - ref).abs().max().item()
        report(err <= 1e-5 * max(1.0, ref.abs().max().item()), "prune_ref_identity_student",
               f"reference on the pruned checkpoint vs the identity-replaced teacher: max abs err {err:.3g}, "
               f"max|ref| {ref.abs().max().item():.3g}, threshold 1e-5 x max(1, max|ref|); student taps resolve to "
               f"{s.vit_taps}")


# ------------------------------------------------------------------------------- distillation metrics
def metrics(t, s):
    t = t.double()
    s = s.double()
    tok = F.cosine_similarity(s, t, dim=-1)
    flat = (s * t).sum() / math.sqrt((t * t).sum().item() * (s * s).sum().item())
    return tok, flat.item(), ((s - t) ** 2).sum().item(), (t * t).sum().item(), (s * t).sum().item(), (s * s).sum().item()


def cmd_distill(a):
    mt, ms = MolmoAct2Ref(a.teacher), MolmoAct2Ref(a.student)
    pv = pixels(mt, a.images)
    per, toks, sse, ste, sdot, sss = [], [], 0.0, 0.0, 0.0, 0.0
    for i in range(pv.shape[0]):
        t, s = mt.vision(pv[i:i + 1]), ms.vision(pv[i:i + 1])
        tok, flat, se, te, dot, ss = metrics(t, s)
        per.append({"cos_token": tok.mean().item(), "cos_flat": flat, "rel_mse": se / te})
        toks.append(tok)
        sse, ste, sdot, sss = sse + se, ste + te, sdot + dot, sss + ss
    res = {"images": per, "overall": {"cos_token": torch.cat(toks).mean().item(),
                                      "cos_flat": sdot / math.sqrt(ste * sss), "rel_mse": sse / ste}}
    with open(a.json, "w") as f:
        json.dump(res, f)
    print("distill overall " + json.dumps(res["overall"]))


# ------------------------------------------------------------------------------- the surgery's contract
def cmd_check(a):
    T, S = a.teacher, a.student
    keep = ints(a.keep)
    K = len(keep)
    with open(os.path.join(T, "config.json")) as f:
        tc = json.load(f)
    with open(os.path.join(S, "config.json")) as f:
        sc = json.load(f)
    L = int(tc["vit_config"].get("num_hidden_layers", 27))
    t_raw = [int(x) for x in tc["adapter_config"].get("vit_layers", [-3, -9])]
    t_abs = [t + L if t < 0 else t for t in t_raw]
    if a.taps:
        want_taps = ints(a.taps)
    else:  # each tap to the student block holding its teacher layer, the teacher's sign kept
        want_taps = [keep.index(t) - (K if r < 0 else 0) for r, t in zip(t_raw, t_abs)]
    lands = [keep[t + K if t < 0 else t] for t in want_taps]
    exp = json.loads(json.dumps(tc))
    exp["vit_config"]["num_hidden_layers"] = K
    exp["adapter_config"]["vit_layers"] = want_taps
    report(sc == exp, "prune_check_config",
           f"student config = teacher config with num_hidden_layers {L}->{K} and vit_layers {t_raw}->{want_taps} "
           f"(taps land on teacher layers {lands}; teacher taps were layers {t_abs}); every other key unchanged")
    student_of = {b: j for j, b in enumerate(keep)}
    tf = sorted(os.listdir(T))
    sf = sorted(os.listdir(S))
    idx_t = os.path.join(T, "model.safetensors.index.json")
    bad, n_st, n_copied = [], 0, 0
    total = 0
    for fn in tf:
        if fn == "config.json":
            continue
        if fn.endswith(".safetensors"):
            tt, tmeta, tfirst = st_tensors(os.path.join(T, fn))
            want = [(renamed(n, student_of), d, s, r) for n, d, s, r in tt]
            want = [w for w in want if w[0] is not None]
            if not want:
                if fn in sf:
                    bad.append(f"{fn}: every tensor dropped but the file was written")
                continue
            if fn not in sf:
                bad.append(f"{fn}: missing")
                continue
            n_st += 1
            path = os.path.join(S, fn)
            header, base, blob = st_read_raw(path)
            got, smeta, sfirst = st_tensors(path)
            rule = order_rule([(n, d) for n, d, _, _ in tt])
            if base % 8:
                bad.append(f"{fn}: data starts at {base}, not 8-byte aligned")
            offs = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
            pos = 0
            for b0, b1 in offs:
                if b0 != pos:
                    bad.append(f"{fn}: data not contiguous at {b0}")
                    break
                pos = b1
            if base + pos != len(blob):
                bad.append(f"{fn}: data section {pos} bytes, file has {len(blob) - base}")
            if smeta != tmeta or (tmeta is not None and sfirst != tfirst):
                bad.append(f"{fn}: __metadata__ changed")
            if rule == "width":
                want.sort(key=lambda w: (-ELT[w[1]], w[0]))
            elif rule == "name":
                want.sort(key=lambda w: w[0])
            if [w[:3] for w in got] != [w[:3] for w in want]:
                bad.append(f"{fn}: tensors/order differ from the expected ({rule} order)")
            elif any(g[3] != w[3] for g, w in zip(got, want)):
                bad.append(f"{fn}: tensor bytes differ")
            total += sum(len(w[3]) for w in want)
        elif fn == "model.safetensors.index.json":
            continue
        else:
            with open(os.path.join(T, fn), "rb") as f1, open(os.path.join(S, fn), "rb") as f2:
                if f1.read() != f2.read():
                    bad.append(f"{fn}: not byte-identical")
            n_copied += 1
    extra = set(sf) - set(tf)
    if extra:
        bad.append(f"unexpected files {sorted(extra)}")
    if os.path.exists(idx_t):
        with open(idx_t) as f:
            ti = json.load(f)
        with open(os.path.join(S, "model.safetensors.index.json")) as f:
            si = json.load(f)
        wm = {}
        for n, fn in ti["weight_map"].items():
            r = renamed(n, student_of)
            if r is not None:
                wm[r] = fn
        if si["weight_map"] != wm:
            bad.append("index weight_map is not the teacher's renamed")
        if si["metadata"].get("total_size") != total:
            bad.append(f"index total_size {si['metadata'].get('total_size')} != {total}")
        for fn in set(wm.values()):
            names = {n for n, _, _, _ in st_tensors(os.path.join(S, fn))[0]}
            if names != {n for n, f2 in wm.items() if f2 == fn}:
                bad.append(f"index and {fn} disagree")
    report(not bad, "prune_check_files",
           "; ".join(bad) if bad else f"{n_st} safetensors files: ViT blocks renamed / dropped, every other tensor's "
           f"bytes, dtype and shape unchanged, the input's order rule, 8-byte aligned, contiguous; {n_copied} other "
           f"files byte-identical" + ("; index rewritten consistently" if os.path.exists(idx_t) else ""))
    try:
        s = MolmoAct2Ref(S)
        report(s.vit_stored_layers == K and [keep[t] for t in s.vit_taps] == lands, "prune_check_loads",
               f"the reference loads the student: {s.vit_stored_layers} blocks, taps {s.vit_taps} = teacher layers "
               f"{[keep[t] for t in s.vit_taps]}")
    except Exception as e:  # noqa: BLE001
        report(False, "prune_check_loads", f"the reference cannot load the student: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("out")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--vit-layers", type=int, default=8)
    g.add_argument("--vit-config-layers", type=int, default=10)
    g.add_argument("--taps", default="-3,-6")
    g.add_argument("--lora", type=int, default=0)
    g.add_argument("--vit-lora", type=int, default=0)
    g.add_argument("--shards", type=int, default=1)
    g.add_argument("--order", choices=["spec", "name", "width"], default="spec")
    g = sub.add_parser("images")
    g.add_argument("out")
    g.add_argument("--n", type=int, default=3)
    g.add_argument("--seed", type=int, required=True)
    g = sub.add_parser("snr")
    g.add_argument("model")
    g.add_argument("--images", nargs="+", required=True)
    g.add_argument("--target-depth", type=int, default=0)
    g.add_argument("--json", required=True)
    g = sub.add_parser("identity")
    g.add_argument("teacher")
    g.add_argument("--keep", required=True)
    g.add_argument("--taps", required=True)
    g.add_argument("--images", nargs="+", required=True)
    g.add_argument("--golden", required=True)
    g.add_argument("--student")
    g = sub.add_parser("distill")
    g.add_argument("teacher")
    g.add_argument("student")
    g.add_argument("--images", nargs="+", required=True)
    g.add_argument("--json", required=True)
    g = sub.add_parser("check")
    g.add_argument("teacher")
    g.add_argument("student")
    g.add_argument("--keep", required=True)
    g.add_argument("--taps")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    {"gen": cmd_gen, "images": cmd_images, "snr": cmd_snr, "identity": cmd_identity, "distill": cmd_distill,
     "check": cmd_check}[a.cmd](a)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
