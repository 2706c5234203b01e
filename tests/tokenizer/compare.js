// Compares mact's ids with the Rust reference and prints one PASS/FAIL line.
// usage: node compare.js NAME TOKENIZER.json CORPUS.hex RUST.txt C.txt [--info]
// --info: report the mismatch count as an INFO line (never fails): used for the strings holding
// characters whose treatment depends on the Unicode version (see gen_corpus.js).
"use strict";
const fs = require("fs");
const { Tokenizer } = require("@anush008/tokenizers");

const [name, tokPath, corpus, rustOut, cOut, mode] = process.argv.slice(2);
const infoOnly = mode === "--info";
const readLines = (p) => { const l = fs.readFileSync(p, "utf8").split("\n"); if (l[l.length - 1] === "") l.pop(); return l; };
const inputs = readLines(corpus), rust = readLines(rustOut), mine = readLines(cOut);
if (rust.length !== inputs.length || mine.length !== inputs.length) {
  console.log(`FAIL tokenizer_${name}: line counts differ (corpus ${inputs.length}, rust ${rust.length}, mact ${mine.length})`);
  process.exit(1);
}
const tok = Tokenizer.fromFile(tokPath);
const show = (ids) => ids.map((i) => `${i}:${JSON.stringify(tok.idToToken(Number(i)))}`).join(" ");
let bad = 0, nTok = 0;
const details = [];
for (let i = 0; i < inputs.length; i++) {
  nTok += rust[i] === "" ? 0 : rust[i].split(" ").length;
  if (rust[i] === mine[i]) continue;
  bad++;
  if (details.length < 5) {
    const text = Buffer.from(inputs[i], "hex").toString("utf8");
    const r = rust[i] === "" ? [] : rust[i].split(" "), c = mine[i].startsWith("ERROR") ? [] : mine[i] === "" ? [] : mine[i].split(" ");
    let k = 0;
    while (k < r.length && k < c.length && r[k] === c[k]) k++;
    details.push(`  #${i} input ${JSON.stringify(text.length > 200 ? text.slice(0, 200) + "..." : text)}\n` +
                 `     first difference at token ${k}\n` +
                 `     rust: ${show(r.slice(Math.max(0, k - 2), k + 6))}\n` +
                 `     mact: ${mine[i].startsWith("ERROR") ? mine[i] : show(c.slice(Math.max(0, k - 2), k + 6))}`);
  }
}
const summary = `${inputs.length} strings, ${nTok} tokens, ${bad} mismatches`;
if (infoOnly) {
  console.log(`INFO tokenizer_${name}: ${summary} (Unicode-version gap: reference regex Unicode 16, ` +
              `NFC Unicode 9; mact PCRE2 Unicode 14, utf8proc NFC Unicode 15)`);
  if (bad) console.log(details.slice(0, 2).join("\n").replace(/^/gm, "INFO "));
  process.exit(0);
}
if (bad === 0) console.log(`PASS tokenizer_${name} (${summary})`);
else { console.log(`FAIL tokenizer_${name}: ${summary}; first ones:`); console.log(details.join("\n")); }
process.exit(bad ? 1 : 0);
