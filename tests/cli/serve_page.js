// The page of tfm serve (GET /) in a real browser: Debian's headless Chromium, driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4; no npm package).
// It loads the page, types a sentence into the translation box, reads the translation from the DOM (it must
// be tfm translate's), shows the attention heatmap (its size must be /attention's), generates greedily in the
// generation box (the streamed text must be tfm generate's), and writes a screenshot.
//   node serve_page.js PORT DIR SCREENSHOT.png      (DIR: src.txt, cli.txt, gen.txt of serve.sh)
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

const [port, dir, shot] = process.argv.slice(2);
const base = "http://127.0.0.1:" + port;
const read = (f) => fs.readFileSync(path.join(dir, f), "utf8");
const src = read("src.txt").split("\n"), cli = read("cli.txt").split("\n");
const greedy = read("gen.txt").slice("ROMEO:".length, -1);
let failures = 0;
const check = (name, ok, why) => {
  if (ok) console.log("PASS serve page: " + name);
  else failures++, console.log("FAIL serve page: " + name + ": " + String(why).slice(0, 400));
};

const profile = fs.mkdtempSync(path.join(dir, "chromium-"));
const browser = spawn("/usr/bin/chromium", [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-proxy-server", "--window-size=1200,1000",
  "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank"],
  { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true });   // its own process group: its helpers too
const exited = new Promise((r) => browser.on("exit", r));
const killAll = () => { try { process.kill(-browser.pid, "SIGKILL"); } catch (e) { /* already gone */ } };
let stderr = "";
browser.stderr.on("data", (d) => { stderr += d; });

// ---- the protocol: requests by id, replies matched back
let nextId = 1, inbox = "";
const waiting = new Map();
browser.stdio[4].on("data", (chunk) => {
  inbox += chunk.toString("utf8");
  let cut;
  while ((cut = inbox.indexOf("\0")) >= 0) {
    const msg = JSON.parse(inbox.slice(0, cut));
    inbox = inbox.slice(cut + 1);
    if (msg.id && waiting.has(msg.id)) {
      const w = waiting.get(msg.id);
      waiting.delete(msg.id);
      msg.error ? w.reject(new Error(msg.error.message)) : w.resolve(msg.result);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  browser.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let session;
async function evaluate(expr) {
  const r = await send("Runtime.evaluate", { expression: expr, returnByValue: true, awaitPromise: true }, session);
  if (r.exceptionDetails) throw new Error(r.exceptionDetails.text + " in " + expr);
  return r.result.value;
}
async function until(expr, what, ms = 30000) {
  const t0 = Date.now();
  for (;;) {
    const v = await evaluate(expr);
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error("timed out waiting for " + what);
    await sleep(50);
  }
}

async function main() {
  const { targetInfos } = await send("Target.getTargets");
  let page = targetInfos.find((t) => t.type === "page");
  if (!page) page = { targetId: (await send("Target.createTarget", { url: "about:blank" })).targetId };
  session = (await send("Target.attachToTarget", { targetId: page.targetId, flatten: true })).sessionId;
  await send("Page.enable", {}, session);
  await send("Page.navigate", { url: base + "/" }, session);
  await until("document.body && document.body.dataset.ready === '1'", "the page to load the languages and models");
  const langs = await evaluate("[$('src-lang').value, $('tgt-lang').value, $('model').value].join(' ')");
  check("the page loads, with the language pair and the model from the server", langs === "en fr lm", langs);

  // translation: typed (Input.insertText, as a keyboard would), translated as you type
  await evaluate("$('source').focus()");
  await send("Input.insertText", { text: src[3] }, session);
  await until("$('translation').dataset.state === 'done'", "the translation");
  const got = await evaluate("$('translation').textContent");
  check("a typed sentence is translated; the DOM holds tfm translate's output", got === cli[3],
        JSON.stringify([src[3], got, cli[3]]));

  // the attention heatmap: one row per target token, one column per source token
  await evaluate("$('show-attention').click()");
  await until("$('heatmap').dataset.state === 'done'", "the heatmap");
  const shape = await evaluate("[$('heatmap').querySelectorAll('tbody tr').length, " +
                               "$('heatmap').querySelectorAll('tbody tr:first-child td').length]");
  const a = await (await fetch(base + "/attention", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ q: src[3], source: "en", target: "fr" }) })).json();
  check("the attention heatmap has /attention's shape (" + shape.join(" x ") + ")",
        shape[0] === a.target_tokens.length && shape[1] === a.source_tokens.length, JSON.stringify([shape, a]));

  // generation: the streamed text appears in the page
  await evaluate("$('prompt').value = 'ROMEO:'; $('max-tokens').value = '40'; $('temperature').value = '0'; " +
                 "$('generate').click()");
  await until("$('generation').dataset.state === 'done'", "the generation");
  const gen = await evaluate("$('generated').textContent");
  const status = await evaluate("$('gen-status').textContent");
  check("the generation box streams tfm generate --temperature 0's text", gen === greedy && status === "40 tokens (length)",
        JSON.stringify([gen, greedy, status]));

  const png = await send("Page.captureScreenshot", { format: "png" }, session);
  fs.writeFileSync(shot, Buffer.from(png.data, "base64"));
  const size = fs.statSync(shot).size;
  check("screenshot written (" + shot + ", " + size + " bytes)", size > 1000, size);
}

const guard = setTimeout(() => { console.log("FAIL serve page: timed out"); killAll(); process.exit(1); }, 100000);
main().catch((e) => { failures++; console.log("FAIL serve page: " + e.message + " | chromium: " + stderr.slice(-300)); })
  .finally(async () => {
    clearTimeout(guard);
    try { await Promise.race([send("Browser.close"), sleep(3000)]); } catch (e) { /* closing anyway */ }
    await Promise.race([exited, sleep(3000)]);
    killAll();
    await sleep(200);
    try { fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }); } catch (e) { /* serve.sh's temp dir goes anyway */ }
    process.exit(failures ? 1 : 0);
  });
