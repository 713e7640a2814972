"""How each position encoding enters the model: one adapter per encoding.

An encoding can act at five places of a pre-norm Transformer: it adds vectors to the token
embeddings (:meth:`PositionEncoding.embed`), rotates queries and keys
(:meth:`PositionEncoding.rotate`), adds a bias to the logits shared by every layer
(:meth:`PositionEncoding.bias`), or, through a per-layer part (:class:`LayerPosition`), adds
terms to a layer's logits, gates them after the mask, or adds terms to its output. Each adapter
overrides the places its encoding uses and calls the library for the formulas; the model calls
every hook of the chosen adapter and knows no encoding by name. Adding an encoding is one class
here and one entry in :data:`ENCODINGS`.

Positions are ``(batch or 1, q)`` for the queries and ``(batch or 1, k)`` for the keys. When they
are the defaults ``0 … seq - 1`` with no cache (``explicit`` false), the relative encodings may
use their table-and-shift forms; otherwise they read the positions of each query and key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn

from posenc.alibi import alibi_bias
from posenc.cope import CoPE
from posenc.learned import LearnedPositionalEncoding
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    relative_position_indices,
    xl_position_logits,
    xl_relative_embedding,
)
from posenc.rope import RotaryEmbedding, _cos_sin_of_angles, apply_rope
from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table

if TYPE_CHECKING:
    from posenc.models._config import TransformerConfig


class AttentionContext(NamedTuple):
    """What the attention of every layer needs, computed once per forward pass."""

    mask: torch.Tensor | None  # (batch or 1, 1, q, k) bool, True where a key is hidden
    window_mask: torch.Tensor | None  # the same for sliding-window layers (None if no layer slides)
    bias: torch.Tensor | None  # broadcastable to (batch, heads, q, k): T5, ALiBi
    shared: Any  # the encoding's per-pass data (Transformer-XL's relative table), or None
    q_pos: torch.Tensor  # (batch or 1, q) integer positions of the new tokens
    k_pos: torch.Tensor  # (batch or 1, k) integer positions of all keys
    explicit: bool  # positions given, derived from a padding mask, or continued from a cache
    encoding: "PositionEncoding"


class LayerPosition(nn.Module):
    """The per-layer part of an encoding; this base adds nothing and has no parameters."""

    def logits(self, q: torch.Tensor, k: torch.Tensor, context: AttentionContext) -> torch.Tensor:
        """Logits before scaling, ``(batch, heads, q, k)``; the content term by default."""
        return q @ k.transpose(-1, -2)

    def after_mask(self, q: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Logits after the mask (scaled, biased); unchanged by default."""
        return logits

    def values(self, attn: torch.Tensor, out: torch.Tensor, context: AttentionContext) -> torch.Tensor:
        """Attention output ``(batch, heads, q, head_dim)``; unchanged by default."""
        return out


class PositionEncoding(nn.Module):
    """The model-level part of an encoding; this base is "no position information" (NoPE)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.dim = config.num_heads, config.head_dim, config.dim

    def layer_position(self) -> LayerPosition:
        """A new per-layer part, created after every shared weight (same seed, same weights)."""
        return LayerPosition()

    def embed(self, x: torch.Tensor, q_pos: torch.Tensor, explicit: bool) -> torch.Tensor:
        """Token embeddings ``(batch, seq, dim)`` with the positions added, if any."""
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, context: AttentionContext, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys ``(batch, heads, q, head_dim)`` of the new tokens in ``layer``, rotated if any."""
        return q, k

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, explicit: bool, like: torch.Tensor) -> torch.Tensor | None:
        """Additive logit bias broadcastable to ``(batch, heads, q, k)``, or ``None``."""
        return None

    def shared(self, q_pos: torch.Tensor, explicit: bool, like: torch.Tensor) -> Any:
        """Data every layer's part reads in this pass, or ``None``."""
        return None

    def shift_keys(self, keys: torch.Tensor, shift: int, layer: int) -> torch.Tensor:
        """Cached keys ``(batch, heads, k, head_dim)`` of ``layer`` moved by ``shift`` positions.

        Keys that carry no position (the position enters at scoring time, from the positions the
        cache keeps) stay as they are.
        """
        return keys


class _TableEncoding(PositionEncoding):
    """An absolute table added to the token embeddings; subclasses create ``self.table``."""

    table: nn.Module

    def embed(self, x: torch.Tensor, q_pos: torch.Tensor, explicit: bool) -> torch.Tensor:
        return self.table(x, positions=q_pos) if explicit else self.table(x)

    def shift_keys(self, keys: torch.Tensor, shift: int, layer: int) -> torch.Tensor:
        raise ValueError(
            "the cached keys of every layer were computed from inputs that carry absolute positions; "
            "a context shift cannot move them (recompute the kept tokens instead)"
        )


class SinusoidalEncoding(_TableEncoding):
    """Vaswani et al.'s fixed table, added to the token embeddings."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.table = SinusoidalPositionalEncoding(config.dim, max_len=config.max_len)


class LearnedEncoding(_TableEncoding):
    """A trained table of ``max_len`` rows, added to the token embeddings."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.table = LearnedPositionalEncoding(config.dim, config.max_len)


class _ShawLayer(LayerPosition):
    def __init__(self, max_relative_position: int, head_dim: int, values: bool) -> None:
        super().__init__()
        self.rel_k = RelativePositionEmbedding(max_relative_position, head_dim)
        self.rel_v = RelativePositionEmbedding(max_relative_position, head_dim) if values else None

    def _index(self, context: AttentionContext) -> torch.Tensor:
        """Rows of the tables per (query, key), ``(batch or 1, q, k)``."""
        return relative_position_indices(context.q_pos, context.k_pos, self.rel_k.max_relative_position)

    def logits(self, q: torch.Tensor, k: torch.Tensor, context: AttentionContext) -> torch.Tensor:
        content = q @ k.transpose(-1, -2)  # (batch, heads, q, k)
        if not context.explicit:
            seq = q.shape[2]
            # rel_k: (seq, seq, head_dim); a_ij added to every key, per query i and key j.
            return content + torch.einsum("bhid,ijd->bhij", q, self.rel_k(seq, seq))
        # q . w_r for the 2K+1 clipped distances r, then picked per (query, key) pair.
        per_distance = q @ self.rel_k.embedding.weight.T  # (batch, heads, q, 2K + 1)
        index = self._index(context)[:, None].expand(q.shape[0], q.shape[1], -1, -1)  # (batch, heads, q, k)
        return content + per_distance.gather(-1, index)

    def values(self, attn: torch.Tensor, out: torch.Tensor, context: AttentionContext) -> torch.Tensor:
        if self.rel_v is None:
            return out
        if not context.explicit:
            seq = attn.shape[2]
            return out + torch.einsum("bhij,ijd->bhid", attn, self.rel_v(seq, seq))
        # Attention mass per clipped distance, then the weighted sum of the 2K+1 vectors.
        rows = self.rel_v.embedding.weight.shape[0]
        one_hot = nn.functional.one_hot(self._index(context), rows).to(attn.dtype)  # (batch or 1, q, k, 2K + 1)
        mass = torch.einsum("bhij,bijr->bhir", attn, one_hot.expand(attn.shape[0], -1, -1, -1))
        return out + mass @ self.rel_v.embedding.weight


class ShawEncoding(PositionEncoding):
    """Shaw et al.'s clipped relative vectors, on the keys and (optionally) the values."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.max_relative_position, self.shaw_values = config.max_relative_position, config.shaw_values

    def layer_position(self) -> LayerPosition:
        return _ShawLayer(self.max_relative_position, self.head_dim, self.shaw_values)


class _XLLayer(LayerPosition):
    def __init__(self, dim: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim
        self.r_proj = nn.Linear(dim, dim, bias=False)
        # The global content bias u and position bias v (std 0.02 as in the authors' code).
        self.content_bias = nn.Parameter(torch.randn(num_heads, head_dim) * 0.02)
        self.position_bias = nn.Parameter(torch.randn(num_heads, head_dim) * 0.02)

    def logits(self, q: torch.Tensor, k: torch.Tensor, context: AttentionContext) -> torch.Tensor:
        # Biases (heads, head_dim) -> (heads, 1, head_dim), broadcast over queries.
        content = (q + self.content_bias[:, None]) @ k.transpose(-1, -2)
        q_v = q + self.position_bias[:, None]
        if context.explicit:
            # (batch or 1, q) positions -> (batch or 1, heads, q, k), heads broadcast
            return content + xl_position_logits(q_v, self.r_proj.weight, context.q_pos, context.k_pos)
        # (rows, dim) -> (rows, heads, head_dim) -> (heads, rows, head_dim)
        r = self.r_proj(context.shared).view(-1, self.num_heads, self.head_dim).transpose(0, 1)
        return content + rel_shift(q_v @ r.transpose(-1, -2))[..., : q.shape[2]]


class XLEncoding(PositionEncoding):
    """Transformer-XL's content/position split with the global biases ``u`` and ``v``."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.causal = config.causal

    def layer_position(self) -> LayerPosition:
        return _XLLayer(self.dim, self.num_heads, self.head_dim)

    def shared(self, q_pos: torch.Tensor, explicit: bool, like: torch.Tensor) -> Any:
        if explicit:
            return None
        seq = q_pos.shape[1]
        if self.causal:
            return xl_relative_embedding(seq, self.dim, dtype=like.dtype, device=like.device)
        # Distances seq-1 … -(seq-1); after rel_shift the first seq columns hold i - j.
        return sinusoidal_table(
            2 * seq - 1, self.dim, style="concat", offset=1 - seq, dtype=like.dtype, device=like.device
        ).flip(0)


class T5Encoding(PositionEncoding):
    """T5's bucketed scalar bias, one table shared by all layers."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.t5 = T5RelativePositionBias(
            config.num_heads,
            bidirectional=not config.causal,
            num_buckets=config.t5_num_buckets,
            max_distance=config.t5_max_distance,
        )

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, explicit: bool, like: torch.Tensor) -> torch.Tensor | None:
        if explicit:
            return self.t5(q_pos, k_pos).to(like.dtype)  # (batch or 1, heads, q, k)
        seq = q_pos.shape[1]
        return self.t5(seq, seq).to(like.dtype)  # (1, heads, seq, seq)


class RopeEncoding(PositionEncoding):
    """Rotary embedding of queries and keys (keys are cached rotated).

    Every rotated layer shares ``self.rope``, except that with ``config.local_rope_base`` the
    sliding-window layers share ``self.local_rope`` instead; the layers in ``config.nope_layers``
    do not rotate.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.rope = self._rotary(config, config.rope_base, config.rope_scaling)
        self.local_rope = None
        if config.local_rope_base is not None:
            self.local_rope = self._rotary(config, config.local_rope_base, config.local_rope_scaling)
        # Which rotary each layer uses: "rope", "local_rope" or None (a NoPE layer).
        self.layer_rotary: list[str | None] = [
            None if layer in config.nope_layers
            else "local_rope" if kind == "sliding_attention" and self.local_rope is not None
            else "rope"
            for layer, kind in enumerate(config.attention_kinds)
        ]

    @staticmethod
    def _rotary(config: TransformerConfig, base: float, scaling: dict | None) -> RotaryEmbedding:
        return RotaryEmbedding(config.head_dim, base=base, scaling=scaling, layout=config.rope_layout,
                               max_len=config.max_len)

    def _rotary_of(self, layer: int) -> RotaryEmbedding | None:
        name = self.layer_rotary[layer]
        return None if name is None else getattr(self, name)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, context: AttentionContext, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rope = self._rotary_of(layer)
        if rope is None:
            return q, k
        return rope(q, k, positions=context.q_pos) if context.explicit else rope(q, k)

    def shift_keys(self, keys: torch.Tensor, shift: int, layer: int) -> torch.Tensor:
        # R(p + s) = R(s) R(p): rotating a key cached at p by the angles of s places it at p + s.
        # The cached key carries the attention factor already, so R(s) is the bare rotation.
        rope = self._rotary_of(layer)
        if rope is None:
            return keys  # a NoPE layer's keys carry no position
        scaling = rope.scaling
        if scaling.length_threshold is not None:
            raise ValueError(
                f"{scaling.rope_type!r} scaling changes the frequencies with the sequence length; cached "
                "keys cannot be re-rotated by a shift"
            )
        angles = shift * scaling.inv_freq(None, keys.device)[None]  # (1, rotary_dim // 2) float64: one position
        cos, sin = _cos_sin_of_angles(angles, 1.0, rope.layout, keys.dtype)
        return apply_rope(keys, cos, sin, layout=rope.layout)


class AlibiEncoding(PositionEncoding):
    """ALiBi's linear distance bias, :math:`-m_h |i - j|`."""

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor, explicit: bool, like: torch.Tensor) -> torch.Tensor | None:
        if explicit:
            return alibi_bias(self.num_heads, q_pos, k_pos, dtype=like.dtype)  # (batch or 1, heads, q, k)
        return alibi_bias(self.num_heads, q_pos.shape[1], dtype=like.dtype, device=like.device)


class _CoPELayer(LayerPosition):
    def __init__(self, head_dim: int, max_pos: int) -> None:
        super().__init__()
        self.cope = CoPE(head_dim, max_pos)

    def after_mask(self, q: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        # After the mask, as in the paper: masked keys get gate 0 and count nothing.
        return logits + self.cope(q, logits)


class CoPEEncoding(PositionEncoding):
    """Contextual positions: gated counts of the keys a query attends to."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        self.max_pos = config.cope_max_pos or config.max_len + 1

    def layer_position(self) -> LayerPosition:
        return _CoPELayer(self.head_dim, self.max_pos)


#: The adapter of each value of ``TransformerConfig.position``.
ENCODINGS: dict[str, type[PositionEncoding]] = {
    "none": PositionEncoding,
    "sinusoidal": SinusoidalEncoding,
    "learned": LearnedEncoding,
    "shaw": ShawEncoding,
    "xl": XLEncoding,
    "t5": T5Encoding,
    "rope": RopeEncoding,
    "alibi": AlibiEncoding,
    "cope": CoPEEncoding,
}

#: Values accepted by ``TransformerConfig.position``.
POSITIONS = tuple(ENCODINGS)
