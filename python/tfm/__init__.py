"""tfm: Transformers on CPUs, from Python (a ctypes binding of libtfm.so; docs/PYTHON.md).

    import tfm
    tr = tfm.Translator("model.tfm")
    print(tr.translate_batch(["ein hund läuft ."])[0].hypotheses[0])
    gen = tfm.Generator("shakespeare.tfm")
    print(gen.generate("ROMEO:", max_tokens=100, temperature=0.8).text)
    print(tfm.bleu(hypotheses, references))

The library is found through $TFM_LIBRARY, a libtfm.so inside this package, the source tree's build/, or the
installed one (docs/PYTHON.md).
"""
from ._lib import path as library_path
from ._lib import lib as _l
from .bpe import BPETokenizer
from .errors import ArgumentError, DataError, Error, IOError, OutOfMemoryError, TrainingInterrupted
from .generator import Generation, GenerationStream, Generator
from .metrics import BLEUScore, CHRFScore, bleu, chrf
from .training import LMProgress, MTProgress, MTValidation, TrainResult, train_lm, train_mt
from .translator import TranslationResult, Translator

__version__ = "0.9.0"
# tfm.IOError is not in __all__: `from tfm import *` would hide the builtin IOError (OSError).
#: the version of the loaded libtfm.so ("0.9.0")
library_version: str = _l.tfm_version_string().decode()


def default_threads() -> int:
    """The thread count used when none is given: OMP_NUM_THREADS, else the CPUs this process may use."""
    return _l.tfm_default_threads()


__all__ = [
    "ArgumentError", "BLEUScore", "BPETokenizer", "CHRFScore", "DataError", "Error", "Generation", "GenerationStream", "Generator",
    "LMProgress", "MTProgress", "MTValidation", "OutOfMemoryError", "TrainResult", "TrainingInterrupted",
    "TranslationResult", "Translator", "bleu", "chrf", "default_threads", "library_path", "library_version",
    "train_lm", "train_mt",
]
