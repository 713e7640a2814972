"""posenc: positional encodings for Transformers, each written once and checked against the
implementations people use.

The public names of SPEC.md are importable from here; ``posenc.numpy``, ``posenc.diagnostics``
and ``posenc.models`` are submodules.
"""

from posenc.learned import LearnedPositionalEncoding, TokenEmbedding
from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table

__version__ = "0.1.0"

__all__ = [
    "LearnedPositionalEncoding",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "sinusoidal_frequencies",
    "sinusoidal_table",
]
