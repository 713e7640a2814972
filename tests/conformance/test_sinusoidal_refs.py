"""``posenc.sinusoidal_table`` against the sinusoidal encodings people actually use.

Installed packages (Hugging Face Marian, x-transformers, positional-encodings) are called directly;
each test skips if its package is missing. Code that is not a pip package (tensor2tensor, fairseq,
Transformer-XL, the PyTorch tutorial / Annotated Transformer, the seed article) is transcribed below,
with the file and function it comes from.

Most references compute in float32, so their error grows with the position: an angle ``p * w``
held in float32 is off by about ``p * 2**-24``. Those comparisons use the bound
``|ref - ours| <= 2**-22 * max(p, 1)`` per row (observed: at most about ``1.1e-7 * p``), and, where
the reference follows the default dtype, a second run in float64 that must agree to ``1e-10``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc.sinusoidal import sinusoidal_frequencies, sinusoidal_table

# Per-position bound on the error of a float32 computation of sin/cos(p * w), see module docstring.
FLOAT32_ERROR_PER_POSITION = 2.0**-22


def assert_float32_close(
    reference: torch.Tensor | np.ndarray, ours64: torch.Tensor, positions: torch.Tensor
) -> None:
    """Assert ``reference`` (computed in float32) is within the float32 bound of the float64 table."""
    reference = torch.as_tensor(reference).double()
    assert reference.shape == ours64.shape
    error = (reference - ours64).abs()
    bound = FLOAT32_ERROR_PER_POSITION * positions.double().abs().clamp(min=1.0)[:, None]
    worst = (error / bound).max().item()
    assert worst <= 1.0, f"float32 reference off by {worst:.2f}x the bound"


# --------------------------------------------------------------------------- transcriptions


def t2t_get_timing_signal_1d(
    length: int,
    channels: int,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
    start_index: int = 0,
    dtype: type = np.float32,
) -> np.ndarray:
    """tensor2tensor/layers/common_attention.py, ``get_timing_signal_1d`` (TF ops as NumPy).

    The original casts with ``tf.to_float`` (float32); ``dtype`` lets a test run the same formula
    in float64.
    """
    position = (np.arange(length) + start_index).astype(dtype)
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        float(num_timescales) - 1, 1
    )
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales).astype(dtype) * -log_timescale_increment
    )
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    signal = np.pad(signal, [[0, 0], [0, channels % 2]])
    return signal.reshape(1, length, channels)


def fairseq_get_embedding(
    num_embeddings: int, embedding_dim: int, padding_idx: int | None = None
) -> torch.Tensor:
    """fairseq/modules/sinusoidal_positional_embedding.py, ``SinusoidalPositionalEmbedding.get_embedding``."""
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
    if embedding_dim % 2 == 1:
        emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)  # zero pad
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb


def fairseq_make_positions(tokens: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """fairseq/utils.py, ``make_positions``: non-pad tokens get ``padding_idx + 1, padding_idx + 2, ...``."""
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def fairseq_forward(tokens: torch.Tensor, embedding_dim: int, padding_idx: int) -> torch.Tensor:
    """``SinusoidalPositionalEmbedding.forward`` (no incremental state, no ONNX path)."""
    bsz, seq_len = tokens.shape
    weights = fairseq_get_embedding(padding_idx + 1 + seq_len, embedding_dim, padding_idx)
    positions = fairseq_make_positions(tokens, padding_idx)
    return weights.index_select(0, positions.view(-1)).view(bsz, seq_len, -1)


class TransformerXLPositionalEmbedding(torch.nn.Module):
    """kimiyoung/transformer-xl, pytorch/mem_transformer.py, ``PositionalEmbedding``."""

    def __init__(self, demb: int) -> None:
        super().__init__()
        self.demb = demb
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq: torch.Tensor, bsz: int | None = None) -> torch.Tensor:
        sinusoid_inp = torch.outer(pos_seq, self.inv_freq)  # the original's torch.ger, since renamed
        pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)
        if bsz is not None:
            return pos_emb[:, None, :].expand(-1, bsz, -1)
        return pos_emb[:, None, :]


def pytorch_tutorial_pe(d_model: int, max_len: int = 5000) -> torch.Tensor:
    """PyTorch tutorial "Language Modeling with nn.Transformer", ``PositionalEncoding.__init__``.

    Returns the buffer, shaped ``(max_len, 1, d)`` (sequence first).
    """
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, 1, d_model)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return pe


def annotated_transformer_pe(d_model: int, max_len: int = 5000) -> torch.Tensor:
    """The Annotated Transformer (harvardnlp), ``PositionalEncoding.__init__``: ``(1, max_len, d)``."""
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.unsqueeze(0)


def seed_naive_positional_encoding(seq_len: int, d_model: int) -> np.ndarray:
    """The seed article's "intuitive double loop" (section 3.1), as published."""
    pe = np.zeros((seq_len, d_model))
    for pos in range(seq_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = np.sin(pos / (10000 ** (2 * i / d_model)))
            pe[pos, i + 1] = np.cos(pos / (10000 ** (2 * i / d_model)))
    return pe


def seed_vectorized_pe(seq_len: int, d_model: int) -> np.ndarray:
    """The seed article's broadcasting version (section 3.2), as published."""
    position = np.arange(seq_len)[:, np.newaxis]
    div_term = np.exp(np.arange(0, d_model, 2) * -(np.log(10000.0) / d_model))
    pe = np.zeros((seq_len, d_model))
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


# ------------------------------------------------------------------------ Hugging Face Marian


@pytest.mark.parametrize("dim", [6, 7, 64, 512])
def test_marian_sinusoidal_equals_concat(dim: int) -> None:
    pytest.importorskip("transformers")
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    module = MarianSinusoidalPositionalEmbedding(256, dim)
    weight = module.create_weight()  # what MarianPreTrainedModel._init_weights copies in
    ours = sinusoidal_table(256, dim, style="concat", dtype=torch.float32)
    assert weight.dtype == torch.float32 and weight.shape == ours.shape
    # Marian: NumPy float64, one cast to float32, same as ours; at most one float32 ulp apart
    # (sin may differ in the last float64 bit between NumPy and torch). Exactly equal here.
    torch.testing.assert_close(weight, ours, rtol=0, atol=2.0**-23)


def test_marian_model_positions_and_cache_length() -> None:
    pytest.importorskip("transformers")
    from transformers import MarianConfig, MarianModel

    config = MarianConfig(
        vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=31, decoder_start_token_id=31,
    )
    model = MarianModel(config)
    table = sinusoidal_table(64, 16, style="concat")
    for embed in (model.encoder.embed_positions, model.decoder.embed_positions):
        assert not embed.weight.requires_grad
        torch.testing.assert_close(embed.weight, table, rtol=0, atol=2.0**-23)
    # Positions start at 0 (no fairseq padding offset); cache_length shifts them.
    torch.testing.assert_close(model.decoder.embed_positions((2, 10)), table[:10], rtol=0, atol=2.0**-23)
    torch.testing.assert_close(
        model.decoder.embed_positions((2, 10), cache_length=5), table[5:15], rtol=0, atol=2.0**-23
    )


def test_marian_table_has_float32_precision_even_in_float64() -> None:
    pytest.importorskip("transformers")
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    weight = MarianSinusoidalPositionalEmbedding(100, 32).double().create_weight()
    assert weight.dtype == torch.float64
    error = (weight - sinusoidal_table(100, 32, style="concat", dtype=torch.float64)).abs().max().item()
    # create_weight goes through torch.FloatTensor whatever the module dtype.
    assert 1e-10 < error < 2.0**-24


@pytest.mark.reference_doc
def test_marian_odd_dim_puts_cosines_one_column_later_than_its_docstring() -> None:
    # create_weight's docstring: "The cos features are in the 2nd half of the vector. [dim // 2:]".
    # With an odd dim the sines take ceil(dim/2) columns, so column dim // 2 is still a sine.
    pytest.importorskip("transformers")
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    assert "[dim // 2:]" in MarianSinusoidalPositionalEmbedding.create_weight.__doc__
    dim = 7
    weight = MarianSinusoidalPositionalEmbedding(50, dim).create_weight().double()
    positions = torch.arange(50, dtype=torch.float64)[:, None]
    freqs = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # ceil(dim/2) of them
    torch.testing.assert_close(weight[:, : dim // 2 + 1], torch.sin(positions * freqs), rtol=0, atol=1e-6)
    torch.testing.assert_close(weight[:, dim // 2 + 1 :], torch.cos(positions * freqs[:-1]), rtol=0, atol=1e-6)
    assert (weight[:, dim // 2] - torch.cos(positions[:, 0] * freqs[0])).abs().max() > 0.5


# ------------------------------------------------------------------------------- Transformer-XL


@pytest.mark.parametrize("dim", [16, 64, 410])
def test_transformer_xl_positional_embedding_equals_concat(dim: int) -> None:
    klen = 3000
    pos_seq = torch.arange(klen - 1, -1, -1.0)  # as MemTransformerLM._forward builds it
    pos_emb = TransformerXLPositionalEmbedding(dim)(pos_seq, bsz=2)
    assert pos_emb.shape == (klen, 2, dim)
    ours = sinusoidal_table(klen, dim, style="concat", dtype=torch.float64).flip(0)  # positions klen-1 ... 0
    assert_float32_close(pos_emb[:, 0], ours, pos_seq)
    assert torch.equal(pos_emb[:, 0], pos_emb[:, 1])


def test_transformer_xl_formula_in_float64(default_float64: None) -> None:
    pos_seq = torch.arange(2999, -1, -1.0)
    pos_emb = TransformerXLPositionalEmbedding(64)(pos_seq)[:, 0]
    ours = sinusoidal_table(3000, 64, style="concat", dtype=torch.float64).flip(0)
    torch.testing.assert_close(pos_emb, ours, rtol=0, atol=1e-10)


def test_transformer_xl_odd_dim_gives_one_extra_column() -> None:
    # arange(0, d, 2) has ceil(d/2) entries and XL concatenates sin and cos of all of them.
    pos_seq = torch.arange(49, -1, -1.0)
    pos_emb = TransformerXLPositionalEmbedding(7)(pos_seq)[:, 0]
    assert pos_emb.shape == (50, 8)
    ours = sinusoidal_table(50, 7, style="concat", dtype=torch.float64).flip(0)
    assert_float32_close(pos_emb[:, :7], ours, pos_seq)  # the same table plus a trailing cosine


# ---------------------------------------------------------------------------------- x-transformers


@pytest.mark.parametrize(("dim", "theta"), [(16, 10000), (64, 10000), (512, 10000), (32, 500)])
def test_x_transformers_scaled_sinusoidal_over_scale_equals_concat(dim: int, theta: int) -> None:
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import ScaledSinusoidalEmbedding

    module = ScaledSinusoidalEmbedding(dim, theta=theta)
    assert module.scale.item() == pytest.approx(dim**-0.5)
    x = torch.zeros(1, 2000, dim)
    with torch.no_grad():
        emb = module(x) / module.scale
    ours = sinusoidal_table(2000, dim, base=theta, style="concat", dtype=torch.float64)
    assert_float32_close(emb, ours, torch.arange(2000))
    with torch.no_grad():
        shifted = module(x[:, :10], offset=7) / module.scale
        explicit = module(x[:, :3], pos=torch.tensor([0, 5, 100])) / module.scale
    assert_float32_close(shifted, ours[7:17], torch.arange(7, 17))
    assert_float32_close(explicit, ours[[0, 5, 100]], torch.tensor([0, 5, 100]))


def test_x_transformers_scaled_sinusoidal_needs_even_dim() -> None:
    # x-transformers asserts an even width; posenc's "concat" table takes an odd one, the extra
    # column being one more sine (and its even-width part is x-transformers' table).
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import ScaledSinusoidalEmbedding

    with pytest.raises(AssertionError):
        ScaledSinusoidalEmbedding(7)
    odd = sinusoidal_table(50, 7, style="concat", dtype=torch.float64)
    positions = torch.arange(50, dtype=torch.float64)[:, None]
    freqs = sinusoidal_frequencies(7)
    torch.testing.assert_close(odd[:, :4], torch.sin(positions * freqs), rtol=0, atol=1e-15)
    torch.testing.assert_close(odd[:, 4:], torch.cos(positions * freqs[:3]), rtol=0, atol=1e-15)


@pytest.mark.reference_doc
def test_x_transformers_scaled_sinusoidal_is_float32_whatever_the_input() -> None:
    # The input gives only the length: the table comes from a float32 buffer.
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import ScaledSinusoidalEmbedding

    module = ScaledSinusoidalEmbedding(16)
    for dtype in (torch.float64, torch.float16):
        with torch.no_grad():
            assert module(torch.zeros(1, 10, 16, dtype=dtype)).dtype == torch.float32


# ------------------------------------------------------------------------------ positional-encodings


@pytest.mark.parametrize("dim", [2, 6, 64, 512])
def test_positional_encodings_1d_equals_interleaved(dim: int) -> None:
    encodings = pytest.importorskip("positional_encodings.torch_encodings")
    out = encodings.PositionalEncoding1D(dim)(torch.zeros(3, 5000, dim))  # (batch, x, ch)
    assert out.shape == (3, 5000, dim) and out.dtype == torch.float32
    ours = sinusoidal_table(5000, dim, dtype=torch.float64)
    assert_float32_close(out[0], ours, torch.arange(5000))
    assert torch.equal(out[0], out[2])
    assert (out[0].double() - ours).abs().max().item() < 1e-3


def test_positional_encodings_1d_computes_in_float32_for_float64_input() -> None:
    encodings = pytest.importorskip("positional_encodings.torch_encodings")
    out = encodings.PositionalEncoding1D(64)(torch.zeros(1, 1000, 64, dtype=torch.float64))
    assert out.dtype == torch.float64
    error = (out[0] - sinusoidal_table(1000, 64, dtype=torch.float64)).abs().max().item()
    assert 1e-9 < error < 1e-4  # float32 angles, stored as float64


@pytest.mark.parametrize("dim", [3, 7, 65])
def test_positional_encodings_1d_odd_dim_is_the_next_even_table_truncated(dim: int) -> None:
    encodings = pytest.importorskip("positional_encodings.torch_encodings")
    out = encodings.PositionalEncoding1D(dim)(torch.zeros(1, 200, dim))[0]
    # It rounds channels up to even, uses that width in the exponent 2i/(dim+1), and drops the
    # last cosine: not the odd-dim interleaved table, whose exponent is 2i/dim.
    next_even = sinusoidal_table(200, dim + 1, dtype=torch.float64)[:, :dim]
    assert_float32_close(out, next_even, torch.arange(200))
    assert (out.double() - sinusoidal_table(200, dim, dtype=torch.float64)).abs().max().item() > 0.1


# ------------------------------------------------------------------------------------ tensor2tensor


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5, 8, 64, 65, 512])
@pytest.mark.parametrize("start_index", [0, 17])
def test_tensor2tensor_timing_signal_equals_tensor2tensor_style(dim: int, start_index: int) -> None:
    ours = sinusoidal_table(300, dim, style="tensor2tensor", offset=start_index, dtype=torch.float64)
    exact = t2t_get_timing_signal_1d(300, dim, start_index=start_index, dtype=np.float64)[0]
    torch.testing.assert_close(torch.from_numpy(exact), ours, rtol=0, atol=1e-12)
    as_published = t2t_get_timing_signal_1d(300, dim, start_index=start_index)[0]  # float32
    assert as_published.dtype == np.float32
    assert_float32_close(as_published, ours, torch.arange(start_index, start_index + 300))


def test_tensor2tensor_frequencies_differ_from_the_paper() -> None:
    # n = d/2 timescales spread over n-1 steps (the paper: over n steps), so the last frequency is
    # exactly 1/10000 rather than 10000**(-(d-2)/d); the columns drift apart with position.
    t2t = sinusoidal_table(1000, 512, style="tensor2tensor", dtype=torch.float64)
    paper = sinusoidal_table(1000, 512, style="concat", dtype=torch.float64)
    assert torch.equal(t2t[:, 0], paper[:, 0])  # frequency 1 in both
    assert (t2t - paper).abs().max().item() > 0.5


# ------------------------------------------------------------------------------------------ fairseq


@pytest.mark.parametrize("dim", [4, 5, 64, 512, 513])
def test_fairseq_get_embedding_equals_tensor2tensor_style(dim: int) -> None:
    table = fairseq_get_embedding(3000, dim)
    ours = sinusoidal_table(3000, dim, style="tensor2tensor", dtype=torch.float64)
    assert_float32_close(table, ours, torch.arange(3000))
    if dim % 2:
        assert torch.equal(table[:, -1], torch.zeros(3000))


def test_fairseq_positions_start_after_padding_idx() -> None:
    padding_idx = 1  # fairseq's dictionary puts <pad> at index 1
    tokens = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, padding_idx, padding_idx, padding_idx]])
    out = fairseq_forward(tokens, 16, padding_idx)
    # The first real token is position padding_idx + 1 = 2, not 0.
    ours = sinusoidal_table(6, 16, style="tensor2tensor", offset=padding_idx + 1, dtype=torch.float64)
    assert_float32_close(out[0], ours, torch.arange(2, 8))
    assert_float32_close(out[1, :3], ours[:3], torch.arange(2, 5))
    assert torch.equal(out[1, 3:], torch.zeros(3, 16))  # the padding row is zeroed
    from_zero = sinusoidal_table(6, 16, style="tensor2tensor", dtype=torch.float64)
    assert (out[0].double() - from_zero).abs().max() > 0.5


@pytest.mark.parametrize("dim", [2, 3])
def test_fairseq_divides_by_zero_where_tensor2tensor_clamps(dim: int) -> None:
    # fairseq divides ln(10000) by half_dim - 1; tensor2tensor by max(half_dim - 1, 1).
    with pytest.raises(ZeroDivisionError):
        fairseq_get_embedding(10, dim)
    ours = sinusoidal_table(10, dim, style="tensor2tensor", dtype=torch.float64)
    torch.testing.assert_close(torch.from_numpy(t2t_get_timing_signal_1d(10, dim, dtype=np.float64)[0]), ours)


# ------------------------------------------------------------- PyTorch tutorial / Annotated Transformer


@pytest.mark.parametrize(("dim", "max_len"), [(16, 2000), (64, 2000), (512, 5000)])
def test_tutorial_and_annotated_transformer_equal_interleaved_up_to_float32(dim: int, max_len: int) -> None:
    tutorial = pytorch_tutorial_pe(dim, max_len)[:, 0]
    annotated = annotated_transformer_pe(dim, max_len)[0]
    assert tutorial.dtype == torch.float32 and torch.equal(tutorial, annotated)
    ours = sinusoidal_table(max_len, dim, dtype=torch.float64)
    assert_float32_close(tutorial, ours, torch.arange(max_len))
    error = (tutorial.double() - ours).abs()
    # Observed: about 4e-4 at d=512 over 5000 positions, 7e-6 over the first 100. Half a float16
    # ulp near 1 is 2.4e-4, so float32 tables are not float16-exact past a few thousand positions.
    assert error.max().item() < 1e-3
    assert error[:100].max().item() < 1e-5


def test_tutorial_formula_in_float64(default_float64: None) -> None:
    tutorial = pytorch_tutorial_pe(512)[:, 0]
    assert tutorial.dtype == torch.float64
    torch.testing.assert_close(tutorial, sinusoidal_table(5000, 512, dtype=torch.float64), rtol=0, atol=1e-10)


def test_tutorial_fails_on_odd_dim() -> None:
    # ceil(d/2) angle columns do not fit the floor(d/2) cosine slots.
    with pytest.raises(RuntimeError):
        pytorch_tutorial_pe(7, max_len=10)
    assert sinusoidal_table(10, 7).shape == (10, 7)


# ------------------------------------------------------------------------------- the seed article


@pytest.mark.parametrize("dim", [8, 64, 128])
def test_seed_loop_is_not_the_paper_formula(dim: int) -> None:
    naive = seed_naive_positional_encoding(200, dim)
    paper = sinusoidal_table(200, dim, dtype=torch.float64).numpy()
    assert np.abs(naive - paper).max() > 0.5
    # i runs over column indices 0, 2, 4, ..., so 2*i/d = 4k/d for pair k: the exponent is
    # doubled, which is the correct table with base 10000**2.
    doubled = sinusoidal_table(200, dim, base=1e8, dtype=torch.float64).numpy()
    np.testing.assert_allclose(naive, doubled, rtol=0, atol=1e-12)


def test_seed_vectorized_version_is_correct_and_disagrees_with_its_loop() -> None:
    vectorized = seed_vectorized_pe(200, 64)
    paper = sinusoidal_table(200, 64, dtype=torch.float64).numpy()
    np.testing.assert_allclose(vectorized, paper, rtol=0, atol=1e-12)
    assert np.abs(vectorized - seed_naive_positional_encoding(200, 64)).max() > 0.5
    with pytest.raises(IndexError):
        seed_naive_positional_encoding(4, 7)  # column i + 1 does not exist for odd d
