// Generation with llama.cpp through node-llama-cpp (its prebuilt CPU libraries; no build, no download): a GGUF
// model continues a fixed prompt by N tokens, greedy (temperature 0).
//
//   node llama_gen.mjs MODEL.gguf [--tokens N] [--prompt TEXT] [--threads N] [--batch N] [--context N]
//   node llama_gen.mjs --probe          (loads the library only: prints its build and the CPU variant in use)
//
// Prints to stdout the generated text, and one line to stderr:
//   llama.cpp: N tokens in S s (T tok/s; generation only, after the prompt) prompt P tokens in S2 s threads N batch N
import fs from 'node:fs';
import {getLlama, LlamaLogLevel} from 'node-llama-cpp';

function parseArgs(argv) {
    const o = {tokens: 256, prompt: 'ROMEO:', threads: 1, batch: 512, context: 0, probe: false};
    const pos = [];
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const next = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
        const num = () => { const x = Number(next()); if (!Number.isInteger(x) || x < 0) throw new Error(`${a}: bad value`); return x; };
        if (a === '--tokens') o.tokens = num();
        else if (a === '--prompt') o.prompt = next();
        else if (a === '--threads') o.threads = num();
        else if (a === '--batch') o.batch = num();
        else if (a === '--context') o.context = num();
        else if (a === '--probe') o.probe = true;
        else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
        else pos.push(a);
    }
    if (!o.probe && pos.length !== 1) throw new Error('usage: llama_gen.mjs MODEL.gguf [options]');
    o.model = pos[0];
    return o;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const llama = await getLlama({gpu: false, build: 'never', usePrebuiltBinaries: true, logLevel: LlamaLogLevel.error,
                                  maxThreads: o.threads || undefined});
    if (o.probe) {
        console.log(`node-llama-cpp: llama.cpp ${llama.llamaCppRelease?.release ?? '?'} (${llama.buildType}), gpu ${llama.gpu}, ` +
                    `CPU ${llama.cpuMathCores} math cores`);
        return;
    }
    if (!fs.existsSync(o.model)) throw new Error(`${o.model}: no such file`);
    const model = await llama.loadModel({modelPath: o.model, gpuLayers: 0});
    const context = await model.createContext({contextSize: o.context || Math.min(model.trainContextSize, 2048),
                                               batchSize: o.batch, threads: o.threads, sequences: 1});
    const seq = context.getSequence();
    const prompt = model.tokenize(o.prompt);
    const out = [];
    const t0 = process.hrtime.bigint();
    let t1 = 0n;
    for await (const tok of seq.evaluate(prompt, {temperature: 0})) {
        if (!t1) t1 = process.hrtime.bigint();   // the first token ends the prompt's evaluation
        out.push(tok);
        if (out.length >= o.tokens) break;
    }
    const t2 = process.hrtime.bigint();
    const gen = Number(t2 - t1) / 1e9, pre = Number(t1 - t0) / 1e9, n = out.length - 1;
    process.stdout.write(model.detokenize(out) + '\n');
    console.error(`llama.cpp: ${n} tokens in ${gen.toFixed(3)} s (${(n / gen).toFixed(1)} tok/s; generation only, after the ` +
                  `prompt) prompt ${prompt.length} tokens in ${pre.toFixed(3)} s threads ${o.threads} batch ${o.batch}`);
    await context.dispose();
    await model.dispose();
}

main().catch((e) => { console.error(`llama_gen: ${e.message}`); process.exit(1); });
