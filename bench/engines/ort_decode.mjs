// Greedy and beam search with ONNX Runtime (onnxruntime-node) over the graphs of onnx_export.py, with tfm's
// search (src/decode/search.c; the PyTorch twin's translate_batch is the same algorithm): sentences sorted by
// source length (longest first) and cut into batches; per batch the encoder once, then one decoder step per
// output position for the live rows; finished rows dropped. Beam: K rows per sentence, the best 2K (row, token)
// candidates per sentence by score + log-softmax (earlier row/token first among equal scores); an <eos> among
// the top K finishes a hypothesis scored logprob / ((5 + len) / 6)^alpha (len with <eos>), the best kept (the
// first among equal scores); a sentence stops with K finished hypotheses (counted, kept or not) or when no
// candidate continues; at step max_output its live beams end as they are, each scored as if <eos> came next.
// Scores, log-softmax normaliser and length penalty are rounded to float32 where tfm computes in float; the
// model's banned tokens (model.json) are never chosen.
//
//   node ort_decode.mjs ONNXDIR IDS.txt OUT.txt [--beam K] [--alpha A] [--max-output N] [--max-src N]
//        [--batch-size N] [--opt disabled|basic|extended|all] [--intra N] [--inter N] [--mode sequential|parallel]
//
// As in tfm translate: --alpha -1 (the default) is the model's stored decoding alpha (model.json decode_alpha,
// 0 if none); --max-output 50, --max-src 200; both bounded by the model's position table.
//
// IDS.txt: one source sentence a line as token ids (tfm bpe encode --ids), without <eos>. OUT.txt: the output ids
// a line (tfm bpe decode --ids turns them into text). Prints one line to stderr:
//   ort: N sentences in S s (decode only: encoder + steps + search; sessions and files not counted) ...
import * as ort from 'onnxruntime-node';
import fs from 'node:fs';
import path from 'node:path';

function parseArgs(argv) {
    const o = {beam: 1, alpha: -1, maxOutput: 50, maxSrc: 200, batch: 32, opt: 'all', intra: 1, inter: 1, mode: 'sequential'};
    const pos = [];
    const num = (v, name) => {
        const x = Number(v);
        if (!Number.isFinite(x)) throw new Error(`${name}: not a number: ${v}`);
        return x;
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const next = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
        if (a === '--beam') o.beam = num(next(), a);
        else if (a === '--alpha') o.alpha = num(next(), a);
        else if (a === '--max-output') o.maxOutput = num(next(), a);
        else if (a === '--max-src') o.maxSrc = num(next(), a);
        else if (a === '--batch-size') o.batch = num(next(), a);
        else if (a === '--opt') o.opt = next();
        else if (a === '--intra') o.intra = num(next(), a);
        else if (a === '--inter') o.inter = num(next(), a);
        else if (a === '--mode') o.mode = next();
        else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
        else pos.push(a);
    }
    if (pos.length !== 3) throw new Error('usage: ort_decode.mjs ONNXDIR IDS.txt OUT.txt [options]');
    if (!['disabled', 'basic', 'extended', 'all'].includes(o.opt)) throw new Error(`--opt: ${o.opt}`);
    if (!['sequential', 'parallel'].includes(o.mode)) throw new Error(`--mode: ${o.mode}`);
    [o.dir, o.ids, o.out] = pos;
    return o;
}

const f32 = Math.fround;

// tfm's float log-sum-exp of one row (mx + logf(sum exp(x - mx))); log-softmax is f32(x[v] - lse)
function rowLse(x) {
    let mx = -Infinity;
    for (let v = 0; v < x.length; v++) if (x[v] > mx) mx = x[v];
    let sum = 0;
    for (let v = 0; v < x.length; v++) sum += Math.exp(x[v] - mx);
    return f32(mx + f32(Math.log(f32(sum))));
}

// GNMT length penalty in float, as search.c's length_penalty
const lengthPenalty = (len, alpha) => (alpha === 0 ? 1 : f32(Math.pow(f32((5 + len) / 6), alpha)));

// rows of a (R, ...) float tensor picked by idx -> a new (idx.length, ...) tensor
function gatherRows(t, idx) {
    const R = t.dims[0], row = R ? t.data.length / R : 0;
    const out = new Float32Array(idx.length * row);
    for (let i = 0; i < idx.length; i++) out.set(t.data.subarray(idx[i] * row, (idx[i] + 1) * row), i * row);
    return new ort.Tensor('float32', out, [idx.length, ...t.dims.slice(1)]);
}
const gatherInts = (a, idx) => idx.map((r) => a[r]);
const int64 = (vals, dims) => new ort.Tensor('int64', BigInt64Array.from(vals, (v) => BigInt(v)), dims);

class Engine {
    constructor(meta, enc, dec) { Object.assign(this, {meta, enc, dec, banned: meta.banned || []}); }

    // encode nb sentences -> {cross: [k0, v0, k1, ...] (nb rows), valid}
    async encode(srcs, maxSrc) {
        const {pad, eos} = this.meta;
        const lens = srcs.map((s) => Math.min(s.length, maxSrc - 1));
        const Ts = Math.max(1, ...lens.map((l) => l + 1));
        const src = new Array(srcs.length * Ts).fill(pad);
        srcs.forEach((s, i) => {
            for (let t = 0; t < lens[i]; t++) src[i * Ts + t] = s[t];
            src[i * Ts + lens[i]] = eos;
        });
        const valid = lens.map((l) => l + 1);
        const r = await this.enc.run({src: int64(src, [srcs.length, Ts]), valid: int64(valid, [srcs.length])});
        const cross = [];
        for (let l = 0; l < this.meta.n_layer; l++) cross.push(r[`cross_k.${l}`], r[`cross_v.${l}`]);
        return {cross, valid};
    }

    emptyPast(rows) {
        const {n_layer, n_head, d_k} = this.meta;
        return Array.from({length: 2 * n_layer}, () => new ort.Tensor('float32', new Float32Array(0), [rows, n_head, 0, d_k]));
    }

    // one step for every row -> {logits (rows x V Float32Array), present}
    async step(toks, pos, st) {
        const feeds = {tok: int64(toks, [toks.length, 1]), pos: int64([pos], [1]), valid: int64(st.valid, [toks.length])};
        for (let l = 0; l < this.meta.n_layer; l++) {
            feeds[`cross_k.${l}`] = st.cross[2 * l];
            feeds[`cross_v.${l}`] = st.cross[2 * l + 1];
            feeds[`past_k.${l}`] = st.past[2 * l];
            feeds[`past_v.${l}`] = st.past[2 * l + 1];
        }
        const r = await this.dec.run(feeds);
        const present = [];
        for (let l = 0; l < this.meta.n_layer; l++) present.push(r[`present_k.${l}`], r[`present_v.${l}`]);
        return {logits: r.logits.data, present};
    }

    reorder(st, idx) {
        st.cross = st.cross.map((t) => gatherRows(t, idx));
        st.past = st.past.map((t) => gatherRows(t, idx));
        st.valid = gatherInts(st.valid, idx);
    }

    async greedy(srcs, o) {
        const V = this.meta.tgt_vocab, {bos, eos} = this.meta, nb = srcs.length;
        const st = await this.encode(srcs, o.maxSrc);
        st.past = this.emptyPast(nb);
        const out = srcs.map(() => []), done = new Array(nb).fill(null);
        let rows = srcs.map((_, i) => i), prev = new Array(nb).fill(bos);
        for (let step = 0; rows.length && step <= o.maxOutput; step++) {
            const {logits, present} = await this.step(prev, step, st);
            st.past = present;
            const keep = [], next = [];
            rows.forEach((s, r) => {
                const x = logits.subarray(r * V, (r + 1) * V);
                for (const b of this.banned) x[b] = -Infinity;
                let best = 0;
                for (let v = 1; v < V; v++) if (x[v] > x[best]) best = v;
                if (best === eos || step === o.maxOutput) done[s] = out[s];
                else { out[s].push(best); keep.push(r); next.push(best); }
            });
            if (keep.length && keep.length < rows.length) this.reorder(st, keep);
            rows = keep.map((r) => rows[r]);
            prev = next;
        }
        return done;
    }

    // search.c's beam_batch: K rows per sentence (only the first live at step 0), each step the best 2K candidates
    // of a sentence's rows (group_candidates), an <eos> among the top K finishes a hypothesis (offer), the best K
    // others continue; a sentence stops with K finished or none continuing; at step maxOutput every live beam
    // ends as it is, scored with <eos> next.
    async beamSearch(srcs, o) {
        const K = o.beam, V = this.meta.tgt_vocab, {bos, eos} = this.meta, nb = srcs.length;
        const st = await this.encode(srcs, o.maxSrc);
        const expand = Array.from({length: nb * K}, (_, r) => Math.floor(r / K));
        st.cross = st.cross.map((t) => gatherRows(t, expand));
        st.valid = gatherInts(st.valid, expand);
        st.past = this.emptyPast(nb * K);
        let score = Array.from({length: nb * K}, (_, r) => (r % K ? -Infinity : 0));
        let hist = Array.from({length: nb * K}, () => []);
        let sents = srcs.map((_, i) => i);
        const best = srcs.map(() => ({score: -Infinity, toks: [], n: 0})), nFin = new Array(nb).fill(0);
        // the finished list with one slot (tfm translate prints the best): a later hypothesis replaces the kept
        // one only with a strictly higher score
        const offer = (s, ns, toks) => {
            if (best[s].n === 0 || ns > best[s].score) best[s] = {score: ns, toks, n: 1};
        };
        let prev = new Array(nb * K).fill(bos);
        for (let step = 0; sents.length && step <= o.maxOutput; step++) {
            const {logits, present} = await this.step(prev, step, st);
            st.past = present;
            if (step === o.maxOutput) {   // the live beams end here, scored as if <eos> came next
                sents.forEach((s, g) => {
                    for (let r = g * K; r < g * K + K; r++) {
                        if (score[r] === -Infinity) continue;
                        const x = logits.subarray(r * V, (r + 1) * V);
                        const sc = f32(score[r] + f32(x[eos] - rowLse(x)));
                        offer(s, f32(sc / lengthPenalty(o.maxOutput + 1, o.alpha)), hist[r]);
                    }
                });
                break;
            }
            const idx = [], newScore = [], newHist = [], newSents = [];
            sents.forEach((s, g) => {
                const top = [];   // the best 2K, sorted by score; an equal score goes after those already kept
                for (let r = g * K; r < g * K + K; r++) {
                    if (score[r] === -Infinity) continue;
                    const x = logits.subarray(r * V, (r + 1) * V);
                    const lse = rowLse(x);
                    for (const b of this.banned) x[b] = -Infinity;   // after the normaliser, as tfm
                    for (let v = 0; v < V; v++) {
                        const sc = f32(score[r] + f32(x[v] - lse));
                        if (top.length === 2 * K && sc <= top[top.length - 1].sc) continue;
                        if (top.length === 2 * K) top.pop();
                        let j = top.length;
                        while (j > 0 && top[j - 1].sc < sc) j--;
                        top.splice(j, 0, {sc, r, tok: v});
                    }
                }
                const live = [];
                for (let j = 0; j < top.length && live.length < K; j++) {
                    const c = top[j];
                    if (c.tok === eos) {
                        if (j >= K) continue;   // only top-K candidates may finish
                        offer(s, f32(c.sc / lengthPenalty(step + 1, o.alpha)), hist[c.r]);
                        nFin[s]++;
                        continue;
                    }
                    live.push({r: c.r, sc: c.sc, h: [...hist[c.r], c.tok]});
                }
                if (nFin[s] >= K || !live.length) return;   // this sentence's rows dropped
                while (live.length < K) live.push({r: live[0].r, sc: -Infinity, h: live[0].h});   // dead beams
                for (const c of live) { idx.push(c.r); newScore.push(c.sc); newHist.push(c.h); }
                newSents.push(s);
            });
            if (!idx.length) break;
            this.reorder(st, idx);
            score = newScore; hist = newHist; sents = newSents;
            prev = hist.map((h) => h[h.length - 1]);
        }
        return best.map((b) => b.toks);
    }
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const meta = JSON.parse(fs.readFileSync(path.join(o.dir, 'model.json'), 'utf8'));
    // tfm translate's defaults and bounds (cli translate, tfm_search_nbest_ensemble)
    if (o.alpha < 0) o.alpha = meta.decode_alpha ?? 0;
    o.beam = Math.max(1, o.beam);
    o.maxOutput = Math.max(1, o.maxOutput);
    o.maxSrc = Math.max(2, o.maxSrc);
    if (meta.max_len > 0) {   // the position table bounds both sides
        o.maxSrc = Math.min(o.maxSrc, meta.max_len);
        o.maxOutput = Math.min(o.maxOutput, meta.max_len - 1);
    }
    const srcs = fs.readFileSync(o.ids, 'utf8').split('\n');
    if (srcs.length && srcs[srcs.length - 1] === '') srcs.pop();
    const ids = srcs.map((l) => (l.trim() ? l.trim().split(/\s+/).map(Number) : []));
    const so = {graphOptimizationLevel: o.opt, intraOpNumThreads: o.intra, interOpNumThreads: o.inter, executionMode: o.mode};
    const eng = new Engine(meta, await ort.InferenceSession.create(path.join(o.dir, 'encoder.onnx'), so),
                           await ort.InferenceSession.create(path.join(o.dir, 'decoder.onnx'), so));
    // longest first, then by index (tfm's order), batches of o.batch
    const order = ids.map((_, i) => i).sort((a, b) => ids[b].length - ids[a].length || a - b);
    const out = new Array(ids.length);
    const t0 = process.hrtime.bigint();
    for (let b = 0; b < order.length; b += o.batch) {
        const sent = order.slice(b, b + o.batch);
        const res = o.beam === 1 ? await eng.greedy(sent.map((i) => ids[i]), o) : await eng.beamSearch(sent.map((i) => ids[i]), o);
        sent.forEach((s, i) => { out[s] = res[i]; });
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    fs.writeFileSync(o.out, out.map((t) => t.join(' ')).join('\n') + (out.length ? '\n' : ''));
    console.error(`ort: ${ids.length} sentences in ${secs.toFixed(3)} s (decode only: encoder + steps + search; sessions ` +
                  `and files not counted) beam ${o.beam} batch ${o.batch} opt ${o.opt} intra ${o.intra} inter ${o.inter} ${o.mode}`);
}

main().catch((e) => { console.error(`ort_decode: ${e.message}`); process.exit(1); });
