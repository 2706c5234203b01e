#!/usr/bin/env python3
"""PyTorch reference for mact's image preprocessing (docs/spec/molmoact2.md 4.1), driven by tests/test_image_torch.sh.

For fresh random images (seed printed) it runs the C tool (tests/c/test_image.c tool mode) and compares:
  * the uint8 bilinear resize against torch, computed the way the HF MolmoAct2 image processor calls
    torchvision.transforms.Resize(size, BILINEAR, antialias=False) on a uint8 CHW tensor: cast to
    float32, F.interpolate(bilinear, align_corners=False, antialias=False), round (half to even),
    cast back to uint8. The CHW tensor is a permuted view of the HWC array (channels-last strides),
    exactly as in HF's resize_image; the contiguous-NCHW variant is reported too (INFO);
  * pixel_values against HF's normalise ((u8/255) * 2 - 1 in float32) + batch_pixels_to_patches;
  * PNG decoding against PNG files written here by hand with zlib (every filter type, several colour
    types / bit depths), i.e. independent of libpng;
  * float [0,1] -> uint8 against LeRobot's _normalize_image (np.clip(x*255, 0, 255).astype(uint8));
  * JPEG decoding against PIL, when PIL is installed (both sit on libjpeg-turbo; INFO otherwise).
Prints PASS/FAIL/INFO lines; exit status 1 when anything failed.
"""
import argparse
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

FAILS = 0


def report(ok, name, detail):
    global FAILS
    if ok:
        print(f"PASS {name} ({detail})")
    else:
        FAILS += 1
        print(f"FAIL {name}: {detail}")
    sys.stdout.flush()


def torch_resize(img, oh, ow, channels_last=True):
    """uint8 HWC -> uint8 HWC, torchvision Resize(bilinear, antialias=False) semantics."""
    t = torch.from_numpy(img)
    if channels_last:
        t = torch.permute(t, [2, 0, 1])  # HF resize_image: a view, channels-last strides
    else:
        t = t.permute(2, 0, 1).contiguous()
    t = t.unsqueeze(0).to(torch.float32)  # torchvision _cast_squeeze_in
    r = F.interpolate(t, size=[oh, ow], mode="bilinear", align_corners=False, antialias=False)
    r = torch.round(r).clamp(0, 255).to(torch.uint8)  # _cast_squeeze_out (+ HF's clip)
    return r[0].permute(1, 2, 0).contiguous().numpy()


def torchvision_resize(img, oh, ow):
    try:
        import torchvision
        from torchvision.transforms import InterpolationMode
    except ImportError:
        return None
    t = torch.permute(torch.from_numpy(img), [2, 0, 1])
    r = torchvision.transforms.Resize([oh, ow], InterpolationMode.BILINEAR, antialias=False)(t)
    return r.permute(1, 2, 0).contiguous().numpy()


def hf_pixel_values(resized_u8, patch):
    r = torch.from_numpy(resized_u8).to(torch.float32)
    r = (r - 0.0) / (255.0 - 0.0)  # HF resize_image tail
    x = r.numpy() * np.asarray(2.0, dtype=np.float32) - np.asarray(1.0, dtype=np.float32)
    h, w, c = x.shape
    x = x.reshape(h // patch, patch, w // patch, patch, c).transpose(0, 2, 1, 3, 4)
    return x.reshape((h // patch) * (w // patch), patch * patch * c)


def run_tool(args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check_resize(tool, tmp, rng):
    cases = [  # (src_h, src_w, dst_h, dst_w, patch)
        (1, 1, 378, 378, 14), (2, 3, 378, 378, 14), (27, 31, 378, 378, 14),
        (224, 224, 378, 378, 14), (480, 640, 378, 378, 14), (640, 360, 378, 378, 14),
        (1000, 1000, 378, 378, 14), (378, 378, 378, 378, 14), (720, 1280, 378, 378, 14),
        (256, 256, 378, 378, 14), (379, 377, 378, 378, 14), (100, 1000, 378, 378, 14),
        (378, 378, 224, 224, 14), (31, 27, 5, 7, 0), (5, 7, 31, 27, 0), (3, 1, 1, 3, 0),
        (1, 1, 1, 1, 1), (640, 480, 28, 42, 14),
    ]
    for _ in range(8):
        cases.append((int(rng.integers(1, 900)), int(rng.integers(1, 900)), 378, 378, 14))
    for _ in range(4):
        cases.append((int(rng.integers(1, 300)), int(rng.integers(1, 300)),
                      int(rng.integers(1, 300)), int(rng.integers(1, 300)), 0))
    total_px = total_bad = total_bad_nchw = 0
    worst = 0
    worst_pv = 0.0
    fails = []
    for (h, w, oh, ow, patch) in cases:
        img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        if rng.random() < 0.3:  # smooth content too: ties and near-ties show up on gradients
            yy, xx = np.mgrid[0:h, 0:w]
            img[..., 0] = (xx * 255 // max(w - 1, 1)).astype(np.uint8)
            img[..., 1] = (yy * 7 % 256).astype(np.uint8)
        fin, fout, fpv = (os.path.join(tmp, n) for n in ("in.u8", "out.u8", "pv.f32"))
        img.tofile(fin)
        rc, out, errs = run_tool([tool, "resize", fin, str(h), str(w), str(oh), str(ow), str(patch), fout, fpv])
        if rc != 0:
            fails.append(f"{h}x{w}->{oh}x{ow}: tool rc={rc} {errs.strip()}")
            continue
        got = np.fromfile(fout, dtype=np.uint8).reshape(oh, ow, 3)
        ref = torch_resize(img, oh, ow, channels_last=True)
        ref_nchw = torch_resize(img, oh, ow, channels_last=False)
        d = np.abs(got.astype(np.int32) - ref.astype(np.int32))
        nbad = int((d != 0).sum())
        total_px += d.size
        total_bad += nbad
        total_bad_nchw += int((got != ref_nchw).sum())
        worst = max(worst, int(d.max()))
        if nbad:
            fails.append(f"{h}x{w}->{oh}x{ow}: {nbad} of {d.size} values differ, max {int(d.max())}")
        tv = torchvision_resize(img, oh, ow)
        if tv is not None and not np.array_equal(tv, ref):
            fails.append(f"{h}x{w}->{oh}x{ow}: this script's torch path differs from torchvision itself")
        if patch:
            pv = np.fromfile(fpv, dtype=np.float32).reshape(-1, patch * patch * 3)
            pv_ref = hf_pixel_values(ref, patch)
            dpv = float(np.abs(pv - pv_ref).max())
            worst_pv = max(worst_pv, dpv)
            if dpv != 0.0:
                fails.append(f"{h}x{w}->{oh}x{ow}: pixel_values max |diff| {dpv:g}")
    report(not fails, "resize_matches_torch",
           f"{len(cases)} cases, {total_px} uint8 values, {total_bad} differ, max diff {worst} LSB"
           + ("" if not fails else "; " + "; ".join(fails[:6])))
    report(worst_pv == 0.0 and not fails, "pixel_values_match_hf",
           f"max |diff| {worst_pv:g} over the patchified cases")
    print(f"INFO resize vs contiguous-NCHW torch kernel: {total_bad_nchw} of {total_px} values differ "
          f"(HF's permuted view takes the channels-last kernel, which is the one matched)")
    import importlib.util
    print("INFO torchvision " + ("present: compared directly" if importlib.util.find_spec("torchvision")
                                 else "not installed: reference reimplements its uint8 path"))


# ---------------------------------------------------------------------------------------- PNG


def png_chunk(tag, data):
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def filter_rows(raw, bpp, rng):
    """raw: [h, rowbytes] uint8 -> filtered scanlines with a random filter type per row."""
    h, n = raw.shape
    out = bytearray()
    prev = np.zeros(n, dtype=np.int32)
    for y in range(h):
        cur = raw[y].astype(np.int32)
        left = np.concatenate([np.zeros(bpp, np.int32), cur[:-bpp]]) if n > bpp else np.zeros(n, np.int32)
        upleft = np.concatenate([np.zeros(bpp, np.int32), prev[:-bpp]]) if n > bpp else np.zeros(n, np.int32)
        ft = int(rng.integers(0, 5))
        if ft == 0:
            f = cur
        elif ft == 1:
            f = cur - left
        elif ft == 2:
            f = cur - prev
        elif ft == 3:
            f = cur - (left + prev) // 2
        else:
            f = cur - paeth(left, prev, upleft)
        out.append(ft)
        out += (f & 0xFF).astype(np.uint8).tobytes()
        prev = cur
    return bytes(out)


def write_png(path, samples, color_type, bit_depth, rng, palette=None):
    h, w = samples.shape[:2]
    if bit_depth == 16:
        raw = samples.astype(">u2").view(np.uint8).reshape(h, -1)
    else:
        raw = samples.astype(np.uint8).reshape(h, -1)
    spp = raw.shape[1] // w // (2 if bit_depth == 16 else 1)
    bpp = max(1, spp * bit_depth // 8)
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0))
    if palette is not None:
        data += png_chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    z = zlib.compress(filter_rows(raw, bpp, rng), 6)
    half = len(z) // 2  # two IDAT chunks: the decoder must concatenate them
    data += png_chunk(b"IDAT", z[:half]) + png_chunk(b"IDAT", z[half:]) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def check_png(tool, tmp, rng):
    fails = []
    n = 0
    for (ct, bd, name) in [(0, 8, "gray8"), (0, 16, "gray16"), (2, 8, "rgb8"), (2, 16, "rgb16"),
                           (4, 8, "gray_alpha8"), (6, 8, "rgba8"), (6, 16, "rgba16"), (3, 8, "palette8")]:
        for (h, w) in [(1, 1), (7, 13), (int(rng.integers(1, 200)), int(rng.integers(1, 200)))]:
            spp = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ct]
            samples = rng.integers(0, 1 << bd, size=(h, w, spp), dtype=np.int64)
            palette = None
            if ct == 3:
                palette = rng.integers(0, 256, size=(256, 3))
                expect = palette[samples[..., 0]]
            else:
                s8 = samples >> 8 if bd == 16 else samples  # 16-bit: high byte
                expect = np.repeat(s8[..., :1], 3, axis=2) if spp <= 2 else s8[..., :3]
            path = os.path.join(tmp, f"t_{name}.png")
            write_png(path, samples, ct, bd, rng, palette)
            out = os.path.join(tmp, "dec.u8")
            rc, so, se = run_tool([tool, "decode", path, out])
            n += 1
            if rc != 0:
                fails.append(f"{name} {h}x{w}: rc={rc} {so.strip()} {se.strip()}")
                continue
            got = np.fromfile(out, dtype=np.uint8)
            if so.split() != [str(h), str(w)] or got.size != h * w * 3 or not np.array_equal(
                    got.reshape(h, w, 3), expect.astype(np.uint8)):
                fails.append(f"{name} {h}x{w}: pixels differ")
    report(not fails, "png_decode_matches_handwritten", f"{n} files, all filter types"
           + ("" if not fails else "; " + "; ".join(fails[:5])))
    # a truncated hand-written file must be rejected
    with open(os.path.join(tmp, "t_rgb8.png"), "rb") as f:
        data = f.read()
    bad = []
    for cut in (len(data) - 1, len(data) - 12, len(data) // 2, 40, 9):
        p = os.path.join(tmp, "trunc.png")
        with open(p, "wb") as f:
            f.write(data[:cut])
        rc, so, _ = run_tool([tool, "decode", p, os.path.join(tmp, "dec.u8")])
        if rc == 0 or "ERROR" not in so:
            bad.append(cut)
    report(not bad, "png_truncated_handwritten_rejected", f"cuts accepted: {bad}")


def check_f32(tool, tmp, rng):
    h, w = 17, 23
    x = rng.random((h, w, 3), dtype=np.float32) * np.float32(1.4) - np.float32(0.2)
    x.flat[:6] = np.array([0.0, 1.0, 0.5, 1.0 / 255, 254.5 / 255, 0.1], dtype=np.float32)
    fin, fout = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.u8")
    x.tofile(fin)
    rc, _, se = run_tool([tool, "f32", fin, str(h), str(w), fout])
    ref = np.clip(x * 255.0, 0, 255).astype(np.uint8)  # LeRobot _normalize_image (float32 math)
    got = np.fromfile(fout, dtype=np.uint8).reshape(h, w, 3) if rc == 0 else None
    ok = got is not None and np.array_equal(got, ref)
    report(ok, "float_to_u8_matches_lerobot",
           f"{x.size} values" if ok else f"rc={rc} {se.strip()} "
           + ("" if got is None else f"{int((got != ref).sum())} differ"))


def check_jpeg(tool, tmp, rng):
    try:
        from PIL import Image
    except ImportError:
        print("INFO jpeg_vs_pil skipped: PIL not installed (C tests cover JPEG sanity)")
        return
    fails = []
    for (h, w, mode) in [(48, 64, "RGB"), (37, 51, "L"), (480, 640, "RGB")]:
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([xx * 3 % 256, yy * 5 % 256, (xx + yy) % 256], axis=-1).astype(np.int64)
        arr = np.clip(base + rng.integers(-20, 20, size=base.shape), 0, 255).astype(np.uint8)
        im = Image.fromarray(arr if mode == "RGB" else arr[..., 0], mode)
        path = os.path.join(tmp, "t.jpg")
        im.save(path, quality=90)
        ref = np.asarray(Image.open(path).convert("RGB"))
        out = os.path.join(tmp, "dec.u8")
        rc, so, se = run_tool([tool, "decode", path, out])
        if rc != 0:
            fails.append(f"{mode} {h}x{w}: rc={rc} {so.strip()}")
            continue
        got = np.fromfile(out, dtype=np.uint8).reshape(h, w, 3)
        d = int(np.abs(got.astype(np.int32) - ref.astype(np.int32)).max())
        if d:
            fails.append(f"{mode} {h}x{w}: max diff {d}")
    report(not fails, "jpeg_decode_matches_pil", "3 files identical" if not fails else "; ".join(fails))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"INFO image_ref seed {seed} (rerun: --seed {seed}); torch {torch.__version__}")
    rng = np.random.default_rng(seed)
    torch.set_num_threads(1)
    check_resize(a.tool, a.tmp, rng)
    check_png(a.tool, a.tmp, rng)
    check_f32(a.tool, a.tmp, rng)
    check_jpeg(a.tool, a.tmp, rng)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
