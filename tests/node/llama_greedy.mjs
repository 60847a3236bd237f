// llama.cpp's greedy continuation of a prompt, through node-llama-cpp's prebuilt CPU libraries
// (tests/cli/gguf.sh; nothing is downloaded or built: build "never", gpu false).
//   node tests/node/llama_greedy.mjs NODE_MODULES MODEL.gguf PROMPT_FILE N [MODEL.gguf PROMPT_FILE N ...]
// Prints one JSON line per model: {"prompt_ids", "prompt_text", "ids", "text"}: prompt_ids is llama.cpp's
// tokenization of the prompt (no BOS added), ids the N tokens it generates greedily (temperature 0; it stops
// early at the model's end token if one is declared, which is left out, as tfm generate does), text those
// tokens' bytes (prompt_text: the prompt ids') decoded from the GGUF vocabulary's byte-level strings (GPT-2's bytes_to_unicode reversed), so no
// detokenizer clean-up (llama.cpp's clean_spaces) changes them.
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [modules, ...jobs] = process.argv.slice(2);
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(path.join(modules, 'node-llama-cpp', 'dist', 'index.js')));
const llama = await getLlama({gpu: false, build: 'never', usePrebuiltBinaries: true, progressLogs: false,
                              logLevel: LlamaLogLevel.error});
const byteOf = new Map();   // bytes_to_unicode reversed: character -> byte
for (let b = 0, k = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteOf.set(String.fromCodePoint(printable ? b : 256 + k++), b);
}

async function greedy(modelPath, promptFile, n) {
    const model = await llama.loadModel({modelPath});
    const prompt = fs.readFileSync(promptFile, 'utf8');
    const promptIds = Array.from(model.tokenize(prompt, false));
    const context = await model.createContext({contextSize: Math.max(64, promptIds.length + n), batchSize: 512,
                                               threads: 1});
    const seq = context.getSequence();
    const tokens = model.fileInfo.metadata.tokenizer.ggml.tokens;
    const eos = model.fileInfo.metadata.tokenizer.ggml.eos_token_id;
    const bytesOf = (id) => {
        const chars = Array.from(tokens[id]);
        if (chars.every((c) => byteOf.has(c))) return chars.map((c) => byteOf.get(c));
        return Array.from(Buffer.from(tokens[id], 'utf8'));   // a control token stands for its own text
    };
    const ids = [];
    if (n > 0) {
        for await (const token of seq.evaluate(promptIds, {temperature: 0, yieldEogToken: true})) {
            if (eos !== undefined && token === eos) break;   // the end token: not part of the text (tfm generate)
            ids.push(token);
            if (ids.length >= n) break;
        }
    }
    const text = Buffer.from(ids.flatMap(bytesOf)).toString('utf8');
    const promptText = Buffer.from(promptIds.flatMap(bytesOf)).toString('utf8');
    await context.dispose();
    await model.dispose();
    return {prompt_ids: promptIds, prompt_text: promptText, ids, text};
}

for (let i = 0; i + 2 < jobs.length; i += 3)
    console.log(JSON.stringify(await greedy(jobs[i], jobs[i + 1], Number(jobs[i + 2]))));
await llama.dispose();
