"""tfm.BPETokenizer: the SentencePiece-compatible BPE subword tokenizer (tfm/bpe.h)."""
from __future__ import annotations

import ctypes
import os
from typing import Iterable, List, Optional, Sequence

from . import _lib
from ._lib import lib


class BPETokenizer:
    """A BPE model: a SentencePiece ``.model`` file (``tfm bpe learn``, or ``spm_train --model_type=bpe``
    with identity normalization) or a tfm checkpoint holding one (a translator trained with
    ``--tokenizer bpe``: its ``tokenizer.bpe`` entry).

    ``BPETokenizer(path)`` loads it (:class:`tfm.Error` naming the file otherwise);
    :meth:`learn` makes one from text; :attr:`Translator.tokenizer` is the one inside a loaded translator.
    ``encode`` gives ids (or pieces with ``out_type=str``) as ``spm_encode``, ``decode`` text as
    ``spm_decode``. tfm's models keep every space, so ``decode(encode(x)) == x``.
    """

    def __init__(self, path: str | os.PathLike):
        self._m = _lib.Bpe()
        self._owner = None
        self._own = False
        _lib.check(lib.tfm_bpe_load(ctypes.byref(self._m), _lib.enc(os.fspath(path), "path")))
        self._own = True
        self._ptr = ctypes.pointer(self._m)

    @classmethod
    def _borrow(cls, ptr: int, owner) -> "BPETokenizer":
        """A view of a model owned by ``owner`` (a Translator), kept alive as long as this object."""
        t = cls.__new__(cls)
        t._own, t._owner = False, owner
        t._ptr = ctypes.cast(ptr, ctypes.POINTER(_lib.Bpe))
        t._m = t._ptr.contents
        return t

    @classmethod
    def learn(cls, lines: Iterable[str], vocab_size: int = 8000, character_coverage: float = 0.9995,
              max_piece_chars: int = 16, split_by_class: bool = True) -> "BPETokenizer":
        """Learn a model from lines of text (deterministic), as ``tfm bpe learn``: ids 0..3 are ``<pad> <s>
        </s> <unk>``, 4..259 the byte pieces ``<0x00>..<0xFF>``, then the merges, then the characters.

        vocab_size          pieces in total (at least 260 + the characters kept)
        character_coverage  keep the most frequent characters covering this share of the text (0.98..1)
        max_piece_chars     longest piece in characters (SentencePiece: 16)
        split_by_class      a piece never mixes letters, digits and punctuation
        """
        o = _lib.BpeLearnOptions()
        lib.tfm_bpe_learn_opts_default(ctypes.byref(o))
        o.vocab_size, o.character_coverage = int(vocab_size), float(character_coverage)
        o.max_piece_chars, o.split_by_class = int(max_piece_chars), int(bool(split_by_class))
        lines = list(lines)
        arr = _lib.strings(lines, "lines")
        t = cls.__new__(cls)
        t._m, t._owner, t._own = _lib.Bpe(), None, False
        _lib.check(lib.tfm_bpe_learn_lines(ctypes.byref(t._m), arr, len(lines), ctypes.byref(o)))
        t._own = True
        t._ptr = ctypes.pointer(t._m)
        return t

    def close(self) -> None:
        """Free the model now (also done when the object is collected)."""
        if getattr(self, "_own", False):
            self._own = False
            if lib is not None:   # None only at interpreter shutdown
                lib.tfm_bpe_free(ctypes.byref(self._m))
        self._ptr = None

    def __del__(self):
        self.close()

    def _p(self):
        if not self._ptr or (self._owner is not None and not self._owner._t):
            raise ValueError("BPETokenizer is closed (or the Translator it belongs to is)")
        return self._ptr

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as a SentencePiece ``.model`` file (atomically), readable by ``spm_encode``."""
        _lib.check(lib.tfm_bpe_save(self._p(), _lib.enc(os.fspath(path), "path")))

    @property
    def vocab_size(self) -> int:
        """Number of pieces (ids are 0 .. vocab_size - 1)."""
        return self._p().contents.n

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_id(self) -> int:
        return self._p().contents.pad_id

    @property
    def bos_id(self) -> int:
        return self._p().contents.bos_id

    @property
    def eos_id(self) -> int:
        return self._p().contents.eos_id

    @property
    def unk_id(self) -> int:
        return self._p().contents.unk_id

    def id_to_piece(self, i: int) -> str:
        """The piece of id ``i`` (IndexError outside 0..vocab_size-1)."""
        m = self._p().contents
        if not 0 <= i < m.n:
            raise IndexError(f"id {i} is not in 0..{m.n - 1}")
        return _lib.dec(m.piece[i])

    def piece_to_id(self, piece: str) -> int:
        """The id of a piece as SentencePiece's PieceToId (``unk_id`` for an unknown piece)."""
        b = _lib.enc(piece, "piece")
        return lib.tfm_bpe_piece_id(self._p(), b, len(b))

    def encode(self, text: str, out_type: type = int) -> List:
        """Encode one line of text into ids (``out_type=int``) or pieces (``out_type=str``), as
        ``spm_encode``. An empty line gives []."""
        b = _lib.enc(text, "text")
        if out_type is str:
            pieces = _lib.take_string(lib.tfm_bpe_encode_pieces(self._p(), b, len(b)))
            return pieces.split(" ") if pieces else []
        if out_type is not int:
            raise ValueError("out_type must be int or str")
        n = ctypes.c_int()
        p = _lib.check_ptr(lib.tfm_bpe_encode(self._p(), b, len(b), ctypes.byref(n)))
        try:
            return list(ctypes.cast(p, ctypes.POINTER(ctypes.c_int))[:n.value])
        finally:
            _lib.free(p)

    def decode(self, ids: Sequence[int]) -> str:
        """Ids (each in 0..vocab_size-1) back into text, as ``spm_decode``."""
        ids = list(ids)
        arr = (ctypes.c_int * len(ids))(*ids)
        return _lib.take_string(lib.tfm_bpe_decode(self._p(), arr, len(ids)))

    def decode_pieces(self, pieces: Sequence[str]) -> str:
        """Piece strings back into text (an unknown piece is kept as it is)."""
        pieces = list(pieces)
        return _lib.take_string(lib.tfm_bpe_decode_pieces(self._p(), _lib.strings(pieces, "pieces"), len(pieces)))


def _translator_tokenizer(translator) -> Optional[BPETokenizer]:
    m = lib.tfm_translator_model(translator._handle()).contents
    return BPETokenizer._borrow(m.bpe, translator) if m.bpe else None
