// .npz (stored or deflated members, via the zip central directory) and .npy v1/v2 reading for the ONNX
// Runtime checks: every array comes back as {shape, data: Float32Array} (f4, i8, b1, u1 members). Test code only.
'use strict';
const fs = require('fs');
const zlib = require('zlib');

function parseNpy(buf, what) {
  if (buf.readUInt32BE(0) !== 0x934e554d || buf[4] !== 0x50 || buf[5] !== 0x59) throw new Error(`${what}: not an npy file`);
  const major = buf[6];
  const hl = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const hdr = buf.toString('latin1', off, off + hl);
  const descr = /'descr':\s*'([^']+)'/.exec(hdr)[1];
  if (/'fortran_order':\s*True/.test(hdr)) throw new Error(`${what}: fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(hdr)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const data = buf.subarray(off + hl);
  const f = new Float32Array(n);
  if (descr === '<f4') for (let i = 0; i < n; i++) f[i] = data.readFloatLE(i * 4);
  else if (descr === '<i8') for (let i = 0; i < n; i++) f[i] = Number(data.readBigInt64LE(i * 8));
  else if (descr === '|b1' || descr === '|u1') for (let i = 0; i < n; i++) f[i] = data[i];
  else throw new Error(`${what}: dtype ${descr} not handled`);
  return { shape, data: f };
}

function readNpz(file) {
  const b = fs.readFileSync(file);
  let e = b.length - 22;
  while (e >= 0 && b.readUInt32LE(e) !== 0x06054b50) e--;
  if (e < 0) throw new Error(`${file}: no zip end record`);
  const count = b.readUInt16LE(e + 10);
  let p = b.readUInt32LE(e + 16);
  const out = {};
  for (let i = 0; i < count; i++) {
    if (b.readUInt32LE(p) !== 0x02014b50) throw new Error(`${file}: bad central directory`);
    const method = b.readUInt16LE(p + 10), csize = b.readUInt32LE(p + 20);
    const nl = b.readUInt16LE(p + 28), xl = b.readUInt16LE(p + 30), cl = b.readUInt16LE(p + 32);
    const lho = b.readUInt32LE(p + 42);
    const name = b.toString('utf8', p + 46, p + 46 + nl);
    p += 46 + nl + xl + cl;
    const lnl = b.readUInt16LE(lho + 26), lxl = b.readUInt16LE(lho + 28);
    const raw = b.subarray(lho + 30 + lnl + lxl, lho + 30 + lnl + lxl + csize);
    const body = method === 0 ? raw : zlib.inflateRawSync(raw);
    out[name.replace(/\.npy$/, '')] = parseNpy(body, `${file}:${name}`);
  }
  return out;
}

module.exports = { readNpz, parseNpy };
