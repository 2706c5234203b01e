// Reference encoder: Hugging Face's Rust `tokenizers` (Node build @anush008/tokenizers).
// usage: node encode_rust.js TOKENIZER.json CORPUS.hex OUT.txt
// OUT has one line per corpus line: the ids separated by spaces (encode without special tokens).
"use strict";
const fs = require("fs");
const { Tokenizer } = require("@anush008/tokenizers");

async function main() {
  const [tokPath, corpus, out] = process.argv.slice(2);
  if (!out) { console.error("usage: node encode_rust.js TOKENIZER.json CORPUS.hex OUT.txt"); process.exit(2); }
  const tok = Tokenizer.fromFile(tokPath);
  const lines = fs.readFileSync(corpus, "utf8").split("\n").filter((l, i, a) => i < a.length - 1 || l !== "");
  const res = [];
  for (const hex of lines) {
    const text = Buffer.from(hex, "hex").toString("utf8");
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    res.push(enc.getIds().join(" "));
  }
  fs.writeFileSync(out, res.join("\n") + "\n");
}
main().catch((e) => { console.error(e); process.exit(1); });
