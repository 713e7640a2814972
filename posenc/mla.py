r"""DeepSeek's multi-head latent attention (MLA): its decoupled rotary part.

MLA caches one low-rank latent per token instead of the keys and values of every head; the keys'
and values' content comes out of it through a projection that can be folded into the queries and
the output. RoPE cannot be folded that way (the rotation depends on the position and sits between
the two projections), so MLA gives each query head a few extra channels, ``q_pe``
(``qk_rope_head_dim`` wide), and adds one key part ``k_pe`` of the same width shared by all heads,
projected straight from the hidden state and cached beside the latent. Only these rotate:

.. math::

    q_h = [\,q^{\mathrm{nope}}_h,\; R_m\, q^{\mathrm{pe}}_h\,], \qquad
    k_h = [\,k^{\mathrm{nope}}_h,\; R_n\, k^{\mathrm{pe}}\,], \qquad
    q_h \cdot k_h = q^{\mathrm{nope}}_h \cdot k^{\mathrm{nope}}_h
    + q^{\mathrm{pe}}_h \cdot R_{n-m}\, k^{\mathrm{pe}}.

DeepSeek's checkpoints hold the rotary channels in interleaved pairs; transformers reorders them to
the half layout before rotating (``rope_interleave``). With YaRN, DeepSeek multiplies cos/sin by
the ratio of two YaRN temperatures, ``yarn(mscale) / yarn(mscale_all_dim)``, and the softmax scale
by the square of the second, ``yarn(mscale_all_dim) ** 2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from posenc._checks import check_bool, check_floating_tensor, check_positive_float, check_positive_int
from posenc._rope_scaling import ScalingParams, _real, scaling_and_type, yarn_mscale
from posenc.rope import apply_rope_qk, interleaved_to_half, permute_for_half_layout

__all__ = ["mla_softmax_scale", "mla_rope", "mla_permute_for_half_layout"]


def _softmax_mscale(scaling: Mapping[str, Any] | None) -> float:
    """YaRN's temperature for ``mscale_all_dim`` (1 without it): the square root of the factor
    :func:`mla_softmax_scale` puts on :math:`1/\\sqrt{d}`. Shared with ``posenc.rope_report``."""
    scaling, rope_type = scaling_and_type(scaling)
    p = ScalingParams(scaling, rope_type)
    mscale_all_dim = p.get("mscale_all_dim", _real)
    if not mscale_all_dim:  # missing, None or 0: as transformers, no factor
        return 1.0
    if rope_type != "yarn":
        # Every other posenc function refuses this key outside YaRN (parse_scaling).
        raise ValueError(
            f"scaling['mscale_all_dim'] is a key of rope_type='yarn', got it with rope_type={rope_type!r}"
        )
    # The factor YaRN's frequencies use: given, or the context ratio (as rope_cos_sin).
    factor = p.get("factor", check_positive_float)
    if factor is None:
        factor = p.factor_or_ratio(p.original_max())
    return yarn_mscale(factor, mscale_all_dim)


def mla_softmax_scale(qk_head_dim: int, *, scaling: Mapping[str, Any] | None = None) -> float:
    r"""The factor MLA multiplies :math:`q \cdot k` by before the softmax.

    .. math::

        s = \frac{m^2}{\sqrt{d_{qk}}}, \qquad
        m = \begin{cases} 0.1\, \mu \ln f + 1 & \text{YaRN with } \mu = \texttt{mscale\_all\_dim}
        \ne 0 \text{ and } f > 1, \\ 1 & \text{otherwise,} \end{cases}

    with :math:`d_{qk}` = ``qk_nope_head_dim + qk_rope_head_dim`` (the whole query head, not
    only its rotary part) and :math:`f` the YaRN ``factor``. YaRN's temperature enters twice in
    DeepSeek: cos/sin are multiplied by ``yarn(mscale) / yarn(mscale_all_dim)``
    (:func:`~posenc.rope_cos_sin` does it) and the softmax scale by ``yarn(mscale_all_dim) ** 2``
    (this function). When the two are equal, as in DeepSeek-V2 and V3, cos/sin are unscaled and
    the whole temperature, :math:`m^2`, applies to every channel, rotary or not.

    Parameters
    ----------
    qk_head_dim : int
        Width of a query (and key) head, ``qk_nope_head_dim + qk_rope_head_dim``.
    scaling : dict, optional
        The model's Hugging Face ``rope_parameters`` (or legacy ``rope_scaling``); only
        ``rope_type``, ``mscale_all_dim`` and ``factor`` are read (without ``factor``, the ratio
        ``max_position_embeddings / original_max_position_embeddings``, as for the frequencies).

    Returns
    -------
    float
        The scale :math:`s`.

    Raises
    ------
    TypeError
        If ``qk_head_dim`` is not an int, ``scaling`` is not a dict, or one of the keys read is
        not a number.
    ValueError
        If ``qk_head_dim`` < 1, the ``rope_type`` is unknown, ``mscale_all_dim`` is not finite
        or comes with a ``rope_type`` other than ``"yarn"``, or the factor is not > 0 (or
        missing, with no context lengths to take it from).

    References
    ----------
    DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language
    Model", 2024, section 2.1; Peng et al., "YaRN: Efficient Context Window Extension of Large
    Language Models", 2023; transformers 5.24 ``DeepseekV3Attention`` (``yarn_apply_mscale``),
    which applies the factor for any ``rope_type`` but ``"default"`` (posenc refuses
    ``mscale_all_dim`` outside YaRN, as everywhere else) and requires ``factor``.
    """
    qk_head_dim = check_positive_int("qk_head_dim", qk_head_dim)
    m = _softmax_mscale(scaling)
    return qk_head_dim**-0.5 * m * m


def mla_rope(
    q: torch.Tensor,
    k_pe: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Rotate the rotary part of MLA's queries and its shared key part.

    The query head is ``[q_nope, q_pe]``: its last ``r = k_pe.shape[-1]`` channels
    (``qk_rope_head_dim``) rotate, the first ``qk_nope_head_dim`` pass through. ``k_pe``, one
    head shared by all query heads, rotates by the same angles:

    .. math::

        q' = [\,q^{\mathrm{nope}},\; R_p\, P q^{\mathrm{pe}}\,], \qquad
        k'^{\mathrm{pe}} = R_p\, P k^{\mathrm{pe}},

    where :math:`R_p` is :func:`~posenc.apply_rope` with ``layout="half"`` and :math:`P` is
    :func:`~posenc.interleaved_to_half` when ``interleaved`` (DeepSeek's weights keep the rotary
    channels in interleaved pairs; transformers reorders them before rotating), the identity
    otherwise. The outputs are therefore in the half layout either way, as transformers hands
    them to its attention function; since :math:`P` is the same on both sides,
    :math:`q' \cdot k'` equals the dot product of the interleaved rotation of the original
    channels. To skip :math:`P` at run time, permute the weights once with
    :func:`mla_permute_for_half_layout` and pass ``interleaved=False``.

    Parameters
    ----------
    q : torch.Tensor
        Queries ``(..., heads, seq, qk_nope_head_dim + r)``, e.g. ``(batch, heads, seq, d_qk)``.
    k_pe : torch.Tensor
        The rotary key part ``(..., seq, r)``, e.g. ``(batch, 1, seq, r)``; the same dtype as
        ``q``, ``r`` even and at most ``q.shape[-1]``.
    cos, sin : torch.Tensor
        ``(seq, r)``, or as many dimensions as ``q`` and ``k_pe``, broadcastable to both
        (see :func:`~posenc.apply_rope`), in the half layout:
        ``rope_cos_sin(positions, r, base=..., scaling=..., layout="half")``. With YaRN they
        carry DeepSeek's ``yarn(mscale) / yarn(mscale_all_dim)`` factor; the softmax scale is
        :func:`mla_softmax_scale`.
    interleaved : bool, optional
        Whether the rotary channels of ``q`` and ``k_pe`` come in interleaved pairs (default
        True: DeepSeek's checkpoints, the config's ``rope_interleave``).

    Returns
    -------
    q, k_pe : tuple of torch.Tensor
        New tensors of the shapes and dtype of ``q`` and ``k_pe``; the rotary channels in the
        half layout.

    Raises
    ------
    TypeError
        If ``q``, ``k_pe``, ``cos`` or ``sin`` is not a floating tensor or ``interleaved`` is not
        a bool.
    ValueError
        If ``k_pe.shape[-1]`` is odd, 0 or larger than ``q.shape[-1]``, the dtypes differ,
        ``cos.shape[-1]`` is not ``k_pe.shape[-1]``, or cos/sin do not broadcast (as in
        :func:`~posenc.apply_rope`).

    References
    ----------
    DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language
    Model", 2024, section 2.1.3 (decoupled rotary position embedding); transformers 5.24
    ``DeepseekV3Attention`` and ``apply_rotary_pos_emb_interleave``.
    """
    check_floating_tensor("q", q)
    check_floating_tensor("k_pe", k_pe)
    check_floating_tensor("cos", cos)
    check_floating_tensor("sin", sin)
    check_bool("interleaved", interleaved)
    if q.ndim == 0 or k_pe.ndim == 0:
        raise ValueError(
            f"q and k_pe must have at least 1 dimension, got shapes {tuple(q.shape)} and {tuple(k_pe.shape)}"
        )
    rope_dim = k_pe.shape[-1]
    if rope_dim == 0 or rope_dim % 2 or rope_dim > q.shape[-1]:
        raise ValueError(
            f"k_pe.shape[-1] must be even and in [2, q.shape[-1]={q.shape[-1]}] (the rotary width "
            f"qk_rope_head_dim; channels rotate in pairs), got {rope_dim}"
        )
    if q.dtype != k_pe.dtype:
        raise ValueError(f"q and k_pe must have the same dtype, got {q.dtype} and {k_pe.dtype}")
    if cos.ndim == 0 or cos.shape[-1] != rope_dim:
        raise ValueError(
            f"cos.shape[-1] must equal k_pe.shape[-1]={rope_dim} (the rotary width), got shape "
            f"{tuple(cos.shape)}"
        )
    # (..., d_qk) -> (..., d_nope), (..., r)
    q_nope, q_pe = q.split([q.shape[-1] - rope_dim, rope_dim], dim=-1)
    if interleaved:
        q_pe, k_pe = interleaved_to_half(q_pe), interleaved_to_half(k_pe)
    q_pe, k_pe = apply_rope_qk(q_pe, k_pe, cos, sin, layout="half")
    return torch.cat((q_nope, q_pe), dim=-1), k_pe


def mla_permute_for_half_layout(weight: torch.Tensor, num_heads: int, rope_dim: int) -> torch.Tensor:
    r"""Reorder the rotary rows of an MLA projection from interleaved pairs to the half layout.

    The output rows of ``weight`` are ``num_heads`` blocks, each ending with ``rope_dim`` rotary
    rows; within those, row :math:`2i` moves to :math:`i` and :math:`2i+1` to
    :math:`i + r/2`, with :math:`r` = ``rope_dim`` (:func:`~posenc.permute_for_half_layout` on
    the rotary rows only); the other
    rows stay. The projections to permute in a DeepSeek-V2/V3 attention layer:

    * ``q_proj`` or ``q_b_proj``: ``num_heads`` = the number of heads, blocks
      ``qk_nope_head_dim + qk_rope_head_dim`` wide;
    * ``kv_a_proj_with_mqa`` (and its bias, if any): ``num_heads=1``, one block
      ``kv_lora_rank + qk_rope_head_dim`` wide.

    The permuted weights with ``mla_rope(..., interleaved=False)`` (transformers:
    ``rope_interleave=False``) give the queries and keys that the original weights give with
    ``interleaved=True``: the layout conversion is paid once, not at every step.

    Parameters
    ----------
    weight : torch.Tensor
        ``(num_heads * block, in_features)``, or ``(num_heads * block,)`` for a bias, with
        ``block >= rope_dim``.
    num_heads : int
        Number of blocks in the output rows.
    rope_dim : int
        ``qk_rope_head_dim``, even.

    Returns
    -------
    torch.Tensor
        A new tensor of the shape of ``weight``.

    Raises
    ------
    TypeError
        If ``weight`` is not a tensor or ``num_heads``/``rope_dim`` is not an int.
    ValueError
        If ``weight`` is not 1-D or 2-D, ``num_heads`` or ``rope_dim`` is not positive,
        ``rope_dim`` is odd, or the rows are not ``num_heads`` blocks of at least ``rope_dim``.

    References
    ----------
    transformers 5.24 ``DeepseekV3Attention`` (``rope_interleave``) and
    ``models/llama/convert_llama_weights_to_hf.py`` (``permute``).
    """
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    num_heads = check_positive_int("num_heads", num_heads)
    rope_dim = check_positive_int("rope_dim", rope_dim)
    if rope_dim % 2:
        raise ValueError(f"rope_dim must be even (channels are rotated in pairs), got {rope_dim}")
    if weight.ndim not in (1, 2):
        raise ValueError(
            f"weight must be 2-D (out_features, in_features) or a 1-D bias, got shape {tuple(weight.shape)}"
        )
    rows = weight.shape[0]
    if rows % num_heads or rows // num_heads < rope_dim:
        raise ValueError(
            f"weight.shape[0]={rows} must be num_heads={num_heads} blocks of at least rope_dim={rope_dim} rows"
        )
    block, rest = rows // num_heads, weight.shape[1:]
    # (heads * block, *rest) -> (heads, block, *rest) -> (heads, block - r, *rest), (heads, r, *rest)
    plain, rotary = weight.reshape(num_heads, block, *rest).split([block - rope_dim, rope_dim], dim=1)
    # (heads, r, *rest) -> (heads * r, *rest), permuted per head, and back
    rotary = permute_for_half_layout(rotary.reshape(num_heads * rope_dim, *rest), num_heads)
    rotary = rotary.reshape(num_heads, rope_dim, *rest)
    # (heads, block, *rest) -> (heads * block, *rest)
    return torch.cat((plain, rotary), dim=1).reshape(weight.shape)
