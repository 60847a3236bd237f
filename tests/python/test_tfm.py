"""The tfm Python package against the tfm CLI (run by tests/cli/python.sh; prints "PASS name" / "FAIL name: why").

Usage: TFM=build/tfm TFM_LIBRARY=build/libtfm.so PYTHONPATH=python python3 tests/python/test_tfm.py
Models are trained here on a toy task made from data/demo.txt (a few seconds): a BPE translator (train_mt,
checked byte for byte against tfm train-mt) and a character GPT (train_lm, against tfm train-lm). The
translations, generations and scores are then compared with what the CLI prints for the same settings.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

import tfm
from tfm import _lib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TFM = os.path.abspath(os.environ.get("TFM", os.path.join(ROOT, "build", "tfm")))
TMP = tempfile.mkdtemp(prefix="tfm-py-")
failures = 0


def check(name: str, ok: bool, why: str = "") -> None:
    global failures
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {why}"[:1500], flush=True)


def run(name: str, fn) -> None:
    """Run one group of checks; an exception is a FAIL of the group, not the end of the script."""
    try:
        fn()
    except Exception:
        check(name, False, "raised " + traceback.format_exc().strip().replace("\n", " | "))


def cli(*args, stdin: str | None = None, cwd: str = TMP) -> str:
    p = subprocess.run([TFM, *args], input=stdin, capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        raise RuntimeError(f"tfm {' '.join(args)}: exit {p.returncode}: {p.stderr[-500:]}")
    return p.stdout


def tmp(name: str) -> str:
    return os.path.join(TMP, name)


# ---------------------------------------------------------------------------------------------- data
WORDS = ("red blue green black white small big old new cat dog bird fish tree house river stone road sun moon "
         "runs sees eats likes finds").split()


def toy_corpus() -> None:
    """A toy translation task: random sentences of 3..7 words of a 25-word vocabulary (a fixed seed), the
    target the same words in reverse order. A tiny Transformer learns it within seconds."""
    import random
    rng = random.Random(1)
    src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(900)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    with open(tmp("train.src"), "w") as f:
        f.write("\n".join(src[:800]) + "\n")
    with open(tmp("train.tgt"), "w") as f:
        f.write("\n".join(tgt[:800]) + "\n")
    with open(tmp("test.src"), "w") as f:   # held-out lines, one empty line and one long line included
        f.write("\n".join(src[800:830] + ["", " ".join(src[830:836])]) + "\n")
    with open(tmp("train.tsv"), "w") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in zip(src[:300], tgt[:300])))
    with open(tmp("valid.src"), "w") as f:
        f.write("\n".join(src[840:870]) + "\n")
    with open(tmp("valid.tgt"), "w") as f:
        f.write("\n".join(tgt[840:870]) + "\n")
    with open(tmp("prefix.txt"), "w") as f:
        f.write("\n".join(("green" if i % 3 == 0 else "") for i in range(32)) + "\n")


MT = dict(preset="d2l", tokenizer="bpe", vocab_size=360, d_model=32, n_head=4, n_layer=1, ffn=64, max_len=20, dropout=0.0,
          schedule="noam", lr=0.5, warmup=50, epochs=6, batch_size=16, threads=1, log_every=0)
MT_FLAGS = ["--preset", "d2l", "--tokenizer", "bpe", "--vocab-size", "360", "--d-model", "32", "--n-head", "4",
            "--n-layer", "1", "--ffn", "64", "--max-len", "20", "--dropout", "0", "--schedule", "noam", "--lr", "0.5",
            "--warmup", "50", "--epochs", "6", "--batch-size", "16", "--threads", "1", "--log-every", "0"]
LM = dict(iters=60, eval_every=30, eval_iters=2, n_layer=1, n_embd=32, n_head=2, block_size=32, batch_size=8,
          threads=1)
LM_FLAGS = ["--iters", "60", "--eval-every", "30", "--eval-iters", "2", "--n-layer", "1", "--n-embd", "32",
            "--n-head", "2", "--block-size", "32", "--batch-size", "8", "--threads", "1", "--log-every", "0"]
DEMO = os.path.join(ROOT, "data", "demo.txt")


def same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


# ---------------------------------------------------------------------------------------------- checks
def t_layout() -> None:
    """Every mirrored struct has the C compiler's size and field offsets (tfm/_lib.py against include/tfm)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        print("SKIP python_struct_layout: no C compiler")
        return
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "tfm/tfm.h"', '#include "tfm/translator.h"',
             '#include "tfm/generator.h"', '#include "tfm/bpe.h"', '#include "tfm/train.h"', '#include "tfm/run.h"',
             "int main(void) {"]
    want = []
    for cname, cls in _lib.STRUCTS.items():
        lines.append(f'printf("%zu\\n", sizeof({cname}));')
        want.append((f"sizeof {cname}", ctypes_size(cls), False))
        for fname, *_ in cls._fields_:
            if fname.startswith("_"):
                continue
            lines.append(f'printf("%zu\\n", offsetof({cname}, {fname}));')
            want.append((f"{cname}.{fname}", getattr(cls, fname).offset, False))
    lines.append("return 0; }")
    with open(tmp("layout.c"), "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-I", os.path.join(ROOT, "include"), tmp("layout.c"), "-o",
                    tmp("layout")], check=True, capture_output=True)
    got = subprocess.run([tmp("layout")], check=True, capture_output=True, text=True).stdout.split()
    bad = []
    for (what, py, at_least), c in zip(want, got):
        c = int(c)
        if (py < c) if at_least else (py != c):
            bad.append(f"{what}: C {c}, Python {py}")
    check(f"python_struct_layout ({len(want)} sizes and offsets of {len(_lib.STRUCTS)} structs)",
          not bad and len(got) == len(want), "; ".join(bad))


def t_no_model_mirrors() -> None:
    """The models are opaque to Python: no ctypes mirror of tfm_bpe, tfm_gpt, tfm_mt_model (or what they hold),
    and the functions returning them are declared to return a plain pointer (read through accessors)."""
    import ctypes
    models = {"tfm_bpe", "tfm_gpt", "tfm_gpt_config", "tfm_mt_model", "tfm_vocab", "tfm_char_vocab", "tfm_params"}
    mirrored = sorted(models & set(_lib.STRUCTS))
    typed = sorted(n for n in ("tfm_translator_model", "tfm_generator_model", "tfm_mt_model_bpe", "tfm_bpe_new")
                   if _lib._FUNCTIONS[n][0] is not ctypes.c_void_p)
    check("python_no_model_struct_mirrors (tfm_bpe, tfm_gpt, tfm_mt_model read through accessors)",
          not mirrored and not typed, f"mirrored: {mirrored}, typed returns: {typed}")


def ctypes_size(cls) -> int:
    import ctypes
    return ctypes.sizeof(cls)


def t_exports() -> None:
    """Every function the package calls is declared with TFM_API in include/tfm (so libtfm.so built with
    -fvisibility=hidden still exports it) and is in libtfm.so's dynamic symbol table."""
    decl = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "include", "tfm"))):
        with open(os.path.join(ROOT, "include", "tfm", name), encoding="utf-8") as f:
            for line in f:
                s = line.strip()
                if s.startswith(("*", "/", "#")):
                    continue
                m = re.match(r"^(TFM_API\s+)?(?:const\s+)?(?:struct\s+)?[A-Za-z_]\w*[\s*]+(tfm_\w+)\s*\(", s)
                if m:
                    decl[m.group(2)] = decl.get(m.group(2), False) or bool(m.group(1))
    missing = [n for n in _lib._FUNCTIONS if not decl.get(n)]
    check(f"python_uses_only_tfm_api ({len(_lib._FUNCTIONS)} functions)", not missing,
          "not declared with TFM_API: " + " ".join(missing))
    nm = shutil.which("nm")
    if nm:
        out = subprocess.run([nm, "-D", "--defined-only", tfm.library_path], capture_output=True, text=True).stdout
        syms = set(re.findall(r" T (\w+)", out))
        absent = [n for n in _lib._FUNCTIONS if n not in syms]
        check("python_functions_exported_by_libtfm", not absent, "not in nm -D: " + " ".join(absent))


def t_version() -> None:
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        pv = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    check("python_version_matches_library", tfm.__version__ == tfm.library_version == pv,
          f"package {tfm.__version__}, pyproject {pv}, libtfm {tfm.library_version}")


def t_train_mt() -> None:
    r = tfm.train_mt(tmp("py_mt.tfm"), src=tmp("train.src"), tgt=tmp("train.tgt"), **MT)
    cli("train-mt", "--src", tmp("train.src"), "--tgt", tmp("train.tgt"), "--out", tmp("cli_mt.tfm"), *MT_FLAGS)
    check("python_train_mt_equals_cli (same checkpoint bytes)", same_file(tmp("py_mt.tfm"), tmp("cli_mt.tfm")),
          "checkpoints differ")
    check("python_train_mt_result", r.step == r.total == r.steps and r.checkpoint == tmp("py_mt.tfm"), str(r))
    # a run stopped by max_steps and resumed ends where the whole run ends, byte for byte
    a = tfm.train_mt(tmp("py_mt_part.tfm"), src=tmp("train.src"), tgt=tmp("train.tgt"), max_steps=37, **MT)
    b = tfm.train_mt(resume=tmp("py_mt_part.tfm"), src=tmp("train.src"), tgt=tmp("train.tgt"), threads=1)
    check("python_train_mt_resume_equals_whole_run", a.step == 37 and b.step == r.step
          and same_file(tmp("py_mt_part.tfm"), tmp("py_mt.tfm")), f"{a} {b}")
    # word vocabularies from a TSV, validation files, a GRU encoder-decoder
    seen, vals, said = [], [], []
    w = tfm.train_mt(tmp("py_rnn.tfm"), tsv=tmp("train.tsv"), valid_src=tmp("valid.src"), valid_tgt=tmp("valid.tgt"),
                     arch="rnn", preprocess="space", min_freq=1, epochs=2, batch_size=32, threads=1, progress=seen.append,
                     on_validation=vals.append, on_message=said.append)
    cli("train-mt", "--tsv", tmp("train.tsv"), "--valid-src", tmp("valid.src"), "--valid-tgt", tmp("valid.tgt"),
        "--out", tmp("cli_rnn.tfm"), "--arch", "rnn", "--preprocess", "space", "--min-freq", "1", "--epochs", "2",
        "--batch-size", "32", "--threads", "1")
    ends = [p for p in seen if p.end_of_epoch]
    check("python_train_mt_tsv_word_rnn_equals_cli", same_file(tmp("py_rnn.tfm"), tmp("cli_rnn.tfm")), "differ")
    check("python_train_mt_valid_loss_reported", len(ends) == 2 and all(p.valid_loss > 0 for p in ends)
          and w.val_loss == ends[-1].valid_loss, f"{ends} {w}")
    check("python_train_mt_bleu_validations (one an epoch, as the CLI's valid lines)", len(vals) == 2
          and [v.step for v in vals] == [p.step for p in ends] and all(0 <= v.bleu <= 100 and v.wrote is None
                                                                       for v in vals)
          and vals[-1].best_bleu == max(v.bleu for v in vals) and str(vals[0]).startswith("valid at step "), str(vals))
    check("python_train_mt_messages (the run's configuration line)",
          any(m.startswith("train-mt config: --tsv ") for m in said), str(said))
    try:
        tfm.train_mt(tmp("x.tfm"), tsv=tmp("train.tsv"), d_modle=8)
        check("python_train_mt_unknown_option", False, "no error")
    except TypeError as e:
        check("python_train_mt_unknown_option", "d_modle" in str(e), str(e))
    try:
        tfm.train_mt(resume=tmp("py_mt.tfm"), src=tmp("train.src"), tgt=tmp("train.tgt"), d_model=64)
        check("python_train_mt_resume_refuses_a_change", False, "no error")
    except tfm.ArgumentError as e:   # the library's resume rule, naming both values as the CLI does
        check("python_train_mt_resume_refuses_a_change", "--d-model 64" in str(e) and "--d-model 32" in str(e), str(e))
    try:   # a new run never replaces an earlier run's checkpoint unless overwrite=True (tests/cli/mt_errors.sh)
        tfm.train_mt(tmp("py_mt.tfm"), src=tmp("train.src"), tgt=tmp("train.tgt"), **MT)
        check("python_train_mt_refuses_an_existing_out", False, "no error")
    except tfm.ArgumentError as e:
        check("python_train_mt_refuses_an_existing_out (tfm.ArgumentError naming --resume and --overwrite)",
              "py_mt.tfm exists" in str(e) and "--resume" in str(e) and "--overwrite" in str(e), str(e))


def nbest_lines(results, with_alignment=False) -> list:
    out = []
    for i, r in enumerate(results):
        for k, (h, s) in enumerate(zip(r.hypotheses, r.scores)):
            line = f"{i} ||| {h} ||| {s:.6f}"
            if with_alignment and k == 0 and r.attention:   # none for an empty line
                line += " ||| " + alignment(r)
            out.append(line)
    return out


def alignment(r) -> str:
    """Marian's hard alignment from the attention matrix (as tfm translate --alignment prints it)."""
    a, ts = r.attention[0], len(r.source_tokens)
    pairs = []
    for i in range(len(r.target_tokens) - 1):
        best = 0
        for j in range(1, ts - 1):
            if a[i][j] > a[i][best]:
                best = j
        if ts > 1:
            pairs.append(f"{best}-{i}")
    return " ".join(pairs)


def t_translate() -> None:
    model = tmp("py_mt.tfm")
    src = open(tmp("test.src")).read().splitlines()
    text = "\n".join(src) + "\n"
    tr = tfm.Translator(model, threads=1)
    greedy = tr.translate_batch(src)
    want = cli("translate", model, stdin=text).splitlines()
    got = [r.hypotheses[0] for r in greedy]
    check(f"python_translate_greedy_equals_cli ({len(src)} lines)", got == want, f"{got[:3]} vs {want[:3]}")
    check("python_translate_empty_line", got[len(src) - 2] == "", repr(got[len(src) - 2]))
    check("python_translate_defaults_are_the_models", tr.default_beam_size == 1 and tr.default_length_penalty == 0
          and [r.hypotheses for r in tr.translate_batch(src, beam_size=1, length_penalty=0)]
          == [r.hypotheses for r in greedy], "beam_size=None differs from the model's stored settings (greedy)")
    beam = tr.translate_batch(src, beam_size=4, length_penalty=1.0)
    want = cli("translate", model, "--beam", "4", "--alpha", "1", stdin=text).splitlines()
    got = [r.hypotheses[0] for r in beam]
    check("python_translate_beam_equals_cli (beam 4, alpha 1)", got == want, f"{got[:3]} vs {want[:3]}")
    check("python_translate_beam_differs_from_greedy (the check can fail)", got != [r.hypotheses[0] for r in greedy],
          "identical outputs: the comparison above does not tell beam from greedy")
    nb = tr.translate_batch(src, beam_size=4, num_hypotheses=3, return_attention=True)
    want = cli("translate", model, "--beam", "4", "--n-best", "3", "--alignment", stdin=text).splitlines()
    got = nbest_lines(nb, with_alignment=True)
    check("python_translate_nbest_scores_alignment_equal_cli (--n-best 3 --alignment)", got == want,
          f"{got[:4]} vs {want[:4]}")
    check("python_translate_nbest_sorted", all(r.scores == sorted(r.scores, reverse=True) and
                                               len(r.hypotheses) == len(r.scores) <= 3 for r in nb), "")
    sc = tr.translate_batch(src, return_scores=True)
    want = cli("translate", model, "--scores", stdin=text).splitlines()
    got = [f"{r.hypotheses[0]} ||| {r.scores[0]:.6f}" for r in sc]
    check("python_translate_scores_equal_cli (--scores)", got == want, f"{got[:2]} vs {want[:2]}")
    r0 = nb[0]
    rows_ok = all(abs(sum(row) - 1) < 1e-4 for row in r0.attention[0])
    check("python_attention_shape_and_rows", len(r0.attention) == 1 and len(r0.attention[0]) == len(r0.target_tokens)
          and all(len(row) == len(r0.source_tokens) for row in r0.attention[0]) and rows_ok
          and r0.source_tokens[-1] == "<eos>" and r0.target_tokens[-1] == "<eos>",
          f"{len(r0.attention[0])}x{len(r0.attention[0][0])} for {r0.target_tokens} x {r0.source_tokens}")
    prefixes = open(tmp("prefix.txt")).read().splitlines()[:len(src)]
    pre = tr.translate_batch(src, target_prefix=prefixes)
    want = cli("translate", model, "--prefix-file", tmp("prefix.txt"), stdin=text).splitlines()
    got = [r.hypotheses[0] for r in pre]
    check("python_translate_target_prefix_equals_cli (--prefix-file)", got == want, f"{got[:3]} vs {want[:3]}")
    check("python_translate_prefix_starts_the_translation",
          all(h.startswith("green") for h, p, x in zip(got, prefixes, src) if p and x), str(got[:4]))
    ens = tfm.Translator([model, model], threads=1)
    two = ens.translate_batch(src, beam_size=4, num_hypotheses=3)
    want = cli("translate", model, model, "--beam", "4", "--n-best", "3", stdin=text).splitlines()
    check("python_translate_ensemble_of_two_copies_equals_cli_and_the_model (--n-best 3)",
          nbest_lines(two) == want and nbest_lines(two) == nbest_lines(tr.translate_batch(src, beam_size=4,
                                                                                         num_hypotheses=3)),
          f"{nbest_lines(two)[:3]} vs {want[:3]}")
    try:
        ens.translate_batch(src[:1], return_attention=True)
        refused = "accepted"
    except tfm.Error as e:
        refused = str(e)
    check("python_translate_ensemble_refuses_return_attention", "not supported for an ensemble" in refused, refused)
    ens.close()
    short = tr.translate_batch(src, max_input_length=5)
    want = cli("translate", model, "--max-src", "5", stdin=text).splitlines()
    check("python_translate_max_input_length_equals_cli (--max-src 5)", [r.hypotheses[0] for r in short] == want, "")
    cut = [r.source_truncated for r in short]
    n_tok = [len(tr.tokenizer.encode(s)) + 1 for s in src]
    check("python_translate_source_truncated", cut == [max(0, n - 5) for n in n_tok], f"{cut} for {n_tok}")
    # translate_iterable: lazy (reads one batch ahead at most), in order, same results
    consumed = []

    def lines():
        for s in src:
            consumed.append(s)
            yield s
    it = tr.translate_iterable(lines(), batch_size=4)
    first = next(it)
    lazy = len(consumed) == 4
    rest = [first] + list(it)
    check("python_translate_iterable_lazy_in_order", lazy and [r.hypotheses for r in rest]
          == [r.hypotheses for r in greedy], f"consumed {len(consumed)} before the first result")
    # the default read-ahead: 16 batches per worker (16 x 1 lines here), the same results, still lazy
    consumed.clear()
    tr4 = tfm.Translator(model, threads=1, max_batch_size=1)
    it = tr4.translate_iterable(lines())
    first = next(it)
    ahead = len(consumed)
    rest = [first] + list(it)
    check("python_translate_iterable_default_reads_16_batches_ahead",
          ahead == min(16, len(src)) and [r.hypotheses for r in rest] == [r.hypotheses for r in greedy],
          f"consumed {ahead} of {len(src)} before the first result")
    tr4.close()
    # two Python threads translating at once with one Translator give the results of one thread
    tr2 = tfm.Translator(model, threads=1, max_batch_size=4)
    ref = [r.hypotheses for r in tr2.translate_batch(src, beam_size=3)]
    out, errs = [None, None], []
    barrier = threading.Barrier(2)

    def work(i):
        try:
            barrier.wait()
            out[i] = [[r.hypotheses for r in tr2.translate_batch(src, beam_size=3)] for _ in range(3)]
        except Exception as e:   # pragma: no cover - reported below
            errs.append(repr(e))
    ths = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    import ctypes
    py_api = [n for n in _lib._FUNCTIONS if getattr(_lib.lib, n)._flags_ & ctypes._FUNCFLAG_PYTHONAPI]
    check("python_gil_released_in_calls (ctypes CDLL functions, none PyDLL)", not py_api
          and not isinstance(_lib.lib, ctypes.PyDLL), " ".join(py_api))
    check("python_two_threads_translate_at_once", not errs and all(o == [ref] * 3 for o in out), "; ".join(errs))
    # errors: a bad option names it, bad text is a DataError
    try:
        tr.translate_batch(src, num_hypotheses=2)
        check("python_translate_bad_option_raises", False, "no exception")
    except tfm.Error as e:
        check("python_translate_bad_option_raises", "num_hypotheses" in str(e) and e.kind == "other", str(e))
    try:
        tr.translate_batch(["ok", "bad \udcff"])
        check("python_translate_invalid_utf8_is_data_error", False, "no exception")
    except tfm.DataError as e:
        check("python_translate_invalid_utf8_is_data_error", "source[1]" in str(e) and isinstance(e, ValueError), str(e))
    tok = tr.tokenizer
    tok2 = tfm.BPETokenizer(model)
    ids = tok.encode(src[0])
    check("python_bpe_tokenizer_of_a_checkpoint", ids == tok2.encode(src[0]) and tok.decode(ids) == src[0]
          and tok.vocab_size == 360 and tok.encode(src[0], out_type=str) == [tok.id_to_piece(i) for i in ids],
          f"{ids} {tok2.encode(src[0])}")
    tr.close()
    for what, call in (("translate", lambda: tr.translate_batch(src)), ("its tokenizer", lambda: tok.encode("x"))):
        try:
            call()
            check(f"python_closed_translator_raises ({what})", False, "no exception")
        except ValueError:
            check(f"python_closed_translator_raises ({what})", True)


def t_bad_paths() -> None:
    missing = tmp("no/such/model.tfm")
    for cls in (tfm.Translator, tfm.Generator):
        try:
            cls(missing)
            check(f"python_{cls.__name__}_bad_path_raises", False, "no exception")
        except tfm.IOError as e:
            check(f"python_{cls.__name__}_bad_path_raises (tfm.IOError naming the file)",
                  missing in str(e) and e.kind == "io" and isinstance(e, OSError), str(e))
    try:
        tfm.Translator(DEMO)
        check("python_not_a_checkpoint_raises", False, "no exception")
    except tfm.DataError as e:
        check("python_not_a_checkpoint_raises (tfm.DataError naming the file)", DEMO in str(e), str(e))
    try:
        tfm.Translator(tmp("py_lm.tfm"))
        check("python_lm_checkpoint_to_translator_raises", False, "no exception")
    except tfm.Error as e:
        check("python_lm_checkpoint_to_translator_raises", "language-model" in str(e), str(e))
    try:
        tfm.train_lm(tmp("no_such.txt"), tmp("x.tfm"), **LM)
        check("python_train_lm_missing_data_raises", False, "no exception")
    except tfm.IOError as e:
        check("python_train_lm_missing_data_raises", "no_such.txt" in str(e), str(e))
    check("python_failed_runs_write_nothing", not os.path.exists(tmp("x.tfm")), "x.tfm written")


def t_train_lm() -> None:
    r = tfm.train_lm(DEMO, tmp("py_lm.tfm"), **LM)
    cli("train-lm", "--data", DEMO, "--out", tmp("cli_lm.tfm"), *LM_FLAGS)
    check("python_train_lm_equals_cli (same checkpoint bytes)", same_file(tmp("py_lm.tfm"), tmp("cli_lm.tfm")),
          "checkpoints differ")
    try:   # a new run never replaces an earlier run's checkpoint unless overwrite=True (tests/cli/lm.sh)
        tfm.train_lm(DEMO, tmp("py_lm.tfm"), **LM)
        check("python_train_lm_refuses_an_existing_out", False, "no error")
    except tfm.ArgumentError as e:
        check("python_train_lm_refuses_an_existing_out (tfm.ArgumentError naming --resume and --overwrite)",
              "py_lm.tfm exists" in str(e) and "--resume" in str(e) and "--overwrite" in str(e), str(e))
    tfm.train_lm(DEMO, tmp("py_lm.tfm"), overwrite=True, **LM)
    check("python_train_lm_overwrite (the run again over its checkpoint: the CLI's bytes, overwrite not stored)",
          same_file(tmp("py_lm.tfm"), tmp("cli_lm.tfm")), "checkpoints differ")
    seen = []
    tfm.train_lm(DEMO, tmp("py_lm2.tfm"), progress=seen.append, **LM)
    evals = [p.step for p in seen if p.eval]
    check("python_train_lm_progress", len(seen) == 62 and evals == [30, 60] and seen[-1].val_loss == r.val_loss,
          f"{len(seen)} reports, evals at {evals}")

    def boom(p):
        if p.step == 5:
            raise RuntimeError("stop here")
    try:
        tfm.train_lm(DEMO, tmp("py_lm3.tfm"), progress=boom, **LM)
        check("python_train_lm_callback_error_stops", False, "no exception")
    except RuntimeError as e:
        st = checkpoint_step(tmp("py_lm3.tfm"))
        check("python_train_lm_callback_error_stops (re-raised, checkpoint at that step)",
              str(e) == "stop here" and st == 5, f"{e}, step {st}")


def checkpoint_step(path: str) -> int:
    out = cli("info", path)
    m = re.search(r"^\s+iter\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else -1


CHILD = r"""
import sys, tfm
def progress(p):
    if p.step == 20:
        print("running", flush=True)
try:
    tfm.train_lm(sys.argv[1], sys.argv[2], iters=5000, eval_every=1000, eval_iters=2, n_layer=1, n_embd=32,
                 n_head=2, block_size=32, batch_size=8, threads=1, progress=progress)
except tfm.TrainingInterrupted as e:
    print("interrupted", e.step, e.checkpoint, e.signal, flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def t_interrupt() -> None:
    """Ctrl-C (SIGINT) during train_lm: the run stops at a step boundary with a checkpoint that resumes (with
    Python or with tfm train-lm --resume) to exactly the checkpoint of an uninterrupted run."""
    with open(tmp("child.py"), "w") as f:
        f.write(CHILD)
    ck = tmp("int.tfm")
    p = subprocess.Popen([sys.executable, tmp("child.py"), DEMO, ck], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline().strip()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        check("python_sigint_stops_train_lm", False, "still running 60 s after SIGINT")
        return
    words = out.split()
    ok = line == "running" and p.returncode == 130 and words[:1] == ["interrupted"] and words[2:4] == [ck, "2"]
    check("python_sigint_stops_train_lm (TrainingInterrupted)", ok, f"rc {p.returncode}: {line} {out} {err[-300:]}")
    if not ok:
        return
    step = int(words[1])
    check("python_sigint_checkpoint_at_the_step", checkpoint_step(ck) == step and step >= 20,
          f"checkpoint at {checkpoint_step(ck)}, reported {step}")
    stop = step + 5
    shutil.copy(ck, tmp("int_cli.tfm"))
    ref = tfm.train_lm(DEMO, tmp("ref.tfm"), iters=5000, eval_every=1000, eval_iters=2, n_layer=1, n_embd=32, n_head=2,
                       block_size=32, batch_size=8, threads=1, max_steps=stop)
    res = tfm.train_lm(DEMO, resume=ck, max_steps=stop, threads=1)
    check("python_sigint_checkpoint_resumes_exactly (Python)", res.step == ref.step == stop and
          res.steps == 5 and same_file(ck, tmp("ref.tfm")), f"{res} vs {ref}")
    cli("train-lm", "--resume", tmp("int_cli.tfm"), "--data", DEMO, "--max-steps", str(stop), "--threads", "1")
    check("python_sigint_checkpoint_resumes_exactly (tfm train-lm --resume)", same_file(tmp("int_cli.tfm"),
                                                                                       tmp("ref.tfm")), "differ")


def t_generate() -> None:
    g = tfm.Generator(tmp("py_lm.tfm"), threads=1)
    cases = [dict(max_tokens=80, temperature=0.8, top_k=10, seed=7), dict(max_tokens=50, temperature=1.0, seed=1),
             dict(max_tokens=40, temperature=0.0, seed=3), dict(max_tokens=60, temperature=1.2, top_p=0.9, seed=11)]
    for c in cases:
        r = g.generate("First Citizen:", **c)
        args = ["--tokens", str(c["max_tokens"]), "--temperature", str(c["temperature"]), "--seed", str(c["seed"]),
                "--top-k", str(c.get("top_k", 0)), "--top-p", str(c.get("top_p", 1.0)), "--threads", "1"]
        want = cli("generate", tmp("py_lm.tfm"), "--prompt", "First Citizen:", *args)
        check(f"python_generate_equals_cli ({' '.join(args[:-2])})", "First Citizen:" + r.text + "\n" == want and
              r.n_tokens == c["max_tokens"] and r.finish_reason == "length", f"{r.text!r} vs {want!r}")
        pieces = list(g.generate_tokens("First Citizen:", **c))
        check("python_stream_equals_generate", "".join(pieces) == r.text and len(pieces) > 1, f"{pieces}")
    c = dict(max_tokens=200, temperature=0.9, seed=5)
    whole = g.generate("ROMEO:", **c).text
    stop = whole[30:32]   # a stop string that occurs
    r = g.generate("ROMEO:", stop=[stop, "zzzz"], **c)
    s = g.generate_tokens("ROMEO:", stop=[stop, "zzzz"], **c)
    pieces = list(s)
    check("python_generate_stop_string", r.finish_reason == "stop" and r.text == whole[:whole.index(stop)]
          and stop not in r.text, f"{r} with stop {stop!r}")
    check("python_stream_with_stop_equals_generate", "".join(pieces) == r.text and s.result == r and
          all(stop not in p for p in pieces), f"{pieces} {s.result}")
    s = g.generate_tokens("ROMEO:", max_tokens=1000, seed=2)
    first = [next(s) for _ in range(3)]
    s.close()
    check("python_stream_abandoned", len(first) == 3 and s.result is None and list(s) == [], f"{first}")
    s = g.generate_tokens("ROMEO:", max_tokens=1000, seed=2)
    next(s)
    g2 = tfm.Generator(tmp("py_lm.tfm"), threads=1)
    s2 = g2.generate_tokens("ROMEO:", max_tokens=1000, seed=2)
    next(s2)
    g2.close()   # frees the stream still open on it
    check("python_generator_close_frees_its_streams", list(s2) == [] and s2.result is None and next(s) != "", "")
    try:
        g.generate("ROMEO€", max_tokens=4)
        check("python_generate_bad_prompt_raises", False, "no exception")
    except tfm.Error as e:
        check("python_generate_bad_prompt_raises", "U+20AC" in str(e), str(e))
    check("python_generator_counts", g.count_tokens("ROMEO:") == 6 and g.tokenizer == "char" and g.block_size == 32,
          f"{g.count_tokens('ROMEO:')} {g.tokenizer} {g.block_size}")


def t_metrics() -> None:
    fix = os.path.join(ROOT, "tests", "fixtures", "bleu")
    hyp = open(os.path.join(fix, "hyp.txt"), encoding="utf-8").read().split("\n")[:-1]
    ref = open(os.path.join(fix, "ref.txt"), encoding="utf-8").read().split("\n")[:-1]
    rows = [line.split() for line in open(os.path.join(fix, "expected.txt")) if not line.startswith("#")]
    bad = []
    for s, e, lc, score, *_ in rows:
        got = tfm.bleu(hyp[int(s):int(e)], ref[int(s):int(e)], lowercase=lc == "1").score
        if abs(got - float(score)) > 1e-4:
            bad.append(f"[{s},{e}) lc={lc}: {got} vs {score}")
    check(f"python_bleu_equals_sacrebleu ({len(rows)} fixture spans)", not bad, "; ".join(bad[:5]))
    rows = [line.split() for line in open(os.path.join(fix, "chrf_expected.txt")) if not line.startswith("#")]
    bad = []
    for s, e, lc, score, *_ in rows:
        got = tfm.chrf(hyp[int(s):int(e)], ref[int(s):int(e)], lowercase=lc == "1").score
        if abs(got - float(score)) > 1e-4:
            bad.append(f"[{s},{e}) lc={lc}: {got} vs {score}")
    check(f"python_chrf_equals_sacrebleu ({len(rows)} fixture spans)", not bad, "; ".join(bad[:5]))
    h, r = os.path.join(fix, "hyp.txt"), os.path.join(fix, "ref.txt")
    b, c = tfm.bleu(hyp, ref), tfm.chrf(hyp, ref)
    check("python_bleu_chrf_lines_equal_cli", f"{b}\n{b.signature}\n" == cli("bleu", h, r) and
          f"{c}\n{c.signature}\n" == cli("bleu", h, r, "--metric", "chrf"), f"{b} / {c}")
    two = tfm.bleu(hyp, [ref, hyp])   # a second reference stream equal to the hypotheses: a perfect score
    check("python_bleu_reference_streams", abs(two.score - 100) < 1e-9 and "nrefs:2" in two.signature, str(two))
    try:
        tfm.bleu(hyp, ref[:-1])
        check("python_bleu_misaligned_raises", False, "no exception")
    except ValueError as e:
        check("python_bleu_misaligned_raises", "aligned" in str(e), str(e))


def t_bpe() -> None:
    lines = open(tmp("train.src")).read().splitlines() + open(tmp("train.tgt")).read().splitlines()
    tok = tfm.BPETokenizer.learn(lines, vocab_size=300)
    tok.save(tmp("b.model"))
    cli("bpe", "learn", "--vocab-size", "300", "-o", tmp("cli_b.model"), tmp("train.src"), tmp("train.tgt"))
    check("python_bpe_learn_equals_cli (same .model bytes)", same_file(tmp("b.model"), tmp("cli_b.model")), "differ")
    loaded = tfm.BPETokenizer(tmp("b.model"))
    text = "\n".join(lines[:50]) + "\n"
    want_pieces = cli("bpe", "encode", "--model", tmp("b.model"), stdin=text).splitlines()
    want_ids = cli("bpe", "encode", "--ids", "--model", tmp("b.model"), stdin=text).splitlines()
    got_pieces = [" ".join(loaded.encode(s, out_type=str)) for s in lines[:50]]
    got_ids = [" ".join(map(str, loaded.encode(s))) for s in lines[:50]]
    check("python_bpe_encode_equals_cli (pieces and ids)", got_pieces == want_pieces and got_ids == want_ids,
          f"{got_pieces[:2]} vs {want_pieces[:2]}")
    odd = "naïve café ☃ — 3.14 ok"
    check("python_bpe_roundtrip", all(loaded.decode(loaded.encode(s)) == s for s in lines[:50] + [odd, ""]) and
          loaded.decode_pieces(loaded.encode(odd, out_type=str)) == odd, "decode(encode(x)) != x")
    check("python_bpe_specials", (loaded.pad_id, loaded.bos_id, loaded.eos_id, loaded.unk_id) == (0, 1, 2, 3)
          and loaded.piece_to_id("<0x41>") == 4 + 0x41, "")
    try:
        tfm.BPETokenizer(DEMO)
        check("python_bpe_bad_file_raises", False, "no exception")
    except tfm.DataError as e:
        check("python_bpe_bad_file_raises", DEMO in str(e), str(e))


def main() -> int:
    toy_corpus()
    run("python_struct_layout", t_layout)
    run("python_no_model_struct_mirrors", t_no_model_mirrors)
    run("python_exports", t_exports)
    run("python_version", t_version)
    run("python_metrics", t_metrics)
    run("python_bpe", t_bpe)
    run("python_train_lm", t_train_lm)
    run("python_generate", t_generate)
    run("python_interrupt", t_interrupt)
    run("python_train_mt", t_train_mt)
    run("python_translate", t_translate)
    run("python_bad_paths", t_bad_paths)
    shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
