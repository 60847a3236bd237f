"""tfm.Translator: a translation checkpoint as one object, one call per batch (tfm/translator.h)."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence

from . import _lib
from ._lib import lib


@dataclass
class TranslationResult:
    """One input's translation.

    hypotheses        the translations, best first (``num_hypotheses`` of them, or fewer when the search
                      found fewer distinct endings), detokenized text
    scores            with ``return_scores`` (or ``num_hypotheses`` > 1): one score per hypothesis, the sum of
                      its tokens' log-probabilities (``<eos>`` included) divided by the GNMT length penalty
                      ``((5 + len) / 6) ** length_penalty``; else ``[]``
    attention         with ``return_attention``: a list holding ONE matrix, the best hypothesis' (CTranslate2
                      returns one per hypothesis; tfm computes the first only): ``attention[0][i][j]`` is the
                      weight of source token j for target token i, the last decoder layer's encoder-decoder
                      attention averaged over its heads (Bahdanau: its one map); rows are target tokens,
                      columns source tokens, ``<eos>`` included on both sides; else ``[]``
    source_tokens, target_tokens
                      with ``return_attention``: the labels of the matrix's columns and rows (words or subword
                      pieces, ``<eos>`` last); else ``[]``
    source_truncated  source tokens dropped by ``max_input_length`` (0 = none)
    """

    hypotheses: List[str]
    scores: List[float] = field(default_factory=list)
    attention: List[List[List[float]]] = field(default_factory=list)
    source_tokens: List[str] = field(default_factory=list)
    target_tokens: List[str] = field(default_factory=list)
    source_truncated: int = 0


def _result(r: _lib.Translation, want_scores: bool) -> TranslationResult:
    n = r.n_hypotheses
    out = TranslationResult([_lib.dec(r.hypotheses[k]) for k in range(n)])
    if want_scores and r.scores:
        out.scores = [float(r.scores[k]) for k in range(n)]
    if r.attention:
        ts, tt = r.n_source_tokens, r.n_target_tokens
        flat = ctypes.cast(r.attention, ctypes.POINTER(ctypes.c_float * (ts * tt))).contents if ts * tt else []
        out.attention = [[[float(flat[i * ts + j]) for j in range(ts)] for i in range(tt)]]
        out.source_tokens = [_lib.dec(r.source_tokens[j]) for j in range(ts)]
        out.target_tokens = [_lib.dec(r.target_tokens[i]) for i in range(tt)]
    out.source_truncated = r.source_truncated
    return out


class Translator:
    """A translation checkpoint written by ``tfm train-mt`` (or ``tfm import``), ready to translate.

    ``Translator(path, threads=0, max_batch_size=32)`` loads the model, its tokenizer and its packed weights.
    ``path`` may be a list of checkpoints that share one tokenizer: an ensemble, whose search ranks by the mean
    of the models' log-probabilities at each step (``tfm translate A.tfm B.tfm``); the first model tokenizes and
    gives the stored settings; ``return_attention`` is refused for it.
    ``threads``: threads per call (0 = OMP_NUM_THREADS, else the CPUs this process may use).
    ``max_batch_size``: sentences decoded together by one worker (a call with more inputs is cut into
    batches of this size, decoded in parallel), as ``tfm translate --batch-size``.

    One Translator may be used by several Python threads at once: the library releases nothing shared, and
    ctypes releases the GIL during the call, so the translations run concurrently. Results do not depend on
    how many calls run at once nor on ``threads``. Raises :class:`tfm.Error` (``IOError`` for a missing file,
    ``DataError`` for a malformed one), the message naming the file.
    """

    def __init__(self, path: str | os.PathLike | Sequence[str | os.PathLike], threads: int = 0,
                 max_batch_size: int = 32):
        p = _lib.TranslatorParams()
        lib.tfm_translator_params_default(ctypes.byref(p))
        p.threads, p.max_batch_size = int(threads), int(max_batch_size)
        # translate_iterable's default read-ahead: the library's read_ahead batches per worker (tfm translate --maxi-batch)
        self._read_ahead = (max(1, p.read_ahead) * max(1, p.max_batch_size) *
                            (p.threads if p.threads > 0 else lib.tfm_default_threads()))
        self._t = None
        one = isinstance(path, (str, bytes, os.PathLike))
        self.paths: List[str] = [os.fspath(path)] if one else [os.fspath(q) for q in path]
        if not self.paths:
            raise ValueError("Translator: an empty list of checkpoints")
        self.path = self.paths[0]
        names = (ctypes.c_char_p * len(self.paths))(*[_lib.enc(q, "path") for q in self.paths])
        self._t = _lib.check_ptr(lib.tfm_translator_load_ensemble(names, len(self.paths), ctypes.byref(p)))
        m = lib.tfm_translator_model(self._t)
        beam = lib.tfm_mt_model_decode_beam(m)
        self.default_beam_size: int = beam if beam > 0 else 1
        self.default_length_penalty: float = float(lib.tfm_mt_model_decode_alpha(m)) if beam > 0 else 0.0
        self.source_language: str = _lib.dec(lib.tfm_mt_model_src_lang(m))
        self.target_language: str = _lib.dec(lib.tfm_mt_model_tgt_lang(m))

    def close(self) -> None:
        """Free the model now (also done when the object is collected); not while another thread is in a
        call. Using it afterwards raises ValueError."""
        t, self._t = getattr(self, "_t", None), None
        if t and lib is not None:   # lib is None only at interpreter shutdown
            lib.tfm_translator_free(t)

    def __del__(self):
        self.close()

    def __enter__(self) -> "Translator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _handle(self):
        if not self._t:
            raise ValueError("Translator is closed")
        return self._t

    @property
    def tokenizer(self):
        """The model's BPE tokenizer (a :class:`tfm.BPETokenizer` valid while this Translator is open), or
        None for a model with word vocabularies."""
        from .bpe import _translator_tokenizer
        return _translator_tokenizer(self)

    def translate_batch(self, source: Sequence[str], beam_size: Optional[int] = None,
                        length_penalty: Optional[float] = None, num_hypotheses: int = 1,
                        return_scores: bool = False, return_attention: bool = False,
                        target_prefix: Optional[Sequence[Optional[str]]] = None, max_decoding_length: int = 50,
                        max_input_length: int = 200) -> List[TranslationResult]:
        """Translate a list of raw sentences (one str each, no newline); one result per input, in order.

        beam_size            1 = greedy; None = the model's stored setting (``train-mt --decode-beam``, greedy
                             if none), as ``tfm translate`` without ``--beam``
        length_penalty       GNMT alpha: hypotheses are ranked by log-probability / ((5+len)/6)**alpha;
                             None = the model's stored setting (0 if none)
        num_hypotheses       1..beam_size hypotheses per input, best first (``tfm translate --n-best``)
        return_scores        fill ``scores`` (always filled when ``num_hypotheses`` > 1)
        return_attention     fill ``attention``, ``source_tokens``, ``target_tokens`` (best hypothesis only)
        target_prefix        None, or one entry per input (None or "" = none): the translation starts with
                             that text (tokenized as the target side) and decoding continues it
        max_decoding_length  most output tokens per sentence, without <eos> (the prefix counts)
        max_input_length     most source tokens kept, <eos> included (and at most the model's position table);
                             longer sources are cut, counted in ``source_truncated``
        An empty string gives an empty translation. Raises :class:`tfm.Error` for a bad option (naming it),
        :class:`tfm.DataError` for invalid text.
        """
        if isinstance(source, str):
            raise TypeError("translate_batch takes a list of sentences, got one str")
        source = list(source)
        n = len(source)
        o = _lib.TranslateOptions()
        lib.tfm_translate_options_default(ctypes.byref(o))
        o.beam_size = 0 if beam_size is None else int(beam_size)
        if beam_size is not None and o.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1 (None = the model's), got {beam_size}")
        if length_penalty is not None and not length_penalty >= 0:
            raise ValueError(f"length_penalty must be >= 0 (None = the model's), got {length_penalty}")
        o.length_penalty = -1.0 if length_penalty is None else float(length_penalty)
        o.num_hypotheses = int(num_hypotheses)
        o.return_scores = int(bool(return_scores) or o.num_hypotheses > 1)
        o.return_attention = int(bool(return_attention))
        o.max_decoding_length, o.max_input_length = int(max_decoding_length), int(max_input_length)
        src = _lib.strings(source, "source")
        prefixes = None
        if target_prefix is not None:
            target_prefix = list(target_prefix)
            if len(target_prefix) != n:
                raise ValueError(f"target_prefix has {len(target_prefix)} entries for {n} inputs")
            prefixes = _lib.strings(["" if p is None else p for p in target_prefix], "target_prefix")
            o.target_prefix = ctypes.cast(prefixes, ctypes.POINTER(ctypes.c_char_p))
        if n == 0:
            return []
        res = (_lib.Translation * n)()
        _lib.check(lib.tfm_translator_translate_batch(self._handle(), src, n, ctypes.byref(o), res))
        try:
            return [_result(res[i], bool(o.return_scores)) for i in range(n)]
        finally:
            for i in range(n):
                lib.tfm_translation_free(ctypes.byref(res[i]))

    def translate_iterable(self, source: Iterable[str], batch_size: int = 0,
                           target_prefix: Optional[Iterable[Optional[str]]] = None,
                           **options) -> Iterator[TranslationResult]:
        """Translate a (possibly endless) iterable of sentences lazily, ``batch_size`` at a time, yielding one
        result per input in order. ``batch_size`` 0 (the default) reads the library's read-ahead, 16 batches per
        worker (``16 * max_batch_size * threads``, as ``tfm translate --maxi-batch 16``): one call sorts them by length
        into batches of similar sentences, which decodes faster than batches taken as read. ``target_prefix``
        may be an iterable aligned with ``source``; the other options are those of :meth:`translate_batch`."""
        if batch_size < 0:
            raise ValueError(f"batch_size must be >= 0 (0 = 16 batches per worker), got {batch_size}")
        batch_size = batch_size or self._read_ahead
        it = iter(source)
        pit = iter(target_prefix) if target_prefix is not None else None
        while True:
            batch = []
            for line in it:
                batch.append(line)
                if len(batch) == batch_size:
                    break
            if not batch:
                return
            prefixes = None
            if pit is not None:
                prefixes = [next(pit, None) for _ in batch]
            yield from self.translate_batch(batch, target_prefix=prefixes, **options)
            if len(batch) < batch_size:
                return
