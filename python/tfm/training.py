"""tfm.train_lm / tfm.train_mt: the library's training loops (tfm/train.h) with the tfm CLI's run semantics.

Both write the checkpoints ``tfm train-lm`` / ``tfm train-mt`` write (model, optimizer, training state and the
run configuration as run.* entries, so either the CLI's ``--resume`` or ``resume=`` here continues a run made by
the other), stop cleanly on SIGINT / SIGTERM, and report progress through a callback.

Ctrl-C: while a run is in progress (called from the main thread), SIGINT and SIGTERM set the library's stop
flag (tfm_train_ctl.stop) at once, through Python's wakeup fd and a watcher thread: the loop finishes the
current step, saves the checkpoint and returns, and :class:`tfm.TrainingInterrupted` (a KeyboardInterrupt) is
raised. A second Ctrl-C ends the process at once (exit status 130) and leaves the last complete checkpoint, as
the CLI does. The handlers in place before the call are restored after it.
"""
from __future__ import annotations

import ctypes
import logging
import math
import os
import signal
import threading
from dataclasses import dataclass
from ctypes import c_uint8
from typing import Callable, Optional

from . import _lib
from ._lib import lib
from .errors import TrainingInterrupted, _last_error
from .errors import IOError as _IOError

_logger = logging.getLogger("tfm")


# ---------------------------------------------------------------------------------------------- stopping
class _Stop:
    """The library's stop flag, set by SIGINT/SIGTERM (main thread only) or by a failing callback."""

    def __init__(self, handle_signals: bool):
        self.flag = ctypes.c_int(0)     # what tfm_train_ctl.stop points at (sig_atomic_t is an int)
        self.signal = 0                 # the signal that stopped the run
        self.error: Optional[BaseException] = None   # an exception raised by a callback
        self._on = handle_signals and threading.current_thread() is threading.main_thread()
        self._old: dict = {}
        self._fds = None
        self._old_fd = -1
        self._watcher = None

    def _got(self, sig: int) -> None:
        if sig == signal.SIGINT and self.signal:   # a second Ctrl-C leaves at once (the CLI's _exit(130))
            os._exit(128 + sig)
        if not self.signal:
            self.signal = sig
            self.flag.value = sig

    def _watch(self, fd: int) -> None:
        while True:
            try:
                b = os.read(fd, 64)
            except InterruptedError:
                continue
            except OSError:
                return
            for sig in b:
                if sig == 0:   # the sentinel written by __exit__
                    return
                if sig in (signal.SIGINT, signal.SIGTERM):
                    self._got(sig)

    def fail(self, e: BaseException) -> None:
        """A callback raised: stop at the next step boundary (with a checkpoint), re-raise after the run."""
        if self.error is None:
            self.error = e
        self.flag.value = self.flag.value or -1

    def __enter__(self) -> "_Stop":
        if not self._on:
            return self
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._fds = (r, w)
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, _noop_handler)   # the watcher thread acts on the signal
            self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except BaseException:
            self._restore()
            raise
        self._watcher = threading.Thread(target=self._watch, args=(r,), name="tfm-stop-watcher", daemon=True)
        self._watcher.start()
        return self

    def _restore(self) -> None:
        if self._fds:
            signal.set_wakeup_fd(self._old_fd)
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}

    def __exit__(self, *exc) -> None:
        if not self._on or not self._fds:
            return
        _noop()   # a function call: Python runs the handlers of signals still pending before they are restored
        self._restore()
        r, w = self._fds
        os.set_blocking(w, True)
        os.write(w, b"\0")
        self._watcher.join()
        os.close(r)
        os.close(w)
        self._fds = None


def _noop() -> None:
    pass


def _noop_handler(sig, frame) -> None:
    pass


# ---------------------------------------------------------------------------------------------- results
@dataclass
class TrainResult:
    """What a finished run returns.

    checkpoint  the checkpoint written (``out``)
    step        the run's optimizer step at the end (counted across resumes)
    steps       optimizer steps made by this call
    total       the run's length in steps (train_lm: ``iters``; train_mt: epochs x batches)
    val_loss    the last validation loss (NaN if none was measured)
    train_s     seconds spent in training steps by this call
    """

    checkpoint: str
    step: int
    steps: int
    total: int
    val_loss: float
    train_s: float


@dataclass
class LMProgress:
    """A train_lm progress report: after every step (``eval`` False: ``loss``, ``lr``, ``tokens_per_s``,
    ``eta_s``), and after each evaluation (``eval`` True: ``train_loss`` and ``val_loss`` over eval_iters
    batches). ``step`` counts the run's steps (across resumes) out of ``steps``."""

    step: int
    steps: int
    loss: float
    lr: float
    tokens_per_s: float
    eta_s: float
    eval: bool
    train_loss: float
    val_loss: float
    train_s: float

    def __str__(self) -> str:
        if self.eval:
            return f"step {self.step}: train loss {self.train_loss:.4f}, val loss {self.val_loss:.4f}"
        return (f"step {self.step}/{self.steps} | loss {self.loss:.4f} | lr {self.lr:.2e} | "
                f"{self.tokens_per_s:.0f} tok/s | ETA {self.eta_s:.0f}s")


@dataclass
class MTProgress:
    """A train_mt progress report: every ``log_every`` steps and at the end of each epoch. ``loss`` is the mean
    token loss since the previous report; ``valid_loss`` is set (>= 0) at the end of an epoch when validation
    files were given, else -1."""

    epoch: int
    epochs: int
    step: int
    total_steps: int
    loss: float
    lr: float
    tokens_per_s: float
    eta_s: float
    valid_loss: float
    end_of_epoch: bool

    def __str__(self) -> str:
        s = (f"epoch {self.epoch}/{self.epochs}  step {self.step}/{self.total_steps}  loss {self.loss:.4f}  "
             f"lr {self.lr:.2e}  {self.tokens_per_s:.0f} tok/s")
        return s + (f"  valid loss {self.valid_loss:.4f}" if self.valid_loss >= 0 else "")


# ---------------------------------------------------------------------------------------------- library runs
class _RunOptions:
    """A run's options block (tfm_<kind>_run_opts), allocated at the size the library reports and set BY NAME
    through its field table (tfm_field_find / tfm_field_parse: the CLI's flags and parsing), so the package
    does not mirror the struct. ``given`` marks the fields the caller set (a resume checks those and takes
    the checkpoint's values for the rest)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.buf = ctypes.create_string_buffer(getattr(lib, f"tfm_{kind}_run_opts_size")())
        getattr(lib, f"tfm_{kind}_run_opts_default")(self.buf)
        n = ctypes.c_int(0)
        self.fields = getattr(lib, f"tfm_{kind}_run_fields")(ctypes.byref(n))
        self.n = n.value
        self.given = (c_uint8 * max(self.n, 1))()
        self._keep: list = []   # the bytes string fields point into

    def index(self, name: str) -> int:
        return lib.tfm_field_find(self.fields, self.n, name.encode())

    def names(self) -> list:
        return [self.fields[i].name.decode().replace("-", "_") for i in range(self.n)]

    def set(self, name: str, value) -> None:
        i = self.index(name)
        if i < 0:
            raise TypeError(f"train_{self.kind}() got an unexpected keyword argument {name!r} "
                            f"(options: {', '.join(self.names())})")
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, float):
            text = repr(value)
        elif isinstance(value, (int, str, os.PathLike)):
            text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        else:
            raise TypeError(f"{name} must be int, float, bool or str, got {type(value).__name__}")
        b = _lib.enc(text, name)
        self._keep.append(b)
        _lib.check(lib.tfm_field_parse(ctypes.byref(self.fields[i]), self.buf, b))
        self.given[i] = 1

    def get(self, name: str) -> str:
        out = ctypes.create_string_buffer(4200)
        lib.tfm_field_format(ctypes.byref(self.fields[self.index(name)]), self.buf, out, len(out))
        return out.value.decode("utf-8", "replace")


def _options_doc(kind: str) -> str:
    """Every option of a run, its default and its meaning, from the library's field table."""
    try:
        o = _RunOptions(kind)
    except (AttributeError, OSError):
        return ""
    rows = []
    for i in range(o.n):
        f = o.fields[i]
        name = f.name.decode().replace("-", "_")
        rows.append(f"    {name} = {o.get(name) or None!s}: {f.help.decode()}")
    return "\n".join(rows)


def _library_run(kind: str, options: dict, progress_hook, progress, on_message, handle_signals: bool):
    """tfm_<kind>_run with the options given by name, messages and progress through callbacks, SIGINT/SIGTERM
    through the hooks' stop flag. Returns (options, tfm_run_result)."""
    o = _RunOptions(kind)
    for k, v in options.items():
        if v is not None:
            o.set(k, v)
    stop = _Stop(handle_signals)
    log = on_message if on_message is not None else _logger.info

    def message(line, _user):
        try:
            log(line.decode("utf-8", "replace"))
        except BaseException as e:   # noqa: B902 - re-raised after the run
            stop.fail(e)

    def on_progress(p, _user):
        if progress is None or stop.error is not None:
            return
        try:
            progress_hook(p.contents, progress)
        except BaseException as e:   # noqa: B902 - re-raised after the run
            stop.fail(e)

    hooks = _lib.RunHooks()
    hooks.on_message = _lib.MessageFn(message)
    setattr(hooks, f"on_{kind}_progress", getattr(_lib, f"{kind.upper()}ProgressFn")(on_progress))
    hooks.stop = ctypes.pointer(stop.flag)
    hooks.given = ctypes.cast(o.given, ctypes.POINTER(c_uint8))
    r = _lib.RunResult()
    with stop:
        rc = getattr(lib, f"tfm_{kind}_run")(o.buf, ctypes.byref(hooks), ctypes.byref(r))
        err = _last_error(lib) if rc < 0 else None
    if err is not None:
        raise err
    if stop.error is not None:
        raise stop.error
    if r.log_failed:
        raise _IOError(r.log_error.decode("utf-8", "replace"))
    if stop.signal:
        raise TrainingInterrupted(o.get("out"), r.step, stop.signal)
    return o, r


# ---------------------------------------------------------------------------------------------- train_lm
def _lm_progress(p, progress) -> None:
    r = p.r.contents
    progress(LMProgress(r.step, r.steps, r.loss, r.lr, r.tokens_per_s, r.eta_s, bool(r.eval), r.train_loss,
                        r.val_loss, r.train_s))


def train_lm(data: str | os.PathLike | None = None, out: str | os.PathLike | None = None, *,
             resume: str | os.PathLike | None = None, progress: Optional[Callable[[LMProgress], None]] = None,
             on_message: Optional[Callable[[str], None]] = None, handle_signals: bool = True,
             **options) -> TrainResult:
    """Train a GPT on a UTF-8 text file: ``tfm train-lm --data DATA --out OUT`` as one library call
    (tfm_lm_run), with the same options by name (``n_layer`` for ``--n-layer`` ...) parsed as the CLI parses
    them: the same seed and thread count give the same checkpoint, byte for byte. Returns a
    :class:`TrainResult`.

    The checkpoint is written (atomically) at every evaluation, every ``save_every`` steps, and when the run
    stops. Every option not given takes train-lm's default (below) or, with ``resume``, the run's stored value:
    a resume continues the stored run exactly; only the run's length, threads, logging and checkpoint options
    may differ (another value raises :class:`tfm.ArgumentError`), and ``data`` must have the same contents
    unless ``allow_new_data=True``.

    progress: called with an :class:`LMProgress` after every step and every evaluation. on_message: called with
    each line the run has to say (its shape and data, its configuration, a resume); default: the ``tfm``
    logger at INFO. An exception either raises stops the run at the step boundary (the checkpoint is saved)
    and is re-raised. handle_signals: Ctrl-C (SIGINT) and SIGTERM stop the run at a step boundary with a
    checkpoint and raise :class:`tfm.TrainingInterrupted` (module docstring); only from the main thread.
    Errors (unreadable data, a diverged run, a failed save) raise :class:`tfm.Error` subclasses naming the
    option or file.

    Options (name = default: meaning):
    """
    options.update(data=data, out=out, resume=resume)
    o, r = _library_run("lm", options, _lm_progress, progress, on_message, handle_signals)
    val = r.val_loss
    return TrainResult(o.get("out"), r.step, r.steps, int(o.get("iters")), val if math.isfinite(val) else math.nan,
                       r.train_s)


train_lm.__doc__ += _options_doc("lm")


# ---------------------------------------------------------------------------------------------- train_mt
@dataclass
class MTValidation:
    """A train_mt validation with BLEU (every ``eval_every`` steps and after each epoch, with ``valid_src`` /
    ``valid_tgt``): the validation loss, corpus BLEU and chrF2 of greedy translations of the raw validation
    sources against the raw references, the best BLEU so far and its step, and the best checkpoint written
    (``keep_best``: OUT.best.tfm), else None."""

    step: int
    epoch: int
    valid_loss: float
    bleu: float
    chrf: float
    best_bleu: float
    best_step: int
    wrote: Optional[str]

    def __str__(self) -> str:
        s = (f"valid at step {self.step}: loss {self.valid_loss:.4f}  BLEU {self.bleu:.2f}  chrF2 {self.chrf:.2f}  "
             f"(best BLEU {self.best_bleu:.2f} at step {self.best_step})")
        return s + (f"  wrote {self.wrote}" if self.wrote else "")


def train_mt(out: str | os.PathLike | None = None, *, src: str | os.PathLike | None = None,
             tgt: str | os.PathLike | None = None, tsv: str | os.PathLike | None = None,
             valid_src: str | os.PathLike | None = None, valid_tgt: str | os.PathLike | None = None,
             resume: str | os.PathLike | None = None,
             arch: Optional[str] = None, tokenizer: Optional[str] = None, vocab_size: Optional[int] = None,
             bpe_model: str | os.PathLike | None = None, preprocess: Optional[str] = None,
             num_examples: Optional[int] = None, min_freq: Optional[int] = None, max_len: Optional[int] = None,
             d_model: Optional[int] = None, n_head: Optional[int] = None, n_layer: Optional[int] = None,
             ffn: Optional[int] = None, pre_ln: Optional[bool] = None, embed_size: Optional[int] = None,
             hidden_size: Optional[int] = None, dropout: Optional[float] = None,
             share_embeddings: Optional[bool] = None, pad_to_max_len: Optional[bool] = None,
             init: Optional[str] = None, label_smoothing: Optional[float] = None, loss_norm: Optional[str] = None,
             lr: Optional[float] = None, min_lr: Optional[float] = None, schedule: Optional[str] = None,
             warmup: Optional[int] = None, batch_size: Optional[int] = None, max_tokens: Optional[int] = None,
             epochs: Optional[int] = None, grad_clip: Optional[float] = None, weight_decay: Optional[float] = None,
             beta1: Optional[float] = None, beta2: Optional[float] = None, bucket: Optional[int] = None,
             seed: Optional[int] = None, precision: Optional[str] = None, save_every: Optional[int] = None,
             keep_last: Optional[int] = None, skip_nonfinite: Optional[int] = None, threads: Optional[int] = None,
             parallel: Optional[str] = None, max_steps: Optional[int] = None, log_every: Optional[int] = None,
             allow_new_data: Optional[bool] = None, progress: Optional[Callable[[MTProgress], None]] = None,
             handle_signals: bool = True, on_message: Optional[Callable[[str], None]] = None,
             on_validation: Optional[Callable[[MTValidation], None]] = None, **options) -> TrainResult:
    """Train a translator on a parallel corpus: ``tfm train-mt --out OUT --src S --tgt T`` (or ``--tsv``) as one
    library call (tfm_mt_run), with the same options by name (``d_model`` for ``--d-model`` ...) parsed as the
    CLI parses them: the same seed and thread count give the same checkpoint, byte for byte. Returns a
    :class:`TrainResult`.

    The checkpoint is written after every epoch, every ``save_every`` steps, and when the run stops. Every option
    left None takes train-mt's default (below; a ``preset`` sets the options not given: without one, "multi30k"
    when ``tokenizer="bpe"`` is given for a Transformer, else "d2l") or, with ``resume``, the run's stored value:
    a resume continues the stored run exactly; only the run's length (``epochs``), threads, logging, validation
    and checkpoint options may differ (another value raises :class:`tfm.ArgumentError`), and the data files must
    have the same contents unless ``allow_new_data=True``.

    Data: ``src``/``tgt`` (aligned files) or ``tsv`` ("source<TAB>target" lines); ``valid_src``/``valid_tgt``:
    the validation loss after each epoch (``MTProgress.valid_loss``) and BLEU validations (``on_validation``;
    ``eval_every``, ``keep_best``, ``patience``).

    progress: called with an :class:`MTProgress` every ``log_every`` steps and at the end of each epoch.
    on_validation: called with an :class:`MTValidation` after each BLEU validation. on_message: called with each
    line the run has to say (its data and model, its configuration, a resume, warnings); default: the ``tfm``
    logger at INFO. An exception any of them raises stops the run at the step boundary (the checkpoint is saved)
    and is re-raised. handle_signals: as for :func:`train_lm`.

    Options (name = default: meaning):
    """
    args = {k: v for k, v in locals().items() if k not in ("progress", "handle_signals", "on_message",
                                                          "on_validation", "options")}
    args.update(options)
    last = {"total": 0}

    def forward(p) -> None:
        if p.r:
            r = p.r.contents
            last["total"] = r.total_steps
            if progress is not None:
                progress(MTProgress(r.epoch, r.epochs, r.step, r.total_steps, r.loss, r.lr, r.tokens_per_s,
                                    r.eta_s, r.valid_loss, bool(r.end_of_epoch)))
        elif on_validation is not None:
            on_validation(MTValidation(p.step, p.epoch, p.valid_loss, p.bleu, p.chrf, p.best_bleu, p.best_step,
                                       p.wrote.decode("utf-8", "replace") if p.wrote else None))

    o, r = _library_run("mt", args, lambda p, fn: fn(p), forward, on_message, handle_signals)
    val = r.val_loss
    return TrainResult(o.get("out"), r.step, r.steps, last["total"], val if math.isfinite(val) else math.nan,
                       r.train_s)


train_mt.__doc__ += _options_doc("mt")
