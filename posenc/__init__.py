"""posenc: positional encodings for Transformers, each written once and checked against the
implementations people use.

The public names of the library contract (docs/dev/spec.md) are importable from here; ``posenc.numpy``, ``posenc.diagnostics``
and ``posenc.models`` are submodules.
"""

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.cope import CoPE, cope_logits, cope_positions
from posenc.graph import laplacian_pe, random_walk_pe
from posenc.learned import LearnedPositionalEncoding, TokenEmbedding
from posenc.mla import mla_permute_for_half_layout, mla_rope, mla_softmax_scale
from posenc.mrope import mrope_axes, mrope_cos_sin, mrope_position_ids
from posenc.temperature import attention_temperature
from posenc.multidim import VideoPositionalEncoding, sinusoidal_2d, sinusoidal_nd
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    relative_position_indices,
    t5_relative_position_bucket,
    xl_position_logits,
    xl_relative_embedding,
)
from posenc.rope import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_qk,
    axial_rope_cos_sin,
    half_to_interleaved,
    interleaved_to_half,
    permute_for_half_layout,
    rope_cos_sin,
    rope_inv_freq,
    yarn_mscale,
)
from posenc.packing import cu_seqlens_from_position_ids, document_ids, document_mask, packed_position_ids
from posenc.rope_config import RopeReport, rope_report
from posenc.parity import rope_parity
from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table

from posenc import diagnostics, models, numpy  # noqa: E402  (submodules: posenc.diagnostics, ...)

__version__ = "0.1.0"

__all__ = [
    "CoPE",
    "RotaryEmbedding",
    "apply_rope",
    "apply_rope_qk",
    "cope_logits",
    "cope_positions",
    "half_to_interleaved",
    "interleaved_to_half",
    "permute_for_half_layout",
    "rope_cos_sin",
    "rope_inv_freq",
    "yarn_mscale",
    "mla_permute_for_half_layout",
    "mla_rope",
    "mla_softmax_scale",
    "mrope_axes",
    "mrope_cos_sin",
    "mrope_position_ids",
    "attention_temperature",
    "rope_report",
    "rope_parity",
    "RopeReport",
    "LearnedPositionalEncoding",
    "RelativePositionEmbedding",
    "SinusoidalPositionalEncoding",
    "T5RelativePositionBias",
    "TokenEmbedding",
    "VideoPositionalEncoding",
    "alibi_bias",
    "alibi_slopes",
    "axial_rope_cos_sin",
    "laplacian_pe",
    "random_walk_pe",
    "rel_shift",
    "relative_position_indices",
    "sinusoidal_2d",
    "sinusoidal_frequencies",
    "sinusoidal_nd",
    "sinusoidal_table",
    "t5_relative_position_bucket",
    "xl_relative_embedding",
    "xl_position_logits",
    "packed_position_ids",
    "cu_seqlens_from_position_ids",
    "document_ids",
    "document_mask",
]
