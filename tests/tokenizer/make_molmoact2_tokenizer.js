// Derives a MolmoAct2-style tokenizer.json from the Qwen3 one by adding MolmoAct2's marker tokens as
// added special tokens (docs/spec/molmoact2.md 4.2).
// usage: node make_molmoact2_tokenizer.js QWEN3.json OUT.json
//
// Id layout (the real checkpoint's tokenizer files are not available here; NAT-TOK asserts the image
// tokens sit at 154624 + index, the rest follow in the order below):
//   151643..151668  Qwen3's own added tokens, unchanged
//   151669..154623  "<|mact_reserved_ID|>" fillers. HF tokenizers ignores the ids written in
//                   tokenizer.json for tokens missing from the BPE vocab and numbers them
//                   consecutively after the last one, so the gap must be filled for the Rust
//                   library and mact to agree on the ids below. They stand in for whatever the real
//                   checkpoint has there and never occur in prompts.
//   154624..154632  <im_start> <im_end> <im_patch> <im_col> <low_res_im_start> <|image|> <im_low>
//                   <frame_start> <frame_end>
//   154633..154641  <setup_start> <setup_end> <control_start> <control_end> <state_start>
//                   <state_end> <action_start> <action_end> <action_output>
//   154642..154897  <state_0> .. <state_255>   (so state_token_start_id = 154642 in this layout)
// Runtime code must always look these ids up from the checkpoint's tokenizer (and config.json's
// state_token_start_id), never hard-code them: this layout is only the test fixture's.
"use strict";
const fs = require("fs");

const [src, out] = process.argv.slice(2);
if (!src || !out) { console.error("usage: node make_molmoact2_tokenizer.js QWEN3.json OUT.json"); process.exit(2); }
const j = JSON.parse(fs.readFileSync(src, "utf8"));

const IMAGE_TOKENS = ["<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>", "<|image|>",
                      "<im_low>", "<frame_start>", "<frame_end>"];
const ROBOT_TOKENS = ["<setup_start>", "<setup_end>", "<control_start>", "<control_end>", "<state_start>",
                      "<state_end>", "<action_start>", "<action_end>", "<action_output>"];
const IMAGE_START_ID = 154624;
const N_STATE = 256;

const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
                                    normalized: false, special: true });
let next = Math.max(...j.added_tokens.map(t => t.id)) + 1;
const taken = new Set(j.added_tokens.map(t => t.content));
const add = (content) => {
  if (taken.has(content)) throw new Error(`duplicate token ${content}`);
  taken.add(content);
  j.added_tokens.push(special(next++, content));
};
while (next < IMAGE_START_ID) add(`<|mact_reserved_${next}|>`);
for (const t of IMAGE_TOKENS) add(t);
for (const t of ROBOT_TOKENS) add(t);
const stateStart = next;
for (let k = 0; k < N_STATE; k++) add(`<state_${k}>`);

fs.writeFileSync(out, JSON.stringify(j));
console.log(`wrote ${out}: ${j.added_tokens.length} added tokens, <im_start>=${IMAGE_START_ID}, ` +
            `<state_0>=${stateStart}, last id ${next - 1}`);
