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
import struct
import threading
import time
import warnings
from dataclasses import dataclass
from ctypes import c_uint8
from typing import Callable, Dict, List, Optional

from . import _lib
from ._lib import lib
from .errors import DataError, TrainingInterrupted, _last_error
from .errors import IOError as _IOError

_logger = logging.getLogger("tfm")


# ---------------------------------------------------------------------------------------------- run configuration
@dataclass(frozen=True)
class _Flag:
    """One CLI flag of a trainer's run configuration (src/cli/run_flags.c): its run.<cli> entry."""

    cli: str
    kind: type            # int, float, bool or str
    default: object
    data: bool = False    # a data file: its fingerprint is stored as data:<cli>, its path may change on resume
    changeable: bool = False   # a resume may change it (the run's length, checkpoint frequency)

    @property
    def py(self) -> str:
        return self.cli.replace("-", "_")


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _fmt(kind: type, v) -> str:
    """A value as the CLI writes it in run.* (format_flag in src/cli/run_flags.c)."""
    if kind is bool:
        return "1" if v else "0"
    if kind is int:
        return "%d" % int(v)
    if kind is float:   # the shortest of %g / %.9g that reads back as the same float32
        f = _f32(v)
        s = "%g" % f
        return s if _f32(float(s)) == f else "%.9g" % f
    return "" if v is None else os.fspath(v)


def _parse(kind: type, s: str):
    if kind is bool:
        return int(s or 0) != 0
    if kind is int:
        return int(s or 0)
    if kind is float:
        return _f32(float(s))
    return s or None


def _fingerprint(path: str) -> str:
    buf = ctypes.create_string_buffer(128)
    _lib.check(lib.tfm_file_fingerprint(_lib.enc(path, "data path"), buf, 128))
    return buf.value.decode()


def _run_values(flags: List[_Flag], given: Dict[str, object], resume: Optional[str],
                allow_new_data: bool) -> Dict[str, object]:
    """The run's settings: defaults, then (resume) the checkpoint's stored run configuration for what is not
    given; a given value that differs from the stored one is refused unless the flag is changeable, and a data
    file whose contents differ is refused unless allow_new_data (the CLI's --resume rules)."""
    values = {f.py: f.default for f in flags}
    values.update(given)
    if not resume:
        return values
    stored = _lib.RunConfig()
    _lib.check(lib.tfm_run_config_load(_lib.enc(resume, "resume"), ctypes.byref(stored)))
    try:
        for f in flags:
            v = lib.tfm_run_config_find(ctypes.byref(stored), f.cli.encode())
            if v is None:
                continue
            v = v.decode("utf-8", "replace")
            if f.py not in given:
                values[f.py] = _parse(f.kind, v)
            elif _fmt(f.kind, given[f.py]) != v and not f.data and not f.changeable:
                raise ValueError(f"resume: {f.py}={_fmt(f.kind, given[f.py])} differs from the checkpoint's "
                                 f"{f.py}={v} (a resume continues the stored run; only threads, the run's length "
                                 "and the checkpoint options may change)")
            fp = lib.tfm_run_config_find(ctypes.byref(stored), f"data:{f.cli}".encode())
            if not f.data or fp is None or not values[f.py]:
                continue
            now = _fingerprint(os.fspath(values[f.py]))
            if now == fp.decode():
                continue
            if not allow_new_data:
                raise ValueError(f"resume: {f.py}={values[f.py]} is not the data of the run ({now}; the "
                                 f"checkpoint's: {fp.decode()}); allow_new_data=True to train on it anyway")
            warnings.warn(f"allow_new_data: {f.py}={values[f.py]} ({now}) replaces the run's data ({fp.decode()})")
    finally:
        lib.tfm_run_config_free(ctypes.byref(stored))
    return values


def _run_config(flags: List[_Flag], values: Dict[str, object]) -> _lib.RunConfig:
    """The run.* entries as the CLI builds them (cli_run_config_build); free with tfm_run_config_free."""
    rc = _lib.RunConfig()
    try:
        for f in flags:
            s = _fmt(f.kind, values[f.py])
            _lib.check(lib.tfm_run_config_set(ctypes.byref(rc), f.cli.encode(), _lib.enc(s, f.py)))
            if f.data and s:
                _lib.check(lib.tfm_run_config_set(ctypes.byref(rc), f"data:{f.cli}".encode(),
                                                  _fingerprint(s).encode()))
    except BaseException:
        lib.tfm_run_config_free(ctypes.byref(rc))
        raise
    return rc


def _given(flags: List[_Flag], args: Dict[str, object]) -> Dict[str, object]:
    names = {f.py for f in flags}
    return {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in args.items()
            if k in names and v is not None}


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


def _parallel(value: str) -> int:
    names = {"auto": 0, "ops": 1, "batch": 2}   # tfm_parallel
    if value not in names:
        raise ValueError(f"parallel must be auto, batch or ops, got {value!r}")
    return names[value]


def _bf16(value: Optional[str]) -> int:
    if value not in (None, "fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, got {value!r}")
    return int(value == "bf16")


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise ValueError(msg)


class _Threads:
    """tfm_set_threads for the call (the OpenMP thread count of the calling thread), restored after it."""

    def __init__(self, n: int):
        _check(0 <= n <= 1024, f"threads must be in 0..1024 (0 = default), got {n}")
        self.n = n

    def __enter__(self):
        self.old = lib.tfm_get_threads()
        lib.tfm_set_threads(self.n)

    def __exit__(self, *exc):
        lib.tfm_set_threads(self.old)


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
# tfm train-mt's recorded flags, in its table's order, with its defaults (src/cli/cmd_train_mt.c,
# train_mt_model.c). eval-every, keep-best and patience (BLEU validation, still in the CLI) are recorded with
# their values but not acted on here.
_MT_FLAGS = [
    _Flag("tsv", str, None, data=True), _Flag("src", str, None, data=True), _Flag("tgt", str, None, data=True),
    _Flag("valid-src", str, None, data=True), _Flag("valid-tgt", str, None, data=True),
    _Flag("arch", str, "transformer"), _Flag("preprocess", str, "d2l"), _Flag("num-examples", int, 0),
    _Flag("min-freq", int, 2), _Flag("max-len", int, 10), _Flag("d-model", int, 32), _Flag("n-head", int, 4),
    _Flag("n-layer", int, 2), _Flag("ffn", int, 64), _Flag("pre-ln", bool, False), _Flag("embed-size", int, 32),
    _Flag("hidden-size", int, 32), _Flag("dropout", float, 0.2), _Flag("label-smoothing", float, 0.0),
    _Flag("loss-norm", str, "tokens"), _Flag("lr", float, 0.005), _Flag("min-lr", float, 0.0),
    _Flag("schedule", str, "constant"), _Flag("warmup", int, 0), _Flag("batch-size", int, 64),
    _Flag("epochs", int, 10, changeable=True), _Flag("grad-clip", float, 1.0), _Flag("weight-decay", float, 0.0),
    _Flag("beta1", float, 0.9), _Flag("beta2", float, 0.999), _Flag("bucket", int, 0), _Flag("seed", int, 1),
    _Flag("save-every", int, 0, changeable=True), _Flag("keep-last", int, 0, changeable=True),
    _Flag("skip-nonfinite", int, 0, changeable=True),
    _Flag("tokenizer", str, "word"), _Flag("vocab-size", int, 0), _Flag("bpe-model", str, None),
    _Flag("share-embeddings", bool, False), _Flag("pad-to-max-len", bool, False), _Flag("init", str, "d2l"),
    _Flag("max-tokens", int, 0), _Flag("eval-every", int, 0, changeable=True),
    _Flag("keep-best", bool, False, changeable=True), _Flag("patience", int, 0, changeable=True),
    _Flag("precision", str, None), _Flag("decode-beam", int, 0, changeable=True),
    _Flag("decode-alpha", float, 0.0, changeable=True), _Flag("src-lang", str, None, changeable=True),
    _Flag("tgt-lang", str, None, changeable=True),
]
_SCHEDULES = {"noam": 0, "cosine": 1, "constant": 2}   # tfm_sched_kind
_TOK_BPE = 4                                             # TFM_TOK_BPE


def _mt_check(v: dict) -> None:
    """The checks of train-mt's flags that the library does not make itself, naming the argument."""
    _check((v["tsv"] is None) != (v["src"] is None), "give tsv, or src and tgt")
    _check((v["src"] is None) == (v["tgt"] is None), "src and tgt go together")
    _check((v["valid_src"] is None) == (v["valid_tgt"] is None), "valid_src and valid_tgt go together")
    _check(v["arch"] in ("transformer", "rnn", "bahdanau"), f"arch must be transformer, rnn or bahdanau, got {v['arch']!r}")
    _check(v["schedule"] in _SCHEDULES, f"schedule must be noam, cosine or constant, got {v['schedule']!r}")
    _check(v["loss_norm"] in ("tokens", "d2l"), f"loss_norm must be tokens or d2l, got {v['loss_norm']!r}")
    _check(v["tokenizer"] in ("word", "bpe"), f"tokenizer must be word or bpe, got {v['tokenizer']!r}")
    _check(v["init"] in ("d2l", "xavier"), f"init must be d2l or xavier, got {v['init']!r}")
    bpe = v["tokenizer"] == "bpe"
    if not bpe:
        _check(lib.tfm_tok_kind_parse(_lib.enc(v["preprocess"], "preprocess")) in (0, 1, 2, 3),
               f"preprocess must be d2l, moses, moses-lower or space, got {v['preprocess']!r}")
    _check(bpe or not (v["vocab_size"] or v["bpe_model"]), "vocab_size / bpe_model need tokenizer='bpe'")
    _check(not (v["vocab_size"] and v["bpe_model"]), "give vocab_size or bpe_model, not both")
    _check(0 <= v["vocab_size"] <= 1000000, f"vocab_size must be in 1..1000000, got {v['vocab_size']}")
    _check(bpe or not v["share_embeddings"], "share_embeddings needs one joint vocabulary: tokenizer='bpe'")
    _check(not v["pad_to_max_len"] or not v["max_tokens"], "give pad_to_max_len or max_tokens, not both")
    _check(0 <= v["max_tokens"] <= 10000000, f"max_tokens must be in 0..1e7, got {v['max_tokens']}")
    _check(not v["max_tokens"] or v["max_tokens"] >= v["max_len"], "max_tokens must be at least max_len")
    _check(1 <= v["epochs"] <= 1000000, f"epochs must be in 1..1e6, got {v['epochs']}")
    _check(1 <= v["batch_size"] <= 65536, f"batch_size must be in 1..65536, got {v['batch_size']}")
    _check(2 <= v["max_len"] <= 100000, f"max_len must be in 2..1e5, got {v['max_len']}")
    _check(v["lr"] > 0, f"lr must be > 0, got {v['lr']}")
    for k in ("save_every", "keep_last", "skip_nonfinite", "warmup", "num_examples", "bucket", "min_freq"):
        _check(v[k] >= 0, f"{k} must be >= 0, got {v[k]}")
    for k in ("eval_every", "keep_best", "patience"):
        _check(not v[k], f"{k}: BLEU validation is not in the library yet (use tfm train-mt)")


def _mt_options(v: dict, max_steps: int, log_every: int, parallel: str) -> _lib.MTTrainOptions:
    to = _lib.MTTrainOptions()
    lib.tfm_mt_train_opts_default(ctypes.byref(to))
    to.epochs, to.batch_size, to.num_steps, to.lr = v["epochs"], v["batch_size"], v["max_len"], v["lr"]
    to.schedule, to.warmup, to.min_lr = _SCHEDULES[v["schedule"]], v["warmup"], v["min_lr"]
    to.label_smoothing, to.loss_norm = v["label_smoothing"], int(v["loss_norm"] == "d2l")
    to.grad_clip, to.weight_decay, to.beta1, to.beta2 = v["grad_clip"], v["weight_decay"], v["beta1"], v["beta2"]
    to.seed, to.bucket, to.log_every, to.max_steps = v["seed"] % (1 << 64), v["bucket"], int(log_every), int(max_steps)
    to.ctl.parallel, to.ctl.bf16 = _parallel(parallel), _bf16(v["precision"])
    to.ctl.save_every, to.ctl.skip_nonfinite = v["save_every"], v["skip_nonfinite"]
    to.max_tokens = v["max_tokens"]
    return to


def _mt_config(v: dict) -> _lib.S2SConfig:
    cf = _lib.S2SConfig()
    lib.tfm_s2s_config_default(ctypes.byref(cf))
    cf.arch = v["arch"].encode()
    cf.d_model, cf.n_head, cf.ffn, cf.pre_ln = v["d_model"], v["n_head"], v["ffn"], int(v["pre_ln"])
    cf.max_len = max(1000, v["max_len"] + 1)   # the positional table: train-mt's pe_len 1000, or longer
    cf.n_layer, cf.embed_size, cf.hidden_size, cf.dropout = v["n_layer"], v["embed_size"], v["hidden_size"], v["dropout"]
    cf.pad_len = v["max_len"] if v["pad_to_max_len"] else 0
    cf.share_embeddings, cf.init = int(v["share_embeddings"]), int(v["init"] == "xavier")
    return cf


def _mt_corpus(p, v: dict, kind: int, valid: bool) -> None:
    if valid:
        rc = lib.tfm_parallel_load_files(p, _lib.enc(v["valid_src"]), _lib.enc(v["valid_tgt"]), kind, 0)
    elif v["tsv"]:
        rc = lib.tfm_parallel_load_tsv(p, _lib.enc(v["tsv"]), kind, v["num_examples"])
    else:
        rc = lib.tfm_parallel_load_files(p, _lib.enc(v["src"]), _lib.enc(v["tgt"]), kind, v["num_examples"])
    _lib.check(rc)
    name = v["valid_src"] if valid else v["tsv"] or v["src"]
    if p.contents.n_empty:
        warnings.warn(f"{name}: skipped {p.contents.n_empty} empty lines (of {p.contents.n_lines} read)")
    if p.contents.n == 0:
        lib.tfm_parallel_text_free(p)
        raise DataError(f"{name}: no sentence pairs")


def _pair_lines(p: _lib.ParallelText):
    """The raw lines of both sides, interleaved (what train-mt learns its joint BPE model from)."""
    lines = (ctypes.c_char_p * (2 * p.n))()
    for i in range(p.n):
        lines[2 * i], lines[2 * i + 1] = p.src[i].tok[0], p.tgt[i].tok[0]
    return lines


def _mt_build(v: dict, p, to, tr, opt) -> None:
    """A fresh translator: word vocabularies, or a joint BPE model learned from the pairs / read from bpe_model."""
    cf = _mt_config(v)
    if v["tokenizer"] == "bpe":
        b = _lib.calloc_bpe()   # the translator owns it from now on (and frees it, also on failure)
        try:
            if v["bpe_model"]:
                rc = lib.tfm_bpe_load(b, _lib.enc(v["bpe_model"], "bpe_model"))
            else:
                lines = _pair_lines(p.contents)
                lo = _lib.BpeLearnOptions()
                lib.tfm_bpe_learn_defaults(ctypes.byref(lo))
                if v["vocab_size"]:
                    lo.vocab_size = v["vocab_size"]
                rc = lib.tfm_bpe_learn_lines(b, lines, len(lines), ctypes.byref(lo))
            _lib.check(rc)
        except BaseException:
            lib.tfm_bpe_free(b)
            _lib.free(ctypes.cast(b, ctypes.c_void_p).value)
            raise
        _lib.check(lib.tfm_mt_model_build_bpe(tr, b, ctypes.byref(cf), to.seed))
    else:
        kind = lib.tfm_tok_kind_parse(_lib.enc(v["preprocess"]))
        _lib.check(lib.tfm_mt_model_build(tr, p, kind, v["min_freq"], ctypes.byref(cf), to.seed))
    params = ctypes.cast(tr.contents.model, ctypes.POINTER(_lib.EncDec)).contents.params
    _lib.check(lib.tfm_adamw_init(opt, ctypes.byref(params), to.beta1, to.beta2, to.eps, to.weight_decay))


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
             keep_last: Optional[int] = None, skip_nonfinite: Optional[int] = None, threads: int = 0,
             parallel: str = "auto", max_steps: int = 0, log_every: int = 50, allow_new_data: bool = False,
             progress: Optional[Callable[[MTProgress], None]] = None, handle_signals: bool = True) -> TrainResult:
    """Train a translator on a parallel corpus, as ``tfm train-mt --out OUT --src S --tgt T`` (or ``--tsv``)
    with the same options (``d_model`` for ``--d-model`` ...): the same seed and thread count give the same
    checkpoint, byte for byte. Returns a :class:`TrainResult`.

    The checkpoint is written after every epoch, every ``save_every`` steps, and when the run stops. Every
    setting left None takes tfm train-mt's default (below) or, with ``resume``, the checkpoint's, under the
    CLI's resume rules (see :func:`train_lm`; here ``epochs``, ``save_every``, ``keep_last`` and
    ``skip_nonfinite`` may change).

    Data: src/tgt (aligned files) or tsv ("source<TAB>target" lines); num_examples 0 (= all pairs);
    valid_src/valid_tgt: validation loss after each epoch (``MTProgress.valid_loss``).
    Tokens: tokenizer "word" (preprocess "d2l" | "moses" | "moses-lower" | "space", min_freq 2) or "bpe" (a
    joint BPE model learned from both sides, vocab_size 0 = 8000 pieces, or read from bpe_model; raw text in
    and out); max_len 10 (sentences padded/truncated to this many tokens, <eos> included).
    Model: arch "transformer" (d_model 32, n_head 4, n_layer 2, ffn 64, pre_ln False, share_embeddings False,
    init "d2l" | "xavier") | "rnn" | "bahdanau" (embed_size 32, hidden_size 32, n_layer 2); dropout 0.2;
    pad_to_max_len False.
    Optimization: batch_size 64 pairs (or max_tokens > 0: token-budget batches), epochs 10, lr 0.005,
    schedule "constant" | "noam" (lr is its scale) | "cosine" (to min_lr 0), warmup 0, label_smoothing 0,
    loss_norm "tokens" | "d2l", grad_clip 1, weight_decay 0, beta1 0.9, beta2 0.999, bucket 0, seed 1,
    precision None (fp32) | "bf16". Checkpoints: save_every 0, keep_last 0, skip_nonfinite 0.
    Not stored: threads 0, parallel "auto", max_steps 0, log_every 50 (steps between progress reports; 0 = one
    per epoch).

    progress, handle_signals: as for :func:`train_lm` (progress gets an :class:`MTProgress`).
    Not available yet (the library lacks them; ``tfm train-mt`` has them): BLEU/chrF validation with
    eval_every / keep_best / patience, and the JSON-lines log file.
    """
    resume = os.fspath(resume) if resume is not None else None
    out = os.fspath(out) if out is not None else resume
    _check(out is not None, "out (or resume) is required")
    values = _run_values(_MT_FLAGS, _given(_MT_FLAGS, dict(locals())), resume, allow_new_data)
    _mt_check(values)
    _check(max_steps >= 0, f"max_steps must be >= 0 (0 = no limit), got {max_steps}")
    _check(log_every >= 0, f"log_every must be >= 0, got {log_every}")
    to = _mt_options(values, max_steps, log_every, parallel)
    run = _run_config(_MT_FLAGS, values)
    with _Threads(int(threads)):
        try:
            return _mt_run(values, out, resume, to, run, progress, handle_signals)
        finally:
            lib.tfm_run_config_free(ctypes.byref(run))


def _mt_run(v, out, resume, to, run, progress, handle_signals) -> TrainResult:
    tr, opt, prog = _lib.MTModel(), _lib.AdamW(), _lib.MTProgress()
    ptrain, pvalid, atrain, avalid = _lib.ParallelText(), _lib.ParallelText(), _lib.NmtArrays(), _lib.NmtArrays()
    ptr, popt, pprog = ctypes.pointer(tr), ctypes.pointer(opt), ctypes.pointer(prog)
    lib.tfm_mt_progress_init(pprog, to.seed)
    frees = [lambda: lib.tfm_mt_model_free(ptr)]
    try:
        kind = _TOK_BPE if v["tokenizer"] == "bpe" else lib.tfm_tok_kind_parse(_lib.enc(v["preprocess"]))
        if resume:
            _lib.check(lib.tfm_mt_resume(_lib.enc(resume), ptr, popt, pprog, ctypes.byref(to)))
            frees.append(lambda: lib.tfm_adamw_free(popt))
            kind = tr.tok_kind
        _mt_corpus(ctypes.pointer(ptrain), v, kind, False)
        frees.append(lambda: lib.tfm_parallel_text_free(ctypes.byref(ptrain)))
        have_valid = v["valid_src"] is not None
        if have_valid:
            _mt_corpus(ctypes.pointer(pvalid), v, kind, True)
            frees.append(lambda: lib.tfm_parallel_text_free(ctypes.byref(pvalid)))
        if not resume:
            _mt_build(v, ctypes.pointer(ptrain), to, ptr, popt)
            frees.append(lambda: lib.tfm_adamw_free(popt))
        _lib.check(lib.tfm_mt_arrays(ctypes.byref(ptrain), ptr, v["max_len"], ctypes.byref(atrain)))
        frees.append(lambda: lib.tfm_nmt_arrays_free(ctypes.byref(atrain)))
        if have_valid:
            _lib.check(lib.tfm_mt_arrays(ctypes.byref(pvalid), ptr, v["max_len"], ctypes.byref(avalid)))
            frees.append(lambda: lib.tfm_nmt_arrays_free(ctypes.byref(avalid)))
        lib.tfm_ckpt_remove_stale_tmp(_lib.enc(out, "out"))
        out_b, keep_last = _lib.enc(out, "out"), v["keep_last"]
        last = {"total": 0, "valid": math.nan, "train_s": 0.0}
        stop = _Stop(handle_signals)

        def on_report(r, _user):
            r = r.contents
            last["total"] = r.total_steps
            if r.valid_loss >= 0:
                last["valid"] = r.valid_loss
            if progress is not None and stop.error is None:
                try:
                    progress(MTProgress(r.epoch, r.epochs, r.step, r.total_steps, r.loss, r.lr, r.tokens_per_s,
                                        r.eta_s, r.valid_loss, bool(r.end_of_epoch)))
                except BaseException as e:   # noqa: B902 - re-raised after the run
                    stop.fail(e)

        def on_epoch(p, _user):
            if lib.tfm_mt_save_run(out_b, ptr, popt, p, ctypes.byref(to), ctypes.byref(run)):
                return -1
            return lib.tfm_ckpt_keep_step(out_b, p.contents.step, keep_last) if keep_last > 0 else 0

        report_fn, epoch_fn = _lib.MTReportFn(on_report), _lib.MTEpochFn(on_epoch)
        to.ctl.stop = ctypes.pointer(stop.flag)
        start = prog.step
        idle = prog.epoch >= to.epochs or (to.max_steps > 0 and prog.step >= to.max_steps)
        t0 = time.perf_counter()
        with stop:
            rc = 0 if idle else lib.tfm_mt_train(tr.model, ctypes.byref(atrain), ctypes.byref(avalid) if have_valid
                                                 else None, ctypes.byref(to), popt, pprog, report_fn, epoch_fn, None)
            err = _last_error(lib) if rc else None
        if err is not None:
            raise err
        if stop.error is not None:
            raise stop.error
        if stop.signal:
            raise TrainingInterrupted(out, prog.step, stop.signal)
        return TrainResult(out, prog.step, prog.step - start, last["total"], last["valid"], time.perf_counter() - t0)
    finally:
        for f in reversed(frees):
            f()
