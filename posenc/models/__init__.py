"""One small Transformer whose only varying part is the position encoding.

Every experiment on the site compares ``TransformerConfig(position=...)`` values with everything
else fixed: same pre-norm blocks, same attention code, same dropout and, for the same seed, the
same initial shared weights. The encodings are the library's own modules and functions, attached
to the model by one adapter each (``posenc/models/_encodings.py``).

The package has three parts: the model (:class:`Transformer`, its heads and :class:`KVCache`),
the training loop (:func:`train`, :func:`next_token_loss`, :func:`token_losses`) and the data (:class:`CharCorpus`).
"""

from posenc.models._config import POSITIONS, TransformerConfig
from posenc.models._corpus import CharCorpus, stdlib_corpus
from posenc.models._training import TrainingLog, next_token_loss, token_losses, train
from posenc.models._transformer import Attention, CausalLM, EncoderClassifier, KVCache, Transformer

__all__ = [
    "POSITIONS",
    "TransformerConfig",
    "KVCache",
    "Attention",
    "Transformer",
    "EncoderClassifier",
    "CausalLM",
    "next_token_loss",
    "token_losses",
    "TrainingLog",
    "train",
    "CharCorpus",
    "stdlib_corpus",
]

# Documented as posenc.models.<name>: the submodules are private.
for _name in __all__[1:]:
    globals()[_name].__module__ = __name__
del _name
