"""tfm.bleu / tfm.chrf: sacreBLEU-compatible corpus BLEU and chrF2, as ``tfm bleu`` (tfm/eval.h)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import List, Sequence, Union

from . import _lib
from ._lib import lib

References = Union[Sequence[str], Sequence[Sequence[str]]]


@dataclass
class BLEUScore:
    """Corpus BLEU as sacreBLEU's BLEUScore: ``score`` (0..100), ``precisions`` (percent, orders 1..4),
    ``counts`` / ``totals`` (matching / all hypothesis n-grams per order), ``bp`` (brevity penalty),
    ``ratio`` (sys_len / ref_len), ``sys_len``, ``ref_len``, ``signature`` (sacreBLEU's, to quote with the
    score). ``str()`` is sacreBLEU's line, as ``tfm bleu`` prints it."""

    score: float
    precisions: List[float]
    counts: List[int]
    totals: List[int]
    bp: float
    ratio: float
    sys_len: int
    ref_len: int
    signature: str
    line: str

    def __str__(self) -> str:
        return self.line


@dataclass
class CHRFScore:
    """chrF2 as sacreBLEU's CHRF(): ``score`` (0..100), ``precision`` and ``recall`` (percent, averaged over
    the effective character orders), ``signature``; ``str()`` is "chrF2 = 59.27"."""

    score: float
    precision: float
    recall: float
    signature: str
    line: str

    def __str__(self) -> str:
        return self.line


def _streams(hypotheses: Sequence[str], references: References) -> List[Sequence[str]]:
    """references: one reference per hypothesis (a list of str), or sacreBLEU's list of reference streams."""
    if isinstance(hypotheses, str):
        raise TypeError("hypotheses must be a list of sentences, got one str")
    if isinstance(references, str):
        raise TypeError("references must be a list of sentences (or of reference streams), got one str")
    refs = list(references)
    streams = [refs] if not refs or isinstance(refs[0], str) else [list(s) for s in refs]
    for k, s in enumerate(streams):
        if len(s) != len(hypotheses):
            raise ValueError(f"{len(hypotheses)} hypotheses but reference stream {k} has {len(s)} lines "
                             "(hypotheses and references must be aligned)")
    return streams


def _add_all(add, stats, hypotheses, streams) -> None:
    n_refs = len(streams)
    for i, h in enumerate(hypotheses):
        refs = _lib.strings([s[i] for s in streams], f"references[{i}]")
        _lib.check(add(ctypes.byref(stats), _lib.enc(h, f"hypotheses[{i}]"), refs, n_refs))


def bleu(hypotheses: Sequence[str], references: References, lowercase: bool = False) -> BLEUScore:
    """Corpus BLEU of detokenized hypotheses against references, computed as sacreBLEU 2.x's defaults (13a
    tokenization, 4-grams, 'exp' smoothing, brevity penalty; case-sensitive unless ``lowercase``):
    ``tfm.bleu(hyps, refs).score`` equals ``sacrebleu.corpus_bleu(hyps, [refs]).score`` and
    ``tfm bleu HYP REF``. ``references``: one str per hypothesis, or a list of reference streams (each one
    str per hypothesis) as sacreBLEU takes them."""
    streams = _streams(hypotheses, references)
    st = _lib.BleuStats()
    lib.tfm_bleu_init(ctypes.byref(st), int(bool(lowercase)))
    _add_all(lib.tfm_bleu_add, st, hypotheses, streams)
    r = _lib.BleuResult()
    lib.tfm_bleu_compute(ctypes.byref(st), ctypes.byref(r))
    buf = ctypes.create_string_buffer(256)
    line = _lib.dec(lib.tfm_bleu_format(ctypes.byref(r), buf, 256))
    sig = _lib.dec(lib.tfm_bleu_signature(int(bool(lowercase)), len(streams), buf, 256))
    return BLEUScore(r.score, list(r.precisions), list(r.correct), list(r.total), r.bp, r.ratio, r.hyp_len,
                     r.ref_len, sig, line)


def chrf(hypotheses: Sequence[str], references: References, lowercase: bool = False) -> CHRFScore:
    """sacreBLEU's default chrF (chrF2: character 6-grams, beta 2, whitespace removed) of detokenized
    hypotheses; ``tfm bleu --metric chrf``. ``references`` as for :func:`bleu` (several streams: the best
    reference per segment)."""
    streams = _streams(hypotheses, references)
    st = _lib.ChrfStats()
    lib.tfm_chrf_init(ctypes.byref(st), int(bool(lowercase)))
    _add_all(lib.tfm_chrf_add, st, hypotheses, streams)
    r = _lib.ChrfResult()
    lib.tfm_chrf_compute(ctypes.byref(st), ctypes.byref(r))
    buf = ctypes.create_string_buffer(256)
    line = _lib.dec(lib.tfm_chrf_format(ctypes.byref(r), buf, 256))
    sig = _lib.dec(lib.tfm_chrf_signature(int(bool(lowercase)), len(streams), buf, 256))
    return CHRFScore(r.score, r.precision, r.recall, sig, line)
