// Deterministic tokenizer test corpus:
//   node gen_corpus.js SEED COUNT OUT.hex [UNICODE_INFO.txt OLD.txt NEW_OUT.hex NEW_COUNT]
// One string per line, hex-encoded UTF-8 (so NULs, CR, LF and every other byte survive the trip to C).
// The same seed always gives the same corpus; tests/test_tokenizer_rust.sh picks a fresh seed per run.
//
// Unicode versions differ between the two implementations, so a few characters cannot be expected
// to tokenize identically, and they are kept out of the exact-match corpus:
//   * letters/digits assigned after PCRE2's Unicode tables (10.42: Unicode 14): the reference's
//     Oniguruma (Unicode 16) classes them \p{L}/\p{N}, PCRE2 cannot. UNICODE_INFO.txt's "U" ranges
//     (from `test_tokenizer unicode-info`) are PCRE2's unassigned code points; those Node's ICU
//     knows as assigned are the newer ones;
//   * characters NFC can act on (UNICODE_INFO.txt "N" ranges, from utf8proc) that are newer than
//     HF tokenizers' NFC tables (unicode-normalization-alignments 0.1.12: Unicode 9.0). No Unicode
//     9.0 data is at hand, so OLD.txt ("first last" ranges assigned in Unicode 3.2, from Python's
//     unicodedata.ucd_3_2_0; "-" = none: only ASCII counts as old) is the conservative stand-in.
// Randomly drawn characters that fall in these sets are redrawn for OUT.hex, and NEW_OUT.hex gets
// NEW_COUNT strings built around them, whose mismatches the test reports as information.
"use strict";
const fs = require("fs");

const [seedArg, countArg, out, infoPath, oldPath, newOut, newCountArg] = process.argv.slice(2);
if (!out) {
  console.error("usage: node gen_corpus.js SEED COUNT OUT.hex [UNICODE_INFO.txt OLD.txt NEW_OUT.hex NEW_COUNT]");
  process.exit(2);
}
let state = (Number(seedArg) >>> 0) || 1;
function rnd() {  // mulberry32
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ri = (a, b) => a + Math.floor(rnd() * (b - a + 1));  // inclusive
const pick = (a) => a[Math.floor(rnd() * a.length)];
const rep = (n, f) => Array.from({ length: n }, f).join("");

// ---------------------------------------------------------------- building blocks
const OBJECTS = ["black bowl", "plate", "ketchup bottle", "alphabet soup", "cream cheese box", "butter",
  "wine bottle", "moka pot", "red mug", "white mug", "chocolate pudding", "bbq sauce", "salad dressing",
  "tomato sauce", "orange juice", "milk", "basket", "caddy", "stove", "microwave", "top drawer",
  "cabinet", "yellow and white mug", "book", "cube", "pen", "sponge", "lego brick", "screwdriver"];
const VERBS = ["pick up", "put", "place", "open", "close", "turn on", "turn off", "push", "move", "stack",
  "grasp", "lift", "rotate", "slide", "insert", "pour", "wipe", "fold", "hand over"];
const PREPS = ["in", "on", "into", "onto", "next to", "on top of", "under", "behind", "to the left of",
  "to the right of", "inside", "between"];
const WORDS = {
  latin: ["robot", "gripper", "the", "arm", "camera", "table", "slowly", "carefully", "Ångström", "naïve",
    "café", "Straße", "façade", "señor", "œuvre", "ÆØÅ", "İstanbul", "ſtraße"],
  cjk: ["机器人", "拿起", "红色的杯子", "放在桌子上", "ロボット", "カップを持つ", "ひらがな", "漢字", "로봇",
    "컵을 집어", "테이블 위에", "𠀀𠀁", "龍", "中文，标点。", "「引用」"],
  arabic: ["روبوت", "التقط الكوب", "ضع", "على الطاولة", "مرحبا بالعالم", "١٢٣٤", "كتاب"],
  cyrillic: ["робот", "возьми", "красную чашку", "положи на стол", "Привет", "ЁЖИК", "ёлка", "Україна"],
  devanagari: ["रोबोट", "कप उठाओ", "मेज़ पर रखो", "नमस्ते", "हिन्दी", "क़", "१२३"],
  thai: ["หุ่นยนต์", "หยิบแก้ว", "วางบนโต๊ะ", "สวัสดีครับ", "ภาษาไทย"],
  other: ["ρομπότ", "Ελληνικά", "רובוט", "שלום", "ሮቦት", "ռոբոտ", "რობოტი", "ᏣᎳᎩ", "ꦗꦮ", "𓂀", "ᚠᚢᚦ"],
};
const EMOJI = ["😀", "🤖", "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇺🇸", "🇯🇵", "1️⃣", "#️⃣",
  "❤️", "❤", "✋🏻", "🧑‍🤝‍🧑", "👁‍🗨", "🫠", "🦾", "🦿", "⚙️", "🔧", "☕", "🍵", "🥤", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"];
const WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ",
  "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u000b", "\u000c", "\u2009", "\u200b", "\ufeff", "\u202f"];
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
  "'Re", "'vE", "'lL", "’s", "’t", "'ſ", "'x", "''", "'"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", "…", "-", "--", "—", "(", ")", "[", "]", "{", "}", "\"", "'",
  "`", "/", "\\", "@", "#", "$", "%", "^", "&", "*", "_", "+", "=", "<", ">", "|", "~", "«", "»", "“", "”", "¿", "¡"];
const NFD_CASES = ["e\u0301", "E\u0301cole", "A\u030a", "n\u0303", "a\u0323\u0302", "a\u0302\u0323", "o\u0308\u0304",
  "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u212b", "\u2126", "\u0958", "\u0915\u093c", "\u00c5\u0301",
  "u\u0308\u0301", "\u0041\u0300\u0301", "\u1e9b\u0323", "\u0071\u0307\u0323", "\u0c48", "\u0c46\u0c56",
  "\u0b47\u0b3e", "\u09c7\u09be", "\u3099", "\u304b\u3099", "\u30cf\u309a", "\ufb01", "\u00bd", "\u2460",
  "\uff21\uff22", "\u0301abc", "x\u0336\u0336", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319"];
const SPECIAL_QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|box_end|>",
  "<|vision_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<think>", "</think>", "<|file_sep|>"];
const SPECIAL_MOLMO = ["<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>", "<|image|>",
  "<im_low>", "<frame_start>", "<frame_end>", "<setup_start>", "<setup_end>", "<control_start>",
  "<control_end>", "<state_start>", "<state_end>", "<action_start>", "<action_end>", "<action_output>"];
const NEAR_MISSES = ["<im_patc", "<im_patch", "im_patch>", "<state_256>", "<state_-1>", "<state_007>", "<state_>",
  "<State_3>", "< state_3>", "<|im_start|", "|im_start|>", "<<im_end>>", "<im_<im_end>end>", "<|endoftext|",
  "<state_1<state_2>>", "<|image||>", "<action_output", "<thinking>", "<|mact_reserved|>"];

function randomCodePoint() {
  const r = rnd();
  if (r < 0.25) return ri(0x20, 0x7e);
  if (r < 0.30) return ri(0x00, 0x1f);
  if (r < 0.45) return ri(0x80, 0x7ff);
  if (r < 0.75) { for (;;) { const c = ri(0x800, 0xffff); if (c < 0xd800 || c > 0xdfff) return c; } }
  if (r < 0.90) return ri(0x10000, 0x2ffff);
  return ri(0x30000, 0x10ffff);
}
const randomUnicode = (n) => rep(n, () => String.fromCodePoint(randomCodePoint()));
const anyWord = () => pick(WORDS[pick(Object.keys(WORDS))]);
const digits = (n) => rep(n, () => String(ri(0, 9)));

function task() {
  const t = `${pick(VERBS)} the ${pick(OBJECTS)}${rnd() < 0.6 ? ` ${pick(PREPS)} the ${pick(OBJECTS)}` : ""}`;
  const r = rnd();
  if (r < 0.15) return t.toUpperCase();
  if (r < 0.3) return t[0].toUpperCase() + t.slice(1) + pick([".", "!", "", " ", "  "]);
  if (r < 0.4) return `Task: ${t}`;
  return t;
}

// MolmoAct2 prompt, docs/spec/molmoact2.md 4.2: images expanded to <im_start> K x <im_patch> <im_end>.
function prompt() {
  const nImg = ri(1, 2), K = pick([16, 196, 16]);
  const img = "<im_start>" + "<im_patch>".repeat(K) + "<im_end>";
  const imgs = nImg === 1 ? img : Array.from({ length: nImg }, (_, i) => `Image ${i + 1}${img}`).join("");
  const setup = pick(["single_arm_franka", "so101 follower arm", "libero", "bimanual aloha", ""]);
  const ctrl = pick(["ee_delta_pose", "joint_position", "delta end-effector", "absolute joints"]);
  const nState = pick([6, 7, 8, 14]);
  const state = "<state_start>" + rep(nState, () => `<state_${ri(0, 255)}>`) + "<state_end>";
  const setupText = rnd() < 0.8 ? `<setup_start>${setup}<setup_end>` : setup;
  return `${imgs}<|im_start|>user\nThe task is to ${task().toLowerCase()}. The setup is ${setupText}.` +
         ` The current state of the robot is ${state}.` +
         ` The expected control mode is <control_start>${ctrl}<control_end>.` +
         ` Given these, what action should the robot take to complete the task?` +
         `<|im_end|>\n<|im_start|>assistant\n<action_output>`;
}

// ---------------------------------------------------------------- generators (name, weight, fn)
const GEN = [
  ["task", 3, () => task()],
  ["prompt", 2, () => prompt()],
  ["mixed_script", 3, () => rep(ri(1, 8), () => pick([anyWord(), anyWord(), pick(WS), pick(PUNCT), digits(ri(1, 5))])
    + (rnd() < 0.5 ? " " : ""))],
  ["emoji", 2, () => rep(ri(1, 6), () => pick([pick(EMOJI), pick(EMOJI) + pick(EMOJI), " ", pick(WORDS.latin),
    pick(EMOJI) + pick(["\u200d", "\ufe0f", "\ufe0e", "\u{1f3fb}", "\u{1f3fe}"])]))],
  ["whitespace", 3, () => rep(ri(1, 8), () => pick([pick(WS), pick(WS) + pick(WS), " ".repeat(ri(1, 40)),
    "\n".repeat(ri(1, 6)), pick(WORDS.latin), pick(WORDS.cjk), "x", pick(PUNCT), "\t".repeat(ri(1, 5))]))
    + pick(["", " ", "  ", "\n", " \n", "\t", "\r\n"])],
  ["digits", 2, () => rep(ri(1, 5), () => pick([digits(ri(1, 30)), digits(3) + "," + digits(3), digits(2) + "." + digits(4),
    "-" + digits(ri(1, 6)), "٣٤٥", "३४५", "３４５", "½", "²³", "Ⅻ", "①②", " ", "x" + digits(2), "v" + digits(1) + "." + digits(2)]))],
  ["contractions", 3, () => rep(ri(1, 6), () => pick([pick(WORDS.latin) + pick(CONTRACTIONS), pick(CONTRACTIONS),
    " " + pick(CONTRACTIONS), pick(["I", "you", "WE", "they", "It", "don", "can", "Won"]) + pick(CONTRACTIONS),
    pick(CONTRACTIONS) + pick(CONTRACTIONS), pick(CONTRACTIONS) + " ", pick(CONTRACTIONS) + "\n", "'" + digits(2)])
    + pick(["", " "]))],
  ["nfd", 3, () => rep(ri(1, 5), () => pick([pick(NFD_CASES), pick(NFD_CASES).normalize("NFD"),
    pick(WORDS.latin).normalize("NFD"), pick(WORDS.cjk).normalize("NFD"), pick(WORDS.devanagari).normalize("NFD"),
    pick(NFD_CASES) + " ", " " + pick(NFD_CASES), pick(WORDS.latin).normalize("NFKD")]))],
  ["random_unicode", 4, () => randomUnicode(ri(1, 30))],
  ["random_ascii", 2, () => rep(ri(1, 40), () => String.fromCharCode(ri(0, 127)))],
  ["specials", 3, () => rep(ri(1, 8), () => pick([pick(SPECIAL_QWEN), pick(SPECIAL_MOLMO), pick(NEAR_MISSES),
    `<state_${ri(0, 300)}>`, pick(WORDS.latin), " ", "\n", pick(EMOJI), pick(PUNCT), anyWord(), digits(2)]))],
  ["long", 1, () => {
    const r = rnd();
    if (r < 0.2) return pick(["a", " ", "!", "-", "=", "😀", "\n", "ab", "中", "1"]).repeat(ri(100, 3000));
    if (r < 0.4) return rep(ri(50, 300), () => pick([anyWord(), " ", pick(WS), pick(PUNCT), digits(ri(1, 4))]));
    if (r < 0.6) return prompt() + prompt();
    if (r < 0.8) return randomUnicode(ri(200, 1500));
    return rep(ri(20, 60), () => task() + pick([". ", "\n", "; "]));
  }],
  ["code", 1, () => pick([
    "def f(x):\n    return x * 2  # double\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
    "{\"action\": [0.1, -0.25, 3e-4], \"gripper\": \"open\"}", "https://huggingface.co/allenai/MolmoAct-7B-D-0812?x=1&y=2",
    "SELECT * FROM episodes WHERE task LIKE '%mug%';", "$ ./mact run --model ./ckpt --image a.png\r\n",
    "<div class=\"x\">&nbsp;</div>", "a_b-c.d/e\\f:g|h", "C:\\Users\\robot\\Desktop", "x=1;y=2;z=x+y",
  ]) + pick(["", " ", "\n", pick(WS)])],
  ["empty_edge", 1, () => pick(["", " ", "\n", "\t", "\r", "\r\n", "\u0000", "a\u0000b", "\u0000\u0000", "'", "'s", " 's",
    "\u{10ffff}", "\ufffd", "\ufeffBOM", "\u{e0001}", "\u{f0000}", "\ud7ff", "\ue000"])],
];
// Splice: concatenations of other generators.
const totalW = GEN.reduce((s, g) => s + g[1], 0);
function one() {
  let r = rnd() * totalW;
  for (const g of GEN) { r -= g[1]; if (r < 0) return g[2](); }
  return GEN[0][2]();
}
GEN.push(["splice", 3, () => rep(ri(2, 4), () => one())]);

// Version-sensitive code points (empty without UNICODE_INFO.txt), see the header.
const NEW_CPS = [];
if (infoPath) {
  const readRanges = (text, tag) => text.split("\n").map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length === (tag ? 3 : 2) && (!tag || f[0] === tag)).map((f) => f.slice(tag ? 1 : 0).map(Number));
  const info = fs.readFileSync(infoPath, "utf8");
  const old = new Uint8Array(0x110000);
  if (oldPath && oldPath !== "-") for (const [a, b] of readRanges(fs.readFileSync(oldPath, "utf8"), null)) old.fill(1, a, b + 1);
  else old.fill(1, 0, 0x80);
  const sens = new Uint8Array(0x110000);
  const cn = /\p{Cn}/u;
  for (const [a, b] of readRanges(info, "U"))
    for (let c = a; c <= b; c++) if (!cn.test(String.fromCodePoint(c))) sens[c] = 1;
  for (const [a, b] of readRanges(info, "N")) for (let c = a; c <= b; c++) if (!old[c]) sens[c] = 1;
  for (let c = 0; c < 0x110000; c++) if (sens[c]) NEW_CPS.push(c);
}
const NEW_SET = new Set(NEW_CPS);
function stable(s) {  // replaces post-PCRE2-Unicode characters by freshly drawn older ones
  if (!NEW_SET.size) return s;
  let o = "";
  for (const ch of s) {
    let c = ch.codePointAt(0);
    while (NEW_SET.has(c)) c = randomCodePoint();
    o += String.fromCodePoint(c);
  }
  return o;
}

const count = Number(countArg) || 2000;
const lines = [];
const kinds = {};
const total = GEN.reduce((s, g) => s + g[1], 0);
for (let i = 0; i < count; i++) {
  let r = rnd() * total, g = GEN[0];
  for (const cand of GEN) { r -= cand[1]; if (r < 0) { g = cand; break; } }
  const s = stable(g[2]());
  kinds[g[0]] = (kinds[g[0]] || 0) + 1;
  lines.push(Buffer.from(s, "utf8").toString("hex"));
}
fs.writeFileSync(out, lines.join("\n") + "\n");
console.log(`INFO corpus: ${count} strings, seed ${seedArg}: ` +
            Object.entries(kinds).map(([k, v]) => `${k}=${v}`).join(" "));

if (newOut && NEW_CPS.length) {
  const newCount = Number(newCountArg) || 200;
  const newLines = [];
  const newCp = () => String.fromCodePoint(pick(NEW_CPS));
  for (let i = 0; i < newCount; i++) {
    const s = rep(ri(1, 6), () => pick([newCp(), newCp() + newCp(), " " + newCp(), pick(WORDS.latin), anyWord(),
      pick(PUNCT), digits(ri(1, 3)), " ", pick(WS), newCp() + pick(PUNCT), pick(PUNCT) + newCp(),
      newCp() + pick(PUNCT) + pick(WORDS.latin), pick(WORDS.latin) + newCp() + digits(1)]));
    newLines.push(Buffer.from(s, "utf8").toString("hex"));
  }
  fs.writeFileSync(newOut, newLines.join("\n") + "\n");
  console.log(`INFO corpus: ${newCount} more strings around the ${NEW_CPS.length} Unicode-version-sensitive ` +
              `code points (reported apart)`);
}
