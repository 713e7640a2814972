"""One small Transformer whose only varying part is the position encoding.

Every experiment on the site compares ``TransformerConfig(position=...)`` values with everything
else fixed: same pre-norm blocks, same attention code, same dropout and, for the same seed, the
same initial shared weights. The encodings are the library's own modules and functions.
"""

from __future__ import annotations

import math
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

import torch
from torch import nn

from posenc._checks import (
    check_bool,
    check_choice,
    check_even,
    check_int,
    check_integer_tensor,
    check_ndim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc._cache import cached_rows
from posenc.alibi import alibi_bias, alibi_slopes
from posenc.cope import CoPE
from posenc.learned import LearnedPositionalEncoding, TokenEmbedding
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    t5_relative_position_bucket,
    xl_relative_embedding,
)
from posenc.rope import RotaryEmbedding
from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table

__all__ = [
    "POSITIONS",
    "TransformerConfig",
    "KVCache",
    "Attention",
    "Transformer",
    "EncoderClassifier",
    "CausalLM",
    "next_token_loss",
    "TrainingLog",
    "train",
    "CharCorpus",
    "stdlib_corpus",
]

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
    rope_scaling : dict, optional
        Hugging Face ``rope_parameters`` for RoPE's long-context scaling (see
        :func:`posenc.rope_inv_freq`); default none. To evaluate a trained model with another
        scaling, replace its ``transformer.rope`` with a new :class:`posenc.RotaryEmbedding`.
    rope_layout : str
        ``"half"`` (GPT-NeoX, Hugging Face) or ``"interleaved"`` (Meta, GPT-J) pairs of RoPE.
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
    rope_scaling: dict | None = None
    rope_layout: str = "half"
    cope_max_pos: int | None = None

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
        if self.cope_max_pos is not None:
            check_positive_int("cope_max_pos", self.cope_max_pos)

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``dim // num_heads``."""
        return self.dim // self.num_heads


class _AttentionContext(NamedTuple):
    """What the attention of every layer needs, computed once per forward.

    ``q`` is the number of new tokens, ``k`` the number of keys (cached ones included). With the
    default positions ``0 … q-1`` and no cache (``explicit`` false), the relative encodings use
    their table-and-shift forms; otherwise they read the positions of each query and key.
    """

    mask: torch.Tensor | None  # (batch or 1, 1, q, k) bool, True where a key is hidden
    bias: torch.Tensor | None  # broadcastable to (batch, heads, q, k): T5, ALiBi
    xl_table: torch.Tensor | None  # (rows, dim) sinusoids of relative distances (default positions)
    rope: RotaryEmbedding | None
    q_pos: torch.Tensor  # (batch or 1, q) integer positions of the new tokens
    k_pos: torch.Tensor  # (batch or 1, k) integer positions of all keys
    explicit: bool  # positions given, derived from a padding mask, or continued from a cache


class KVCache:
    """Keys, values and key positions of the tokens a causal model has already seen.

    Pass the same (initially empty) cache to successive calls of :class:`Transformer` or
    :class:`CausalLM` to decode incrementally: each call attends to the cached keys and appends
    its own. Keys are stored after RoPE's rotation, so they keep the angles of their own
    positions.

    Attributes
    ----------
    keys, values : list of torch.Tensor
        One ``(batch, heads, k, head_dim)`` tensor per layer.
    positions : torch.Tensor or None
        ``(batch or 1, k)`` integer positions of the cached keys.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.positions: torch.Tensor | None = None

    def __len__(self) -> int:
        """Number of cached tokens."""
        return 0 if self.positions is None else self.positions.shape[1]

    def _extend(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.keys):
            self.keys.append(keys)
            self.values.append(values)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], keys], dim=2)
            self.values[layer] = torch.cat([self.values[layer], values], dim=2)
        return self.keys[layer], self.values[layer]


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

    def scores(
        self, x: torch.Tensor, context: _AttentionContext, cache: tuple[KVCache, int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention logits, before the softmax, and values.

        Parameters
        ----------
        x : torch.Tensor
            Normalised input ``(batch, seq, dim)`` of the new tokens.
        context : tuple
            Mask, bias, positions, Transformer-XL table and rotary module of this forward pass.
        cache : tuple, optional
            A :class:`KVCache` and this layer's index in it: the new keys and values are appended,
            and the queries attend to all of them.

        Returns
        -------
        tuple of torch.Tensor
            Logits ``(batch, heads, seq, k)`` (the most negative float where masked) and values
            ``(batch, heads, k, head_dim)``, where ``k`` counts cached keys too.
        """
        batch, seq, _ = x.shape
        # (batch, seq, 3 * dim) -> (batch, seq, 3, heads, head_dim) -> (3, batch, heads, seq, head_dim)
        q, k, values = self.qkv(x).view(batch, seq, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if context.rope is not None:
            q, k = context.rope(q, k, positions=context.q_pos) if context.explicit else context.rope(q, k)
        if cache is not None:
            k, values = cache[0]._extend(cache[1], k, values)
        if self.r_proj is not None:
            logits = self._xl_logits(q, k, context)
        else:
            logits = q @ k.transpose(-1, -2)  # (batch, heads, seq, k)
        if self.rel_k is not None:
            logits = logits + self._shaw_key_term(q, context)
        logits = logits / math.sqrt(self.head_dim)
        if context.bias is not None:
            logits = logits + context.bias
        if context.mask is not None:
            # The most negative float rather than -inf: a padding query whose keys are all hidden
            # gets a uniform (unused) row instead of NaN; exp() of it is exactly 0 otherwise.
            logits = logits.masked_fill(context.mask, torch.finfo(logits.dtype).min)
        if self.cope is not None:
            # After the mask, as in the paper: masked keys get gate 0 and count nothing.
            logits = logits + self.cope(q, logits)
        return logits, values

    def _xl_logits(self, q: torch.Tensor, k: torch.Tensor, context: _AttentionContext) -> torch.Tensor:
        # Biases (heads, head_dim) -> (heads, 1, head_dim), broadcast over queries.
        content = (q + self.xl_content_bias[:, None]) @ k.transpose(-1, -2)
        q_v = q + self.xl_position_bias[:, None]
        assert self.r_proj is not None
        if not context.explicit:
            # (rows, dim) -> (rows, heads, head_dim) -> (heads, rows, head_dim)
            r = self.r_proj(context.xl_table).view(-1, self.num_heads, self.head_dim).transpose(0, 1)
            return content + rel_shift(q_v @ r.transpose(-1, -2))[..., : q.shape[2]]
        # Any positions: R_{i-j} = [sin((i-j)w), cos((i-j)w)] splits by the angle-addition formulas
        # into sinusoids of i and of j, so (q + v) W_r R_{i-j} is one product of two (.., 2F) tensors.
        w = self.r_proj.weight.view(self.num_heads, self.head_dim, -1)  # (heads, head_dim, dim)
        a = torch.einsum("bhid,hdf->bhif", q_v, w)  # (batch, heads, q, dim): sin half, cos half
        a_sin, a_cos = a.chunk(2, dim=-1)
        s_i, c_i = _sin_cos(context.q_pos, w.shape[-1], q.dtype)  # (batch or 1, q, F)
        s_j, c_j = _sin_cos(context.k_pos, w.shape[-1], q.dtype)  # (batch or 1, k, F)
        left = torch.cat([a_sin * s_i[:, None] + a_cos * c_i[:, None], a_cos * s_i[:, None] - a_sin * c_i[:, None]], -1)
        right = torch.cat([c_j, s_j], dim=-1)[:, None]  # (batch or 1, 1, k, 2F)
        return content + left @ right.transpose(-1, -2)

    def _shaw_key_term(self, q: torch.Tensor, context: _AttentionContext) -> torch.Tensor:
        assert self.rel_k is not None
        if not context.explicit:
            seq = q.shape[2]
            # rel_k: (seq, seq, head_dim); a_ij added to every key, per query i and key j.
            return torch.einsum("bhid,ijd->bhij", q, self.rel_k(seq, seq))
        # q . w_r for the 2K+1 clipped distances r, then picked per (query, key) pair.
        per_distance = q @ self.rel_k.embedding.weight.T  # (batch, heads, q, 2K + 1)
        index = _shaw_index(context, self.rel_k.max_relative_position)  # (batch or 1, q, k)
        index = index[:, None].expand(q.shape[0], q.shape[1], -1, -1)
        return per_distance.gather(-1, index)

    def forward(
        self, x: torch.Tensor, context: _AttentionContext, cache: tuple[KVCache, int] | None = None
    ) -> torch.Tensor:
        """Attend.

        Parameters
        ----------
        x : torch.Tensor
            Normalised input ``(batch, seq, dim)``.
        context : tuple
            As in :meth:`scores`.
        cache : tuple, optional
            As in :meth:`scores`.

        Returns
        -------
        torch.Tensor
            ``(batch, seq, dim)``, before the residual connection.
        """
        logits, values = self.scores(x, context, cache)
        attn = self.drop(logits.softmax(dim=-1))  # (batch, heads, seq, k)
        out = attn @ values  # (batch, heads, seq, head_dim)
        if self.rel_v is not None:
            if context.explicit:
                index = _shaw_index(context, self.rel_v.max_relative_position)  # (batch or 1, q, k)
                # Attention mass per clipped distance, then the weighted sum of the 2K+1 vectors.
                rows = self.rel_v.embedding.weight.shape[0]
                one_hot = nn.functional.one_hot(index, rows).to(attn.dtype)  # (batch or 1, q, k, 2K + 1)
                mass = torch.einsum("bhij,bijr->bhir", attn, one_hot.expand(attn.shape[0], -1, -1, -1))
                out = out + mass @ self.rel_v.embedding.weight
            else:
                seq = x.shape[1]
                out = out + torch.einsum("bhij,ijd->bhid", attn, self.rel_v(seq, seq))
        # (batch, heads, seq, head_dim) -> (batch, seq, heads, head_dim) -> (batch, seq, dim)
        return self.proj(out.transpose(1, 2).flatten(2))


def _shaw_index(context: _AttentionContext, max_relative_position: int) -> torch.Tensor:
    """Rows of Shaw's table: clip(j - i, -K, K) + K from the positions, ``(batch or 1, q, k)``."""
    distance = context.k_pos[:, None, :] - context.q_pos[:, :, None]
    return distance.clamp(-max_relative_position, max_relative_position) + max_relative_position


def _sin_cos(positions: torch.Tensor, dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """sin and cos of position * frequency for the ``dim // 2`` sinusoidal frequencies, float64 angles."""
    angles = positions.double()[..., None] * sinusoidal_frequencies(dim, device=positions.device)
    return angles.sin().to(dtype), angles.cos().to(dtype)


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

    def forward(
        self, x: torch.Tensor, context: _AttentionContext, cache: tuple[KVCache, int] | None = None
    ) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), context, cache))
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
            self.rope = RotaryEmbedding(
                config.head_dim,
                base=config.rope_base,
                scaling=config.rope_scaling,
                layout=config.rope_layout,
                max_len=config.max_len,
            )
        for block in self.blocks:
            block.attn.add_position(config)

    def _positions(
        self, tokens: torch.Tensor, position_ids: Any, attention_mask: torch.Tensor | None, past: int
    ) -> torch.Tensor:
        """Positions of the new tokens, ``(batch or 1, seq)``."""
        batch, seq = tokens.shape
        if position_ids is not None:
            check_integer_tensor("position_ids", position_ids)
            if tuple(position_ids.shape) not in ((batch, seq), (1, seq)):
                raise ValueError(
                    f"position_ids must have shape (batch, seq) = {(batch, seq)} or (1, seq), "
                    f"got {tuple(position_ids.shape)}"
                )
            if bool((position_ids < 0).any()):
                # A learned table would read a row from its end, a sinusoidal table lookup would wrap.
                raise ValueError(f"position_ids must be >= 0, got a minimum of {int(position_ids.min())}")
            return position_ids.to(tokens.device)
        if attention_mask is not None:
            # Left padding: each real token's position counts the real tokens before it.
            counted = attention_mask.long().cumsum(dim=1)[:, past:] - 1
            return counted.clamp(min=0)
        return torch.arange(past, past + seq, device=tokens.device)[None]

    def _attention_context(
        self,
        tokens: torch.Tensor,
        like: torch.Tensor,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        attention_mask: torch.Tensor | None,
        explicit: bool,
    ) -> _AttentionContext:
        config, device = self.config, like.device
        seq, keys = q_pos.shape[1], k_pos.shape[1]
        mask = None
        if config.causal:
            # Query t of this call is token keys - seq + t; it sees the keys up to itself.
            query_index = torch.arange(keys - seq, keys, device=device)
            mask = (torch.arange(keys, device=device)[None, :] > query_index[:, None])[None, None]
        if attention_mask is not None:
            padding = (attention_mask == 0)[:, None, None, :]  # (batch, 1, 1, keys)
            mask = padding if mask is None else mask | padding
        bias = None
        if self.t5 is not None:
            if explicit:
                bucket = t5_relative_position_bucket(
                    k_pos[:, None, :] - q_pos[:, :, None],
                    bidirectional=self.t5.bidirectional,
                    num_buckets=self.t5.num_buckets,
                    max_distance=self.t5.max_distance,
                )
                # (batch or 1, q, k, heads) -> (batch or 1, heads, q, k)
                bias = self.t5.relative_attention_bias(bucket).permute(0, 3, 1, 2).to(like.dtype)
            else:
                bias = self.t5(seq, seq).to(like.dtype)
        elif config.position == "alibi":
            if explicit:
                distance = (q_pos[:, :, None] - k_pos[:, None, :]).abs().to(like.dtype)  # (batch or 1, q, k)
                slopes = alibi_slopes(config.num_heads, dtype=like.dtype, device=device)
                bias = -slopes[None, :, None, None] * distance[:, None]
            else:
                bias = alibi_bias(config.num_heads, seq, dtype=like.dtype, device=device)
        xl_table = None
        if config.position == "xl" and not explicit:
            if config.causal:
                xl_table = xl_relative_embedding(seq, config.dim, dtype=like.dtype, device=device)
            else:
                # Distances seq-1 … -(seq-1); after rel_shift the first seq columns hold i - j.
                xl_table = sinusoidal_table(
                    2 * seq - 1, config.dim, style="concat", offset=1 - seq, dtype=like.dtype, device=device
                ).flip(0)
        return _AttentionContext(mask, bias, xl_table, self.rope, q_pos, k_pos, explicit)

    def _check_inputs(
        self, tokens: Any, position_ids: Any, attention_mask: Any, cache: Any
    ) -> int:
        """Validate the arguments of :meth:`forward`; return the number of cached tokens."""
        _check_tokens(tokens)
        past = 0
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a posenc.models.KVCache, got {type(cache).__name__}")
            if not self.config.causal:
                raise ValueError("a KV cache needs a causal model (config.causal=True), got causal=False")
            past = len(cache)
            if cache.keys and cache.keys[0].shape[0] != tokens.shape[0]:
                raise ValueError(
                    f"the cache holds a batch of {cache.keys[0].shape[0]}, got tokens of batch {tokens.shape[0]}"
                )
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor) or attention_mask.dtype.is_floating_point:
                raise TypeError(
                    "attention_mask must be an integer or bool torch.Tensor (1 = token, 0 = padding), "
                    f"got {attention_mask.dtype if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__}"
                )
            expected = (tokens.shape[0], past + tokens.shape[1])
            if tuple(attention_mask.shape) != expected:
                raise ValueError(
                    f"attention_mask must have shape (batch, cached + seq) = {expected}, "
                    f"got {tuple(attention_mask.shape)}"
                )
        return past

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Hidden states of the last layer (after the final layer norm).

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)`` (the new tokens, when decoding with a cache).
        position_ids : torch.Tensor, optional
            Non-negative integer positions ``(batch, seq)`` or ``(1, seq)`` of the tokens (a
            negative one raises ``ValueError``). Default: counted from
            ``attention_mask`` if given (left padding then leaves each sequence's positions as if
            it were alone), else ``cached … cached + seq - 1``.
        attention_mask : torch.Tensor, optional
            ``(batch, cached + seq)``, 1 for a token and 0 for padding, covering the cached tokens
            too (as in Hugging Face transformers). Padding keys are hidden from every query.
        cache : KVCache, optional
            Keys and values of earlier calls (causal models only); this call's are appended.

        Returns
        -------
        torch.Tensor
            ``(batch, seq, dim)``. Outputs at padding positions are computed but meaningless.
        """
        past = self._check_inputs(tokens, position_ids, attention_mask, cache)
        q_pos = self._positions(tokens, position_ids, attention_mask, past)
        explicit = position_ids is not None or attention_mask is not None or past > 0
        k_pos = q_pos
        if cache is not None and cache.positions is not None:
            batch = tokens.shape[0]
            k_pos = torch.cat([cache.positions.expand(batch, -1), q_pos.expand(batch, -1)], dim=1)
        x = self.embed(tokens)
        x = self._add_absolute(x, q_pos, explicit)
        x = self.drop(x)
        context = self._attention_context(tokens, x, q_pos, k_pos, attention_mask, explicit)
        for layer, block in enumerate(self.blocks):
            x = block(x, context, None if cache is None else (cache, layer))
        if cache is not None:
            cache.positions = k_pos
        return self.norm(x)

    def _add_absolute(self, x: torch.Tensor, q_pos: torch.Tensor, explicit: bool) -> torch.Tensor:
        if self.absolute is None:
            return x
        if not explicit:
            return self.absolute(x)
        if isinstance(self.absolute, LearnedPositionalEncoding):
            table = self.absolute.weight
            if int(q_pos.max()) >= table.shape[0]:
                raise ValueError(
                    f"position {int(q_pos.max())} is past the learned table (max_len={table.shape[0]})"
                )
        else:
            (table,) = cached_rows(self.absolute, ("pe",), 0, int(q_pos.max()) + 1, self.absolute._rows)
        return self.absolute.dropout(x + table[q_pos].to(x.dtype))


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
        self.head = nn.Linear(config.dim, check_positive_int("num_classes", num_classes))
        self.transformer = Transformer(config)

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Classify.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.
        position_ids, attention_mask : torch.Tensor, optional
            As in :meth:`Transformer.forward`; the mean runs over the tokens the mask keeps.

        Returns
        -------
        torch.Tensor
            Class logits ``(batch, num_classes)``.
        """
        hidden = self.transformer(tokens, position_ids=position_ids, attention_mask=attention_mask)
        if attention_mask is None:
            return self.head(hidden.mean(dim=1))  # (batch, seq, dim) -> (batch, dim)
        keep = attention_mask.to(hidden.dtype)[..., None]  # (batch, seq, 1)
        return self.head((hidden * keep).sum(dim=1) / keep.sum(dim=1))


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
        self.head = None if check_bool("tie_weights", tie_weights) else nn.Linear(config.dim, config.vocab_size, bias=False)
        self.transformer = Transformer(config)

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Predict the next token at every position.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.
        position_ids, attention_mask : torch.Tensor, optional
            As in :meth:`Transformer.forward`.
        cache : KVCache, optional
            As in :meth:`Transformer.forward`: decode incrementally.

        Returns
        -------
        torch.Tensor
            Logits ``(batch, seq, vocab_size)``; position ``t`` scores token ``t + 1``.
        """
        hidden = self.transformer(tokens, position_ids=position_ids, attention_mask=attention_mask, cache=cache)
        if self.head is None:
            return hidden @ self.transformer.embed.weight.T  # (batch, seq, dim) @ (dim, vocab)
        return self.head(hidden)


def next_token_loss(model: CausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]``.

    Parameters
    ----------
    model : CausalLM
        The language model.
    tokens : torch.Tensor
        Integer token ids ``(batch, seq)``, ``seq >= 2``.

    Returns
    -------
    torch.Tensor
        Scalar loss (natural log).
    """
    _check_tokens(tokens)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens need at least 2 positions to predict one, got seq={tokens.shape[1]}")
    logits = model(tokens[:, :-1])  # (batch, seq - 1, vocab)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


@dataclass
class TrainingLog:
    """What :func:`train` did: the loss of every step and the wall-clock time it took."""

    losses: list[float]
    seconds: float


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    make_batch: Callable[[torch.Generator], Any],
    *,
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = 1.0,
    warmup: int = 0,
    threads: int | None = 1,
) -> TrainingLog:
    """Train ``model`` in place with AdamW: the loop every experiment on the site shares.

    Each step draws a batch with ``make_batch(generator)`` (a ``torch.Generator`` seeded from
    ``seed``), computes ``loss_fn(model, batch)``, clips the gradient norm and steps. The learning
    rate rises linearly over ``warmup`` steps, then stays at ``lr``. Dropout draws from the global
    generator, seeded with ``seed`` too, so a run is repeatable. The model is left in eval mode.

    Parameters
    ----------
    model : torch.nn.Module
        Model to train (its parameters are updated).
    loss_fn : collections.abc.Callable
        ``loss_fn(model, batch) -> scalar tensor``, e.g. :func:`next_token_loss`.
    make_batch : collections.abc.Callable
        ``make_batch(generator) -> batch``.
    steps : int
        Number of optimiser steps.
    lr : float, optional
        Peak learning rate.
    seed : int, optional
        Seed of the data generator and of dropout.
    weight_decay : float, optional
        AdamW's decoupled weight decay.
    max_grad_norm : float or None, optional
        Clip the global gradient norm to this value; ``None`` disables clipping.
    warmup : int, optional
        Steps of linear warm-up.
    threads : int or None, optional
        CPU threads during training (restored afterwards). One thread is fastest and repeatable
        for the site's small models on a shared machine; ``None`` leaves the setting alone.

    Returns
    -------
    TrainingLog
        Loss per step and the time taken.
    """
    steps = check_positive_int("steps", steps)
    lr = check_positive_float("lr", lr)
    seed = check_int("seed", seed)
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if max_grad_norm is not None:
        max_grad_norm = check_positive_float("max_grad_norm", max_grad_norm)
    warmup = check_nonnegative_int("warmup", warmup)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check_positive_int("threads", threads))
    try:
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        losses = []
        start = time.perf_counter()
        model.train()
        for step in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
            loss = loss_fn(model, make_batch(generator))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        return TrainingLog(losses, time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous_threads)


@dataclass(frozen=True)
class CharCorpus:
    """Text as character ids: the data of the site's small language models.

    Every ASCII character of the training text gets an id, in sorted order; any other character,
    and any character the training text lacks, gets one extra id, :attr:`unknown`.

    Parameters
    ----------
    chars : str
        The vocabulary: id ``i`` is ``chars[i]``.
    train, held_out : torch.Tensor
        The two texts as 1-D int64 id tensors.
    """

    chars: str
    train: torch.Tensor
    held_out: torch.Tensor

    @classmethod
    def from_text(cls, train_text: str, held_out_text: str) -> "CharCorpus":
        """Build the vocabulary from ``train_text`` and encode both texts."""
        chars = "".join(sorted({c for c in train_text if c.isascii()}))
        empty = torch.empty(0, dtype=torch.long)
        corpus = cls(chars, empty, empty)
        return cls(chars, corpus.encode(train_text), corpus.encode(held_out_text))

    @property
    def unknown(self) -> int:
        """The id of characters outside the vocabulary, ``len(chars)``."""
        return len(self.chars)

    @property
    def vocab_size(self) -> int:
        """Number of ids, the vocabulary plus :attr:`unknown`."""
        return len(self.chars) + 1

    def encode(self, text: str) -> torch.Tensor:
        """Ids of the characters of ``text``, ``(len(text),)`` int64."""
        index = {c: i for i, c in enumerate(self.chars)}
        return torch.tensor([index.get(c, self.unknown) for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """The text of 1-D ``ids``; the unknown id reads as ``"?"``."""
        return "".join(self.chars[i] if i < self.unknown else "?" for i in ids.tolist())

    def windows(
        self, length: int, batch_size: int, data: torch.Tensor | None = None
    ) -> Callable[[torch.Generator], torch.Tensor]:
        """A ``make_batch`` for :func:`train`: random windows of ``length + 1`` ids.

        Parameters
        ----------
        length : int
            Number of predictions per window (the model reads ``length`` ids).
        batch_size : int
            Windows per batch.
        data : torch.Tensor, optional
            Ids to cut the windows from; default :attr:`train`.

        Returns
        -------
        collections.abc.Callable
            ``make_batch(generator) -> (batch_size, length + 1)`` int64 tensor.
        """
        length = check_positive_int("length", length)
        batch_size = check_positive_int("batch_size", batch_size)
        source = self.train if data is None else data
        if source.ndim != 1 or source.numel() < length + 1:
            raise ValueError(
                f"data must be 1-D with at least length + 1 = {length + 1} ids, got shape {tuple(source.shape)}"
            )

        def make_batch(generator: torch.Generator) -> torch.Tensor:
            # Starts 0 ... len - length - 1: the last window ends on the last id.
            start = torch.randint(0, len(source) - length, (batch_size,), generator=generator)
            return source[start[:, None] + torch.arange(length + 1)]  # (batch_size, length + 1)

        return make_batch


def stdlib_corpus(train_modules: list[str], held_out_modules: list[str]) -> CharCorpus:
    """A :class:`CharCorpus` of modules of the running Python's standard library.

    The source files are read from the interpreter's own ``stdlib`` directory, so the data is
    available offline; the numbers a page prints then depend only on the Python version.

    Parameters
    ----------
    train_modules, held_out_modules : list of str
        Module names such as ``"argparse"``; each text is the files ``<name>.py`` concatenated.

    Returns
    -------
    CharCorpus
        Vocabulary from the training modules.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])

    def read(names: list[str]) -> str:
        missing = [name for name in names if not (stdlib / f"{name}.py").is_file()]
        if not names or missing:
            raise ValueError(f"modules must be non-empty names of files in {stdlib}, missing: {missing}")
        return "".join((stdlib / f"{name}.py").read_text(encoding="utf-8") for name in names)

    return CharCorpus.from_text(read(train_modules), read(held_out_modules))
