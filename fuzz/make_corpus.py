#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/ (committed; small files).

usage: fuzz/make_corpus.py MODEL_DIR [LEROBOT_DIR]
  MODEL_DIR: a `mact synth tiny` checkpoint (config.json, norm_stats.json);
  LEROBOT_DIR: a LeRobot policy folder over it, for fuzz_lerobot (tests/reference/lerobot_policy.py MODEL_DIR
  LEROBOT_DIR --seed 1 --joints custom --mask-dtype bool); without it those seeds are left as they are.
Standard library only, except the JPEG seeds (PIL, skipped when missing)."""
import io, json, os, struct, sys, zlib

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
model = sys.argv[1]


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- safetensors (as fuzz/README.md's seeds)
def st_img(header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data

sizes = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8, "I64": 8, "I32": 4, "I8": 1, "U8": 1, "BOOL": 1}
put("safetensors", "empty", st_img({}))
put("safetensors", "meta", st_img({"__metadata__": {"format": "pt"}}))
for i, (dt, sz) in enumerate(sizes.items()):
    shape = [[2, 3], [4], [], [1, 2, 1, 2], [0, 5]][i % 5]
    n = 1
    for d in shape:
        n *= d
    put("safetensors", "one_" + dt, st_img({"t." + dt: {"dtype": dt, "shape": shape, "data_offsets": [0, n * sz]}},
                                           bytes(range(n * sz))))
hdr, off = {"__metadata__": {"format": "pt"}}, 0
for i, dt in enumerate(["F32", "BF16", "F16", "I64"]):
    hdr["model.layers.%d.weight" % i] = {"dtype": dt, "shape": [2, 2], "data_offsets": [off, off + 4 * sizes[dt]]}
    off += 4 * sizes[dt]
put("safetensors", "multi", st_img(hdr, bytes(off)))

# ---- config.json: the tiny checkpoint's, plus variants that reach each branch
cfg = json.load(open(os.path.join(model, "config.json")))
put("config", "tiny.json", json.dumps(cfg))
for k, v in [("action_mode", "both"), ("max_action_dim", 7), ("use_grid_token_sampler", False)]:
    c = dict(cfg); c[k] = v
    put("config", "top_%s.json" % k, json.dumps(c))
c = json.loads(json.dumps(cfg)); c["text_config"]["use_qk_norm"] = True; c["text_config"]["qk_norm_type"] = "olmo"
put("config", "olmo.json", json.dumps(c))
c = json.loads(json.dumps(cfg)); c["adapter_config"]["pooling_attention_mask"] = True; c["adapter_config"]["attn_implementation"] = "eager"
put("config", "eager.json", json.dumps(c))
put("config", "minimal.json", json.dumps({"vit_config": {}, "adapter_config": {}, "text_config": {"eos_token_id": 1},
                                          "action_expert_config": {"num_layers": 48}}))

# ---- norm_stats.json
ns = json.load(open(os.path.join(model, "norm_stats.json")))
# byte 0 even: the file's norm_mode; odd: byte 1 picks the state and action modes (mode + 5 * mode)
put("normstats", "tiny.json", b"\0\0" + json.dumps(ns).encode())
put("normstats", "modes_mean_std.json", b"\1\x0c" + json.dumps(ns).encode())
for mode in ["min_max", "mean_std", "q10_q90", "none"]:
    n2 = json.loads(json.dumps(ns)); n2["norm_mode"] = mode
    for t in n2["metadata_by_tag"].values():
        for f in ("state_stats", "action_stats"):
            s = t[f]; d = len(s["q01"])
            s.setdefault("q10", [-1.0] * d); s.setdefault("q90", [1.0] * d)
            s.setdefault("mean", [0.0] * d); s.setdefault("std", [1.0] * d)
            s.setdefault("min", [-2.0] * d); s.setdefault("max", [2.0] * d)
            s["mask"] = [i % 2 == 0 for i in range(d)]
    put("normstats", "mode_%s.json" % mode, b"\0\0" + json.dumps(n2).encode())

# ---- LeRobot policy folder (fuzz_lerobot): byte 0 the parser (fuzz/fuzz_lerobot.c)
if len(sys.argv) > 2:
    lr = sys.argv[2]
    rd = lambda n: open(os.path.join(lr, n), "rb").read()
    put("lerobot", "config.json", b"\0" + rd("config.json"))
    c = json.loads(rd("config.json")); c["joint_signs"] = None; c["joint_offsets"] = None; c["rtc_config"] = None
    put("lerobot", "config_null_joints.json", b"\0" + json.dumps(c).encode())
    put("lerobot", "pre.json", b"\1" + rd("policy_preprocessor.json"))
    put("lerobot", "post.json", b"\2" + rd("policy_postprocessor.json"))
    put("lerobot", "frame_pre.json", b"\3\0" + rd("policy_preprocessor.json"))
    put("lerobot", "frame_post.json", b"\3\1" + rd("policy_postprocessor.json"))
    for post, name in ((0, "policy_preprocessor.json"), (1, "policy_postprocessor.json")):
        steps = json.loads(rd(name))["steps"]
        f = next(s["state_file"] for s in steps if s.get("state_file"))
        put("lerobot", "stats_%d.safetensors" % post, b"\4\0" + rd(f))
    for i, r in enumerate(["allenai/MolmoAct2-LIBERO", "org/name@main", "org/name@refs/pr/1", "a-b.c/d_e@v1.0",
                           "0123456789abcdef0123456789abcdef01234567\n", "org/../x", "org/name@../main"]):
        put("lerobot", "hf%d" % i, b"\5" + r.encode())

# ---- tokenizer: mode byte 0 + a tokenizer.json; mode byte 1 + text
def bytelevel():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

bl = bytelevel()
vocab = {bl[b]: b for b in range(256)}
vocab.update({"pi": 256, "ck": 257, "\u0120t": 258, "\u0120the": 259, "th": 260, "\u0120th": 261})
added = [{"id": 300 + i, "content": c, "special": True, "normalized": False, "single_word": False,
          "lstrip": False, "rstrip": False}
         for i, c in enumerate(["<|im_start|>", "<|im_end|>", "<|image|>", "<im_patch>", "<state_0>", "<action_output>"])]
added.append({"id": 310, "content": "caf\u00e9", "special": False, "normalized": True, "single_word": True,
              "lstrip": True, "rstrip": True})
split = {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
                                      "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False}
tok = {"version": "1.0", "added_tokens": added, "normalizer": {"type": "NFC"},
       "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, {"type": "ByteLevel", "add_prefix_space": False,
                                                                       "trim_offsets": False, "use_regex": False}]},
       "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab,
                 "merges": ["p i", "c k", "\u0120 t", "t h", "\u0120 th", "\u0120th e"]}}
put("tokenizer", "tok_full.json", b"\0" + json.dumps(tok).encode())
t2 = json.loads(json.dumps(tok)); t2["normalizer"] = None; t2["model"]["merges"] = [m.split(" ") for m in t2["model"]["merges"]]
put("tokenizer", "tok_pairs.json", b"\0" + json.dumps(t2).encode())
for i, text in enumerate(["Pick up the cube.", "caf\u00e9 cafe\u0301  <|im_start|>x<|image|>", "  \t\n 12345 \u4f60\u597d \U0001F600",
                          "it's THE pick-up; don't!", "\u00e9\u0301\u0300 \u1e9b\u0323"]):
    put("tokenizer", "text%d" % i, b"\1" + text.encode())
put("tokenizer", "text_bad_utf8", b"\1abc\xc3(\xed\xa0\x80")

# ---- prompt builder: task texts
for i, t in enumerate(["Pick up the blue cube and put it in the box.", "Task: \"open the drawer\"", "a.b!c?d", "(red) block.",
                       "  The task is to  PICK   up\tthe  mug!!  ", "\u201cMove left\u201d", "x <|image|> y", "<STATE_0>",
                       "Instruction: [stack the cups]...", "\u0130stanbul \u023a caf\u00e9"]):
    put("prompt", "task%d" % i, t)

# ---- npy / npz: mode byte 1 = npy, 0 = npz (stored and deflated members)
def npy(descr, shape, data, fortran=False, version=1):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, repr(tuple(shape)))
    pre = 10 if version == 1 else 12
    h += " " * (-(pre + len(h) + 1) % 64) + "\n"
    ln = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + ln + h.encode() + data

arrs = {"f4": npy("<f4", (2, 3), struct.pack("<6f", *range(6))), "i8": npy("<i8", (3,), struct.pack("<3q", 1, -2, 3)),
        "u1": npy("|u1", (2, 2, 3), bytes(range(12))), "b1": npy("|b1", (4,), b"\1\0\1\1"),
        "f2": npy("<f2", (), b"\0\x3c"), "f8": npy("<f8", (0, 4), b""), "v2": npy("<f4", (1,), b"\0\0\x80\x3f", version=2)}
for k, v in arrs.items():
    put("npy", "npy_" + k, b"\1" + v)

def zipfile_bytes(members, deflate):
    out, cd = io.BytesIO(), b""
    for name, data in members:
        nm = name.encode()
        comp = zlib.compress(data)[2:-4] if deflate else data
        crc = zlib.crc32(data)
        off = out.tell()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 8 if deflate else 0, 0, 0, crc, len(comp), len(data),
                              len(nm), 0) + nm + comp)
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 8 if deflate else 0, 0, 0, crc, len(comp), len(data),
                          len(nm), 0, 0, 0, 0, 0, off) + nm
    cdo = out.tell()
    out.write(cd + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(members), len(members), len(cd), cdo, 0))
    return out.getvalue()

put("npy", "npz_stored", b"\0" + zipfile_bytes([("a.npy", arrs["f4"]), ("b.npy", arrs["i8"])], False))
put("npy", "npz_deflated", b"\0" + zipfile_bytes([("x.npy", arrs["u1"]), ("y.npy", arrs["b1"]), ("z.npy", arrs["f2"])], True))

# ---- images: PNG of several colour types / depths (and interlace), JPEG via PIL
def png(w, h, ctype, depth, rows, interlace=0, extra=b""):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)) + extra +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

put("image", "rgb8.png", png(4, 3, 2, 8, [bytes((x * 60 + y * 20 + c * 7) % 256 for x in range(4) for c in range(3)) for y in range(3)]))
put("image", "gray8.png", png(5, 2, 0, 8, [bytes(range(y * 5, y * 5 + 5)) for y in range(2)]))
put("image", "rgba16.png", png(2, 2, 6, 16, [bytes(range(16)) for _ in range(2)]))
put("image", "gray1.png", png(9, 2, 0, 1, [b"\xaa\x80", b"\x55\x00"]))
put("image", "pal4.png", png(3, 2, 3, 4, [b"\x01\x20", b"\x21\x00"],
                              extra=struct.pack(">I", 9) + b"PLTE" + bytes(range(9)) + struct.pack(">I", zlib.crc32(b"PLTE" + bytes(range(9))))))
put("image", "graya8.png", png(2, 2, 4, 8, [b"\x10\xff\x20\x80", b"\x30\x00\x40\x40"]))
try:
    from PIL import Image
    for mode, q, name in [("RGB", 90, "rgb.jpg"), ("L", 50, "gray.jpg"), ("RGB", 20, "rgb_q20.jpg")]:
        im = Image.new(mode, (16, 8))
        im.putdata([((x * 16) % 256, (y * 32) % 256, 128) if mode == "RGB" else (x * 16) % 256
                    for y in range(8) for x in range(16)])
        b = io.BytesIO(); im.save(b, "JPEG", quality=q); put("image", name, b.getvalue())
    b = io.BytesIO(); Image.new("RGB", (16, 16), (9, 99, 199)).save(b, "JPEG", progressive=True); put("image", "progressive.jpg", b.getvalue())
except ImportError:
    print("PIL missing: no JPEG seeds", file=sys.stderr)
print("wrote", sum(len(fs) for _, _, fs in os.walk(root)), "seed files under", root)
