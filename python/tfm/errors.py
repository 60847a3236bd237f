"""Exceptions: the library's error message and kind (tfm_last_error, tfm_last_error_kind in tfm/core.h).

The library keeps its last error per thread; ctypes runs a call on the calling Python thread, so the message
read right after a failed call is that call's, whatever other threads do.
"""
from __future__ import annotations

import builtins

# tfm_error_kind (core.h)
ERR_OTHER, ERR_DATA, ERR_IO, ERR_NOMEM, ERR_ARG = 0, 1, 2, 3, 4
KIND_NAMES = {ERR_OTHER: "other", ERR_DATA: "data", ERR_IO: "io", ERR_NOMEM: "nomem", ERR_ARG: "arg"}


class Error(Exception):
    """A failure reported by libtfm: ``str(e)`` is its one-line message (naming the file, field or option),
    ``e.kind`` one of ``"other"``, ``"data"``, ``"io"``, ``"nomem"``, ``"arg"``. Anything not below is
    ``Error`` itself (TFM_ERR_OTHER)."""

    kind = "other"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class DataError(Error, ValueError):
    """A file's contents (or an input text) are malformed: format, CRC, ranges, encoding (TFM_ERR_DATA)."""

    kind = "data"


class IOError(Error, builtins.OSError):  # noqa: A001  (tfm.IOError, the library's TFM_ERR_IO)
    """The system refused: open, read, write, rename (TFM_ERR_IO). Also an ``OSError``."""

    kind = "io"

    def __init__(self, message: str):
        builtins.OSError.__init__(self, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OutOfMemoryError(Error, builtins.MemoryError):
    """The library ran out of memory (TFM_ERR_NOMEM). Also a ``MemoryError``."""

    kind = "nomem"


class ArgumentError(Error, ValueError):
    """An argument or option the caller gave is invalid, named in the message (TFM_ERR_ARG; the CLI's usage
    error). Also a ``ValueError``."""

    kind = "arg"


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by :func:`tfm.train_lm` / :func:`tfm.train_mt` after SIGINT (Ctrl-C) or SIGTERM stopped the run
    at a step boundary and the checkpoint was saved: ``checkpoint`` (its path), ``step`` (the run's
    optimizer step in it), ``signal`` (``signal.SIGINT`` or ``signal.SIGTERM``). Continue the run with
    ``resume=checkpoint``. A subclass of KeyboardInterrupt, so an uncaught one ends a script as Ctrl-C does."""

    def __init__(self, checkpoint: str, step: int, signal: int):
        name = {2: "SIGINT", 15: "SIGTERM"}.get(signal, f"signal {signal}")
        super().__init__(f"stopped by {name}: saved {checkpoint} at step {step}; continue with resume={checkpoint!r}")
        self.checkpoint, self.step, self.signal = checkpoint, step, signal


_BY_KIND = {ERR_OTHER: Error, ERR_DATA: DataError, ERR_IO: IOError, ERR_NOMEM: OutOfMemoryError,
            ERR_ARG: ArgumentError}


def _last_error(lib) -> Error:
    msg = lib.tfm_last_error()
    msg = msg.decode("utf-8", "replace") if msg else "unknown error"
    return _BY_KIND.get(lib.tfm_last_error_kind(), Error)(msg)


def _raise_last(lib):
    raise _last_error(lib)
