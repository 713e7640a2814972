"""The site's small pre-norm Transformer, its KV cache and its two heads."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import nn

from posenc._checks import check_bool, check_integer_tensor, check_ndim, check_nonnegative_int, check_positive_int
from posenc.learned import TokenEmbedding
from posenc.models._config import TransformerConfig
from posenc.models._encodings import ENCODINGS, AttentionContext, LayerPosition

__all__ = ["KVCache", "Attention", "Transformer", "EncoderClassifier", "CausalLM", "check_tokens"]


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

    def drop(self, start: int, count: int) -> None:
        """Evict cached tokens ``start … start + count - 1``; the others keep their positions.

        The positions of the kept tokens then have a gap. Without ``position_ids``, the next call
        numbers its tokens from ``len(cache)``, which after a drop is less than the last cached
        position; pass ``position_ids`` to continue the original count, or use
        :meth:`Transformer.shift_cache` to close the gap.

        Parameters
        ----------
        start : int
            Index of the first evicted token in the cache.
        count : int
            Number of evicted tokens.

        Raises
        ------
        ValueError
            If the span is empty or reaches past the cache.
        """
        self._check_span(start, count)
        self.keys, self.values = _without(self.keys, start, count), _without(self.values, start, count)
        self.positions = _without([self.positions], start, count, axis=1)[0]

    def _check_span(self, start: int, count: int) -> None:
        start, count = check_nonnegative_int("start", start), check_positive_int("count", count)
        if start + count > len(self):
            raise ValueError(
                f"tokens {start} … {start + count - 1} reach past the cache, which holds {len(self)}"
            )

    def _extend(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.keys):
            self.keys.append(keys)
            self.values.append(values)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], keys], dim=2)
            self.values[layer] = torch.cat([self.values[layer], values], dim=2)
        return self.keys[layer], self.values[layer]


def _without(tensors: list[torch.Tensor], start: int, count: int, axis: int = 2) -> list[torch.Tensor]:
    """Each tensor without entries ``start … start + count - 1`` along ``axis`` (the tokens)."""
    end = start + count
    return [torch.cat([t.narrow(axis, 0, start), t.narrow(axis, end, t.shape[axis] - end)], dim=axis) for t in tensors]


class Attention(nn.Module):
    """Multi-head self-attention with explicit scores, so every encoding can act on them.

    The layer's own position parameters (Shaw's tables, Transformer-XL's projection and biases,
    CoPE's table) live in its ``position`` attribute, which :class:`Transformer` sets after
    building every shared weight.

    Parameters
    ----------
    config : TransformerConfig
        Model configuration.
    layer : int, optional
        Index of the layer: it selects the layer's attention kind (``config.attention_kinds``)
        and, for RoPE, its rotary embedding.
    """

    def __init__(self, config: TransformerConfig, layer: int = 0) -> None:
        super().__init__()
        self.num_heads, self.head_dim = config.num_heads, config.head_dim
        self.layer, self.sliding = layer, config.attention_kinds[layer] == "sliding_attention"
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.drop = nn.Dropout(config.dropout)
        self.position = LayerPosition()

    def scores(
        self, x: torch.Tensor, context: AttentionContext, cache: tuple[KVCache, int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention logits, before the softmax, and values.

        Parameters
        ----------
        x : torch.Tensor
            Normalised input ``(batch, seq, dim)`` of the new tokens.
        context : tuple
            Mask, bias, positions and encoding of this forward pass.
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
        q, k = context.encoding.rotate(q, k, context, self.layer)
        if cache is not None:
            k, values = cache[0]._extend(cache[1], k, values)
        logits = self.position.logits(q, k, context) / math.sqrt(self.head_dim)  # (batch, heads, seq, k)
        if context.bias is not None:
            logits = logits + context.bias
        mask = context.window_mask if self.sliding else context.mask
        if mask is not None:
            # The most negative float rather than -inf: a padding query whose keys are all hidden
            # gets a uniform (unused) row instead of NaN; exp() of it is exactly 0 otherwise.
            logits = logits.masked_fill(mask, torch.finfo(logits.dtype).min)
        return self.position.after_mask(q, logits), values

    def forward(
        self, x: torch.Tensor, context: AttentionContext, cache: tuple[KVCache, int] | None = None
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
        out = self.position.values(attn, attn @ values, context)  # (batch, heads, seq, head_dim)
        # (batch, heads, seq, head_dim) -> (batch, seq, heads, head_dim) -> (batch, seq, dim)
        return self.proj(out.transpose(1, 2).flatten(2))


class _Block(nn.Module):
    def __init__(self, config: TransformerConfig, layer: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = Attention(config, layer)
        self.norm2 = nn.LayerNorm(config.dim)
        self.ff = nn.Sequential(
            nn.Linear(config.dim, config.ff_mult * config.dim),
            nn.GELU(),
            nn.Linear(config.ff_mult * config.dim, config.dim),
        )
        self.drop = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, context: AttentionContext, cache: tuple[KVCache, int] | None = None
    ) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), context, cache))
        return x + self.drop(self.ff(self.norm2(x)))


def check_tokens(tokens: Any) -> None:
    """Raise unless ``tokens`` is an integer ``(batch, seq)`` tensor."""
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

    Layers may differ, as in current models: ``config.layer_types`` makes some layers attend
    within ``sliding_window`` only (Gemma 2 and 3, GPT-OSS); with RoPE, ``local_rope_base`` gives
    those layers their own base and scaling (Gemma 3), and ``nope_layers`` leaves some layers
    unrotated (Llama 4, Command R7B).

    The encoding's parameters live in ``transformer.position`` (model-wide: a table, T5's biases, RoPE's
    cache) and in each layer's ``attn.position`` (Shaw's tables, Transformer-XL's projection and
    biases, CoPE's table).

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
        self.blocks = nn.ModuleList(_Block(config, layer) for layer in range(config.num_layers))
        self.norm = nn.LayerNorm(config.dim)
        # Position parameters come last, after every shared weight has drawn its random numbers:
        # with the same seed, models that differ in ``position`` share their other initial weights.
        self.position = ENCODINGS[config.position](config)
        for block in self.blocks:
            block.attn.position = self.position.layer_position()

    def shift_cache(self, cache: KVCache, start: int, count: int) -> None:
        """Context shift: drop cached tokens ``start … start + count - 1`` and move the later ones back.

        The tokens after the span get positions ``count`` smaller, so the cache holds consecutive
        positions again and the next call continues from ``len(cache)``. Keys that carry their
        position are moved with it: RoPE's cached keys are rotated by the angles of ``-count``,
        exact because :math:`R(p - c) = R(-c) R(p)`. Keys of the relative biases (ALiBi, T5,
        Shaw, Transformer-XL) carry none: their positions change in the cache only. This is
        llama.cpp's context shift with ``n_keep = start`` and ``n_discard = count``.

        Parameters
        ----------
        cache : KVCache
            The cache to change in place.
        start : int
            Index of the first dropped token (the tokens before it are kept, e.g. attention sinks).
        count : int
            Number of dropped tokens.

        Raises
        ------
        ValueError
            If the span is empty or reaches past the cache; for absolute encodings, whose cached
            keys were computed from inputs carrying absolute positions; for RoPE scaling whose
            frequencies depend on the sequence length.
        """
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a posenc.models.KVCache, got {type(cache).__name__}")
        cache._check_span(start, count)
        end = start + count
        # Every key is moved before the cache changes: an encoding that refuses leaves it whole.
        keys = [torch.cat([k[:, :, :start], self.position.shift_keys(k[:, :, end:], -count, layer)], dim=2)
                for layer, k in enumerate(cache.keys)]
        cache.keys, cache.values = keys, _without(cache.values, start, count)
        cache.positions = torch.cat([cache.positions[:, :start], cache.positions[:, end:] - count], dim=1)

    def stream_cache(self, cache: KVCache, *, window: int, sinks: int = 0) -> None:
        """StreamingLLM: keep the first ``sinks`` tokens and the most recent ones, ``window`` in all.

        When the cache holds more than ``window`` tokens, the tokens between the sinks and the
        last ``window - sinks`` are dropped with :meth:`shift_cache`, so positions are counted
        within the cache, as in the paper. Call it after each step of generation.

        Parameters
        ----------
        cache : KVCache
            The cache to change in place.
        window : int
            Tokens kept in all, sinks included.
        sinks : int, optional
            Tokens at the start that are never evicted (default 0: a plain rolling window).

        Raises
        ------
        ValueError
            If ``window`` is not positive or ``sinks >= window`` (no room for recent tokens).

        References
        ----------
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.
        """
        window, sinks = check_positive_int("window", window), check_nonnegative_int("sinks", sinks)
        if sinks >= window:
            raise ValueError(f"sinks must be smaller than the window (room for recent tokens), got sinks={sinks} "
                             f"and window={window}")
        if len(cache) > window:
            self.shift_cache(cache, sinks, len(cache) - window)

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

    def _hidden_keys(
        self, q_pos: torch.Tensor, k_pos: torch.Tensor, attention_mask: torch.Tensor | None,
        document_mask: torch.Tensor | None, device: torch.device,
    ) -> torch.Tensor | None:
        """``(batch or 1, 1, seq, keys)`` bool, True where a query may not see a key; or ``None``.

        Without the sliding window, which :meth:`_window` adds for the sliding layers.
        """
        seq, keys = q_pos.shape[1], k_pos.shape[1]
        hidden = None
        if self.config.causal:
            # Query t of this call is token keys - seq + t; it sees the keys up to itself.
            query_index = torch.arange(keys - seq, keys, device=device)
            later = (torch.arange(keys, device=device)[None, :] > query_index[:, None])[None, None]
            hidden = later if hidden is None else hidden | later
        if attention_mask is not None:
            padding = (attention_mask == 0)[:, None, None, :]  # (batch, 1, 1, keys)
            hidden = padding if hidden is None else hidden | padding
        if document_mask is not None:
            # (seq, keys) or (batch, seq, keys) allowed -> (batch or 1, 1, seq, keys) hidden
            other = ~(document_mask if document_mask.ndim == 3 else document_mask[None])[:, None]
            hidden = other if hidden is None else hidden | other
        return hidden

    def _window(self, q_pos: torch.Tensor, k_pos: torch.Tensor, hidden: torch.Tensor | None) -> torch.Tensor | None:
        """``hidden`` with the keys outside the sliding window hidden too; ``None`` if no layer slides."""
        if "sliding_attention" not in self.config.attention_kinds:
            return None
        # Key j is visible to query i when j > i - window: the window keys up to the query
        # (transformers' sliding_window_overlay), counted in positions.
        distance = q_pos[:, :, None] - k_pos[:, None, :]  # (batch or 1, seq, keys)
        if not self.config.causal:
            distance = distance.abs()  # an encoder's window reaches both ways
        outside = (distance >= self.config.sliding_window)[:, None]  # (batch or 1, 1, seq, keys)
        return outside if hidden is None else hidden | outside

    def _context(
        self, x: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, explicit: bool,
        attention_mask: torch.Tensor | None = None, document_mask: torch.Tensor | None = None,
    ) -> AttentionContext:
        """What every layer reads in this pass; ``x`` gives the dtype and device."""
        mask = self._hidden_keys(q_pos, k_pos, attention_mask, document_mask, x.device)
        return AttentionContext(
            mask=mask,
            window_mask=self._window(q_pos, k_pos, mask),
            bias=self.position.bias(q_pos, k_pos, explicit, x),
            shared=self.position.shared(q_pos, explicit, x),
            q_pos=q_pos,
            k_pos=k_pos,
            explicit=explicit,
            encoding=self.position,
        )

    def _check_inputs(
        self, tokens: Any, attention_mask: Any, document_mask: Any, cache: Any
    ) -> int:
        """Validate the arguments of :meth:`forward`; return the number of cached tokens."""
        check_tokens(tokens)
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
        batch, keys = tokens.shape[0], past + tokens.shape[1]
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor) or attention_mask.dtype.is_floating_point:
                raise TypeError(
                    "attention_mask must be an integer or bool torch.Tensor (1 = token, 0 = padding), "
                    f"got {attention_mask.dtype if isinstance(attention_mask, torch.Tensor) else type(attention_mask).__name__}"
                )
            if tuple(attention_mask.shape) != (batch, keys):
                raise ValueError(
                    f"attention_mask must have shape (batch, cached + seq) = {(batch, keys)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
        if document_mask is not None:
            if not isinstance(document_mask, torch.Tensor) or document_mask.dtype != torch.bool:
                raise TypeError(
                    "document_mask must be a bool torch.Tensor (True where a query may see a key, as "
                    "posenc.document_mask returns it), got "
                    f"{document_mask.dtype if isinstance(document_mask, torch.Tensor) else type(document_mask).__name__}"
                )
            allowed = [(tokens.shape[1], keys), (batch, tokens.shape[1], keys)]
            if tuple(document_mask.shape) not in allowed:
                raise ValueError(
                    f"document_mask must have shape (seq, cached + seq) = {allowed[0]} or "
                    f"(batch, seq, cached + seq) = {allowed[1]}, got {tuple(document_mask.shape)}"
                )
        return past

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        document_mask: torch.Tensor | None = None,
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
            it were alone), else ``cached … cached + seq - 1``. For a packed batch, positions that
            restart in each document (:func:`posenc.packed_position_ids`).
        attention_mask : torch.Tensor, optional
            ``(batch, cached + seq)``, 1 for a token and 0 for padding, covering the cached tokens
            too (as in Hugging Face transformers). Padding keys are hidden from every query.
        document_mask : torch.Tensor, optional
            Bool ``(seq, cached + seq)`` or ``(batch, seq, cached + seq)``, True where a query may
            see a key: :func:`posenc.document_mask` keeps the documents of a packed batch apart.
            Combined with the causal mask and the padding mask.
        cache : KVCache, optional
            Keys and values of earlier calls (causal models only); this call's are appended.

        Returns
        -------
        torch.Tensor
            ``(batch, seq, dim)``. Outputs at padding positions are computed but meaningless.
        """
        past = self._check_inputs(tokens, attention_mask, document_mask, cache)
        q_pos = self._positions(tokens, position_ids, attention_mask, past)
        explicit = position_ids is not None or attention_mask is not None or past > 0
        k_pos = q_pos
        if cache is not None and cache.positions is not None:
            batch = tokens.shape[0]
            k_pos = torch.cat([cache.positions.expand(batch, -1), q_pos.expand(batch, -1)], dim=1)
        x = self.drop(self.position.embed(self.embed(tokens), q_pos, explicit))
        context = self._context(x, q_pos, k_pos, explicit, attention_mask, document_mask)
        for layer, block in enumerate(self.blocks):
            x = block(x, context, None if cache is None else (cache, layer))
        if cache is not None:
            cache.positions = k_pos
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
        document_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Predict the next token at every position.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.
        position_ids, attention_mask, document_mask : torch.Tensor, optional
            As in :meth:`Transformer.forward`.
        cache : KVCache, optional
            As in :meth:`Transformer.forward`: decode incrementally.

        Returns
        -------
        torch.Tensor
            Logits ``(batch, seq, vocab_size)``; position ``t`` scores token ``t + 1``.
        """
        hidden = self.transformer(
            tokens, position_ids=position_ids, attention_mask=attention_mask, document_mask=document_mask, cache=cache
        )
        if self.head is None:
            return hidden @ self.transformer.embed.weight.T  # (batch, seq, dim) @ (dim, vocab)
        return self.head(hidden)

    def logits_in_chunks(self, tokens: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
        """Logits of ``tokens`` fed in consecutive chunks through one new :class:`KVCache`.

        Each chunk's positions continue from the tokens cached before it (the default of
        :meth:`forward`): sizes ``[prompt, 1, 1, ...]`` are incremental decoding, larger sizes a
        chunked prefill. With a correct cache the result equals ``self(tokens)``.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer token ids ``(batch, seq)``.
        sizes : list of int
            Positive chunk lengths that sum to ``seq``.

        Returns
        -------
        torch.Tensor
            Logits ``(batch, seq, vocab_size)``, the chunks' logits concatenated.
        """
        check_tokens(tokens)
        sizes = [check_positive_int("each chunk size", size) for size in sizes]
        if not sizes:
            raise ValueError("sizes is empty: give at least one chunk")
        if sum(sizes) != tokens.shape[1]:
            raise ValueError(f"the chunk sizes {sizes} sum to {sum(sizes)}, not to the {tokens.shape[1]} tokens")
        cache = KVCache()
        return torch.cat([self(chunk, cache=cache) for chunk in tokens.split(sizes, dim=1)], dim=1)
