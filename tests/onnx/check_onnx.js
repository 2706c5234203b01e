#!/usr/bin/env node
// Runs every graph of a `mact export onnx` folder with ONNX Runtime (onnxruntime-node, CPU) on the inputs of a
// `mact export golden` folder and compares each output with the golden reference tensor.
//   node check_onnx.js ONNX_DIR GOLDEN_DIR [--label L] [--cos-min C] [--rel-tol R] [--threads T] [--info]
//                      [--peer ONNX_DIR2 --peer-tol A] [--only COMPONENT]
// --peer: also runs ONNX_DIR2's graph of each component on the same inputs and requires every output within
// max abs A (default 1e-5) of ONNX_DIR's (decomposed GridSample = native).
// Prints one line per output:  RESULT label/component/output cosine=.. (>= C) max_abs=.. (<= R x max|ref| = ..)
// max_ref=..  with RESULT PASS or FAIL (--info: INFO, no thresholds applied: the fp16-weight graphs). Exit 1 on
// any FAIL or a graph that cannot run. Reads .npz (stored or deflated members) and .npy v1/v2 itself.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { readNpz } = require('./npz.js');

function compare(got, ref) {
  let dot = 0, ng = 0, nr = 0, mx = 0, mr = 0;
  for (let i = 0; i < ref.length; i++) {
    const g = got[i], f = ref[i];
    dot += g * f; ng += g * g; nr += f * f;
    const d = Math.abs(g - f);
    if (!(d <= mx)) mx = Number.isNaN(d) ? Infinity : d;
    if (Math.abs(f) > mr) mr = Math.abs(f);
  }
  const cos = ng === 0 && nr === 0 ? 1 : dot / (Math.sqrt(ng) * Math.sqrt(nr) + 1e-300);
  return { cos, mx, mr };
}

async function main() {
  const a = process.argv.slice(2);
  const opt = { label: 'onnx', cos: 0.99999, rel: 1e-4, threads: 1, info: false, peer: null, peerTol: 1e-5, only: null };
  const pos = [];
  for (let i = 0; i < a.length; i++) {
    if (a[i] === '--label') opt.label = a[++i];
    else if (a[i] === '--cos-min') opt.cos = Number(a[++i]);
    else if (a[i] === '--rel-tol') opt.rel = Number(a[++i]);
    else if (a[i] === '--threads') opt.threads = Number(a[++i]);
    else if (a[i] === '--info') opt.info = true;
    else if (a[i] === '--peer') opt.peer = a[++i];
    else if (a[i] === '--peer-tol') opt.peerTol = Number(a[++i]);
    else if (a[i] === '--only') opt.only = a[++i];
    else pos.push(a[i]);
  }
  if (pos.length !== 2) { console.error('usage: check_onnx.js ONNX_DIR GOLDEN_DIR [--label L] [--info]'); process.exit(2); }
  const [onnxDir, golden] = pos;
  const comps = fs.readdirSync(onnxDir).filter((d) => fs.existsSync(path.join(onnxDir, d, d + '.onnx')))
    .filter((d) => !opt.only || d === opt.only).sort();
  const runGraph = async (dir, c, z) => {
    const s = await ort.InferenceSession.create(path.join(dir, c, c + '.onnx'),
      { intraOpNumThreads: opt.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
    const feeds = {};
    for (const n of s.inputNames) {
      if (!z[n]) throw new Error(`golden ${c}_io.npz has no input ${n}`);
      feeds[n] = new ort.Tensor('float32', z[n].data, z[n].shape);
    }
    return { s, outs: await s.run(feeds) };
  };
  let fails = 0, rows = 0;
  for (const c of comps) {
    const gfile = path.join(golden, c + '_io.npz');
    if (!fs.existsSync(gfile)) { console.log(`FAIL ${opt.label}/${c}: no golden file ${c}_io.npz`); fails++; continue; }
    let outs;
    const z = readNpz(gfile);
    try {
      const s = await ort.InferenceSession.create(path.join(onnxDir, c, c + '.onnx'),
        { intraOpNumThreads: opt.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
      const feeds = {};
      for (const n of s.inputNames) {
        if (!z[n]) throw new Error(`golden ${c}_io.npz has no input ${n}`);
        feeds[n] = new ort.Tensor('float32', z[n].data, z[n].shape);
      }
      const t0 = process.hrtime.bigint();
      outs = await s.run(feeds);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      console.log(`INFO ${opt.label}/${c}: ONNX Runtime ${ms.toFixed(1)} ms (${opt.threads} threads), inputs ${s.inputNames.join(', ')}`);
      for (const n of s.outputNames) {
        const ref = z[n];
        if (!ref) { console.log(`FAIL ${opt.label}/${c}/${n}: golden has no ${n}`); fails++; continue; }
        const got = outs[n].data;
        if (got.length !== ref.data.length) {
          console.log(`FAIL ${opt.label}/${c}/${n}: ${got.length} elements, golden ${ref.data.length}`); fails++; continue;
        }
        const r = compare(got, ref.data);
        const tol = opt.rel * r.mr;
        const pass = r.cos >= opt.cos && r.mx <= tol;
        const res = opt.info ? 'INFO' : pass ? 'PASS' : 'FAIL';
        if (!opt.info && !pass) fails++;
        rows++;
        console.log(`${res} ${opt.label}/${c}/${n} cosine=${r.cos.toFixed(9)}${opt.info ? '' : ` (>= ${opt.cos})`} ` +
          `max_abs=${r.mx.toExponential(3)}${opt.info ? '' : ` (<= ${opt.rel} x max|ref| = ${tol.toExponential(3)})`} ` +
          `max_ref=${r.mr.toExponential(3)} shape=[${outs[n].dims.join(',')}]`);
      }
      if (opt.peer && fs.existsSync(path.join(opt.peer, c, c + '.onnx'))) {
        const sOutputs = s.outputNames;
        await s.release();  /* one session at a time: the full-size graphs are GBs each */
        const p = await runGraph(opt.peer, c, z);
        for (const n of sOutputs) {
          const r = compare(p.outs[n].data, outs[n].data);
          const pass = r.mx <= opt.peerTol;
          if (!pass) fails++;
          console.log(`${pass ? 'PASS' : 'FAIL'} ${opt.label}/${c}/${n}_vs_peer max_abs=${r.mx.toExponential(3)} ` +
            `(<= ${opt.peerTol}) cosine=${r.cos.toFixed(9)} peer=${opt.peer}`);
        }
        await p.s.release();
      } else await s.release();
    } catch (e) {
      console.log(`FAIL ${opt.label}/${c}: ${String(e.message || e).split('\n')[0]}`);
      fails++;
    }
  }
  if (!rows && !fails) { console.log(`FAIL ${opt.label}: no graph found in ${onnxDir}`); fails++; }
  process.exit(fails ? 1 : 0);
}
main();
