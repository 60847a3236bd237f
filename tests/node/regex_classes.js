// Print the code point ranges of \p{L}, \p{N} and \s as node's regex engine defines them, one class per
// line: "NAME lo-hi lo-hi ..." (hex). tests/cli/gpt2_bpe.sh compares them with tfm's generated tables.
'use strict';
const classes = [['letter', /^\p{L}$/u], ['number', /^\p{N}$/u], ['space', /^\s$/u]];
console.log('unicode ' + process.versions.unicode);
for (const [name, re] of classes) {
  const out = [];
  let lo = -1;
  for (let cp = 0; cp <= 0x110000; cp++) {
    const hit = cp <= 0x10ffff && re.test(String.fromCodePoint(cp));
    if (hit && lo < 0) lo = cp;
    if (!hit && lo >= 0) { out.push(lo.toString(16) + '-' + (cp - 1).toString(16)); lo = -1; }
  }
  console.log(name + ' ' + out.join(' '));
}
