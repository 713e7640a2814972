"""Relative positions: Shaw et al. embeddings, T5 bucketed biases and Transformer-XL shifts."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._checks import (
    check_bool,
    check_int,
    check_integer_tensor,
    check_keys_cover_queries,
    check_positive_int,
)
from posenc.sinusoidal import sinusoidal_table

__all__ = [
    "relative_position_indices",
    "RelativePositionEmbedding",
    "t5_relative_position_bucket",
    "T5RelativePositionBias",
    "xl_relative_embedding",
    "rel_shift",
]


def relative_position_indices(
    q_len: int,
    k_len: int,
    max_relative_position: int,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Clipped relative distances ``key - query``, shifted to be valid table rows.

    Query ``i`` sits at absolute position :math:`i' = k - q + i` (the queries are the last
    ``q_len`` of the ``k_len`` keys, as when decoding with a cache), and

    .. math::

        R_{ij} = \operatorname{clip}(j - i', -K, K) + K \in \{0, \dots, 2K\}.

    When ``q_len == k_len`` this is :math:`\operatorname{clip}(j - i, -K, K) + K`.

    Parameters
    ----------
    q_len : int
        Number of queries.
    k_len : int
        Number of keys, at least ``q_len``.
    max_relative_position : int
        :math:`K`; distances beyond it share the row of distance :math:`\pm K`.
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        ``torch.long`` tensor of shape ``(q_len, k_len)``.

    References
    ----------
    Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position Representations",
    NAACL 2018; tensor2tensor ``_generate_relative_positions_matrix``.
    """
    q_len = check_positive_int("q_len", q_len)
    k_len = check_positive_int("k_len", k_len)
    check_keys_cover_queries(q_len, k_len)
    k = check_positive_int("max_relative_position", max_relative_position)
    keys = torch.arange(k_len, device=device)
    queries = keys[k_len - q_len :]
    return (keys[None, :] - queries[:, None]).clamp(-k, k) + k


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

    def forward(self, q_len: int, k_len: int) -> torch.Tensor:
        """Vectors for every (query, key) pair.

        Parameters
        ----------
        q_len : int
            Number of queries.
        k_len : int
            Number of keys, at least ``q_len``.

        Returns
        -------
        torch.Tensor
            Shape ``(q_len, k_len, dim)``, dtype of the embedding weight.
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

    def forward(self, q_len: int, k_len: int, *, offset: int = 0) -> torch.Tensor:
        """Bias for queries at positions ``offset … offset + q_len - 1`` and keys ``0 … k_len - 1``.

        Parameters
        ----------
        q_len : int
            Number of queries.
        k_len : int
            Number of keys.
        offset : int, optional
            Position of the first query (the number of cached tokens when decoding).

        Returns
        -------
        torch.Tensor
            Shape ``(1, num_heads, q_len, k_len)``, dtype of the embedding weight.
        """
        q_len = check_positive_int("q_len", q_len)
        k_len = check_positive_int("k_len", k_len)
        offset = check_int("offset", offset)
        device = self.relative_attention_bias.weight.device
        queries = torch.arange(offset, offset + q_len, device=device)
        keys = torch.arange(k_len, device=device)
        bucket = t5_relative_position_bucket(
            keys[None, :] - queries[:, None],
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        # (q_len, k_len, heads) -> (heads, q_len, k_len) -> (1, heads, q_len, k_len)
        return self.relative_attention_bias(bucket).permute(2, 0, 1).unsqueeze(0)

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
