#!/usr/bin/env python3
"""Copies a checkpoint without its grid token sampler: SRC DST. The sampler's tensors are dropped from
model.safetensors (every other tensor keeps its dtype), config.json's use_grid_token_sampler is set to false,
the other files are copied. For tests/test_export.sh (the sampler-less tiny checkpoint)."""
import json, os, shutil, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from molmoact2_ref import read_safetensors, read_safetensors_header, SafetensorsWriter  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for f in os.listdir(src):
    if f not in ("model.safetensors", "config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
header, _ = read_safetensors_header(os.path.join(src, "model.safetensors"))
meta = header.pop("__metadata__", None)
tensors, _ = read_safetensors(os.path.join(src, "model.safetensors"))
leaves = ("scout_mlp.", "coord_encoder.")
keep = [k for k in header if not any(l in k for l in leaves)]
w = SafetensorsWriter(os.path.join(dst, "model.safetensors"),
                      [(k, header[k]["dtype"], header[k]["shape"]) for k in keep], meta)
for k in keep:
    w.write(k, tensors[k])
w.close()
with open(os.path.join(src, "config.json")) as f:
    cfg = json.load(f)
cfg["use_grid_token_sampler"] = False
with open(os.path.join(dst, "config.json"), "w") as f:
    json.dump(cfg, f, indent=1)
print(f"{dst}: {len(header) - len(keep)} sampler tensors dropped, {len(keep)} kept")
