"""Relative positions: Shaw et al. embeddings, T5 bucketed biases and Transformer-XL shifts."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._checks import check_bool, check_int, check_integer_tensor, check_positive_int
from posenc._positions import key_minus_query, query_key_positions
from posenc.sinusoidal import sinusoidal_table

__all__ = [
    "relative_position_indices",
    "RelativePositionEmbedding",
    "t5_relative_position_bucket",
    "T5RelativePositionBias",
    "xl_relative_embedding",
    "xl_position_logits",
    "rel_shift",
]


def relative_position_indices(
    q_len: int | torch.Tensor,
    k_len: int | torch.Tensor,
    max_relative_position: int,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Clipped relative distances ``key - query``, shifted to be valid table rows.

    For a query at position :math:`i` and a key at position :math:`j`,

    .. math::

        R_{ij} = \operatorname{clip}(j - i, -K, K) + K \in \{0, \dots, 2K\}.

    Given lengths, the keys sit at :math:`0 \dots k-1` and the queries are the last ``q_len`` of
    them (as when decoding with a cache); when ``q_len == k_len`` this is
    :math:`\operatorname{clip}(j - i, -K, K) + K` for row :math:`i` and column :math:`j`. Given
    tensors, they are the positions themselves.

    Parameters
    ----------
    q_len : int or torch.Tensor
        Number of queries, or their integer positions ``(..., q)``.
    k_len : int or torch.Tensor
        Number of keys, at least ``q_len``, or their integer positions ``(..., k)`` (leading
        dimensions broadcastable with the queries').
    max_relative_position : int
        :math:`K`; distances beyond it share the row of distance :math:`\pm K`.
    device : torch.device or str, optional
        Device of the result for lengths (positions keep their own device).

    Returns
    -------
    torch.Tensor
        ``torch.long``, ``(q_len, k_len)`` for lengths, ``(..., q, k)`` for positions.

    Raises
    ------
    TypeError
        If one of ``q_len``, ``k_len`` is a length and the other a tensor, or positions are not
        integers.
    ValueError
        If ``k_len < q_len``, or the positions' leading dimensions do not broadcast.

    References
    ----------
    Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position Representations",
    NAACL 2018; tensor2tensor ``_generate_relative_positions_matrix``.
    """
    q_pos, k_pos = query_key_positions(q_len, k_len, device=device)
    k = check_positive_int("max_relative_position", max_relative_position)
    return key_minus_query(q_pos, k_pos).clamp(-k, k) + k


class RelativePositionEmbedding(nn.Module):
    r"""Learned vectors for clipped relative distances (Shaw et al., 2018).

    ``forward(q_len, k_len)[i, j] = E[R_ij]`` with ``R`` from :func:`relative_position_indices`
    and ``E`` an ``nn.Embedding`` of :math:`2K + 1` rows (default ``nn.Embedding``
    initialisation, :math:`\mathcal{N}(0, 1)`). Shaw et al. use two such tables per layer, one
    added to the keys (:math:`a^K`) and one to the values (:math:`a^V`):

    .. math::

        e_{ij} = \frac{x_i W^Q (x_j W^K + a^K_{ij})^\top}{\sqrt{d}}, \qquad
        z_i = \sum_j \alpha_{ij} (x_j W^V + a^V_{ij}).

    Parameters
    ----------
    max_relative_position : int
        :math:`K`, the largest distinguished distance.
    dim : int
        Width of each vector (the head dimension in the paper).

    References
    ----------
    Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position Representations",
    NAACL 2018.
    """

    def __init__(self, max_relative_position: int, dim: int) -> None:
        super().__init__()
        self.max_relative_position = check_positive_int("max_relative_position", max_relative_position)
        self.dim = check_positive_int("dim", dim)
        self.embedding = nn.Embedding(2 * self.max_relative_position + 1, self.dim)

    def reset_parameters(self) -> None:
        r"""Redraw the table from :math:`\mathcal{N}(0, 1)` (``nn.Embedding``'s initialisation)."""
        self.embedding.reset_parameters()

    def forward(self, q_len: int | torch.Tensor, k_len: int | torch.Tensor) -> torch.Tensor:
        """Vectors for every (query, key) pair.

        Parameters
        ----------
        q_len : int or torch.Tensor
            Number of queries, or their integer positions ``(..., q)``.
        k_len : int or torch.Tensor
            Number of keys, at least ``q_len``, or their integer positions ``(..., k)``.

        Returns
        -------
        torch.Tensor
            ``(q_len, k_len, dim)`` for lengths, ``(..., q, k, dim)`` for positions; dtype of the
            embedding weight.
        """
        index = relative_position_indices(
            q_len, k_len, self.max_relative_position, device=self.embedding.weight.device
        )
        return self.embedding(index)

    def extra_repr(self) -> str:
        return f"max_relative_position={self.max_relative_position}, dim={self.dim}"


def _check_t5_buckets(bidirectional: bool, num_buckets: int, max_distance: int) -> tuple[int, int]:
    """Validate the bucket options; return (buckets per direction, exact buckets)."""
    check_bool("bidirectional", bidirectional)
    num_buckets = check_positive_int("num_buckets", num_buckets)
    max_distance = check_positive_int("max_distance", max_distance)
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    if max_exact < 1:
        # Hugging Face divides by max_exact: ZeroDivisionError.
        least = 4 if bidirectional else 2
        raise ValueError(
            f"num_buckets must be >= {least} when bidirectional={bidirectional}, got {num_buckets}"
        )
    if max_distance <= max_exact:
        # log(max_distance / max_exact) <= 0 would divide by zero or reverse the buckets.
        raise ValueError(
            f"max_distance must be > {max_exact} (the number of exact buckets for "
            f"num_buckets={num_buckets}, bidirectional={bidirectional}), got {max_distance}"
        )
    return per_direction, max_exact


def t5_relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    r"""T5's bucket index of each relative position ``key - query``.

    With :math:`n` buckets per direction (``num_buckets // 2`` if bidirectional, the sign taking
    the upper half for positive positions; otherwise ``num_buckets``, and positive positions
    fall into bucket 0 like distance 0), :math:`m = n // 2` exact buckets and distance
    :math:`d \ge 0`:

    .. math::

        b(d) = \begin{cases} d & d < m \\
        \min\!\left(n - 1,\; m + \left\lfloor \dfrac{\ln(d / m)}{\ln(D / m)} (n - m) \right\rfloor\right)
        & d \ge m \end{cases}

    where :math:`D` is ``max_distance``. The logarithm is evaluated in float32 exactly as Hugging
    Face does, so that positions on a bucket boundary round the same way; the result is the same
    integer as ``T5Attention._relative_position_bucket`` for every input.

    Parameters
    ----------
    relative_position : torch.Tensor
        Integer tensor of any shape, ``memory_position - query_position``.
    bidirectional : bool, optional
        Separate buckets for keys after the query (encoder); ``False`` for causal decoders.
    num_buckets : int, optional
        Total number of buckets (at least 4 if bidirectional, 2 otherwise).
    max_distance : int, optional
        Scale of the logarithmic buckets: every distance ``>= max_distance`` shares the last
        bucket (which starts earlier, at 91 for the defaults). Must exceed the number of
        exact buckets.

    Returns
    -------
    torch.Tensor
        ``torch.long`` tensor, same shape and device as ``relative_position``, values in
        ``[0, num_buckets)``.

    References
    ----------
    Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
    Transformer", JMLR 2020, section 2.1; Mesh TensorFlow ``_relative_position_bucket``.
    """
    check_integer_tensor("relative_position", relative_position)
    per_direction, max_exact = _check_t5_buckets(bidirectional, num_buckets, max_distance)
    position = relative_position.long()
    if bidirectional:
        bucket = (position > 0).long() * per_direction
        distance = position.abs()
    else:
        bucket = torch.zeros_like(position)
        distance = (-position).clamp_min(0)
    # The clamp only touches distances that take the exact branch; it keeps log() off 0.
    ratio = distance.clamp_min(max_exact).float() / max_exact
    log_bucket = torch.log(ratio) / math.log(max_distance / max_exact) * (per_direction - max_exact)
    large = (max_exact + log_bucket.long()).clamp_max(per_direction - 1)
    return bucket + torch.where(distance < max_exact, distance, large)


class T5RelativePositionBias(nn.Module):
    r"""T5's learned scalar bias per head and relative-position bucket.

    .. math::

        B_{h i j} = w_{h,\, b(j - (i + \text{offset}))}

    with :math:`b` from :func:`t5_relative_position_bucket` and :math:`w` the embedding
    ``relative_attention_bias`` of shape ``(num_buckets, num_heads)`` (the Hugging Face name, so
    its weight loads directly). The bias is added to the attention logits, which T5 does not
    scale by :math:`1/\sqrt{d}`.

    Parameters
    ----------
    num_heads : int
        Number of attention heads.
    bidirectional : bool, optional
        ``True`` for the encoder, ``False`` for the causal decoder.
    num_buckets : int, optional
        Number of buckets.
    max_distance : int, optional
        Distance at which the logarithmic buckets end.

    References
    ----------
    Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
    Transformer", JMLR 2020, section 2.1.
    """

    def __init__(
        self, num_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        _check_t5_buckets(bidirectional, num_buckets, max_distance)
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, self.num_heads)

    def reset_parameters(self) -> None:
        r"""Redraw the bias table from :math:`\mathcal{N}(0, 1)` (``nn.Embedding``'s initialisation)."""
        self.relative_attention_bias.reset_parameters()

    def forward(
        self, q_len: int | torch.Tensor, k_len: int | torch.Tensor, *, offset: int = 0
    ) -> torch.Tensor:
        """Bias for every (query, key) pair.

        Given lengths, the queries sit at ``offset … offset + q_len - 1`` and the keys at
        ``0 … k_len - 1``. Given tensors, they are the positions themselves.

        Parameters
        ----------
        q_len : int or torch.Tensor
            Number of queries, or their integer positions ``(..., q)``.
        k_len : int or torch.Tensor
            Number of keys, or their integer positions ``(..., k)`` (leading dimensions
            broadcastable with the queries').
        offset : int, optional
            Position of the first query (the number of cached tokens when decoding); lengths
            only.

        Returns
        -------
        torch.Tensor
            ``(1, num_heads, q_len, k_len)`` for lengths (Hugging Face's ``position_bias``),
            ``(..., num_heads, q, k)`` for positions; dtype of the embedding weight.

        Raises
        ------
        TypeError
            If one of ``q_len``, ``k_len`` is a length and the other a tensor, or positions are
            not integers.
        ValueError
            If ``offset`` is given with positions, or the positions' leading dimensions do not
            broadcast.
        """
        offset = check_int("offset", offset)
        device = self.relative_attention_bias.weight.device
        positions = isinstance(q_len, torch.Tensor) or isinstance(k_len, torch.Tensor)
        if positions:
            if offset:
                raise ValueError(f"offset applies to lengths only; add it to the positions, got offset={offset}")
            q_pos, k_pos = query_key_positions(q_len, k_len)
        else:
            # Queries offset … offset + q_len - 1 against keys 0 … k_len - 1: any offset, so the
            # lengths are checked here rather than as "the last q_len of k_len keys".
            q_len = check_positive_int("q_len", q_len)
            k_len = check_positive_int("k_len", k_len)
            q_pos, k_pos = torch.arange(offset, offset + q_len, device=device), torch.arange(k_len, device=device)
        bucket = t5_relative_position_bucket(
            key_minus_query(q_pos, k_pos),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        bias = self.relative_attention_bias(bucket).movedim(-1, -3)  # (..., q, k, heads) -> (..., heads, q, k)
        return bias if positions else bias.unsqueeze(0)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


def xl_relative_embedding(
    k_len: int,
    dim: int,
    *,
    clamp_len: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Transformer-XL's sinusoidal encodings of the distances ``k_len - 1 … 0``.

    Row :math:`r` encodes distance :math:`p_r = \min(k - 1 - r, c)` (``c`` = ``clamp_len``) in
    the ``"concat"`` style of :func:`~posenc.sinusoidal_table`:

    .. math::

        R_{r} = \left[\sin(p_r \omega_0), \dots, \cos(p_r \omega_0), \dots\right], \qquad
        \omega_i = 10000^{-2i/d}.

    Multiplied with the queries, row :math:`r` scores key column :math:`r` for the last query;
    :func:`rel_shift` then aligns the other rows.

    Parameters
    ----------
    k_len : int
        Number of keys (memory plus current segment).
    dim : int
        Encoding width.
    clamp_len : int, optional
        Largest distance encoded; larger ones reuse its row. ``None`` (the default) clamps
        nothing. (Transformer-XL uses ``clamp_len <= 0`` for "no clamp"; here that is ``None``.)
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(k_len, dim)``.

    References
    ----------
    Dai et al., "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
    ACL 2019, section 3.3.
    """
    k_len = check_positive_int("k_len", k_len)
    dim = check_positive_int("dim", dim)
    rows = k_len
    if clamp_len is not None:
        rows = min(k_len, check_positive_int("clamp_len", clamp_len) + 1)
    table = sinusoidal_table(rows, dim, style="concat", dtype=dtype, device=device)
    distance = torch.arange(k_len - 1, -1, -1, device=table.device).clamp_max(rows - 1)
    return table[distance]


def xl_position_logits(
    query: torch.Tensor,
    weight: torch.Tensor,
    q_len: int | torch.Tensor,
    k_len: int | torch.Tensor,
) -> torch.Tensor:
    r"""Transformer-XL's position term for every (query, key) pair, at any positions.

    .. math::

        s_{ij} = q_i^\top W_R\, R_{i - j}, \qquad
        R_{p} = \left[\sin(p\,\omega_0), \dots, \cos(p\,\omega_0), \dots\right],

    with :math:`q_i` the query plus the position bias :math:`v`, :math:`W_R` one head's slice of
    the projection of the relative encodings, and :math:`R` the ``"concat"`` sinusoids of
    :func:`~posenc.xl_relative_embedding`. The angle-addition formulas split
    :math:`\sin((i - j)\omega)` and :math:`\cos((i - j)\omega)` into sinusoids of :math:`i` and of
    :math:`j`, so the term is one product of a ``(q, dim)`` and a ``(k, dim)`` tensor per head: no
    ``(q, k, dim)`` table and no :func:`rel_shift`, and the positions may be anything (restarted in
    each document of a pack, kept after a cache eviction). For queries that are the last ``q_len``
    of ``k_len`` consecutive keys it equals ``rel_shift(query @ (W_R R).T)`` on and below the
    diagonal.

    Parameters
    ----------
    query : torch.Tensor
        Floating ``(..., heads, q, head_dim)``: the queries plus :math:`v`.
    weight : torch.Tensor
        :math:`W_R` as an ``nn.Linear`` weight, ``(heads * head_dim, dim)`` with ``dim`` even.
    q_len : int or torch.Tensor
        Number of queries, or their integer positions ``(..., q)`` (leading dimensions
        broadcastable with ``query``'s, without the heads axis).
    k_len : int or torch.Tensor
        Number of keys, at least ``q_len``, or their integer positions ``(..., k)``.

    Returns
    -------
    torch.Tensor
        ``(..., heads, q, k)``, dtype of ``query``.

    Raises
    ------
    TypeError
        If one of ``q_len``, ``k_len`` is a length and the other a tensor, or positions are not
        integers.
    ValueError
        If the shapes do not fit together, ``dim`` is odd, or ``k_len < q_len``.

    References
    ----------
    Dai et al., "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
    ACL 2019, section 3.3 (term (d) with the global bias :math:`v`).
    """
    if not isinstance(query, torch.Tensor) or not isinstance(weight, torch.Tensor):
        raise TypeError("query and weight must be torch.Tensors")
    if query.ndim < 3 or weight.ndim != 2:
        raise ValueError(
            f"query must be (..., heads, q, head_dim) and weight (heads * head_dim, dim), got shapes "
            f"{tuple(query.shape)} and {tuple(weight.shape)}"
        )
    heads, _, head_dim = query.shape[-3:]
    if weight.shape[0] != heads * head_dim or weight.shape[1] % 2:
        raise ValueError(
            f"weight must be (heads * head_dim, even dim) = ({heads * head_dim}, 2F), got {tuple(weight.shape)}"
        )
    q_pos, k_pos = query_key_positions(q_len, k_len, device=query.device)
    if q_pos.shape[-1] != query.shape[-2]:
        raise ValueError(f"{q_pos.shape[-1]} query positions for {query.shape[-2]} queries")
    dim = weight.shape[1]
    w = weight.view(heads, head_dim, dim)  # (heads * head_dim, dim) -> (heads, head_dim, dim)
    a_sin, a_cos = torch.einsum("...hid,hdf->...hif", query, w.to(query.dtype)).chunk(2, dim=-1)
    # (..., q, dim) sinusoids of the positions -> sin and cos halves (..., 1, q, F), over heads
    s_i, c_i = sinusoidal_table(q_pos, dim, style="concat", dtype=query.dtype).unsqueeze(-3).chunk(2, dim=-1)
    s_j, c_j = sinusoidal_table(k_pos, dim, style="concat", dtype=query.dtype).unsqueeze(-3).chunk(2, dim=-1)
    # sin((i-j)w) = s_i c_j - c_i s_j and cos((i-j)w) = c_i c_j + s_i s_j, grouped by c_j and s_j:
    left = torch.cat([a_sin * s_i + a_cos * c_i, a_cos * s_i - a_sin * c_i], dim=-1)  # (..., heads, q, 2F)
    right = torch.cat([c_j, s_j], dim=-1)  # (..., 1, k, 2F)
    return left @ right.transpose(-1, -2)


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    r"""Transformer-XL's relative shift of the last two dimensions ``(q_len, k_len)``.

    ``x[..., i, r]`` holds the score of query ``i`` against distance ``k_len - 1 - r`` (the
    layout of :func:`xl_relative_embedding`). The shift pads one zero column on the left, reads
    the ``q_len * (k_len + 1)`` values as ``(k_len + 1, q_len)``, drops the first row and reads
    the rest as ``(q_len, k_len)``. With :math:`i' = i + k - q` the query's absolute position:

    .. math::

        \text{out}_{ij} = x_{i,\, j + q - 1 - i}
        \quad\text{(distance } i' - j\text{)}, \qquad j \le i'.

    Above that band the values are not scores for ``(i, j)``: ``out[i, i' + 1]`` is ``0`` and
    ``out[i, j]`` for ``j > i' + 1`` is ``x[i + 1, j - i' - 2]``, a score of the next query
    (for ``q_len <= k_len``). They must be masked (the causal mask does it); Transformer-XL's
    ``zero_triu`` zeroes them.

    Parameters
    ----------
    x : torch.Tensor
        Shape ``(..., q_len, k_len)``, any dtype.

    Returns
    -------
    torch.Tensor
        Same shape and dtype as ``x``.

    References
    ----------
    Dai et al., "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
    ACL 2019, appendix B; ``_rel_shift`` in the authors' ``pytorch/mem_transformer.py``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(
            f"x must have at least 2 dimensions (..., q_len, k_len), got shape {tuple(x.shape)}"
        )
    *batch, q_len, k_len = x.shape
    padded = nn.functional.pad(x, (1, 0))  # (..., q_len, 1 + k_len): a zero column in front
    # Read the same memory as (k_len + 1, q_len) rows, drop the first, read back as (q_len, k_len):
    # row i ends up shifted left by q_len - 1 - i.
    return padded.reshape(*batch, k_len + 1, q_len)[..., 1:, :].reshape(*batch, q_len, k_len)
