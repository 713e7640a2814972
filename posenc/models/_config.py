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

__all__ = ["LAYER_TYPES", "POSITIONS", "TransformerConfig"]

#: Values of ``TransformerConfig.layer_types`` entries (transformers' names).
LAYER_TYPES = ("full_attention", "sliding_attention")


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
    layer_types : tuple of str, optional
        The attention of each layer, ``"full_attention"`` or ``"sliding_attention"`` (the names
        and meaning of transformers' ``layer_types``): a sliding layer sees the keys within
        ``sliding_window``, a full layer sees all of them. Default: every layer
        ``"sliding_attention"`` if ``sliding_window`` is set, else ``"full_attention"``.
        Gemma 2 alternates the two; Gemma 3 has five sliding layers to one full layer.
    local_rope_base : float, optional
        With ``position="rope"``: the RoPE base of the sliding layers (Gemma 3's
        ``rope_local_base_freq``), which then get a rotary embedding of their own with
        ``local_rope_scaling``. Default ``None``: every rotated layer shares ``rope_base`` and
        ``rope_scaling`` (GPT-OSS).
    local_rope_scaling : dict, optional
        Scaling of the sliding layers' own rotary embedding (needs ``local_rope_base``); default
        none: only the full layers are scaled, as in Gemma 3.
    nope_layers : tuple of int
        With ``position="rope"``: indices of the layers that do not rotate their queries and keys
        (NoPE layers: Llama 4's global layers, Command R7B's full layers). Default none.
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
    layer_types: tuple[str, ...] | None = None
    local_rope_base: float | None = None
    local_rope_scaling: dict | None = None
    nope_layers: tuple[int, ...] = ()

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
        self._check_layers()

    def _check_layers(self) -> None:
        """Validate the per-layer settings: layer kinds, local RoPE and NoPE layers."""
        if self.layer_types is not None:
            if not isinstance(self.layer_types, (tuple, list)) or len(self.layer_types) != self.num_layers:
                raise ValueError(
                    f"layer_types must list one attention kind per layer ({self.num_layers}), got {self.layer_types!r}"
                )
            for kind in self.layer_types:
                check_choice("layer_types entry", kind, LAYER_TYPES)
            self.layer_types = tuple(self.layer_types)
            if "sliding_attention" in self.layer_types and self.sliding_window is None:
                raise ValueError("layer_types has sliding_attention layers, which need sliding_window")
        if not isinstance(self.nope_layers, (tuple, list)):
            raise TypeError(f"nope_layers must be a tuple of layer indices, got {type(self.nope_layers).__name__}")
        self.nope_layers = tuple(self.nope_layers)
        for layer in self.nope_layers:
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.num_layers:
                raise ValueError(f"nope_layers must hold layer indices 0 … {self.num_layers - 1}, got {layer!r}")
        if len(set(self.nope_layers)) != len(self.nope_layers):
            raise ValueError(f"nope_layers lists a layer twice: {self.nope_layers}")
        if self.local_rope_base is not None:
            check_positive_float("local_rope_base", self.local_rope_base)
        if self.local_rope_scaling is not None:
            if not isinstance(self.local_rope_scaling, dict):
                raise TypeError(
                    f"local_rope_scaling must be a dict or None, got {type(self.local_rope_scaling).__name__}"
                )
            if self.local_rope_base is None:
                raise ValueError("local_rope_scaling needs local_rope_base (the sliding layers' own rotary embedding)")
        per_layer = {"local_rope_base": self.local_rope_base is not None, "nope_layers": bool(self.nope_layers)}
        for name, given in per_layer.items():
            if given and self.position != "rope":
                raise ValueError(f"{name} applies to position='rope' only, got position={self.position!r}")
        if self.local_rope_base is not None and "sliding_attention" not in self.attention_kinds:
            raise ValueError("local_rope_base sets the RoPE of sliding_attention layers, but no layer slides")

    @property
    def attention_kinds(self) -> tuple[str, ...]:
        """The attention kind of each layer, ``layer_types`` or its default."""
        if self.layer_types is not None:
            return self.layer_types
        return ("sliding_attention" if self.sliding_window is not None else "full_attention",) * self.num_layers

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``dim // num_heads``."""
        return self.dim // self.num_heads
