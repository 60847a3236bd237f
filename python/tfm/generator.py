"""tfm.Generator: a language model as one object, text in, text out, whole or streamed (tfm/generator.h)."""
from __future__ import annotations

import ctypes
import os
import weakref
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence, Union

from . import _lib
from ._lib import lib
from .errors import _last_error


@dataclass
class Generation:
    """What :meth:`Generator.generate` returns.

    text             the generated text, without the prompt, cut before a stop string
    finish_reason    "length" (max_tokens made), "stop" (a stop string appeared) or "cancelled"
    n_prompt_tokens  tokens in the prompt
    n_tokens         tokens generated (a stop string's tokens included)
    """

    text: str
    finish_reason: str
    n_prompt_tokens: int
    n_tokens: int


def _generation(g: _lib.Generation) -> Generation:
    try:
        text = ctypes.string_at(g.text).decode("utf-8", "replace") if g.text else ""
        reason = _lib.dec(lib.tfm_finish_reason_name(g.finish_reason))
        return Generation(text, reason, g.n_prompt_tokens, g.n_tokens)
    finally:
        lib.tfm_generation_free(ctypes.byref(g))


def _options(max_tokens, temperature, top_k, top_p, seed, stop) -> tuple:
    o = _lib.GenerateOptions()
    lib.tfm_generate_options_default(ctypes.byref(o))
    o.max_tokens, o.temperature, o.top_k, o.top_p = int(max_tokens), float(temperature), int(top_k), float(top_p)
    o.seed = int(seed) % (1 << 64)   # as the CLI's (uint64_t)seed for a negative one
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    stop = list(stop)
    if len(stop) > _lib.MAX_STOP:
        raise ValueError(f"stop: at most {_lib.MAX_STOP} stop strings, got {len(stop)}")
    keep = [_lib.enc(s, f"stop[{i}]") for i, s in enumerate(stop)]
    for i, b in enumerate(keep):
        o.stop[i] = b
    return o, keep


class GenerationStream:
    """The iterator :meth:`Generator.generate_tokens` returns: pieces of text (str) as they become final, whole
    characters and nothing that could still turn out to begin a stop string; joined, they are the text
    :meth:`Generator.generate` returns for the same arguments. Lazy: each ``next()`` computes the tokens its
    piece needs. After the last piece, ``result`` is the :class:`Generation` (finish reason, counts).
    ``close()`` (or leaving a ``with`` block, or dropping the iterator) ends it early and frees the stream."""

    def __init__(self, gen: "Generator", s: int, keep):
        self._gen, self._s, self._keep = gen, s, keep   # keep: the option strings the stream was made with
        self.result: Optional[Generation] = None
        gen._streams.add(self)

    def __iter__(self) -> "GenerationStream":
        return self

    def __next__(self) -> str:
        while self._s:
            s = ctypes.c_void_p(self._s)
            if not lib.tfm_gen_stream_finished(s) and lib.tfm_generator_step(self._gen._handle(), ctypes.byref(s), 1):
                err = _last_error(lib)
                self.close()
                raise err
            n = ctypes.c_size_t()
            p = lib.tfm_gen_stream_take(s, ctypes.byref(n))
            piece = ctypes.string_at(p, n.value).decode("utf-8", "replace") if n.value else ""
            if lib.tfm_gen_stream_finished(s):
                g = _lib.Generation()
                _lib.check(lib.tfm_gen_stream_result(s, ctypes.byref(g)))
                self.result = _generation(g)
                self._free()
            if piece:
                return piece
        raise StopIteration

    def _free(self) -> None:
        s, self._s = getattr(self, "_s", None), None
        if s and lib is not None:   # lib is None only at interpreter shutdown
            lib.tfm_gen_stream_free(s)

    def close(self) -> None:
        """Stop generating and free the stream (``result`` stays None if it had not finished)."""
        self._free()

    def __del__(self):
        self._free()

    def __enter__(self) -> "GenerationStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Generator:
    """A language-model checkpoint written by ``tfm train-lm`` (or ``tfm import``), ready to generate.

    ``Generator(path, threads=0)``: ``threads`` per call (0 = OMP_NUM_THREADS, else the CPUs this process may
    use). One Generator may be used by several Python threads at once (each call has its own graph; the GIL
    is released while it computes). Raises :class:`tfm.Error` (``IOError``, ``DataError``) naming the file.
    """

    def __init__(self, path: str | os.PathLike, threads: int = 0):
        p = _lib.GeneratorParams()
        lib.tfm_generator_params_default(ctypes.byref(p))
        p.threads = int(threads)
        self._g = None
        self._streams: "weakref.WeakSet[GenerationStream]" = weakref.WeakSet()
        self.path = os.fspath(path)
        self._g = _lib.check_ptr(lib.tfm_generator_load(_lib.enc(self.path, "path"), ctypes.byref(p)))
        m = lib.tfm_generator_model(self._g)
        self.tokenizer: str = _lib.dec(lib.tfm_generator_tokenizer(self._g))
        self.vocab_size: int = lib.tfm_gpt_vocab_size(m)
        self.block_size: int = lib.tfm_gpt_block_size(m)

    def close(self) -> None:
        """Free the model now (also done when the object is collected), and the streams still open on it;
        not while another thread is in a call."""
        for s in list(getattr(self, "_streams", ())):
            s.close()
        g, self._g = getattr(self, "_g", None), None
        if g and lib is not None:   # lib is None only at interpreter shutdown
            lib.tfm_generator_free(g)

    def __del__(self):
        self.close()

    def __enter__(self) -> "Generator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _handle(self):
        if not self._g:
            raise ValueError("Generator is closed")
        return self._g

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's tokenizer; :class:`tfm.Error` names a character outside the
        vocabulary."""
        return _lib.check(lib.tfm_generator_count_tokens(self._handle(), _lib.enc(text, "text")))

    def generate(self, prompt: str, max_tokens: int = 16, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 1, stop: Union[str, Sequence[str], None] = None) -> Generation:
        """Continue ``prompt`` (not empty; every character in the vocabulary) and return a :class:`Generation`
        (``.text`` is the continuation without the prompt).

        max_tokens   tokens to generate (16, as OpenAI's API; ``tfm generate --tokens`` defaults to 500)
        temperature  softmax temperature, 0 = greedy
        top_k        sample among the k most likely tokens (0 = all)
        top_p        nucleus sampling: among the most likely tokens holding this much probability (1 = all)
        seed         the sampler's seed: the same seed gives the same text (``tfm generate --seed``)
        stop         a string or up to 8 strings: generation ends where one first appears, the text is cut
                     before it (finish_reason "stop")
        The same arguments give the text ``tfm generate MODEL --prompt P --tokens N --seed S ...`` prints
        after the prompt.
        """
        o, keep = _options(max_tokens, temperature, top_k, top_p, seed, stop)
        g = _lib.Generation()
        _lib.check(lib.tfm_generator_generate(self._handle(), _lib.enc(prompt, "prompt"), ctypes.byref(o),
                                              _lib.TextFn(), None, ctypes.byref(g)))
        del keep
        return _generation(g)

    def generate_tokens(self, prompt: str, max_tokens: int = 16, temperature: float = 1.0, top_k: int = 0,
                        top_p: float = 1.0, seed: int = 1,
                        stop: Union[str, Sequence[str], None] = None) -> GenerationStream:
        """Stream what :meth:`generate` returns: an iterator of text pieces (see :class:`GenerationStream`),
        computed lazily one token at a time (tfm_generator_start / step / take). Same arguments, same text.
        A bad option or prompt raises here, before any token is made."""
        o, keep = _options(max_tokens, temperature, top_k, top_p, seed, stop)
        s = _lib.check_ptr(lib.tfm_generator_start(self._handle(), _lib.enc(prompt, "prompt"), ctypes.byref(o)))
        return GenerationStream(self, s, keep)
