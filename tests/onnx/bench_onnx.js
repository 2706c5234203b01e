#!/usr/bin/env node
// ONNX Runtime (CPU) timings of a `mact export onnx` folder on a `mact export golden` folder's inputs, the peer
// row of docs/benchmarks.md: node bench_onnx.js ONNX_DIR GOLDEN_DIR [--threads T] [--iters N] [--steps S]
// One session at a time (created, one warm-up run, N timed runs, released), so peak memory is the largest
// component's. Prints per component the median ms, then vision / llm (the splits) / action (action_context +
// S x action_step; S from the golden's trace.json) / total, as `mact bench` splits its stages.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readNpz } = require('./npz.js');

async function main() {
  const a = process.argv.slice(2);
  let threads = 2, iters = 5, steps = 0;
  const pos = [];
  for (let i = 0; i < a.length; i++) {
    if (a[i] === '--threads') threads = Number(a[++i]);
    else if (a[i] === '--iters') iters = Number(a[++i]);
    else if (a[i] === '--steps') steps = Number(a[++i]);
    else pos.push(a[i]);
  }
  const [onnxDir, golden] = pos;
  if (!steps) steps = JSON.parse(fs.readFileSync(path.join(golden, 'trace.json'), 'utf8')).num_steps;
  const comps = fs.readdirSync(onnxDir).filter((d) => fs.existsSync(path.join(onnxDir, d, d + '.onnx'))).sort();
  const med = {};
  for (const c of comps) {
    const z = readNpz(path.join(golden, c + '_io.npz'));
    const t0 = process.hrtime.bigint();
    const s = await ort.InferenceSession.create(path.join(onnxDir, c, c + '.onnx'),
      { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
    const load = Number(process.hrtime.bigint() - t0) / 1e6;
    const feeds = {};
    for (const n of s.inputNames) feeds[n] = new ort.Tensor('float32', z[n].data, z[n].shape);
    await s.run(feeds);
    const ts = [];
    for (let i = 0; i < iters; i++) {
      const t1 = process.hrtime.bigint();
      await s.run(feeds);
      ts.push(Number(process.hrtime.bigint() - t1) / 1e6);
    }
    ts.sort((x, y) => x - y);
    med[c] = ts[Math.floor(ts.length / 2)];
    console.log(`ort ${c}: median ${med[c].toFixed(1)} ms of ${iters} (min ${ts[0].toFixed(1)}, max ${ts[ts.length - 1].toFixed(1)}), session load ${load.toFixed(0)} ms, ${threads} threads`);
    await s.release();
  }
  const llm = comps.filter((c) => c.startsWith('llm_split')).reduce((x, c) => x + med[c], 0);
  const act = (med.action_context || 0) + steps * (med.action_step || 0);
  const vis = med.vision || 0;
  console.log(`ort total: vision ${vis.toFixed(1)} ms, llm ${llm.toFixed(1)} ms, action ${act.toFixed(1)} ms ` +
    `(context + ${steps} x step), total ${(vis + llm + act).toFixed(1)} ms, ${threads} threads, ORT ${ort.env.versions ? ort.env.versions.common : ''}`);
}
main();
