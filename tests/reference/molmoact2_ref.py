"""MolmoAct2 fp32 PyTorch reference (the independent oracle for the mact C runtime).

Files in tests/reference/
-------------------------
molmoact2_ref.py   this module: safetensors I/O (no `safetensors` package needed), checkpoint loading
                   (HF, LeRobot `model.` and LeRobot+PEFT-LoRA key forms; LoRA merged W0 + alpha/r*B@A),
                   and the continuous-action inference path of the spec (docs/spec/molmoact2.md
                   sections 3.1-3.7, 4.5, 4.6, 5) written with torch's own functions, fp32 throughout.
                   MolmoAct2Ref(model_dir) has one method per boundary of docs/design.md:
                     vision(pixel_values, pooling=None)            -> image_embeds [n_img*K, D]
                     attention_bias(input_ids)                     -> [1,1,N,N] 0 / finfo(f32).min
                     embed(input_ids, image_embeds)                -> [1,N,D]
                     llm_layers(hidden, bias, a, b)                -> hidden_out, keys, values
                     action_context(keys, values)                  -> k_ctx, v_ctx
                     encoder_mask(input_ids, mode=None)            -> [1,N] bool ("all" | "drop_eos")
                     action_step(traj, t, k_ctx, v_ctx, enc_mask, is_pad=None, num_steps=None)
                     action_loop(keys, values, enc_mask, noise, num_steps=None)
                     e2e(pixel_values, input_ids, noise, num_steps=None, pooling=None, encoder_mask_mode=None)
                   plus velocity, prefill, unnormalize_actions and module-level canonicalize_pixels,
                   pooling_index, bilinear_spec (hand-written docs/spec/molmoact2.md 3.4 bilinear, for the self-test).
gen_checkpoint.py  random checkpoint writer: PRESET (tiny | wide) OUT_DIR [--seed S] [--dtype mixed|f32]
                   [--no-sampler] [--sampler-place after|before] [--qkv-bias] [--qk-norm qwen3|olmo|none]
                   [--pooling sdpa|eager|none] [--action-mode continuous|both] [--norm-tag libero|so101]
                   [--lerobot] [--lora R] [--lora-alpha A] [--massive]
                   -> config.json, model.safetensors, norm_stats.json (+ adapter_config.json with --lora)
make_golden.py     golden writer: MODEL_DIR OUT_DIR [--seed S] [--n-images 2] [--seq-len N] [--splits 4]
                   [--steps S] [--horizon H] [--pooling sdpa|eager|none] [--encoder-mask all|drop_eos]
                   [--compressed] [--no-action-span]
                   -> vision_io.npz, llm_split{i}_io.npz, action_context_io.npz, action_step_io.npz,
                      action_loop_io.npz, e2e_io.npz, trace.json (docs/design.md "Golden files")
selftest.py        internal-consistency checks, run by ../test_reference.sh (PASS/FAIL lines)

Typical use:
    /usr/bin/python3 tests/reference/gen_checkpoint.py tiny /tmp/ck --seed 1
    /usr/bin/python3 tests/reference/make_golden.py /tmp/ck /tmp/golden      # prints the seed it drew

Conventions and choices
* all math in fp32; RoPE / sinusoid tables are computed in float64 and rounded once to fp32
  (upstream computes them in fp32; the difference is ~1e-7 relative and this is the exact value).
  Attention scales q by 1/sqrt(head_dim) before q k^T.
* large linears run through torch's oneDNN kernel (see `linear`), small ones through F.linear; both
  are fp32 GEMMs. Cross-checked once against the upstream HF modules (ViT+pooling in all three modes,
  decoder layers with qwen3/olmo/no qk-norm and qkv bias, action expert): max rel. diff ~1e-6.
* masks use finfo(float32).min (LLM bias, action-expert cross bias) like upstream; the 2x2 pooling
  "sdpa" mode masks invalid keys with -inf (a boolean SDPA mask).
* pixel canonicalisation also clamps to 0..255 before /255 (as the HF backbone does).
* vit_layers negative indices are resolved against vit_config.num_hidden_layers exactly as upstream
  (MolmoAct2VisionBackbone.__init__); the generator always writes num_hidden_layers == stored layers,
  and loading fails if the stored layers do not cover the taps.
* sampler: present iff its 8 tensors exist (matched by suffix under any prefix); config key
  `use_grid_token_sampler` must agree (error otherwise). K = scout_mlp.2.weight rows / 2; placement
  from scout_mlp.0.weight columns (text hidden -> after the projector, adapter hidden -> before).
* pooling mode default: adapter_config.pooling_attention_mask false -> "none"; true ->
  adapter_config.attn_implementation "eager" -> "eager", anything else / missing -> "sdpa".
* encoder mask default: top-level action_mode "both" -> "drop_eos", else "all".
* LeRobot+LoRA checkpoints (PEFT-wrapped): every key is `model.base_model.model.<HF key>`, LoRA-wrapped
  leaves are `<module>.base_layer.weight` + `<module>.lora_A.default.weight` / `lora_B.default.weight`.
* Python: use /usr/bin/python3 (Debian torch).
"""
import json
import math
import os
import struct
import zlib

import numpy as np
import torch
import torch.nn.functional as F

F32_MIN = torch.finfo(torch.float32).min

# ----------------------------------------------------------------------------------------------
# safetensors I/O
# ----------------------------------------------------------------------------------------------
_NP_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
              "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_ELT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
             "BOOL": 1}


def f32_to_bf16_bits(x):
    """fp32 ndarray -> uint16 bf16 bit patterns, round-to-nearest-even (NaN kept quiet)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32)
    r = ((b >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)
    out = ((b + r) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.uint16(0x7FC0)
    return out


def bf16_bits_to_f32(u16):
    return (np.asarray(u16, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def read_safetensors(path, names=None):
    """-> (dict name -> fp32 numpy array (ints keep their dtype), metadata dict)."""
    header, base = read_safetensors_header(path)
    meta = header.pop("__metadata__", {}) or {}
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if names is not None and name not in names:
            continue
        b, e = info["data_offsets"]
        raw = mm[base + b: base + e]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        if dt == "BF16":
            arr = bf16_bits_to_f32(np.frombuffer(raw, dtype=np.uint16)).reshape(shape)
        elif dt in ("F32", "F16", "F64"):
            arr = np.frombuffer(raw, dtype=_NP_DTYPES[dt]).astype(np.float32).reshape(shape)
        else:
            arr = np.array(np.frombuffer(raw, dtype=_NP_DTYPES[dt]).reshape(shape))
        out[name] = arr
    del mm
    return out, meta


class SafetensorsWriter:
    """Streaming writer: declare every tensor first (name, dtype, shape), then write the data in the
    declared order with write(name, fp32 array). Never holds more than one tensor in memory."""

    def __init__(self, path, entries, metadata=None):
        self.path = path
        self.entries = list(entries)  # (name, dtype, shape)
        header = {}
        off = 0
        for name, dt, shape in self.entries:
            n = int(np.prod(shape)) * _ELT_SIZE[dt]
            header[name] = {"dtype": dt, "shape": [int(s) for s in shape], "data_offsets": [off, off + n]}
            off += n
        if metadata:
            header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
        hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
        hb += b" " * ((8 - len(hb) % 8) % 8)
        self.f = open(path, "wb")
        self.f.write(struct.pack("<Q", len(hb)))
        self.f.write(hb)
        self.next = 0
        self.total = off

    def write(self, name, arr):
        ename, dt, shape = self.entries[self.next]
        if ename != name:
            raise ValueError(f"write order: expected {ename}, got {name}")
        arr = np.asarray(arr)
        if tuple(arr.shape) != tuple(shape):
            raise ValueError(f"{name}: shape {arr.shape} != declared {shape}")
        if dt == "BF16":
            data = f32_to_bf16_bits(arr)
        elif dt in _NP_DTYPES:
            data = np.ascontiguousarray(arr, dtype=_NP_DTYPES[dt])
        else:
            raise ValueError(dt)
        self.f.write(data.tobytes())
        self.next += 1

    def close(self):
        if self.next != len(self.entries):
            raise ValueError(f"only {self.next}/{len(self.entries)} tensors written")
        self.f.close()


# ----------------------------------------------------------------------------------------------
# checkpoint loading: key canonicalisation + LoRA merge
# ----------------------------------------------------------------------------------------------
_CANON_ROOTS = ("model.vision_backbone.", "model.transformer.", "model.action_expert.", "lm_head.")
_STRIP_PREFIXES = ("model.", "base_model.model.")


def canonical_key(key):
    """HF key for any of: HF, LeRobot (`model.` + HF key), LeRobot+PEFT (`model.base_model.model.` +
    HF key, LoRA-wrapped leaves `.base_layer.weight`). LoRA A/B keys keep their lora_* leaf."""
    k = key
    for _ in range(4):
        if k.startswith(_CANON_ROOTS) and not k.startswith("model.model."):
            break
        for p in _STRIP_PREFIXES:
            if k.startswith(p):
                k = k[len(p):]
                break
        else:
            break
    k = k.replace(".base_layer.", ".")
    return k


def load_checkpoint_tensors(model_dir, lora_scale=None):
    """-> (dict canonical HF name -> torch fp32 tensor, safetensors metadata, info dict). lora_scale: alpha / r when
    the folder has no adapter_config.json (a LeRobot policy's lora_alpha / lora_rank)."""
    idx_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        with open(idx_path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    raw = {}
    meta = {}
    for fn in files:
        t, m = read_safetensors(os.path.join(model_dir, fn))
        raw.update(t)
        meta.update(m)
    w = {}
    lora_a, lora_b = {}, {}
    for key, arr in raw.items():
        ck = canonical_key(key)
        if ".lora_A." in ck:
            lora_a[ck.split(".lora_A.")[0]] = arr
        elif ".lora_B." in ck:
            lora_b[ck.split(".lora_B.")[0]] = arr
        else:
            if ck in w:
                raise ValueError(f"duplicate tensor after key canonicalisation: {ck}")
            w[ck] = torch.from_numpy(np.ascontiguousarray(arr))
    info = {"lora_merged": 0}
    if lora_a or lora_b:
        if set(lora_a) != set(lora_b):
            raise ValueError("unpaired LoRA A/B tensors")
        ac = os.path.join(model_dir, "adapter_config.json")
        if os.path.exists(ac):
            with open(ac) as f:
                acfg = json.load(f)
            r = int(acfg["r"])
            alpha = float(acfg.get("lora_alpha", r))
            scale = alpha / r
        elif lora_scale is not None:
            scale = float(lora_scale)
        else:
            raise ValueError("LoRA tensors present but adapter_config.json missing")
        for mod in sorted(lora_a):
            a = torch.from_numpy(np.ascontiguousarray(lora_a[mod])).double()
            b = torch.from_numpy(np.ascontiguousarray(lora_b[mod])).double()
            wk = mod + ".weight"
            w0 = w[wk].double()
            w[wk] = (w0 + scale * (b @ a)).float()
            info["lora_merged"] += 1
        info["lora_scale"] = scale
    w.pop("model.transformer.rotary_emb.inv_freq", None)
    return w, meta, info


# ----------------------------------------------------------------------------------------------
# small helpers (torch functions for the math)
# ----------------------------------------------------------------------------------------------
# Debian's torch uses the generic (netlib) BLAS for F.linear (~3 GFLOP/s). Large fp32 linears go
# through torch's own oneDNN kernel instead (~10-25x faster): a 1x1 mkldnn_convolution with the weight
# reordered once and cached (mkldnn_linear would reorder the weight on every call). Both are fp32
# GEMMs; results differ from F.linear only by summation order (the self-test checks this).
# MACT_REF_DENSE_LINEAR=1 forces F.linear everywhere.
_USE_ONEDNN = torch.backends.mkldnn.is_available() and os.environ.get("MACT_REF_DENSE_LINEAR", "") != "1"
_ONEDNN_MIN_MACS = 1 << 22


def _onednn_weight(w):
    o, i = w.shape
    return torch._C._nn.mkldnn_reorder_conv2d_weight(w.contiguous().reshape(o, i, 1, 1).to_mkldnn(),
                                                      [0, 0], [1, 1], [1, 1], 1)


def linear(x, w, b=None, cache=None, key=None, force_onednn=False):
    """y = x w^T + b (torch.nn.functional.linear semantics). cache/key: optional dict holding the
    reordered oneDNN copy of a weight that is used more than once."""
    rows = x.numel() // x.shape[-1]
    if not force_onednn and (not _USE_ONEDNN or rows * w.shape[0] * w.shape[1] < _ONEDNN_MIN_MACS):
        return F.linear(x, w, b)
    if cache is not None and key is not None:
        if key not in cache:
            cache[key] = _onednn_weight(w)
        wc = cache[key]
    else:
        wc = _onednn_weight(w)
    o, i = w.shape
    xi = x.reshape(rows, i).t().reshape(1, i, rows, 1).contiguous().to_mkldnn()
    y = torch.mkldnn_convolution(xi, wc, None if b is None else b.contiguous(), [0, 0], [1, 1], [1, 1], 1)
    y = y.to_dense().reshape(o, rows).t()
    return y.reshape(*x.shape[:-1], o)


def rms_norm(x, weight=None, eps=1e-6):
    """RMSNorm_w(x) = w * x / sqrt(mean(x^2) + eps) over the last dim (torch has no F.rms_norm in 1.13)."""
    x = x.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rope_tables(positions, head_dim, theta):
    """NeoX / rotate-half tables: inv_freq[i] = theta^(-2i/head_dim); cos/sin [P, head_dim] (fp64 -> fp32)."""
    pos = torch.as_tensor(positions, dtype=torch.float64)
    inv = 1.0 / (float(theta) ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = pos[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def attention(q, k, v, bias=None, key_mask=None):
    """q [..., H, Tq, d], k/v [..., H, Tk, d]; softmax((q / sqrt(d)) k^T + bias) v with torch.softmax.
    key_mask (bool, True = keep) is applied with -inf (boolean-SDPA semantics)."""
    s = torch.matmul(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-1, -2))
    if bias is not None:
        s = s + bias
    if key_mask is not None:
        s = s.masked_fill(~key_mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def act_fn(name):
    name = (name or "silu").lower()
    if name in ("gelu_pytorch_tanh", "gelu_new", "gelu_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    if name in ("silu", "swish"):
        return F.silu
    raise ValueError(f"unsupported activation {name}")


def sinusoidal_embedding(t, dim):
    """[sin(t f_j), cos(t f_j)], f_j = exp(-ln(10000) j / (half-1)) (HF SinusoidalTimeEmbedding)."""
    half = dim // 2
    tt = torch.as_tensor(t, dtype=torch.float32).reshape(-1).double()
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * (-math.log(10000.0) / max(half - 1, 1)))
    args = tt[:, None] * freq[None, :]
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
    if dim % 2 == 1:
        emb = F.pad(emb, (0, 1))
    return emb.float()


def pooling_index(n_rows=27, n_cols=27, pool_h=2, pool_w=2):
    """HF arange_for_pooling (crop_mode resize): pad the index grid with -1 (bottom / right, as
    h_pad//2 = 0 on top) to a multiple of the pool size, then one row of pool_h*pool_w indices per
    pooled token, row-major over the pooled grid. -> LongTensor [n_tok, pool_h*pool_w], (gh, gw)."""
    idx = torch.arange(n_rows * n_cols).reshape(n_rows, n_cols)
    ph = (pool_h - n_rows % pool_h) % pool_h
    pw = (pool_w - n_cols % pool_w) % pool_w
    idx = F.pad(idx, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2), value=-1)
    gh, gw = idx.shape[0] // pool_h, idx.shape[1] // pool_w
    idx = idx.reshape(gh, pool_h, gw, pool_w).permute(0, 2, 1, 3).reshape(gh * gw, pool_h * pool_w)
    return idx, (gh, gw)


def bilinear_spec(M, px, py):
    """Hand-written bilinear sampling of docs/spec/molmoact2.md 3.4 (zeros padding, align_corners=False), used only by
    the self-test to check torch's F.grid_sample. M [C, H, W]; px, py python floats in [0,1]."""
    C, H, W = M.shape
    ix = px * W - 0.5
    iy = py * H - 0.5
    x0 = math.floor(ix)
    y0 = math.floor(iy)
    wx = ix - x0
    wy = iy - y0
    out = torch.zeros(C, dtype=torch.float64)
    for (xx, yy, wgt) in ((x0, y0, (1 - wx) * (1 - wy)), (x0 + 1, y0, wx * (1 - wy)),
                          (x0, y0 + 1, (1 - wx) * wy), (x0 + 1, y0 + 1, wx * wy)):
        if 0 <= xx < W and 0 <= yy < H:
            out += wgt * M[:, yy, xx].double()
    return out.float()


def canonicalize_pixels(x):
    """docs/spec/molmoact2.md 3.2: snap float pixels back to the uint8 grid: round((x+1)/2*255) clamped /255*2-1."""
    x = torch.round(((x.float() + 1.0) * 0.5) * 255.0)
    return torch.clamp(x, 0.0, 255.0) / 255.0 * 2.0 - 1.0


def _cfg(d, key, default):
    if d is None:
        return default
    v = d.get(key, default)
    return default if v is None else v


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------
class MolmoAct2Ref:
    def __init__(self, model_dir, norm_tag=None, weights_dir=None, lora_scale=None):
        """model_dir: the HF folder (config.json, norm_stats.json); weights_dir: where the weights are, when not
        there (a LeRobot policy folder over its base), lora_scale its LoRA scale."""
        self.model_dir = model_dir
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        self.w, self.st_meta, self.load_info = load_checkpoint_tensors(weights_dir or model_dir, lora_scale)
        self._onednn = {}
        self.norm_stats = None
        ns_name = _cfg(self.config, "norm_stats_filename", "norm_stats.json")
        ns_path = os.path.join(model_dir, ns_name)
        if os.path.exists(ns_path):
            with open(ns_path) as f:
                self.norm_stats = json.load(f)
        self._resolve_config(norm_tag)

    # ---------------- configuration ----------------
    def _resolve_config(self, norm_tag):
        c = self.config
        vc = c.get("vit_config") or {}
        ac = c.get("adapter_config") or {}
        tc = c.get("text_config") or {}
        ec = c.get("action_expert_config") or {}
        w = self.w
        # ViT
        self.vit_hidden = int(_cfg(vc, "hidden_size", 1152))
        self.vit_heads = int(_cfg(vc, "num_attention_heads", 16))
        self.vit_kv_heads = int(_cfg(vc, "num_key_value_heads", self.vit_heads))
        self.vit_head_dim = int(_cfg(vc, "head_dim", 72))
        self.vit_eps = float(_cfg(vc, "layer_norm_eps", 1e-6))
        self.vit_act = act_fn(_cfg(vc, "hidden_act", "gelu_pytorch_tanh"))
        self.vit_cfg_layers = int(_cfg(vc, "num_hidden_layers", 27))
        size = _cfg(vc, "image_default_input_size", [378, 378])
        patch = int(_cfg(vc, "image_patch_size", 14))
        self.patch_grid = (int(size[0]) // patch, int(size[1]) // patch)
        stored = 0
        while f"model.vision_backbone.image_vit.transformer.resblocks.{stored}.attention.wq.weight" in w:
            stored += 1
        self.vit_stored_layers = stored
        taps = [int(x) for x in _cfg(ac, "vit_layers", [-3, -9])]
        self.vit_taps = [t if t >= 0 else t + self.vit_cfg_layers for t in taps]
        if min(self.vit_taps) < 0 or max(self.vit_taps) + 1 > stored:
            raise ValueError(f"vit_layers {taps} -> {self.vit_taps} not covered by {stored} stored ViT layers")
        # adapter
        self.pool_hidden = int(_cfg(ac, "hidden_size", 1152))
        self.pool_heads = int(_cfg(ac, "num_attention_heads", 16))
        self.pool_kv_heads = int(_cfg(ac, "num_key_value_heads", self.pool_heads))
        self.pool_head_dim = int(_cfg(ac, "head_dim", 72))
        self.proj_act = act_fn(_cfg(ac, "hidden_act", "silu"))
        if bool(_cfg(ac, "pooling_attention_mask", False)):
            impl = str(_cfg(ac, "attn_implementation", "sdpa") or "sdpa").lower()
            self.default_pooling = "eager" if impl == "eager" else "sdpa"
        else:
            self.default_pooling = "none"
        # sampler
        samp = {}
        for k in list(w):
            for leaf in ("scout_mlp.0.weight", "scout_mlp.0.bias", "scout_mlp.2.weight", "scout_mlp.2.bias",
                         "coord_encoder.0.weight", "coord_encoder.0.bias", "coord_encoder.2.weight",
                         "coord_encoder.2.bias"):
                if k == leaf or k.endswith("." + leaf):
                    samp[leaf] = w[k]
        want = bool(_cfg(c, "use_grid_token_sampler", False))
        if want and len(samp) != 8:
            raise ValueError("config use_grid_token_sampler=true but sampler tensors are missing")
        if samp and not want:
            raise ValueError("grid sampler tensors present but config.use_grid_token_sampler is not true")
        self.sampler = samp if samp else None
        self.text_hidden = int(_cfg(tc, "hidden_size", 3584))
        if self.sampler is not None:
            self.sampler_k = samp["scout_mlp.2.weight"].shape[0] // 2
            cdim = samp["scout_mlp.0.weight"].shape[1]
            if cdim == self.text_hidden:
                self.sampler_place = "after"
            elif cdim == self.pool_hidden:
                self.sampler_place = "before"
            else:
                raise ValueError(f"sampler width {cdim} matches neither adapter nor text hidden")
        else:
            self.sampler_k = None
            self.sampler_place = None
        # text
        self.vocab_size = int(_cfg(tc, "vocab_size", 152064))
        self.n_heads = int(_cfg(tc, "num_attention_heads", 28))
        self.n_kv = int(_cfg(tc, "num_key_value_heads", self.n_heads))
        self.head_dim = int(_cfg(tc, "head_dim", 128))
        self.n_layers = int(_cfg(tc, "num_hidden_layers", 48))
        self.qkv_bias = bool(_cfg(tc, "qkv_bias", True))
        self.use_qk_norm = bool(_cfg(tc, "use_qk_norm", False))
        self.qk_norm_type = str(_cfg(tc, "qk_norm_type", "olmo"))
        self.llm_eps = float(_cfg(tc, "layer_norm_eps", 1e-6))
        self.rope_theta = float(_cfg(tc, "rope_theta", 1e6))
        self.llm_act = act_fn(_cfg(tc, "hidden_act", "silu"))
        if _cfg(tc, "rope_scaling", None):
            raise ValueError("rope_scaling is not supported by the reference")
        if bool(_cfg(tc, "norm_after", False)):
            raise ValueError("norm_after=true is not supported by the reference")
        self.kv_dim = self.n_kv * self.head_dim
        # action expert
        self.ae_hidden = int(_cfg(ec, "hidden_size", 1024))
        self.ae_heads = int(_cfg(ec, "num_heads", 16))
        self.ae_head_dim = self.ae_hidden // self.ae_heads
        self.ae_layers = int(_cfg(ec, "num_layers", self.n_layers))
        if self.ae_layers != self.n_layers:
            raise ValueError("action_expert_config.num_layers must equal text_config.num_hidden_layers")
        self.ae_t_dim = int(_cfg(ec, "timestep_embed_dim", 256))
        self.ae_ctx_norm = bool(_cfg(ec, "context_layer_norm", True))
        self.ae_qk_norm = bool(_cfg(ec, "qk_norm", True))
        self.ae_qk_eps = float(_cfg(ec, "qk_norm_eps", 1e-6))
        self.ae_rope = bool(_cfg(ec, "rope", True))
        self.ae_causal = bool(_cfg(ec, "causal_attn", False))
        self.max_action_dim = int(_cfg(c, "max_action_dim", 32))
        self.max_action_horizon = int(_cfg(c, "max_action_horizon", 30))
        self.flow_steps = int(_cfg(c, "flow_matching_num_steps", 10))
        self.mask_pad = bool(_cfg(c, "mask_action_dim_padding", True))
        self.action_mode = str(_cfg(c, "action_mode", "both"))
        self.default_encoder_mask = "drop_eos" if self.action_mode == "both" else "all"
        # token ids
        self.eos_id = _cfg(c, "eos_token_id", None)
        if isinstance(self.eos_id, list):
            self.eos_id = self.eos_id[0]
        self.image_patch_id = int(c["image_patch_id"])
        self.image_token_ids = [int(c[k]) for k in (
            "image_patch_id", "image_col_id", "image_start_token_id", "low_res_image_start_token_id",
            "frame_start_token_id", "image_end_token_id", "frame_end_token_id", "image_low_res_id")
            if c.get(k) is not None]
        self.action_start_id = c.get("action_start_token_id")
        self.action_end_id = c.get("action_end_token_id")
        # norm stats -> action dim / horizon
        self.norm_tag = None
        self.action_dim = self.max_action_dim
        self.action_horizon = self.max_action_horizon
        if self.norm_stats:
            tags = list((self.norm_stats.get("metadata_by_tag") or {}).keys())
            if tags:
                self.norm_tag = norm_tag if norm_tag is not None else tags[0]
                md = self.norm_stats["metadata_by_tag"][self.norm_tag]
                st = md.get("action_stats") or {}
                for key in ("q01", "q99", "min", "max", "mean", "std", "mask"):
                    if st.get(key) is not None:
                        self.action_dim = len(st[key])
                        break
                if md.get("action_horizon"):
                    self.action_horizon = int(md["action_horizon"])

    def action_dim_is_pad(self, action_dim=None):
        d = self.action_dim if action_dim is None else action_dim
        return torch.arange(self.max_action_dim) >= d

    def _lin(self, x, prefix, bias=True):
        b = self.w.get(prefix + ".bias") if bias else None
        return linear(x, self.w[prefix + ".weight"], b, self._onednn, prefix)

    # ---------------- vision (3.1 - 3.4) ----------------
    def vit(self, pixels):
        """pixels [n, T, 588] (already canonicalised) -> list of residual streams after each block
        up to the last tap."""
        P = "model.vision_backbone.image_vit."
        n, T, _ = pixels.shape
        x = self._lin(pixels, P + "patch_embedding")
        pos = self.w[P + "positional_embedding"]
        if pos.shape[0] != T:
            raise ValueError(f"positional embedding has {pos.shape[0]} rows for {T} patches")
        x = x + pos[None]
        H, KV, d = self.vit_heads, self.vit_kv_heads, self.vit_head_dim
        hs = []
        for j in range(max(self.vit_taps) + 1):
            B = P + f"transformer.resblocks.{j}."
            h = F.layer_norm(x, (x.shape[-1],), self.w[B + "attention_norm.weight"],
                             self.w[B + "attention_norm.bias"], self.vit_eps)
            q = self._lin(h, B + "attention.wq").view(n, T, H, d).transpose(1, 2)
            k = self._lin(h, B + "attention.wk").view(n, T, KV, d).transpose(1, 2)
            v = self._lin(h, B + "attention.wv").view(n, T, KV, d).transpose(1, 2)
            if KV != H:
                k = k.repeat_interleave(H // KV, dim=1)
                v = v.repeat_interleave(H // KV, dim=1)
            a = attention(q, k, v).transpose(1, 2).reshape(n, T, H * d)
            x = x + self._lin(a, B + "attention.wo")
            h = F.layer_norm(x, (x.shape[-1],), self.w[B + "ffn_norm.weight"], self.w[B + "ffn_norm.bias"],
                             self.vit_eps)
            x = x + self._lin(self.vit_act(self._lin(h, B + "feed_forward.w1")), B + "feed_forward.w2")
            hs.append(x)
        return hs

    def pool(self, feats, mode):
        """feats [n, T, Din] -> pooled [n, n_tok, pool_hidden] (2x2 attention pooling, docs/spec/molmoact2.md 3.2 / 7.3)."""
        if mode not in ("sdpa", "eager", "none"):
            raise ValueError(f"pooling mode {mode}")
        P = "model.vision_backbone.image_pooling_2d."
        n, T, D = feats.shape
        idx, (gh, gw) = pooling_index(*self.patch_grid)
        valid = idx >= 0                                            # [t, 4]
        X = feats[:, idx.clamp(min=0)] * valid[None, :, :, None].float()   # [n, t, 4, D]
        if mode == "none":
            query = X.mean(dim=-2, keepdim=True)
        else:
            nv = valid.sum(-1).clamp(min=1).float()
            query = X.sum(dim=-2, keepdim=True) / nv[None, :, None, None]
        H, KV, d = self.pool_heads, self.pool_kv_heads, self.pool_head_dim
        t = idx.shape[0]
        q = self._lin(query, P + "wq").view(n, t, 1, H, d).permute(0, 1, 3, 2, 4)   # [n,t,H,1,d]
        k = self._lin(X, P + "wk").view(n, t, 4, KV, d).permute(0, 1, 3, 2, 4)      # [n,t,KV,4,d]
        v = self._lin(X, P + "wv").view(n, t, 4, KV, d).permute(0, 1, 3, 2, 4)
        if KV != H:
            k = k.repeat_interleave(H // KV, dim=2)
            v = v.repeat_interleave(H // KV, dim=2)
        key_mask = valid[None, :, None, None, :] if mode == "sdpa" else None
        o = attention(q, k, v, key_mask=key_mask)                    # [n,t,H,1,d]
        o = o.reshape(n, t, H * d)
        return self._lin(o, P + "wo"), (gh, gw)

    def project(self, x):
        P = "model.vision_backbone.image_projector."
        return self._lin(self.proj_act(self._lin(x, P + "w1", False)) * self._lin(x, P + "w3", False), P + "w2", False)

    def grid_sample_tokens(self, E, grid_hw):
        """GS ActiveTokenSampler on one image's pooled grid. E [gh*gw, C] row-major -> ([K, C], p [K, 2])."""
        s = self.sampler
        gh, gw = grid_hw
        C = E.shape[-1]
        M = E.t().reshape(1, C, gh, gw)
        if gh != gw:
            m = min(gh, gw)
            M = F.adaptive_avg_pool2d(M, (m, m))
        g = M.mean(dim=(2, 3))                                              # [1, C]
        h = F.relu(F.linear(g, s["scout_mlp.0.weight"], s["scout_mlp.0.bias"]))
        p = torch.sigmoid(F.linear(h, s["scout_mlp.2.weight"], s["scout_mlp.2.bias"])).view(1, -1, 2)
        grid = (p * 2.0 - 1.0).unsqueeze(1)                                # [1, 1, K, 2] (x, y)
        samp = F.grid_sample(M, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        samp = samp.squeeze(2).transpose(1, 2)                             # [1, K, C]
        ce = F.linear(F.relu(F.linear(p, s["coord_encoder.0.weight"], s["coord_encoder.0.bias"])),
                      s["coord_encoder.2.weight"], s["coord_encoder.2.bias"])
        return (samp + ce)[0], p[0]

    def vision(self, pixel_values, pooling=None, return_aux=False):
        """pixel_values [n_img, 729, 588] or [1, n_img, 729, 588] -> image_embeds [n_img*K, D_llm]."""
        pooling = pooling or self.default_pooling
        pv = torch.as_tensor(pixel_values).float()
        if pv.dim() == 4:
            pv = pv.reshape(-1, pv.shape[-2], pv.shape[-1])
        pv = canonicalize_pixels(pv)
        hs = self.vit(pv)
        feats = torch.cat([hs[t] for t in self.vit_taps], dim=-1)
        pooled, grid = self.pool(feats, pooling)                           # [n, 196, pool_hidden]
        aux = {"pooled": pooled, "coords": []}
        outs = []
        for i in range(pooled.shape[0]):
            o = pooled[i]
            if self.sampler is None:
                outs.append(self.project(o))
            elif self.sampler_place == "after":
                e, p = self.grid_sample_tokens(self.project(o), grid)
                outs.append(e)
                aux["coords"].append(p)
            else:
                e, p = self.grid_sample_tokens(o, grid)
                outs.append(self.project(e))
                aux["coords"].append(p)
        out = torch.cat(outs, dim=0)
        return (out, aux) if return_aux else out

    # ---------------- LLM input (3.5, 3.6) ----------------
    def attention_bias(self, input_ids):
        """[1, N] or [N] ids -> [1, 1, N, N] fp32 with 0 / finfo(fp32).min (docs/spec/molmoact2.md 3.6); ids < 0 = padding."""
        ids = torch.as_tensor(input_ids).reshape(-1).long()
        N = ids.shape[0]
        valid = ids >= 0
        img = torch.zeros(N, dtype=torch.bool)
        for t in self.image_token_ids:
            img |= ids == t
        causal = torch.tril(torch.ones(N, N, dtype=torch.bool))
        allowed = valid[None, :] & (causal | (img[:, None] & img[None, :]))
        bias = torch.where(allowed, torch.zeros((), dtype=torch.float32), torch.full((), F32_MIN))
        return bias.reshape(1, 1, N, N)

    def positions(self, input_ids):
        ids = torch.as_tensor(input_ids).reshape(-1).long()
        return (torch.cumsum((ids >= 0).long(), 0) - 1).clamp(min=0)

    def embed(self, input_ids, image_embeds):
        """docs/spec/molmoact2.md 3.5: wte lookup (ids >= vocab -> new_embedding), image features ADDED at <im_patch>."""
        ids = torch.as_tensor(input_ids).reshape(-1).long()
        ids = torch.where(ids < 0, torch.zeros_like(ids), ids)
        emb = self.w["model.transformer.wte.embedding"]
        new = self.w["model.transformer.wte.new_embedding"]
        table = torch.cat([emb, new], dim=0)
        x = table[ids].clone()
        is_patch = ids == self.image_patch_id
        n_patch = int(is_patch.sum())
        if image_embeds is None:
            if n_patch:
                raise ValueError("input_ids has image patch tokens but no image embeddings")
        else:
            image_embeds = torch.as_tensor(image_embeds).float()
            if n_patch != image_embeds.shape[0]:
                raise ValueError(f"{n_patch} <im_patch> tokens vs {image_embeds.shape[0]} image embeddings")
            x[is_patch] = x[is_patch] + image_embeds
        return x[None]

    # ---------------- LLM layers (3.6) ----------------
    def llm_layers(self, hidden, bias, a, b, positions=None):
        """Decoder layers a..b-1. hidden [1,N,D], bias [1,1,N,N] -> (hidden_out [1,N,D],
        keys [b-a,1,N,kv_dim], values [b-a,1,N,kv_dim]) with post-qk-norm, post-RoPE keys."""
        x = torch.as_tensor(hidden).float().reshape(-1, self.text_hidden)
        bias = torch.as_tensor(bias).float()
        N = x.shape[0]
        bias2 = bias.reshape(N, N)
        if positions is None:
            positions = torch.arange(N)
        cos, sin = rope_tables(positions, self.head_dim, self.rope_theta)
        H, KV, d = self.n_heads, self.n_kv, self.head_dim
        keys, values = [], []
        for i in range(a, b):
            B = f"model.transformer.blocks.{i}."
            h = rms_norm(x, self.w[B + "attn_norm.weight"], self.llm_eps)
            qkv = self._lin(h, B + "self_attn.att_proj", bias=self.qkv_bias)
            q, k, v = torch.split(qkv, [H * d, KV * d, KV * d], dim=-1)
            if self.use_qk_norm and self.qk_norm_type != "qwen3":      # olmo: whole projection
                q = rms_norm(q, self.w[B + "self_attn.q_norm.weight"], self.llm_eps)
                k = rms_norm(k, self.w[B + "self_attn.k_norm.weight"], self.llm_eps)
            q = q.view(N, H, d)
            k = k.view(N, KV, d)
            v = v.view(N, KV, d)
            if self.use_qk_norm and self.qk_norm_type == "qwen3":      # per head
                q = rms_norm(q, self.w[B + "self_attn.q_norm.weight"], self.llm_eps)
                k = rms_norm(k, self.w[B + "self_attn.k_norm.weight"], self.llm_eps)
            q = apply_rope(q, cos[:, None, :], sin[:, None, :])
            k = apply_rope(k, cos[:, None, :], sin[:, None, :])
            keys.append(k.reshape(N, KV * d))
            values.append(v.reshape(N, KV * d))
            kk = k.transpose(0, 1).repeat_interleave(H // KV, dim=0)      # [H, N, d]; head h -> kv h//(H/KV)
            vv = v.transpose(0, 1).repeat_interleave(H // KV, dim=0)
            att = attention(q.transpose(0, 1), kk, vv, bias=bias2)         # [H, N, d]
            x = x + self._lin(att.transpose(0, 1).reshape(N, H * d), B + "self_attn.attn_out", False)
            h = rms_norm(x, self.w[B + "ff_norm.weight"], self.llm_eps)
            u = self._lin(h, B + "mlp.ff_proj", False)
            up, gate = u.chunk(2, dim=-1)
            x = x + self._lin(self.llm_act(gate) * up, B + "mlp.ff_out", False)
        keys = torch.stack(keys)[:, None] if keys else torch.zeros(0, 1, N, self.kv_dim)
        values = torch.stack(values)[:, None] if values else torch.zeros(0, 1, N, self.kv_dim)
        return x[None], keys, values

    # ---------------- action expert (3.7, 4.5, 4.6, 5) ----------------
    def action_context(self, keys, values):
        """keys/values [L,1,N,kv_dim] -> k_ctx, v_ctx [L,1,N,ae_hidden] (head-major h*hd+d)."""
        P = "model.action_expert."
        keys = torch.as_tensor(keys).float()
        values = torch.as_tensor(values).float()
        kc = self._lin(keys, P + "context_k_proj", False)
        vc = self._lin(values, P + "context_v_proj", False)
        if self.ae_ctx_norm:
            kc = rms_norm(kc, None, 1e-6)
            vc = rms_norm(vc, None, 1e-6)
        if self.ae_qk_norm:
            shp = kc.shape
            kc = rms_norm(kc.reshape(*shp[:-1], self.ae_heads, self.ae_head_dim), None,
                          self.ae_qk_eps).reshape(shp)
        return kc, vc

    def encoder_mask(self, input_ids, mode=None):
        """[1, N] bool. 'all': every valid token; 'drop_eos': also drop ids == eos_token_id and every
        action_start..action_end span (inclusive; an unterminated span runs to the end) -- HF
        _get_encoder_attention_mask with action_mode == 'both'."""
        mode = mode or self.default_encoder_mask
        ids = torch.as_tensor(input_ids).reshape(-1).long()
        mask = ids >= 0
        if mode == "all":
            return mask[None]
        if mode != "drop_eos":
            raise ValueError(f"encoder mask mode {mode}")
        if self.eos_id is not None:
            mask &= ids != int(self.eos_id)
        if self.action_start_id is not None and self.action_end_id is not None:
            starts = (ids == int(self.action_start_id)).nonzero().flatten().tolist()
            ends = (ids == int(self.action_end_id)).nonzero().flatten().tolist()
            ep = 0
            for s in starts:
                while ep < len(ends) and ends[ep] < s:
                    ep += 1
                if ep >= len(ends):
                    mask[s:] = False
                    break
                mask[s:ends[ep] + 1] = False
                ep += 1
        return mask[None]

    def time_conditioning(self, t):
        P = "model.action_expert.time_embed."
        emb = sinusoidal_embedding(t, self.ae_t_dim)                        # [1, t_dim]
        return F.linear(F.silu(F.linear(emb, self.w[P + "1.weight"], self.w[P + "1.bias"])),
                        self.w[P + "3.weight"], self.w[P + "3.bias"])       # [1, ae_hidden]

    @staticmethod
    def _modulate(z, shift, scale):
        return z * (1.0 + scale) + shift

    def velocity(self, traj, t, k_ctx, v_ctx, enc_mask):
        """v(x_t, t): traj [1,H,A], k_ctx/v_ctx [L,1,N,ae_hidden], enc_mask [1,N] -> [1,H,A]."""
        P = "model.action_expert."
        x = torch.as_tensor(traj).float().reshape(-1, self.max_action_dim)
        Hn = x.shape[0]
        k_ctx = torch.as_tensor(k_ctx).float()
        v_ctx = torch.as_tensor(v_ctx).float()
        N = k_ctx.shape[-2]
        nh, hd = self.ae_heads, self.ae_head_dim
        enc = torch.as_tensor(enc_mask).reshape(-1).bool()
        cross_bias = torch.where(enc, torch.zeros((), dtype=torch.float32), torch.full((), F32_MIN))
        self_bias = None
        if self.ae_causal:
            self_bias = torch.where(torch.tril(torch.ones(Hn, Hn, dtype=torch.bool)),
                                    torch.zeros(()), torch.full((), F32_MIN))
        c = self.time_conditioning(t)
        sc = F.silu(c)[0]
        if self.ae_rope:
            cos, sin = rope_tables(torch.arange(Hn), hd, 10000.0)
        z = self._lin(x, P + "action_embed")                                # [H, ae]
        for i in range(self.ae_layers):
            B = P + f"blocks.{i}."
            m = self._lin(sc, B + "modulation.linear").chunk(9, dim=-1)
            (sh_msa, sc_msa, g_msa, sh_mca, sc_mca, g_mca, sh_mlp, sc_mlp, g_mlp) = m
            # self-attention
            u = self._modulate(rms_norm(z, None, 1e-6), sh_msa, sc_msa)
            qkv = self._lin(u, B + "self_attn.qkv").view(Hn, 3, nh, hd)
            q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]                       # [H, nh, hd]
            if self.ae_qk_norm:
                q = rms_norm(q, None, self.ae_qk_eps)
                k = rms_norm(k, None, self.ae_qk_eps)
            if self.ae_rope:
                q = apply_rope(q, cos[:, None, :], sin[:, None, :])
                k = apply_rope(k, cos[:, None, :], sin[:, None, :])
            a = attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), bias=self_bias)
            z = z + g_msa * self._lin(a.transpose(0, 1).reshape(Hn, nh * hd), B + "self_attn.out_proj")
            # cross-attention to LLM layer i
            u = self._modulate(rms_norm(z, None, 1e-6), sh_mca, sc_mca)
            q = self._lin(u, B + "cross_attn.q_proj").view(Hn, nh, hd)
            if self.ae_qk_norm:
                q = rms_norm(q, None, self.ae_qk_eps)
            kc = k_ctx[i].reshape(N, nh, hd).transpose(0, 1)
            vc = v_ctx[i].reshape(N, nh, hd).transpose(0, 1)
            a = attention(q.transpose(0, 1), kc, vc, bias=cross_bias)
            z = z + g_mca * self._lin(a.transpose(0, 1).reshape(Hn, nh * hd), B + "cross_attn.out_proj")
            # MLP
            u = self._modulate(rms_norm(z, None, 1e-6), sh_mlp, sc_mlp)
            hmid = F.silu(self._lin(u, B + "mlp.gate_proj")) * self._lin(u, B + "mlp.up_proj")
            z = z + g_mlp * self._lin(hmid, B + "mlp.down_proj")
        sh_f, sc_f = self._lin(sc, P + "final_layer.modulation.linear").chunk(2, dim=-1)
        out = self._lin(self._modulate(rms_norm(z, None, 1e-6), sh_f, sc_f), P + "final_layer.linear")
        return out[None]

    def action_step(self, traj, t, k_ctx, v_ctx, enc_mask, is_pad=None, num_steps=None):
        """One masked Euler step: x + v/num_steps, padded dims zeroed in v and in the result."""
        num_steps = num_steps or self.flow_steps
        is_pad = self.action_dim_is_pad() if is_pad is None else torch.as_tensor(is_pad).reshape(-1).bool()
        x = torch.as_tensor(traj).float()
        v = self.velocity(x, t, k_ctx, v_ctx, enc_mask)
        if self.mask_pad:
            v = v.masked_fill(is_pad, 0.0)
        x = x + (1.0 / num_steps) * v
        if self.mask_pad:
            x = x.masked_fill(is_pad, 0.0)
        return x

    def action_loop(self, keys, values, enc_mask, noise, num_steps=None, is_pad=None):
        """Whole flow loop from noise [1,H,A] (padded dims zeroed first), t = k/num_steps."""
        num_steps = num_steps or self.flow_steps
        is_pad = self.action_dim_is_pad() if is_pad is None else torch.as_tensor(is_pad).reshape(-1).bool()
        k_ctx, v_ctx = self.action_context(keys, values)
        x = torch.as_tensor(noise).float().clone()
        if self.mask_pad:
            x = x.masked_fill(is_pad, 0.0)
        for k in range(num_steps):
            t = torch.tensor([k / num_steps], dtype=torch.float32)
            x = self.action_step(x, t, k_ctx, v_ctx, enc_mask, is_pad, num_steps)
        return x

    # ---------------- real-time chunking (LeRobot's RTCProcessor as MolmoAct2 calls it) ----------------
    @staticmethod
    def rtc_prefix_weights(inference_delay, execution_horizon, n_prev, H, schedule="linear"):
        """LeRobot's get_prefix_weights(start=d, end=e, total=H) with e = min(execution_horizon, n_prev, H) and
        d = min(delay, e): [H] float32 (linear ramp torch.linspace(1, 0, e - d + 2)[1:-1])."""
        e = min(int(execution_horizon), int(n_prev), int(H))
        d = min(int(inference_delay), e)
        if schedule == "zeros":
            w = torch.zeros(H)
            w[:d] = 1.0
            return w
        if schedule == "ones":
            w = torch.ones(H)
            w[e:] = 0.0
            return w
        if schedule not in ("linear", "exp"):
            raise ValueError(f"RTC schedule {schedule}")
        lin = torch.linspace(1, 0, e - d + 2)[1:-1] if e > d else torch.zeros(0)
        if schedule == "exp":
            lin = lin * torch.expm1(lin).div(math.e - 1)
        return torch.cat([torch.ones(d), lin, torch.zeros(H - e)]).float()

    @staticmethod
    def rtc_guidance_weight(t, beta):
        """LeRobot's guidance weight with tau = t (float32 tensors; nan_to_num of the infinities -> beta)."""
        tau = torch.as_tensor(t, dtype=torch.float32).reshape(())
        bmax = torch.as_tensor(beta, dtype=torch.float32)
        sq = (1 - tau) ** 2
        inv_r2 = (sq + tau ** 2) / sq
        c = torch.nan_to_num((1 - tau) / tau, posinf=float(bmax))
        g = torch.nan_to_num(c * inv_r2, posinf=float(bmax))
        return torch.minimum(g, bmax)

    def rtc_velocity_vjp(self, traj, t, k_ctx, v_ctx, enc_mask, err, is_pad=None):
        """(dv/dx)^T err at traj by torch.autograd (v the velocity with the padded dims masked), [1, H, A]."""
        global _USE_ONEDNN
        is_pad = self.action_dim_is_pad() if is_pad is None else torch.as_tensor(is_pad).reshape(-1).bool()
        keep, _USE_ONEDNN = _USE_ONEDNN, False   # the oneDNN path has no autograd; F.linear is the same product
        try:
            with torch.enable_grad():
                x = torch.as_tensor(traj).float().clone().detach().requires_grad_(True)
                v = self.velocity(x, t, k_ctx, v_ctx, enc_mask)
                if self.mask_pad:
                    v = v.masked_fill(is_pad, 0.0)
                return torch.autograd.grad(v, x, torch.as_tensor(err).float().reshape(v.shape))[0].detach()
        finally:
            _USE_ONEDNN = keep

    def action_loop_rtc(self, keys, values, enc_mask, noise, prev_actions_norm, inference_delay, execution_horizon,
                        schedule="linear", max_guidance_weight=10.0, guidance="identity", num_steps=None, is_pad=None):
        """action_loop with RTC guidance, written from LeRobot's RTCProcessor.denoise_step in its own order: per
        step t = k/S, time = 1 - t, u = -v (LeRobot's velocity points to the noise), x1 = x - time * u,
        err = W * (Y - x1) over the real action dims (Y: the normalised previous rows [1, n_prev, action_dim]
        zero-padded to [1, H, A]), corr = err (identity) or autograd.grad(x1, x, err) with x requiring grad
        (vjp), guided u - g * corr, velocity = -that, then the masked Euler step."""
        num_steps = num_steps or self.flow_steps
        is_pad = self.action_dim_is_pad() if is_pad is None else torch.as_tensor(is_pad).reshape(-1).bool()
        if guidance not in ("identity", "vjp"):
            raise ValueError(f"RTC guidance {guidance}")
        k_ctx, v_ctx = self.action_context(keys, values)
        x = torch.as_tensor(noise).float().clone()
        H, A = x.shape[-2], x.shape[-1]
        prev = torch.as_tensor(prev_actions_norm).float().reshape(-1, torch.as_tensor(prev_actions_norm).shape[-1])
        n_prev, adim = prev.shape
        Y = torch.zeros(1, H, A)
        Y[0, :n_prev, :adim] = prev
        W = self.rtc_prefix_weights(inference_delay, execution_horizon, n_prev, H, schedule)[None, :, None]
        real = (~is_pad).float()
        if self.mask_pad:
            x = x.masked_fill(is_pad, 0.0)
        global _USE_ONEDNN
        for k in range(num_steps):
            t = torch.tensor([k / num_steps], dtype=torch.float32)
            time = 1.0 - t
            if guidance == "identity":
                v = self.velocity(x, t, k_ctx, v_ctx, enc_mask)
                if self.mask_pad:
                    v = v.masked_fill(is_pad, 0.0)
                u = -v
                x1 = x - time * u
                err = W * (Y - x1) * real
                corr = err
            else:
                keep, _USE_ONEDNN = _USE_ONEDNN, False
                try:
                    with torch.enable_grad():
                        xg = x.clone().detach().requires_grad_(True)
                        v = self.velocity(xg, t, k_ctx, v_ctx, enc_mask)
                        if self.mask_pad:
                            v = v.masked_fill(is_pad, 0.0)
                        u = -v
                        x1 = xg - time * u
                        err = (W * (Y - x1) * real).detach()
                        corr = torch.autograd.grad(x1, xg, err)[0].detach()
                finally:
                    _USE_ONEDNN = keep
                u = u.detach()
            g = self.rtc_guidance_weight(t, max_guidance_weight)
            v = -(u - g * corr)
            if self.mask_pad:
                v = v.masked_fill(is_pad, 0.0)
            x = x + (1.0 / num_steps) * v
            if self.mask_pad:
                x = x.masked_fill(is_pad, 0.0)
        return x

    def prefill(self, input_ids, image_embeds):
        ids = torch.as_tensor(input_ids).reshape(1, -1).long()
        hidden = self.embed(ids, image_embeds)
        bias = self.attention_bias(ids)
        return self.llm_layers(hidden, bias, 0, self.n_layers, positions=self.positions(ids))

    def e2e(self, pixel_values, input_ids, noise, num_steps=None, pooling=None, encoder_mask_mode=None,
            is_pad=None):
        img = self.vision(pixel_values, pooling=pooling) if pixel_values is not None else None
        _, keys, values = self.prefill(input_ids, img)
        enc = self.encoder_mask(input_ids, encoder_mask_mode)
        return self.action_loop(keys, values, enc, noise, num_steps, is_pad)

    # ---------------- post-processing (4.4) ----------------
    def unnormalize_actions(self, actions_norm, n_action_steps=None):
        """actions_norm [1,H,A] -> [n_steps, action_dim] in robot units (q01/q99, per-dim mask)."""
        a = torch.as_tensor(actions_norm).float().reshape(-1, self.max_action_dim)
        md = self.norm_stats["metadata_by_tag"][self.norm_tag]
        st = md["action_stats"]
        n = n_action_steps or int(md.get("n_action_steps") or a.shape[0])
        a = a[:n, :self.action_dim].clamp(-1, 1).double()
        q01 = torch.tensor(st["q01"], dtype=torch.float64)
        q99 = torch.tensor(st["q99"], dtype=torch.float64)
        out = (a + 1.0) * (q99 - q01) / 2.0 + q01
        if st.get("mask") is not None:
            out = torch.where(torch.tensor(st["mask"], dtype=torch.bool), out, a)
        return out.float()


def stable_seed(seed, name):
    """Per-tensor seed (order / layout independent)."""
    return (int(seed) * 1000003 + zlib.crc32(name.encode("utf-8"))) % (2 ** 63)
