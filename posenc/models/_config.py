"""The hyper-parameters of the site's small Transformer."""

from __future__ import annotations

from dataclasses import dataclass

from posenc._checks import (
    check_bool,
    check_choice,
    check_even,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc.models._encodings import POSITIONS

__all__ = ["POSITIONS", "TransformerConfig"]


@dataclass
class TransformerConfig:
    """Hyper-parameters of :class:`Transformer`; validated on creation.

    Parameters
    ----------
    vocab_size : int
        Number of token ids.
    dim : int
        Model width.
    num_heads : int
        Attention heads; must divide ``dim``.
    num_layers : int
        Number of blocks.
    ff_mult : int
        Feed-forward width is ``ff_mult * dim``.
    max_len : int
        Positions of the ``"learned"`` table, initial cache of ``"sinusoidal"`` and ``"rope"``,
        and (plus one) the default CoPE ``max_pos``. Only ``"learned"`` refuses longer input.
    dropout : float
        Dropout on embeddings, attention weights and residual branches.
    position : str
        One of ``"none"``, ``"sinusoidal"``, ``"learned"``, ``"shaw"``, ``"xl"``, ``"t5"``,
        ``"rope"``, ``"alibi"``, ``"cope"``.
    causal : bool
        Causal mask (language model) if true, bidirectional attention (encoder) otherwise.
    max_relative_position : int
        Shaw et al.'s clipping distance :math:`K`.
    shaw_values : bool
        Shaw et al.'s value term :math:`a^V_{ij}` besides the key term.
    t5_num_buckets : int
        T5 buckets.
    t5_max_distance : int
        Distance at which T5's logarithmic buckets end.
    rope_base : float
        RoPE base.
    rope_scaling : dict, optional
        Hugging Face ``rope_parameters`` for RoPE's long-context scaling (see
        :func:`posenc.rope_inv_freq`); default none. To evaluate a trained model with another
        scaling, replace its ``transformer.rope`` with a new :class:`posenc.RotaryEmbedding`.
    rope_layout : str
        ``"half"`` (GPT-NeoX, Hugging Face) or ``"interleaved"`` (Meta, GPT-J) pairs of RoPE.
    cope_max_pos : int, optional
        CoPE's number of positions (default ``max_len + 1``, enough never to clamp).
    sliding_window : int, optional
        Each query sees the keys whose positions are within ``sliding_window`` of its own,
        itself included: key :math:`j` is visible to query :math:`i` when
        :math:`p_i - p_j < W` (Mistral; the causal ``sliding_window`` of transformers), or
        :math:`|p_i - p_j| < W` without a causal mask. Default ``None``, no window.
    """

    vocab_size: int
    dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    ff_mult: int = 4
    max_len: int = 512
    dropout: float = 0.0
    position: str = "sinusoidal"
    causal: bool = False
    max_relative_position: int = 16
    shaw_values: bool = True
    t5_num_buckets: int = 32
    t5_max_distance: int = 128
    rope_base: float = 10000.0
    rope_scaling: dict | None = None
    rope_layout: str = "half"
    cope_max_pos: int | None = None
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "num_heads", "num_layers", "ff_mult", "max_len"):
            check_positive_int(name, getattr(self, name))
        for name in ("max_relative_position", "t5_num_buckets", "t5_max_distance"):
            check_positive_int(name, getattr(self, name))
        check_probability("dropout", self.dropout)
        check_choice("position", self.position, POSITIONS)
        check_positive_float("rope_base", self.rope_base)
        check_choice("rope_layout", self.rope_layout, ("half", "interleaved"))
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, dict):
            raise TypeError(f"rope_scaling must be a dict or None, got {type(self.rope_scaling).__name__}")
        for name in ("causal", "shaw_values"):
            check_bool(name, getattr(self, name))
        if self.dim % self.num_heads:
            raise ValueError(f"num_heads must divide dim={self.dim}, got num_heads={self.num_heads}")
        if self.position == "rope":
            check_even("head_dim", self.head_dim)
        if self.position == "xl":
            check_even("dim", self.dim)  # sine and cosine halves of the relative table
        for name in ("cope_max_pos", "sliding_window"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``dim // num_heads``."""
        return self.dim // self.num_heads
