#!/usr/bin/env python3
"""Makes a broken copy of a checkpoint directory for the loader tests (tests/test_loader.sh).

usage: mutate_checkpoint.py SRC DST CASE
CASE is one of: drop, rename, reshape, extra, sampler_off, sampler_missing, truncate, header_past_eof,
overlap, dtype_size, bad_json, bad_config, nan_config_taps. Prints what it changed."""
import json, os, shutil, struct, sys

def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]

def save(path, header, data):
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)

def first(header, sub):
    return next(k for k in sorted(header) if sub in k and k != "__metadata__")

def main():
    src, dst, case = sys.argv[1:4]
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    st = os.path.join(dst, "model.safetensors")
    cfgp = os.path.join(dst, "config.json")
    h, data = load(st)
    if case == "drop":  # a missing tensor: the header no longer lists it
        k = first(h, "blocks.1.mlp.ff_out.weight"); del h[k]; save(st, h, data)
    elif case == "rename":
        k = first(h, "attention_norm.weight"); h[k + "_renamed"] = h.pop(k); save(st, h, data)
    elif case == "reshape":  # same bytes, transposed shape: byte size still matches
        k = first(h, "blocks.0.mlp.ff_out.weight"); h[k]["shape"] = h[k]["shape"][::-1]; save(st, h, data)
    elif case == "extra":
        k = first(h, "ln_f.weight"); h["model.transformer.extra_tensor.weight"] = dict(h[k]); save(st, h, data)
        # share the bytes of ln_f would be an overlap; give it fresh bytes at the end instead
        b, e = h[k]["data_offsets"]; h["model.transformer.extra_tensor.weight"]["data_offsets"] = [len(data), len(data) + e - b]
        save(st, h, data + data[b:e])
    elif case == "sampler_off":
        c = json.load(open(cfgp)); c["use_grid_token_sampler"] = False; json.dump(c, open(cfgp, "w"))
    elif case == "sampler_missing":
        for k in [k for k in h if "scout_mlp" in k or "coord_encoder" in k]:
            del h[k]
        save(st, h, data)
    elif case == "truncate":
        with open(st, "r+b") as f:
            f.truncate(os.path.getsize(st) - 1000)
    elif case == "header_past_eof":
        with open(st, "r+b") as f:
            f.write(struct.pack("<Q", os.path.getsize(st) + 10))
    elif case == "overlap":
        ks = [k for k in sorted(h) if k != "__metadata__"]
        a, b = ks[0], ks[1]
        n = h[b]["data_offsets"][1] - h[b]["data_offsets"][0]
        h[b]["data_offsets"] = [h[a]["data_offsets"][0], h[a]["data_offsets"][0] + n]
        save(st, h, data)
    elif case == "dtype_size":  # F32 declared where the bytes are BF16-sized
        k = first(h, "wte.embedding")
        h[k]["dtype"] = "F32" if h[k]["dtype"] == "BF16" else "BF16"
        save(st, h, data)
    elif case == "bad_json":
        raw = open(st, "rb").read()
        raw = raw[:8] + b"!" + raw[9:]
        open(st, "wb").write(raw)
    elif case == "bad_config":
        open(cfgp, "w").write("{\"vit_config\": [1, 2")
    elif case == "craft_sampler":
        # Pins the sampler's points with the scout MLP's last bias (weights scaled to ~0, not zero):
        # sigmoid(+-100) is exactly 1 / ~0 in fp32, i.e. ix = 13.5 / -0.5 on the 14-cell grid border;
        # logit((i + 0.5) / 14) lands on cell centres; the rest fall between cells.
        import math, random
        import numpy as np
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from molmoact2_ref import read_safetensors, SafetensorsWriter
        t, meta = read_safetensors(st)
        wk = first(h, "scout_mlp.2.weight"); bk = first(h, "scout_mlp.2.bias")
        n = t[bk].shape[0]
        rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        logit = lambda p: math.log(p / (1 - p))
        pts = [100.0, 100.0, -100.0, -100.0, 100.0, -100.0, -100.0, 100.0]  # corners: (13.5,13.5) (-0.5,-0.5) ...
        pts += [logit((i + 0.5) / 14) for i in (0, 6, 13, 7)]                 # two centres
        pts += [logit(0.5 / 14), 100.0, -100.0, logit(13.5 / 14)]             # centre on one axis, border on the other
        while len(pts) < n:
            pts.append(logit(rng.uniform(0.02, 0.98)))                          # between cells
        t[wk] = (t[wk] * 1e-12).astype(np.float32)
        t[bk] = np.array(pts[:n], dtype=np.float32)
        entries = [(k, h[k]["dtype"], h[k]["shape"]) for k in h if k != "__metadata__"]
        w = SafetensorsWriter(st, entries, meta)
        for k, _, _ in entries:
            w.write(k, t[k])
        w.close()
    elif case == "drop_vit_block":  # tower truncated before the deepest tap
        import re
        last = max(int(m.group(1)) for k in h for m in [re.search(r"resblocks\.(\d+)\.", k)] if m)
        for k in [k for k in h if f"resblocks.{last}." in k]:
            del h[k]
        save(st, h, data)
    elif case == "taps_out_of_range":
        c = json.load(open(cfgp)); c["adapter_config"]["vit_layers"] = [-1, -99]; json.dump(c, open(cfgp, "w"))
    else:
        sys.exit(f"unknown case {case}")
    print(f"{case}: {dst}")

if __name__ == "__main__":
    main()
