"""Loading libtfm.so and declaring what the package calls in it (ctypes, no compiler needed).

Every function used is declared once in ``_FUNCTIONS`` with its C result and argument types. Only the option,
result and report structs the calls fill are mirrored as ctypes Structures (their layout is compared with the
C compiler's by tests/python/test_tfm.py: sizeof and offsetof of every field); the models (tfm_bpe, tfm_gpt,
tfm_mt_model) are opaque pointers read through accessor functions, so no struct layout of theirs is assumed. ctypes releases the GIL for the duration of every foreign call, so
Python threads run the library concurrently.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_long, c_size_t, c_uint8,
                    c_uint64, c_void_p)
from pathlib import Path

from .errors import _raise_last

# ---------------------------------------------------------------------------------------------- finding it

ENV_VAR = "TFM_LIBRARY"


def _candidates() -> list:
    """Where libtfm.so is looked for, in order (docs/PYTHON.md, "Finding the library")."""
    here = Path(__file__).resolve().parent
    out = []
    if os.environ.get(ENV_VAR):
        return [os.environ[ENV_VAR]]
    out.append(str(here / "libtfm.so"))                        # a copy placed inside the package
    out.append(str(here.parent.parent / "build" / "libtfm.so"))  # python/tfm -> the source tree's build/
    try:   # written into an installed package by python/_backend/tfm_build.py: the tree it was built from
        from ._build_path import LIBRARY
        out.append(LIBRARY)
    except ImportError:
        pass
    found = ctypes.util.find_library("tfm")                    # ld.so.cache (after make install; ldconfig)
    if found:
        out.append(found)
    out += ["libtfm.so", "/usr/local/lib/libtfm.so", "/usr/lib/libtfm.so"]
    return out


def _short_spin() -> None:
    """As the tfm CLI does (tfm_threads_short_spin): idle OpenMP threads sleep after ~0.3 ms of spinning
    instead of GNU libgomp's default of ~10 ms, so a waiting thread frees its core (several Python threads
    each running an OpenMP team on few cores). libgomp reads the variable when it is loaded, i.e. with
    libtfm.so below; an OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME already set is left alone."""
    if not any(v in os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")):
        os.environ["GOMP_SPINCOUNT"] = "10000"


def _load() -> tuple[ctypes.CDLL, str]:
    _short_spin()
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("tfm: cannot load libtfm.so; tried " + "; ".join(tried) +
                      f". Build it (make) or install it (make install), or set {ENV_VAR}=/path/to/libtfm.so")


# ---------------------------------------------------------------------------------------------- structs
class TranslatorParams(Structure):   # tfm_translator_params (translator.h)
    _fields_ = [("threads", c_int), ("max_batch_size", c_int), ("pack_weights", c_int), ("profile", c_int),
                ("read_ahead", c_int)]


class TranslateOptions(Structure):   # tfm_translate_options (translator.h)
    _fields_ = [("beam_size", c_int), ("length_penalty", c_float), ("max_decoding_length", c_int),
                ("max_input_length", c_int), ("num_hypotheses", c_int), ("return_scores", c_int),
                ("return_attention", c_int), ("target_prefix", POINTER(c_char_p)), ("max_batch_size", c_int)]


class Translation(Structure):        # tfm_translation (translator.h)
    _fields_ = [("n_hypotheses", c_int), ("hypotheses", POINTER(c_char_p)), ("scores", POINTER(c_float)),
                ("attention", POINTER(c_float)), ("n_source_tokens", c_int), ("n_target_tokens", c_int),
                ("source_tokens", POINTER(c_char_p)), ("target_tokens", POINTER(c_char_p)),
                ("source_truncated", c_int), ("n_input_tokens", c_int), ("n_output_tokens", c_int)]


MAX_STOP = 8                         # TFM_MAX_STOP (generator.h)


class GeneratorParams(Structure):    # tfm_generator_params (generator.h)
    _fields_ = [("threads", c_int), ("profile", c_int), ("no_kv_cache", c_int)]


class GenerateOptions(Structure):    # tfm_generate_options (generator.h)
    _fields_ = [("max_tokens", c_int), ("temperature", c_float), ("top_k", c_int), ("top_p", c_float),
                ("seed", c_uint64), ("stop", c_char_p * MAX_STOP)]


class Generation(Structure):         # tfm_generation (generator.h)
    _fields_ = [("text", c_void_p), ("n_prompt_tokens", c_int), ("n_tokens", c_int), ("finish_reason", c_int)]


MessageFn = ctypes.CFUNCTYPE(None, c_char_p, c_void_p)    # tfm_run_hooks.on_message


class Field(Structure):              # tfm_field (run.h): one option of a run, set by name
    _fields_ = [("name", c_char_p), ("type", c_int), ("cls", c_int), ("offset", c_size_t), ("help", c_char_p)]


class LMReport(Structure):           # tfm_lm_report (train.h)
    _fields_ = [("step", c_int), ("steps", c_int), ("loss", c_float), ("lr", c_float), ("tokens_per_s", c_float),
                ("eta_s", c_float), ("eval", c_int), ("train_loss", c_float), ("val_loss", c_float),
                ("train_s", c_double)]


class LMProgress(Structure):         # tfm_lm_progress (run.h)
    _fields_ = [("r", POINTER(LMReport)), ("mean_loss", c_float), ("n_mean", c_int), ("line", c_int),
                ("train_per_char", c_float), ("val_per_char", c_float)]


LMProgressFn = ctypes.CFUNCTYPE(None, POINTER(LMProgress), c_void_p)


class MTReport(Structure):           # tfm_mt_report (train.h)
    _fields_ = [("epoch", c_int), ("epochs", c_int), ("step", c_int), ("total_steps", c_int), ("loss", c_float),
                ("lr", c_float), ("tokens_per_s", c_float), ("eta_s", c_float), ("valid_loss", c_float),
                ("end_of_epoch", c_int)]


class MTRunProgress(Structure):      # tfm_mt_run_progress (run.h): a report (r) or a validation
    _fields_ = [("r", POINTER(MTReport)), ("step", c_int), ("epoch", c_int), ("valid_loss", c_float),
                ("bleu", c_float), ("chrf", c_double), ("best_bleu", c_float), ("best_step", c_int),
                ("wrote", c_char_p)]


MTProgressFn = ctypes.CFUNCTYPE(None, POINTER(MTRunProgress), c_void_p)


class RunHooks(Structure):           # tfm_run_hooks (run.h); stop points at a sig_atomic_t (an int here)
    _fields_ = [("on_message", MessageFn), ("on_lm_progress", LMProgressFn), ("stop", POINTER(c_int)),
                ("given", POINTER(c_uint8)), ("dist", c_void_p), ("user", c_void_p),
                ("on_mt_progress", MTProgressFn)]


class RunResult(Structure):          # tfm_run_result (run.h)
    _fields_ = [("start_step", c_int), ("step", c_int), ("steps", c_int), ("saved_step", c_int),
                ("stopped_by", c_int), ("log_failed", c_int), ("epoch", c_int), ("train_s", c_double),
                ("tokens", c_long), ("val_loss", c_float), ("log_error", c_char * 256)]


BLEU_MAX_ORDER = 4                   # TFM_BLEU_MAX_ORDER (eval.h)
CHRF_ORDER = 6                       # TFM_CHRF_ORDER


class BleuResult(Structure):         # tfm_bleu_result (eval.h)
    _fields_ = [("score", c_double), ("precisions", c_double * BLEU_MAX_ORDER), ("bp", c_double),
                ("ratio", c_double), ("hyp_len", c_long), ("ref_len", c_long),
                ("correct", c_long * BLEU_MAX_ORDER), ("total", c_long * BLEU_MAX_ORDER)]


class BleuStats(Structure):          # tfm_bleu_stats (eval.h)
    _fields_ = [("lowercase", c_int), ("max_order", c_int), ("effective_order", c_int), ("hyp_len", c_long),
                ("ref_len", c_long), ("correct", c_long * BLEU_MAX_ORDER), ("total", c_long * BLEU_MAX_ORDER),
                ("n_segments", c_long)]


class ChrfStats(Structure):          # tfm_chrf_stats (eval.h)
    _fields_ = [("lowercase", c_int), ("counts", (c_long * 3) * CHRF_ORDER), ("n_segments", c_long)]


class ChrfResult(Structure):         # tfm_chrf_result (eval.h)
    _fields_ = [("score", c_double), ("precision", c_double), ("recall", c_double),
                ("counts", (c_long * 3) * CHRF_ORDER)]


class BpeLearnOptions(Structure):    # tfm_bpe_learn_opts (bpe.h)
    _fields_ = [("vocab_size", c_int), ("character_coverage", c_float), ("max_piece_chars", c_int),
                ("split_by_class", c_int)]


# C names of the mirrored structs, for the layout check (tests/python/test_tfm.py).
STRUCTS = {
    "tfm_translator_params": TranslatorParams, "tfm_translate_options": TranslateOptions,
    "tfm_translation": Translation, "tfm_generator_params": GeneratorParams,
    "tfm_generate_options": GenerateOptions, "tfm_generation": Generation, "tfm_lm_report": LMReport,
    "tfm_field": Field, "tfm_lm_progress": LMProgress, "tfm_run_hooks": RunHooks, "tfm_run_result": RunResult,
    "tfm_mt_report": MTReport, "tfm_mt_run_progress": MTRunProgress, "tfm_bleu_result": BleuResult,
    "tfm_bleu_stats": BleuStats, "tfm_chrf_stats": ChrfStats, "tfm_chrf_result": ChrfResult,
    "tfm_bpe_learn_opts": BpeLearnOptions,
}

# ---------------------------------------------------------------------------------------------- callbacks
TextFn = ctypes.CFUNCTYPE(c_int, c_void_p, c_size_t, c_void_p)            # tfm_text_fn

# ---------------------------------------------------------------------------------------------- functions
P = POINTER
_FUNCTIONS = {
    # core.h, version.h
    "tfm_last_error": (c_char_p, []),
    "tfm_last_error_kind": (c_int, []),
    "tfm_version_string": (c_char_p, []),
    "tfm_default_threads": (c_int, []),
    "tfm_get_threads": (c_int, []),
    "tfm_set_threads": (None, [c_int]),
    # translator.h
    "tfm_translator_params_default": (None, [P(TranslatorParams)]),
    "tfm_translator_load": (c_void_p, [c_char_p, P(TranslatorParams)]),
    "tfm_translator_load_ensemble": (c_void_p, [P(c_char_p), c_int, P(TranslatorParams)]),
    "tfm_translator_free": (None, [c_void_p]),
    "tfm_translator_model": (c_void_p, [c_void_p]),
    "tfm_translate_options_default": (None, [P(TranslateOptions)]),
    "tfm_translation_free": (None, [P(Translation)]),
    "tfm_translator_translate_batch": (c_int, [c_void_p, P(c_char_p), c_int, P(TranslateOptions), P(Translation)]),
    # seq2seq.h: the model behind a translator (read-only)
    "tfm_mt_model_decode_beam": (c_int, [c_void_p]),
    "tfm_mt_model_decode_alpha": (c_float, [c_void_p]),
    "tfm_mt_model_src_lang": (c_char_p, [c_void_p]),
    "tfm_mt_model_tgt_lang": (c_char_p, [c_void_p]),
    "tfm_mt_model_bpe": (c_void_p, [c_void_p]),
    # generator.h
    "tfm_generator_params_default": (None, [P(GeneratorParams)]),
    "tfm_generator_load": (c_void_p, [c_char_p, P(GeneratorParams)]),
    "tfm_generator_free": (None, [c_void_p]),
    "tfm_generator_model": (c_void_p, [c_void_p]),
    "tfm_generator_tokenizer": (c_char_p, [c_void_p]),
    "tfm_generator_count_tokens": (c_int, [c_void_p, c_char_p]),
    "tfm_gpt_vocab_size": (c_int, [c_void_p]),
    "tfm_gpt_block_size": (c_int, [c_void_p]),
    "tfm_generate_options_default": (None, [P(GenerateOptions)]),
    "tfm_finish_reason_name": (c_char_p, [c_int]),
    "tfm_generation_free": (None, [P(Generation)]),
    "tfm_generator_generate": (c_int, [c_void_p, c_char_p, P(GenerateOptions), TextFn, c_void_p, P(Generation)]),
    "tfm_generator_start": (c_void_p, [c_void_p, c_char_p, P(GenerateOptions)]),
    "tfm_generator_step": (c_int, [c_void_p, P(c_void_p), c_int]),
    "tfm_gen_stream_take": (c_void_p, [c_void_p, P(c_size_t)]),
    "tfm_gen_stream_finished": (c_int, [c_void_p]),
    "tfm_gen_stream_cancel": (None, [c_void_p]),
    "tfm_gen_stream_result": (c_int, [c_void_p, P(Generation)]),
    "tfm_gen_stream_free": (None, [c_void_p]),
    # eval.h
    "tfm_bleu_init": (None, [P(BleuStats), c_int]),
    "tfm_bleu_add": (c_int, [P(BleuStats), c_char_p, P(c_char_p), c_int]),
    "tfm_bleu_compute": (None, [P(BleuStats), P(BleuResult)]),
    "tfm_bleu_format": (c_char_p, [P(BleuResult), c_char_p, c_size_t]),
    "tfm_bleu_signature": (c_char_p, [c_int, c_int, c_char_p, c_size_t]),
    "tfm_chrf_init": (None, [P(ChrfStats), c_int]),
    "tfm_chrf_add": (c_int, [P(ChrfStats), c_char_p, P(c_char_p), c_int]),
    "tfm_chrf_compute": (None, [P(ChrfStats), P(ChrfResult)]),
    "tfm_chrf_format": (c_char_p, [P(ChrfResult), c_char_p, c_size_t]),
    "tfm_chrf_signature": (c_char_p, [c_int, c_int, c_char_p, c_size_t]),
    # bpe.h (a model is an opaque pointer: tfm_bpe_new / tfm_bpe_delete)
    "tfm_bpe_new": (c_void_p, []),
    "tfm_bpe_delete": (None, [c_void_p]),
    "tfm_bpe_size": (c_int, [c_void_p]),
    "tfm_bpe_pad_id": (c_int, [c_void_p]),
    "tfm_bpe_bos_id": (c_int, [c_void_p]),
    "tfm_bpe_eos_id": (c_int, [c_void_p]),
    "tfm_bpe_unk_id": (c_int, [c_void_p]),
    "tfm_bpe_piece": (c_void_p, [c_void_p, c_int, P(c_size_t)]),
    "tfm_bpe_learn_opts_default": (None, [P(BpeLearnOptions)]),
    "tfm_bpe_learn_lines": (c_int, [c_void_p, P(c_char_p), c_int, P(BpeLearnOptions)]),
    "tfm_bpe_learn_files": (c_int, [c_void_p, P(c_char_p), c_int, P(BpeLearnOptions)]),
    "tfm_bpe_load": (c_int, [c_void_p, c_char_p]),
    "tfm_bpe_save": (c_int, [c_void_p, c_char_p]),
    "tfm_bpe_piece_id": (c_int, [c_void_p, c_char_p, c_size_t]),
    "tfm_bpe_encode": (c_void_p, [c_void_p, c_char_p, c_size_t, P(c_int)]),
    "tfm_bpe_encode_pieces": (c_void_p, [c_void_p, c_char_p, c_size_t]),
    "tfm_bpe_decode": (c_void_p, [c_void_p, P(c_int), c_int]),
    "tfm_bpe_decode_pieces": (c_void_p, [c_void_p, P(c_char_p), c_int]),
    # run.h: whole runs, options set by name
    "tfm_field_find": (c_int, [P(Field), c_int, c_char_p]),
    "tfm_field_parse": (c_int, [P(Field), c_void_p, c_char_p]),
    "tfm_field_format": (None, [P(Field), c_void_p, c_char_p, c_size_t]),
    "tfm_lm_run_opts_size": (c_size_t, []),
    "tfm_lm_run_opts_default": (None, [c_void_p]),
    "tfm_lm_run_fields": (P(Field), [P(c_int)]),
    "tfm_lm_run": (c_int, [c_void_p, P(RunHooks), P(RunResult)]),
    "tfm_mt_run_opts_size": (c_size_t, []),
    "tfm_mt_run_opts_default": (None, [c_void_p]),
    "tfm_mt_run_fields": (P(Field), [P(c_int)]),
    "tfm_mt_run": (c_int, [c_void_p, P(RunHooks), P(RunResult)]),
}


def _declare(lib: ctypes.CDLL) -> None:
    missing = []
    for name, (restype, argtypes) in _FUNCTIONS.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype, f.argtypes = restype, argtypes
    if missing:
        raise ImportError(f"tfm: {path} does not export {', '.join(missing)} (a libtfm.so of another version?)")


lib, path = _load()
_declare(lib)
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_libc.free.argtypes, _libc.free.restype = [c_void_p], None


def free(p: int | None) -> None:
    """free() memory the library malloc'd and handed over (tfm_bpe_encode and the like)."""
    if p:
        _libc.free(p)


def take_string(p: int | None) -> str:
    """A malloc'd NUL-terminated UTF-8 string returned by the library, as str; the memory is freed."""
    if not p:
        _raise_last(lib)
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        free(p)


def check(rc: int) -> int:
    """Raise the library's error when a call returned -1 (or another negative value)."""
    if rc < 0:
        _raise_last(lib)
    return rc


def check_ptr(p):
    """Raise the library's error when a call returned NULL."""
    if not p:
        _raise_last(lib)
    return p


def enc(s: str | os.PathLike | None, what: str = "argument") -> bytes | None:
    """str (or path) -> UTF-8 bytes for a const char * argument; a NUL inside is refused."""
    if s is None:
        return None
    if isinstance(s, os.PathLike):
        s = os.fspath(s)
    if isinstance(s, bytes):
        b = s
    elif isinstance(s, str):
        b = s.encode("utf-8", "surrogateescape")
    else:
        raise TypeError(f"{what} must be str, got {type(s).__name__}")
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL character")
    return b


def strings(items, what: str = "argument"):
    """A list of str -> a C array of char * (kept alive by the returned object)."""
    arr = (c_char_p * len(items))()
    for i, s in enumerate(items):
        arr[i] = enc(s, f"{what}[{i}]")
    return arr


def dec(b: bytes | None) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""
