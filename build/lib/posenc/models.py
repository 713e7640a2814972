"""One small Transformer whose only varying part is the position encoding.

Every experiment on the site compares ``TransformerConfig(position=...)`` values with everything
else fixed: same pre-norm blocks, same attention code, same dropout and, for the same seed, the
same initial shared weights. The encodings are the library's own modules and functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from posenc._checks import (
    check_choice,
    check_even,
    check_integer_tensor,
    check_ndim,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc.alibi import alibi_bias
from posenc.cope import CoPE
from posenc.learned import LearnedPositionalEncoding, TokenEmbedding
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    xl_relative_embedding,
)
from posenc.rope import RotaryEmbedding
from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table

__all__ = ["POSITIONS", "TransformerConfig", "Attention", "Transformer", "EncoderClassifier", "CausalLM"]

#: Values accepted by ``TransformerConfig.position``.
POSITIONS = ("none", "sinusoidal", "learned", "shaw", "xl", "t5", "rope", "alibi", "cope")


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
    cope_max_pos : int, optional
        CoPE's number of positions (default ``max_len + 1``, enough never to clamp).
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
    cope_max_pos: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "num_heads", "num_layers", "ff_mult", "max_len"):
            check_positive_int(name, getattr(self, name))
        for name in ("max_relative_position", "t5_num_buckets", "t5_max_distance"):
            check_positive_int(name, getattr(self, name))
        check_probability("dropout", self.dropout)
        check_choice("position", self.position, POSITIONS)
        check_positive_float("rope_base", self.rope_base)
        for name in ("causal", "shaw_values"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.dim % self.num_heads:
            raise ValueError(f"num_heads must divide dim={self.dim}, got num_heads={self.num_heads}")
        if self.position == "rope":
            check_even("head_dim", self.head_dim)
        if self.cope_max_pos is not None:
            check_positive_int("cope_max_pos", self.cope_max_pos)

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``dim // num_heads``."""
        return self.dim // self.num_heads


class _AttentionContext(NamedTuple):
    """What the attention of every layer needs, computed once per forward."""

    mask: torch.Tensor | None  # (seq, seq) bool, True where a key is hidden
    bias: torch.Tensor | None  # broadcastable to (batch, heads, seq, seq): T5, ALiBi
    xl_table: torch.Tensor | None  # (rows, dim) sinusoids of relative distances
    rope: RotaryEmbedding | None


class Attention(nn.Module):
    """Multi-head self-attention with explicit scores, so every encoding can act on them.

    The layer's own position parameters (Shaw's tables, Transformer-XL's projection and biases,
    CoPE's table) are created by :meth:`add_position`, which :class:`Transformer` calls after
    building every shared weight.

    Parameters
    ----------
    config : TransformerConfig
        Model configuration.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.position = config.position
        self.num_heads, self.head_dim = config.num_heads, config.head_dim
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.drop = nn.Dropout(config.dropout)
        self.rel_k: RelativePositionEmbedding | None = None
        self.rel_v: RelativePositionEmbedding | None = None
        self.r_proj: nn.Linear | None = None
        self.xl_content_bias: nn.Parameter | None = None  # Transformer-XL's u
        self.xl_position_bias: nn.Parameter | None = None  # Transformer-XL's v
        self.cope: CoPE | None = None

    def add_position(self, config: TransformerConfig) -> None:
        """Create this layer's position parameters, if ``config.position`` has any.

        Parameters
        ----------
        config : TransformerConfig
            The configuration given to the constructor.
        """
        if self.position == "shaw":
            k = config.max_relative_position
            self.rel_k = RelativePositionEmbedding(k, self.head_dim)
            if config.shaw_values:
                self.rel_v = RelativePositionEmbedding(k, self.head_dim)
        elif self.position == "xl":
            self.r_proj = nn.Linear(config.dim, config.dim, bias=False)
            # The global content bias u and position bias v (std 0.02 as in the authors' code).
            self.xl_content_bias = nn.Parameter(torch.randn(self.num_heads, self.head_dim) * 0.02)
            self.xl_position_bias = nn.Parameter(torch.randn(self.num_heads, self.head_dim) * 0.02)
        elif self.position == "cope":
            self.cope = CoPE(self.head_dim, config.cope_max_pos or config.max_len + 1)

    def scores(self, x: torch.Tensor, context: _AttentionContext) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention logits, before the softmax, and values.

        Parameters
        ----------
        x : torch.Tensor
            Normalised input ``(batch, seq, dim)``.
        context : tuple
            Mask, bias, Transformer-XL table and rotary module of this forward pass.

        Returns
        -------
        tuple of torch.Tensor
            Logits ``(batch, heads, seq, seq)`` (``-inf`` where masked) and values
            ``(batch, heads, seq, head_dim)``.
        """
        batch, seq, _ = x.shape
        # (batch, seq, 3 * dim) -> (batch, seq, 3, heads, head_dim) -> (3, batch, heads, seq, head_dim)
        q, k, values = self.qkv(x).view(batch, seq, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if context.rope is not None:
            q, k = context.rope(q, k)
        if self.r_proj is not None:
            # (rows, dim) -> (rows, heads, head_dim) -> (heads, rows, head_dim)
            r = self.r_proj(context.xl_table).view(-1, self.num_heads, self.head_dim).transpose(0, 1)
            # Biases (heads, head_dim) -> (heads, 1, head_dim), broadcast over queries.
            content = (q + self.xl_content_bias[:, None]) @ k.transpose(-1, -2)
            position = rel_shift((q + self.xl_position_bias[:, None]) @ r.transpose(-1, -2))[..., :seq]
            logits = content + position  # (batch, heads, seq, seq)
        else:
            logits = q @ k.transpose(-1, -2)  # (batch, heads, seq, seq)
        if self.rel_k is not None:
            # rel_k: (seq, seq, head_dim); a_ij added to every key, per query i and key j.
            logits = logits + torch.einsum("bhid,ijd->bhij", q, self.rel_k(seq, seq))
        logits = logits / math.sqrt(self.head_dim)
        if context.bias is not None:
            logits = logits + context.bias
        if context.mask is not None:
            logits = logits.masked_fill(context.mask, float("-inf"))
        if self.cope is not None:
            # After the mask, as in the paper: masked keys get gate 0 and count nothing.
            logits = logits + self.cope(q, logits)
        return logits, values

    def forward(self, x: torch.Tensor, context: _AttentionContext) -> torch.Tensor:
        """Attend.

        Parameters
        ----------
        x : torch.Tensor
            Normalised input ``(batch, seq, dim)``.
        context : tuple
            As in :meth:`scores`.

        Returns
        -------
        torch.Tensor
            ``(batch, seq, dim)``, before the residual connection.
        """
        logits, values = self.scores(x, context)
        attn = self.drop(logits.softmax(dim=-1))  # (batch, heads, seq, seq)
        out = attn @ values  # (batch, heads, seq, head_dim)
        if self.rel_v is not None:
            seq = x.shape[1]
            out = out + torch.einsum("bhij,ijd->bhid", attn, self.rel_v(seq, seq))
        # (batch, heads, seq, head_dim) -> (batch, seq, heads, head_dim) -> (batch, seq, dim)
        return self.proj(out.transpose(1, 2).flatten(2))


class _Block(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = Attention(config)
        self.norm2 = nn.LayerNorm(config.dim)
        self.ff = nn.Sequential(
            nn.Linear(config.dim, config.ff_mult * config.dim),
            nn.GELU(),
            nn.Linear(config.ff_mult * config.dim, config.dim),
        )
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, context: _AttentionContext) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), context))
        return x + self.drop(self.ff(self.norm2(x)))


def _check_tokens(tokens: Any) -> None:
    check_integer_tensor("tokens", tokens)
    check_ndim("tokens", tokens, 2, "(batch, seq)")


class Transformer(nn.Module):
    r"""Pre-norm Transformer; ``config.position`` selects the positional encoding.

    - ``"none"``: nowhere (with ``causal=False`` the model is permutation-equivariant);
    - ``"sinusoidal"``, ``"learned"``: a table added to the token embeddings (Vaswani et al.
      2017);
    - ``"shaw"``: key term :math:`q_i \cdot a^K_{ij}` and value term :math:`a^V_{ij}` (Shaw et
      al. 2018);
    - ``"xl"``: content/position split with global biases :math:`u, v` (Dai et al. 2019);
    - ``"t5"``: bucketed bias, one table shared by all layers (Raffel et al. 2020);
    - ``"rope"``: rotates queries and keys (Su et al. 2021);
    - ``"alibi"``: linear distance bias (Press et al. 2022);
    - ``"cope"``: gated, counted positions (Golovneva et al. 2024).

    Attention logits are :math:`(q_i \cdot k_j + \text{terms}) / \sqrt{d_h}` plus bias for every
    type. Without a causal mask, ``"xl"`` scores negative distances too, with the sinusoids of
    :math:`i - j` for all pairs (as XLNet's bidirectional attention), and ``"alibi"`` uses
    :math:`-m\lvert i - j\rvert` both ways.

    Parameters
    ----------
    config : TransformerConfig
        Model configuration.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017; Shaw, Uszkoreit and Vaswani,
    "Self-Attention with Relative Position Representations", NAACL 2018; Dai et al.,
    "Transformer-XL", ACL 2019; Yang et al., "XLNet", NeurIPS 2019; Raffel et al., "Exploring the
    Limits of Transfer Learning with a Unified Text-to-Text Transformer", JMLR 2020; Su et al.,
    "RoFormer", 2021; Press, Smith and Lewis, "Train Short, Test Long", ICLR 2022; Golovneva et
    al., "Contextual Position Encoding", 2024.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config.dim)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(config.dim)
        # Position parameters come last, after every shared weight has drawn its random numbers:
        # with the same seed, models that differ in ``position`` share their other initial weights.
        position = config.position
        self.absolute: nn.Module | None = None
        if position == "sinusoidal":
            self.absolute = SinusoidalPositionalEncoding(config.dim, max_len=config.max_len)
        elif position == "learned":
            self.absolute = LearnedPositionalEncoding(config.dim, config.max_len)
        self.t5 = None
        if position == "t5":
            self.t5 = T5RelativePositionBias(
                config.num_heads,
                bidirectional=not config.causal,
                num_buckets=config.t5_num_buckets,
                max_distance=config.t5_max_distance,
            )
        self.rope = None
        if position == "rope":
            self.rope = RotaryEmbedding(config.head_dim, base=config.rope_base, max_len=config.max_len)
        for block in self.blocks:
            block.attn.add_position(config)

    def _attention_context(self, seq: int, like: torch.Tensor) -> _AttentionContext:
        config, device = self.config, like.device
        mask = torch.ones(seq, seq, dtype=torch.bool, device=device).triu(1) if config.causal else None
        bias = None
        if self.t5 is not None:
            bias = self.t5(seq, seq).to(like.dtype)
        elif config.position == "alibi":
            bias = alibi_bias(config.num_heads, seq, dtype=like.dtype, device=device)
        xl_table = None
        if config.position == "xl":
            if config.causal:
                xl_table = xl_relative_embedding(seq, config.dim, dtype=like.dtype, device=device)
            else:
                # Distances seq-1 … -(seq-1); after rel_shift the first seq columns hold i - j.
                xl_table = sinusoidal_table(
                    2 * seq - 1, config.dim, style="concat", offset=1 - seq, dtype=like.dtype, device=device
                ).flip(0)
        return _AttentionContext(mask, bias, xl_table, self.rope)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Hidden states of the last layer (after the final layer norm).

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.

        Returns
        -------
        torch.Tensor
            ``(batch, seq, dim)``.
        """
        _check_tokens(tokens)
        x = self.embed(tokens)
        if self.absolute is not None:
            x = self.absolute(x)
        x = self.drop(x)
        context = self._attention_context(tokens.shape[1], x)
        for block in self.blocks:
            x = block(x, context)
        return self.norm(x)


class EncoderClassifier(nn.Module):
    """Sequence classifier: :class:`Transformer`, mean over positions, linear layer.

    Parameters
    ----------
    config : TransformerConfig
        Backbone configuration (usually ``causal=False``).
    num_classes : int
        Number of output classes.
    """

    def __init__(self, config: TransformerConfig, num_classes: int) -> None:
        super().__init__()
        # The head is built first so the backbone's initial weights match Transformer(config).
        self.head = nn.Linear(config.dim, check_positive_int("num_classes", num_classes))
        self.transformer = Transformer(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Classify.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.

        Returns
        -------
        torch.Tensor
            Class logits ``(batch, num_classes)``.
        """
        return self.head(self.transformer(tokens).mean(dim=1))  # (batch, seq, dim) -> (batch, dim)


class CausalLM(nn.Module):
    """Next-token language model: causal :class:`Transformer` and an output projection.

    Parameters
    ----------
    config : TransformerConfig
        Backbone configuration; ``causal`` must be true.
    tie_weights : bool, optional
        Use the token embedding as the output projection (no separate head).
    """

    def __init__(self, config: TransformerConfig, *, tie_weights: bool = True) -> None:
        super().__init__()
        if not config.causal:
            raise ValueError("config.causal must be True for a CausalLM, got False")
        self.head = None if tie_weights else nn.Linear(config.dim, config.vocab_size, bias=False)
        self.transformer = Transformer(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Predict the next token at every position.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.

        Returns
        -------
        torch.Tensor
            Logits ``(batch, seq, vocab_size)``; position ``t`` scores token ``t + 1``.
        """
        hidden = self.transformer(tokens)
        if self.head is None:
            return hidden @ self.transformer.embed.weight.T  # (batch, seq, dim) @ (dim, vocab)
        return self.head(hidden)
