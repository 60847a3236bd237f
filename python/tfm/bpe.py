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
        self._ptr, self._owner = None, None
        b = _lib.enc(os.fspath(path), "path")
        self._own_new(lambda m: lib.tfm_bpe_load(m, b))

    def _own_new(self, fill) -> None:
        """A model of this object's own (tfm_bpe_new), filled by fill(pointer) (a tfm_bpe_load / learn call)."""
        m = _lib.check_ptr(lib.tfm_bpe_new())
        try:
            _lib.check(fill(m))
        except BaseException:
            lib.tfm_bpe_delete(m)
            raise
        self._ptr = m

    @classmethod
    def _borrow(cls, ptr: int, owner) -> "BPETokenizer":
        """A view of a model owned by ``owner`` (a Translator), kept alive as long as this object."""
        t = cls.__new__(cls)
        t._ptr, t._owner = ptr, owner
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
        t._ptr, t._owner = None, None
        t._own_new(lambda m: lib.tfm_bpe_learn_lines(m, arr, len(lines), ctypes.byref(o)))
        return t

    def close(self) -> None:
        """Free the model now (also done when the object is collected)."""
        p, self._ptr = getattr(self, "_ptr", None), None
        if p and getattr(self, "_owner", None) is None and lib is not None:   # lib: None only at shutdown
            lib.tfm_bpe_delete(p)

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
        return lib.tfm_bpe_size(self._p())

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def pad_id(self) -> int:
        return lib.tfm_bpe_pad_id(self._p())

    @property
    def bos_id(self) -> int:
        return lib.tfm_bpe_bos_id(self._p())

    @property
    def eos_id(self) -> int:
        return lib.tfm_bpe_eos_id(self._p())

    @property
    def unk_id(self) -> int:
        return lib.tfm_bpe_unk_id(self._p())

    def id_to_piece(self, i: int) -> str:
        """The piece of id ``i`` (IndexError outside 0..vocab_size-1)."""
        size = self.vocab_size
        if not 0 <= i < size:
            raise IndexError(f"id {i} is not in 0..{size - 1}")
        n = ctypes.c_size_t()
        p = _lib.check_ptr(lib.tfm_bpe_piece(self._p(), int(i), ctypes.byref(n)))
        return _lib.dec(ctypes.string_at(p, n.value))

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
    bpe = lib.tfm_mt_model_bpe(lib.tfm_translator_model(translator._handle()))
    return BPETokenizer._borrow(bpe, translator) if bpe else None
