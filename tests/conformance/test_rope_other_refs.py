"""posenc RoPE against rotary-embedding-torch, x-transformers, torchtune, Meta's Llama reference
code and the weight permutation of Hugging Face's Llama conversion script.

rotary-embedding-torch and x-transformers both use the interleaved layout (their ``rotate_half``
pairs channels ``2i`` and ``2i+1``), as do Meta's complex-number implementation and torchtune's
real-number transcription of it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from pathlib import Path

import pytest
import torch

from posenc.rope import (
    apply_rope,
    half_to_interleaved,
    interleaved_to_half,
    permute_for_half_layout,
    rope_cos_sin,
    rope_inv_freq,
)

# ---------------------------------------------------------------------------------------------
# Transcriptions of Meta's reference code (not a pip package).
# ---------------------------------------------------------------------------------------------


def meta_precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0, use_scaled: bool = False):
    """Transcribes ``precompute_freqs_cis`` of meta-llama/llama ``llama/model.py`` (Llama 2) and
    meta-llama/llama-models ``models/llama3/reference_impl/model.py`` (``use_scaled``)."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    if use_scaled:
        freqs = meta_apply_scaling(freqs)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def meta_apply_scaling(freqs: torch.Tensor) -> torch.Tensor:
    """Transcribes ``apply_scaling`` of meta-llama/llama-models ``models/llama3/reference_impl/model.py``."""
    scale_factor = 8
    low_freq_factor = 1
    high_freq_factor = 4
    old_context_len = 8192  # original llama3 length
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            new_freqs.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return torch.tensor(new_freqs, dtype=freqs.dtype, device=freqs.device)


def meta_reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Transcribes ``reshape_for_broadcast`` of meta-llama/llama ``llama/model.py``."""
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def meta_apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor):
    """Transcribes ``apply_rotary_emb`` of meta-llama/llama ``llama/model.py``.
    Note Meta's layout: ``(batch, seq, heads, head_dim)``."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = meta_reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def hf_conversion_permute(w: torch.Tensor, n_heads: int, dim1: int, dim2: int) -> torch.Tensor:
    """Transcribes ``permute`` of transformers ``models/llama/convert_llama_weights_to_hf.py``."""
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


# ---------------------------------------------------------------------------------------------
# Meta Llama
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dim", "theta"), [(64, 10000.0), (128, 500000.0)])
def test_interleaved_equals_meta_apply_rotary_emb(dim: int, theta: float) -> None:
    torch.manual_seed(0)
    batch, seq, heads = 2, 50, 3
    xq = torch.randn(batch, seq, heads, dim)  # Meta's layout
    xk = torch.randn(batch, seq, heads, dim)
    ref_q, ref_k = meta_apply_rotary_emb(xq, xk, meta_precompute_freqs_cis(dim, seq, theta))
    cos, sin = rope_cos_sin(seq, dim, base=theta, layout="interleaved")
    # posenc rotates (..., seq, dim): move heads before seq.
    got_q = apply_rope(xq.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    got_k = apply_rope(xk.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got_q, ref_q, rtol=0, atol=2e-5)
    torch.testing.assert_close(got_k, ref_k, rtol=0, atol=2e-5)


def test_interleaved_cos_sin_are_meta_freqs_cis() -> None:
    freqs_cis = meta_precompute_freqs_cis(32, 100)
    cos, sin = rope_cos_sin(100, 32, layout="interleaved")
    torch.testing.assert_close(cos[:, 0::2], freqs_cis.real, rtol=0, atol=2e-5)
    torch.testing.assert_close(cos[:, 1::2], freqs_cis.real, rtol=0, atol=2e-5)
    torch.testing.assert_close(sin[:, 0::2], freqs_cis.imag, rtol=0, atol=2e-5)


def test_llama3_scaling_equals_meta_apply_scaling() -> None:
    base_freqs = 1.0 / (500000.0 ** (torch.arange(0, 128, 2)[:64].float() / 128))
    ref = meta_apply_scaling(base_freqs)
    ours, factor = rope_inv_freq(
        128,
        base=500000.0,
        scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192},
    )
    assert factor == 1.0
    torch.testing.assert_close(ours.float(), ref, rtol=2e-6, atol=0)
    # and the rotation built on it (Llama 3.1 reference, use_scaled=True)
    torch.manual_seed(1)
    xq, xk = torch.randn(1, 40, 2, 128), torch.randn(1, 40, 2, 128)
    ref_q, _ = meta_apply_rotary_emb(xq, xk, meta_precompute_freqs_cis(128, 40, 500000.0, use_scaled=True))
    cos, sin = rope_cos_sin(
        40,
        128,
        base=500000.0,
        scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192},
        layout="interleaved",
    )
    got_q = apply_rope(xq.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got_q, ref_q, rtol=0, atol=2e-5)


@pytest.mark.reference_doc
def test_meta_rotation_is_float32_for_float64_inputs() -> None:
    # apply_rotary_emb rotates xq.float() by the complex64 freqs_cis and casts back (type_as).
    torch.manual_seed(8)
    dim, seq = 64, 2048
    freqs_cis = meta_precompute_freqs_cis(dim, seq)
    assert freqs_cis.dtype == torch.complex64
    xq = torch.randn(1, seq, 1, dim, dtype=torch.float64)
    out, _ = meta_apply_rotary_emb(xq, xq, freqs_cis)
    assert out.dtype == torch.float64
    # The same rotation in float64: pairs (2i, 2i+1) as complex numbers, angle p * theta**(-2i/d).
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, dim, 2, dtype=torch.float64) / dim
    )
    pairs = torch.view_as_complex(xq.reshape(1, seq, 1, dim // 2, 2))
    exact = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)[None, :, None]).flatten(3)
    error = (out - exact).abs().max().item()
    assert 1e-9 < error < 1e-2


# ---------------------------------------------------------------------------------------------
# Hugging Face conversion script: Meta weights -> half layout
# ---------------------------------------------------------------------------------------------


def test_permute_for_half_layout_equals_conversion_script() -> None:
    w = torch.randn(8 * 16, 96)
    torch.testing.assert_close(permute_for_half_layout(w, 8), hf_conversion_permute(w, 8, 128, 96), rtol=0, atol=0)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2)])
def test_permuted_weights_give_identical_scores_under_half_layout(heads: int, kv_heads: int) -> None:
    torch.manual_seed(2)
    hidden, head_dim, seq = 48, 16, 23
    x = torch.randn(2, seq, hidden, dtype=torch.float64)
    wq = torch.randn(heads * head_dim, hidden, dtype=torch.float64)
    wk = torch.randn(kv_heads * head_dim, hidden, dtype=torch.float64)

    def scores(wq: torch.Tensor, wk: torch.Tensor, layout: str) -> torch.Tensor:
        q = (x @ wq.T).unflatten(-1, (heads, head_dim)).transpose(1, 2)
        k = (x @ wk.T).unflatten(-1, (kv_heads, head_dim)).transpose(1, 2)
        cos, sin = rope_cos_sin(seq, head_dim, layout=layout, dtype=torch.float64)
        q, k = apply_rope(q, cos, sin, layout=layout), apply_rope(k, cos, sin, layout=layout)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        return q @ k.transpose(-1, -2)

    meta = scores(wq, wk, "interleaved")
    hf = scores(permute_for_half_layout(wq, heads), permute_for_half_layout(wk, kv_heads), "half")
    torch.testing.assert_close(hf, meta, rtol=1e-12, atol=1e-10)
    # not vacuous: without the permutation the scores differ
    assert not torch.allclose(scores(wq, wk, "half"), meta, atol=1e-3)
    # the permutation is interleaved_to_half on each head's output rows
    per_head = wq.unflatten(0, (heads, head_dim)).transpose(1, 2)
    expected = interleaved_to_half(per_head).transpose(1, 2).flatten(0, 1)
    torch.testing.assert_close(permute_for_half_layout(wq, heads), expected, rtol=0, atol=0)
    back = half_to_interleaved(permute_for_half_layout(wq, heads).unflatten(0, (heads, head_dim)).transpose(1, 2))
    torch.testing.assert_close(back.transpose(1, 2).flatten(0, 1), wq, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# rotary-embedding-torch
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 5])
def test_rotary_embedding_torch_default_is_interleaved(offset: int) -> None:
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(3)
    dim, seq = 32, 40
    ref_module = ret.RotaryEmbedding(dim=dim)
    q = torch.randn(2, 3, seq, dim)
    ref = ref_module.rotate_queries_or_keys(q, offset=offset)
    cos, sin = rope_cos_sin(torch.arange(offset, offset + seq), dim, layout="interleaved")
    torch.testing.assert_close(apply_rope(q, cos, sin, layout="interleaved"), ref, rtol=0, atol=2e-5)
    # and not the half layout
    cos_h, sin_h = rope_cos_sin(torch.arange(offset, offset + seq), dim)
    assert not torch.allclose(apply_rope(q, cos_h, sin_h), ref, atol=1e-2)


def test_rotary_embedding_torch_partial_interpolate_and_theta_rescale() -> None:
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(4)
    head_dim, rot_dim, seq = 64, 32, 30
    # interpolate_factor divides the positions: posenc "linear"; theta_rescale_factor multiplies
    # theta by factor ** (dim / (dim - 2)): a fixed NTK base, i.e. posenc base.
    ref_module = ret.RotaryEmbedding(dim=rot_dim, interpolate_factor=4.0, theta_rescale_factor=2.0)
    q = torch.randn(1, 2, seq, head_dim)
    ref = ref_module.rotate_queries_or_keys(q)
    base = 10000.0 * 2.0 ** (rot_dim / (rot_dim - 2))
    cos, sin = rope_cos_sin(
        seq,
        head_dim,
        base=base,
        scaling={"rope_type": "linear", "factor": 4.0, "partial_rotary_factor": rot_dim / head_dim},
        layout="interleaved",
    )
    out = apply_rope(q, cos, sin, layout="interleaved")
    torch.testing.assert_close(out, ref, rtol=0, atol=2e-5)
    assert torch.equal(out[..., rot_dim:], q[..., rot_dim:])


def test_rotary_embedding_torch_holds_positions_in_input_dtype() -> None:
    """rotary-embedding-torch builds the positions in the input's dtype, so float16 inputs get
    positions rounded past 2048 (bfloat16: past 256). posenc keeps positions exact."""
    ret = pytest.importorskip("rotary_embedding_torch")
    torch.manual_seed(5)
    dim, seq = 32, 3000
    q = torch.randn(1, 1, seq, dim, dtype=torch.float64)
    truth = apply_rope(q, *rope_cos_sin(seq, dim, layout="interleaved", dtype=torch.float64), layout="interleaved")
    ref16 = ret.RotaryEmbedding(dim=dim).rotate_queries_or_keys(q.half()).double()
    ours16 = apply_rope(
        q.half(), *rope_cos_sin(seq, dim, layout="interleaved", dtype=torch.float16), layout="interleaved"
    ).double()
    err_ref = (ref16 - truth).abs()[..., 2049:, :].max()
    err_ours = (ours16 - truth).abs()[..., 2049:, :].max()
    assert err_ours < 1e-2
    assert err_ref > 0.5  # a whole position off at frequency 1


# ---------------------------------------------------------------------------------------------
# x-transformers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rot_dim", "interpolation"), [(64, 1.0), (32, 1.0), (32, 2.0)])
def test_x_transformers_rotary_is_interleaved(rot_dim: int, interpolation: float) -> None:
    xt = pytest.importorskip("x_transformers.x_transformers")
    torch.manual_seed(6)
    head_dim, seq = 64, 25
    rotary = xt.RotaryEmbedding(rot_dim, interpolation_factor=interpolation)
    freqs, scale = rotary.forward_from_seq_len(seq)
    assert scale == 1.0
    q = torch.randn(2, 4, seq, head_dim)
    ref = xt.apply_rotary_pos_emb(q, freqs)
    scaling = {"rope_type": "linear", "factor": interpolation, "partial_rotary_factor": rot_dim / head_dim}
    cos, sin = rope_cos_sin(seq, head_dim, scaling=scaling, layout="interleaved")
    torch.testing.assert_close(apply_rope(q, cos, sin, layout="interleaved"), ref, rtol=0, atol=2e-5)


def test_x_transformers_apply_uses_last_positions() -> None:
    """x-transformers' apply_rotary_pos_emb takes the *last* seq positions of freqs (KV-cache
    decoding); posenc expresses the same with explicit positions / an offset."""
    xt = pytest.importorskip("x_transformers.x_transformers")
    torch.manual_seed(7)
    rotary = xt.RotaryEmbedding(32)
    freqs, _ = rotary.forward_from_seq_len(50)
    q = torch.randn(1, 2, 10, 32)
    ref = xt.apply_rotary_pos_emb(q, freqs)
    cos, sin = rope_cos_sin(torch.arange(40, 50), 32, layout="interleaved")
    torch.testing.assert_close(apply_rope(q, cos, sin, layout="interleaved"), ref, rtol=0, atol=2e-5)


# ---------------------------------------------------------------------------------------------
# torchtune
# ---------------------------------------------------------------------------------------------


def _torchtune_position_embeddings() -> types.ModuleType:
    """torchtune's ``modules/position_embeddings.py``, loaded by file path.

    ``import torchtune`` runs ``torchtune/__init__.py``, which imports torchao (and more) that the
    Makefile does not install (``--no-deps``); this one file imports only torch, so it is executed
    on its own, from the installed package, without running any ``__init__.py`` of torchtune.
    """
    name = "_posenc_torchtune_position_embeddings"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("torchtune")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchtune is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "modules" / "position_embeddings.py"
    file_spec = importlib.util.spec_from_file_location(name, path)
    assert file_spec is not None and file_spec.loader is not None
    module = importlib.util.module_from_spec(file_spec)
    file_spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


@pytest.mark.parametrize(("dim", "base"), [(64, 10_000), (128, 500_000)])
def test_interleaved_equals_torchtune_rope(dim: int, base: int) -> None:
    tt = _torchtune_position_embeddings()
    torch.manual_seed(9)
    batch, seq, heads = 2, 50, 3
    rope = tt.RotaryPositionalEmbeddings(dim, max_seq_len=128, base=base)
    x = torch.randn(batch, seq, heads, dim)  # torchtune's layout, like Meta's
    ref = rope(x)
    assert ref.dtype == torch.float32
    cos, sin = rope_cos_sin(seq, dim, base=base, layout="interleaved")
    # posenc rotates (..., seq, dim): move heads before seq.
    got = apply_rope(x.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got, ref, rtol=0, atol=2e-5)
    # and not the half layout
    cos_h, sin_h = rope_cos_sin(seq, dim, base=base)
    assert not torch.allclose(apply_rope(x.transpose(1, 2), cos_h, sin_h).transpose(1, 2), ref, atol=1e-2)


def test_torchtune_input_pos_are_the_positions() -> None:
    """``input_pos`` of shape ``(seq,)`` (cached decoding) or ``(batch, seq)`` (packed samples)
    picks the rows of the cache: posenc's explicit positions."""
    tt = _torchtune_position_embeddings()
    torch.manual_seed(10)
    dim, seq, heads = 32, 12, 2
    rope = tt.RotaryPositionalEmbeddings(dim, max_seq_len=64)
    x = torch.randn(2, seq, heads, dim)
    # one row of positions for the whole batch: an offset, as in cached decoding
    offset = torch.arange(30, 30 + seq)
    ref = rope(x, input_pos=offset)
    cos, sin = rope_cos_sin(offset, dim, layout="interleaved")
    got = apply_rope(x.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got, ref, rtol=0, atol=2e-5)
    assert not torch.allclose(rope(x), ref, atol=1e-2)  # the offset matters
    # positions per sample: two documents packed in the first sequence, an offset in the second
    packed = torch.stack([torch.cat([torch.arange(5), torch.arange(seq - 5)]), torch.arange(7, 7 + seq)])
    ref = rope(x, input_pos=packed)
    cos, sin = rope_cos_sin(packed, dim, layout="interleaved")  # (batch, seq, dim)
    got = apply_rope(x.transpose(1, 2), cos.unsqueeze(1), sin.unsqueeze(1), layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got, ref, rtol=0, atol=2e-5)


@pytest.mark.reference_doc
def test_torchtune_rotation_is_float32_for_float64_inputs() -> None:
    # forward rotates x.float() by the float32 cache and casts back (type_as).
    tt = _torchtune_position_embeddings()
    torch.manual_seed(11)
    dim, seq = 64, 2048
    rope = tt.RotaryPositionalEmbeddings(dim, max_seq_len=seq)
    assert rope.cache.dtype == torch.float32
    x = torch.randn(1, seq, 1, dim, dtype=torch.float64)
    out = rope(x)
    assert out.dtype == torch.float64
    # bit for bit the float32 rotation, widened
    assert torch.equal(out, rope(x.float()).double())
    # so not the float64 rotation: pairs (2i, 2i+1) as complex numbers, angle p * base**(-2i/d)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, dim, 2, dtype=torch.float64) / dim
    )
    pairs = torch.view_as_complex(x.reshape(1, seq, 1, dim // 2, 2))
    exact = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)[None, :, None]).flatten(3)
    error = (out - exact).abs().max().item()
    assert 1e-9 < error < 1e-2


@pytest.mark.reference_doc
def test_torchtune_does_not_recompute_past_max_seq_len_as_its_docstring_says() -> None:
    """The docstring of ``max_seq_len`` says: "if exceeded the cached freqs will be recomputed".
    ``forward`` never rebuilds the cache: a longer sequence, or a position past it, raises."""
    tt = _torchtune_position_embeddings()
    assert "if exceeded the cached freqs will be recomputed" in " ".join(tt.RotaryPositionalEmbeddings.__doc__.split())
    rope = tt.RotaryPositionalEmbeddings(16, max_seq_len=8)
    with pytest.raises(RuntimeError):
        rope(torch.randn(1, 9, 1, 16))
    with pytest.raises(IndexError):
        rope(torch.randn(1, 1, 1, 16), input_pos=torch.tensor([8]))
    assert rope.cache.shape[0] == 8
    rope(torch.randn(1, 8, 1, 16))  # up to max_seq_len it works
