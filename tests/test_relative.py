"""Tests for posenc.relative: Shaw et al. indices/embeddings, T5 buckets and bias, Transformer-XL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    relative_position_indices,
    t5_relative_position_bucket,
    xl_relative_embedding,
)

FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


# --------------------------------------------------------------------------- Shaw et al. indices


def indices_loop(q_len: int, k_len: int, k: int) -> torch.Tensor:
    """clip(j - i', -K, K) + K with i' = k_len - q_len + i, one entry at a time."""
    out = torch.empty(q_len, k_len, dtype=torch.long)
    for i in range(q_len):
        for j in range(k_len):
            out[i, j] = min(max(j - (k_len - q_len + i), -k), k) + k
    return out


@pytest.mark.parametrize(("q_len", "k_len", "k"), [(1, 1, 1), (5, 5, 2), (4, 9, 3), (1, 7, 10), (6, 6, 100)])
def test_indices_match_loop(q_len, k_len, k):
    out = relative_position_indices(q_len, k_len, k)
    assert out.dtype == torch.long
    assert torch.equal(out, indices_loop(q_len, k_len, k))


def test_indices_square_are_key_minus_query():
    out = relative_position_indices(4, 4, 2)
    expected = torch.tensor([[2, 3, 4, 4], [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]])
    assert torch.equal(out, expected)


@settings(max_examples=60, deadline=None)
@given(q_len=st.integers(1, 12), extra=st.integers(0, 12), k=st.integers(1, 15))
def test_indices_properties(q_len, extra, k):
    k_len = q_len + extra
    out = relative_position_indices(q_len, k_len, k)
    assert out.shape == (q_len, k_len)
    assert int(out.min()) >= 0 and int(out.max()) <= 2 * k
    # Toeplitz: only j - i matters.
    assert torch.equal(out[1:, 1:], out[:-1, :-1])
    # The last query is the last key: distance 0 sits at column k_len - 1.
    assert int(out[-1, -1]) == k


def test_indices_device_argument():
    assert relative_position_indices(2, 3, 1, device="cpu").device.type == "cpu"


def test_embedding_looks_up_indices():
    emb = RelativePositionEmbedding(3, 5)
    out = emb(4, 6)
    assert out.shape == (4, 6, 5)
    index = indices_loop(4, 6, 3)
    assert torch.equal(out, emb.embedding.weight[index])
    assert emb.embedding.weight.shape == (7, 5)


def test_embedding_state_dict_and_to():
    emb = RelativePositionEmbedding(2, 3)
    assert list(emb.state_dict()) == ["embedding.weight"]
    other = RelativePositionEmbedding(2, 3)
    other.load_state_dict(emb.state_dict())
    assert torch.equal(other(3, 3), emb(3, 3))
    for dtype in FLOAT_DTYPES:
        assert emb.to(dtype)(2, 3).dtype == dtype


def test_embedding_gradient_reaches_every_used_row():
    emb = RelativePositionEmbedding(2, 4)
    emb(3, 3).sum().backward()
    # Distances -2..2 all occur in a 3x3 grid; each row gets a gradient.
    assert bool((emb.embedding.weight.grad.abs().sum(dim=1) > 0).all())


def test_embedding_compiles():
    emb = RelativePositionEmbedding(3, 4)
    compiled = torch.compile(emb, fullgraph=True, backend="eager")
    assert torch.equal(compiled(5, 7), emb(5, 7))


# --------------------------------------------------------------------------- T5 buckets


def exact_thresholds(per_direction: int, max_exact: int, max_distance: int) -> list[int]:
    """Smallest distance of each logarithmic bucket, by exact integer arithmetic.

    d is in bucket >= m + t  iff  floor((n - m) ln(d/m) / ln(D/m)) >= t
    iff (d/m)^(n-m) >= (D/m)^t  iff  d^(n-m) m^t >= D^t m^(n-m).
    """
    n, m, big_d = per_direction, max_exact, max_distance
    thresholds = []
    for t in range(1, n - m):
        lo, hi = m, big_d
        while lo < hi:
            mid = (lo + hi) // 2
            if mid ** (n - m) * m**t >= big_d**t * m ** (n - m):
                hi = mid
            else:
                lo = mid + 1
        thresholds.append(lo)
    return thresholds


def bucket_exact(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    n = num_buckets // 2 if bidirectional else num_buckets
    m = n // 2
    offset = n if (bidirectional and rel > 0) else 0
    d = abs(rel) if bidirectional else max(-rel, 0)
    if d < m:
        return offset + d
    return offset + m + sum(d >= t for t in exact_thresholds(n, m, max_distance))


@pytest.mark.parametrize(
    ("bidirectional", "num_buckets", "max_distance"),
    [(True, 32, 128), (False, 32, 128), (True, 64, 256), (False, 8, 20), (True, 6, 10), (False, 2, 5)],
)
def test_t5_buckets_equal_exact_arithmetic(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    expected = torch.tensor([bucket_exact(int(r), bidirectional, num_buckets, max_distance) for r in rel])
    out = t5_relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert out.dtype == torch.long
    assert torch.equal(out, expected)


def test_t5_buckets_default_values():
    rel = torch.tensor([-200, -128, -127, -91, -90, -16, -8, -7, -1, 0, 1, 7, 8, 16, 127, 128, 10**6])
    out = t5_relative_position_bucket(rel)
    # Bidirectional defaults: 16 buckets a side, 8 exact, log buckets up to distance 128; the
    # last bucket already starts at distance 91.
    assert out.tolist() == [15, 15, 15, 15, 14, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31, 31]


def test_t5_unidirectional_maps_future_to_bucket_zero():
    rel = torch.arange(0, 50)
    out = t5_relative_position_bucket(rel, bidirectional=False)
    assert bool((out == 0).all())


@settings(max_examples=80, deadline=None)
@given(
    rel=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30),
    bidirectional=st.booleans(),
    num_buckets=st.integers(4, 80),
    extra=st.integers(1, 300),
)
def test_t5_buckets_properties(rel, bidirectional, num_buckets, extra):
    n = num_buckets // 2 if bidirectional else num_buckets
    max_distance = n // 2 + extra
    x = torch.tensor(rel)
    out = t5_relative_position_bucket(
        x, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert out.shape == x.shape
    assert int(out.min()) >= 0 and int(out.max()) < num_buckets
    # Monotone in distance on each side; saturated from max_distance on.
    distance = x.abs() if bidirectional else (-x).clamp_min(0)
    side = (x > 0) if bidirectional else torch.zeros_like(x, dtype=torch.bool)
    for s in (False, True):
        sel = side == s
        if int(sel.sum()) > 1:
            order = distance[sel].argsort()
            assert bool((out[sel][order].diff() >= 0).all())
    far = distance >= max_distance
    assert bool((out[far] == torch.where(side[far], 2 * n - 1, n - 1)).all())


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_t5_buckets_accept_integer_dtypes(dtype):
    rel = torch.arange(-100, 100).to(dtype)
    assert torch.equal(t5_relative_position_bucket(rel), t5_relative_position_bucket(rel.long()))


def test_t5_buckets_no_warnings_no_nan(recwarn):
    rel = torch.tensor([0, 1, -1, 2**62, -(2**62)])
    out = t5_relative_position_bucket(rel)
    assert out.tolist() == [0, 17, 1, 31, 15]
    assert len(recwarn) == 0


def t5_bias_loop(weight: torch.Tensor, q_len: int, k_len: int, offset: int, **options) -> torch.Tensor:
    out = torch.empty(1, weight.shape[1], q_len, k_len, dtype=weight.dtype)
    for i in range(q_len):
        for j in range(k_len):
            out[0, :, i, j] = weight[bucket_exact(j - (i + offset), **options)]
    return out


@pytest.mark.parametrize(("q_len", "k_len", "offset"), [(5, 5, 0), (1, 9, 8), (3, 40, 20), (4, 2, 0), (2, 3, -1)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_matches_loop(q_len, k_len, offset, bidirectional):
    module = T5RelativePositionBias(3, bidirectional=bidirectional, num_buckets=16, max_distance=20)
    out = module(q_len, k_len, offset=offset)
    assert out.shape == (1, 3, q_len, k_len)
    options = dict(bidirectional=bidirectional, num_buckets=16, max_distance=20)
    expected = t5_bias_loop(module.relative_attention_bias.weight.detach(), q_len, k_len, offset, **options)
    assert torch.equal(out.detach(), expected)


def test_t5_bias_offset_is_a_slice_of_the_full_bias():
    module = T5RelativePositionBias(4, bidirectional=False)
    full = module(12, 12)
    assert torch.equal(module(4, 12, offset=8), full[:, :, 8:, :])
    assert torch.equal(module(1, 12, offset=11), full[:, :, 11:, :])


def test_t5_bias_state_dict_to_and_compile():
    module = T5RelativePositionBias(2, num_buckets=8, max_distance=16)
    assert list(module.state_dict()) == ["relative_attention_bias.weight"]
    assert module.relative_attention_bias.weight.shape == (8, 2)
    for dtype in FLOAT_DTYPES:
        assert module.to(dtype)(3, 4).dtype == dtype
    module = module.double()
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    assert torch.equal(compiled(5, 6, offset=1), module(5, 6, offset=1))


# --------------------------------------------------------------------------- Transformer-XL


def xl_embedding_loop(k_len: int, dim: int, clamp_len: int | None) -> torch.Tensor:
    """Row r: distance p = min(k_len-1-r, clamp_len); sines of p*10000^(-2i/dim), then cosines."""
    n_sin = (dim + 1) // 2
    out = torch.empty(k_len, dim, dtype=torch.float64)
    for r in range(k_len):
        p = k_len - 1 - r if clamp_len is None else min(k_len - 1 - r, clamp_len)
        for c in range(dim):
            i = c if c < n_sin else c - n_sin
            angle = p / 10000.0 ** (2 * i / dim)
            out[r, c] = math.sin(angle) if c < n_sin else math.cos(angle)
    return out


@pytest.mark.parametrize(("k_len", "dim", "clamp_len"), [(6, 8, None), (10, 7, None), (9, 4, 3), (3, 6, 50), (1, 2, None)])
def test_xl_embedding_matches_loop(k_len, dim, clamp_len):
    out = xl_relative_embedding(k_len, dim, clamp_len=clamp_len, dtype=torch.float64)
    assert out.shape == (k_len, dim)
    torch.testing.assert_close(out, xl_embedding_loop(k_len, dim, clamp_len), rtol=0, atol=1e-14)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_xl_embedding_rounded_once(dtype):
    out = xl_relative_embedding(300, 16, dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out, round_once(xl_relative_embedding(300, 16, dtype=torch.float64), dtype))


def test_xl_embedding_default_dtype():
    assert xl_relative_embedding(3, 4).dtype == torch.get_default_dtype()


def test_xl_scores_after_rel_shift_depend_on_distance_only():
    # End to end: B[i, j] = q_i . R_{i' - j} for every allowed (i, j), with memory (k > q).
    q_len, k_len, dim = 5, 9, 8
    g = torch.Generator().manual_seed(0)
    query = torch.randn(q_len, dim, dtype=torch.float64, generator=g)
    r = xl_relative_embedding(k_len, dim, dtype=torch.float64)
    shifted = rel_shift(query @ r.T)
    table = xl_embedding_loop(k_len, dim, None).flip(0)  # row d encodes distance d
    for i in range(q_len):
        for j in range(k_len - q_len + i + 1):
            expected = query[i] @ table[k_len - q_len + i - j]
            torch.testing.assert_close(shifted[i, j], expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    q_len=st.integers(1, 8),
    extra=st.integers(0, 8),
    batch=st.lists(st.integers(1, 3), max_size=2),
    seed=st.integers(0, 2**16),
)
def test_rel_shift_property(q_len, extra, batch, seed):
    """Scores s(i, d) laid out by distance k-1-r become, after the shift, s(i, i' - j).

    For j <= i' = i + k - q the entry [i, j] is the score of query i at distance i' - j;
    [i, i' + 1] is 0 (the padding), and [i, j > i' + 1] is x[i + 1, j - i' - 2] (garbage from
    the next query's row, to be masked).
    """
    k_len = q_len + extra
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(*batch, q_len, k_len, generator=g)  # scores[..., i, d]
    x = scores.flip(-1)  # column r holds distance k_len - 1 - r
    out = rel_shift(x)
    assert out.shape == x.shape
    for i in range(q_len):
        i_abs = i + extra
        for j in range(k_len):
            if j <= i_abs:
                assert torch.equal(out[..., i, j], scores[..., i, i_abs - j])
            elif j == i_abs + 1:
                assert bool((out[..., i, j] == 0).all())
            else:
                assert torch.equal(out[..., i, j], x[..., i + 1, j - i_abs - 2])


def test_rel_shift_small_example():
    x = torch.arange(1, 10).reshape(3, 3)
    assert rel_shift(x).tolist() == [[3, 0, 4], [5, 6, 0], [7, 8, 9]]


def test_rel_shift_keeps_dtype_and_gradient_and_compiles():
    x = torch.randn(2, 3, 4, 6, dtype=torch.float64, requires_grad=True)
    out = rel_shift(x)
    assert out.dtype == torch.float64
    out.sum().backward()
    assert x.grad is not None
    compiled = torch.compile(rel_shift, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x.detach()), rel_shift(x.detach()))
    y = torch.randn(6, 4, 2).transpose(0, 2)  # non-contiguous
    assert torch.equal(rel_shift(y), rel_shift(y.contiguous()))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        (dict(q_len=0, k_len=3, max_relative_position=2), ValueError, "q_len"),
        (dict(q_len=1.5, k_len=3, max_relative_position=2), TypeError, "q_len"),
        (dict(q_len=True, k_len=3, max_relative_position=2), TypeError, "q_len"),
        (dict(q_len=2, k_len=-1, max_relative_position=2), ValueError, "k_len"),
        (dict(q_len=4, k_len=3, max_relative_position=2), ValueError, "k_len"),
        (dict(q_len=2, k_len=3, max_relative_position=0), ValueError, "max_relative_position"),
        (dict(q_len=2, k_len=3, max_relative_position=2.0), TypeError, "max_relative_position"),
    ],
)
def test_indices_bad_input(kwargs, error, name):
    with pytest.raises(error, match=name):
        relative_position_indices(**kwargs)


def test_embedding_bad_input():
    with pytest.raises(ValueError, match="max_relative_position"):
        RelativePositionEmbedding(0, 4)
    with pytest.raises(ValueError, match="dim"):
        RelativePositionEmbedding(2, 0)
    emb = RelativePositionEmbedding(2, 4)
    with pytest.raises(ValueError, match="q_len"):
        emb(0, 3)
    with pytest.raises(ValueError, match="k_len"):
        emb(5, 3)


@pytest.mark.parametrize(
    ("rel", "kwargs", "error", "name"),
    [
        (torch.tensor([1.0, 2.0]), {}, TypeError, "relative_position"),
        (torch.tensor([True]), {}, TypeError, "relative_position"),
        ([1, 2], {}, TypeError, "relative_position"),
        (torch.tensor([1]), dict(bidirectional=1), TypeError, "bidirectional"),
        (torch.tensor([1]), dict(num_buckets=0), ValueError, "num_buckets"),
        (torch.tensor([1]), dict(num_buckets=32.0), TypeError, "num_buckets"),
        (torch.tensor([1]), dict(num_buckets=3), ValueError, "num_buckets"),
        (torch.tensor([1]), dict(num_buckets=1, bidirectional=False), ValueError, "num_buckets"),
        (torch.tensor([1]), dict(max_distance=0), ValueError, "max_distance"),
        (torch.tensor([1]), dict(max_distance=8), ValueError, "max_distance"),
        (torch.tensor([1]), dict(max_distance=16, bidirectional=False), ValueError, "max_distance"),
    ],
)
def test_t5_bucket_bad_input(rel, kwargs, error, name):
    with pytest.raises(error, match=name):
        t5_relative_position_bucket(rel, **kwargs)


def test_t5_bias_bad_input():
    with pytest.raises(ValueError, match="num_heads"):
        T5RelativePositionBias(0)
    with pytest.raises(ValueError, match="num_buckets"):
        T5RelativePositionBias(2, num_buckets=2)
    with pytest.raises(ValueError, match="max_distance"):
        T5RelativePositionBias(2, max_distance=4)
    with pytest.raises(TypeError, match="bidirectional"):
        T5RelativePositionBias(2, bidirectional="yes")
    module = T5RelativePositionBias(2)
    with pytest.raises(ValueError, match="q_len"):
        module(0, 3)
    with pytest.raises(ValueError, match="k_len"):
        module(2, -3)
    with pytest.raises(TypeError, match="offset"):
        module(2, 3, offset=1.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        (dict(k_len=0, dim=4), ValueError, "k_len"),
        (dict(k_len=3, dim=0), ValueError, "dim"),
        (dict(k_len=3, dim=4.0), TypeError, "dim"),
        (dict(k_len=3, dim=4, clamp_len=0), ValueError, "clamp_len"),
        (dict(k_len=3, dim=4, clamp_len=-1), ValueError, "clamp_len"),
        (dict(k_len=3, dim=4, clamp_len=2.5), TypeError, "clamp_len"),
        (dict(k_len=3, dim=4, dtype=torch.int64), TypeError, "dtype"),
    ],
)
def test_xl_embedding_bad_input(kwargs, error, name):
    with pytest.raises(error, match=name):
        xl_relative_embedding(**kwargs)


def test_rel_shift_bad_input():
    with pytest.raises(TypeError, match="x"):
        rel_shift([[1.0, 2.0]])
    with pytest.raises(ValueError, match="x"):
        rel_shift(torch.zeros(4))


# ---------------------------------------------------------------------------------------------
# T5 buckets against the original Mesh TensorFlow code (independent of transformers)
# ---------------------------------------------------------------------------------------------


def _mesh_tf_bucket(relative_position: np.ndarray, bidirectional: bool, num_buckets: int,
                    max_distance: int, real: type = np.float32) -> np.ndarray:
    """Transcription of mesh_tensorflow ``transformer/transformer_layers._relative_position_bucket``
    in NumPy: float32 arithmetic throughout (``mtf.to_float``; Python constants become float32
    tensors), truncation by ``mtf.to_int32``. ``real=np.float64`` gives the same formula in
    float64, to find the settings where the two differ."""
    ret = np.zeros_like(relative_position, dtype=np.int64)
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).astype(np.int64) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    with np.errstate(divide="ignore"):
        log_ratio = np.log(n.astype(real) / real(max_exact))
    scaled = log_ratio / real(math.log(max_distance / max_exact)) * real(num_buckets - max_exact)
    val_if_large = max_exact + np.where(is_small, 0, scaled).astype(np.int64)
    val_if_large = np.minimum(val_if_large, num_buckets - 1)
    return ret + np.where(is_small, n, val_if_large)


#: (bidirectional, num_buckets, max_distance) where float32 and float64 arithmetic give different
#: buckets, so that the float32 steps are what the comparison checks.
FLOAT32_MATTERS = [(True, 166, 1000), (False, 83, 1000), (False, 159, 2048)]


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), FLOAT32_MATTERS)
def test_t5_settings_where_float32_matters(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    relative = np.arange(-3 * max_distance, 3 * max_distance + 1, dtype=np.int64)
    in_float32 = _mesh_tf_bucket(relative, bidirectional, num_buckets, max_distance)
    in_float64 = _mesh_tf_bucket(relative, bidirectional, num_buckets, max_distance, real=np.float64)
    assert (in_float32 != in_float64).any()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(
    ("num_buckets", "max_distance"),
    [(32, 128), (64, 256), (8, 20), (320, 4096), (166, 1000), (318, 2048), (83, 1000), (159, 2048)],
)
def test_t5_buckets_equal_mesh_tensorflow(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    relative = np.arange(-3 * max_distance, 3 * max_distance + 1, dtype=np.int64)
    expected = _mesh_tf_bucket(relative, bidirectional, num_buckets, max_distance)
    ours = t5_relative_position_bucket(
        torch.from_numpy(relative), bidirectional=bidirectional, num_buckets=num_buckets,
        max_distance=max_distance,
    )
    np.testing.assert_array_equal(ours.numpy(), expected)
