"""Tests for posenc.models: one Transformer, nine position encodings."""

from __future__ import annotations

import math
import sysconfig
from pathlib import Path

import pytest
import torch

from posenc.alibi import alibi_bias
from posenc.models import (
    POSITIONS,
    CausalLM,
    CharCorpus,
    EncoderClassifier,
    KVCache,
    Transformer,
    TransformerConfig,
    next_token_loss,
    stdlib_corpus,
    train,
)
from posenc.relative import relative_position_indices
from posenc.sinusoidal import sinusoidal_table

VOCAB, DIM, HEADS, SEQ = 11, 16, 2, 7
RELATIVE = ("shaw", "xl", "t5", "rope", "alibi")  # scores depend on i - j only
POSITION_PARAMS = {  # parameter-name fragments that only the given encoding creates
    "none": (),
    "sinusoidal": (),
    "learned": ("position.table.weight",),
    "shaw": ("position.rel_k.", "position.rel_v."),
    "xl": ("position.r_proj.", "attn.position.content_bias", "attn.position.position_bias"),
    "t5": ("position.t5.",),
    "rope": (),
    "alibi": (),
    "cope": ("cope.pos_emb",),
}


def config(position: str, **kwargs) -> TransformerConfig:
    options = dict(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, num_layers=2, max_len=32, position=position)
    options.update(kwargs)
    return TransformerConfig(**options)


def tokens(batch: int = 2, seq: int = SEQ, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """float64, eval mode, and no parameter left at an exact zero/one initialisation (e.g. CoPE)."""
    torch.manual_seed(1)
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.mark.parametrize("position", POSITIONS)
def test_forward_shapes(position):
    x = tokens()
    assert Transformer(config(position))(x).shape == (2, SEQ, DIM)
    assert Transformer(config(position, causal=True))(x).shape == (2, SEQ, DIM)
    assert EncoderClassifier(config(position), num_classes=3)(x).shape == (2, 3)
    assert CausalLM(config(position, causal=True))(x).shape == (2, SEQ, VOCAB)
    assert CausalLM(config(position, causal=True), tie_weights=False)(x).shape == (2, SEQ, VOCAB)


@pytest.mark.parametrize("position", POSITIONS)
def test_causal_lm_does_not_see_the_future(position):
    model = perturbed(CausalLM(config(position, causal=True), tie_weights=False))
    x = tokens(seq=SEQ)
    changed = x.clone()
    changed[:, 4] = (changed[:, 4] + 1) % VOCAB
    before, after = model(x), model(changed)
    torch.testing.assert_close(before[:, :4], after[:, :4], rtol=0, atol=1e-12)
    assert (before[:, 4:] - after[:, 4:]).abs().amax() > 1e-6


@pytest.mark.parametrize("position", POSITIONS)
def test_only_none_is_permutation_equivariant(position):
    model = perturbed(Transformer(config(position)))
    x = tokens()
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    gap = (model(x[:, perm]) - model(x)[:, perm]).abs().amax()
    if position == "none":
        assert gap < 1e-12
    else:
        assert gap > 1e-4


@pytest.mark.parametrize("position", RELATIVE)
@pytest.mark.parametrize("causal", [False, True])
def test_relative_encodings_score_by_offset_only(position, causal):
    # The same two tokens at positions (1, 3) and (4, 6) get the same first-layer logit.
    model = perturbed(Transformer(config(position, causal=causal)))
    x = tokens(batch=1, seq=SEQ)
    x[0, 4], x[0, 6] = x[0, 1], x[0, 3]
    logits = first_layer_logits(model, x)
    # RotaryEmbedding's cos/sin cache holds float32 values even in a float64 model.
    atol = 1e-7 if position == "rope" else 1e-12
    torch.testing.assert_close(logits[..., 3, 1], logits[..., 6, 4], rtol=0, atol=atol)
    if not causal:
        torch.testing.assert_close(logits[..., 1, 3], logits[..., 4, 6], rtol=0, atol=atol)
    absolute = perturbed(Transformer(config("learned", causal=causal)))
    absolute_logits = first_layer_logits(absolute, x)
    assert (absolute_logits[..., 3, 1] - absolute_logits[..., 6, 4]).abs().amax() > 1e-3


def first_layer_logits(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(x.shape[1])[None]
    hidden = model.position.embed(model.embed(x), positions, False)
    block = model.blocks[0]
    context = model._context(hidden, positions, positions, False)
    return block.attn.scores(block.norm1(hidden), context)[0]


def qkv(model: Transformer, x: torch.Tensor):
    block = model.blocks[0]
    hidden = block.norm1(model.embed(x))
    q, k, v = block.attn.qkv(hidden).view(1, x.shape[1], 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
    return block.attn, q[0], k[0]


@pytest.mark.parametrize("causal", [False, True])
def test_xl_logits_match_the_formula(causal):
    # ((q_i + u) . k_j + (q_i + v) . W_R R_{i-j}) / sqrt(d_h), R the "concat" sinusoid of i - j.
    model = perturbed(Transformer(config("xl", causal=causal)))
    x = tokens(batch=1)
    attn, q, k = qkv(model, x)
    logits = first_layer_logits(model, x)[0]
    for i in range(SEQ):
        for j in range(SEQ if not causal else i + 1):
            r = attn.position.r_proj(sinusoidal_table(1, DIM, style="concat", offset=i - j, dtype=torch.float64))
            r = r.view(HEADS, DIM // HEADS)
            expected = ((q[:, i] + attn.position.content_bias) * k[:, j]).sum(-1) + ((q[:, i] + attn.position.position_bias) * r).sum(-1)
            torch.testing.assert_close(logits[:, i, j], expected / math.sqrt(DIM // HEADS))
    if causal:
        assert (logits.triu(1)[logits.triu(1) != 0] == torch.finfo(logits.dtype).min).all()


def test_shaw_and_alibi_logits_match_the_formula():
    model = perturbed(Transformer(config("shaw", max_relative_position=2)))
    x = tokens(batch=1)
    attn, q, k = qkv(model, x)
    table = attn.position.rel_k.embedding.weight
    index = relative_position_indices(SEQ, SEQ, 2)
    expected = torch.einsum("hid,hijd->hij", q, k[:, None, :, :] + table[index][None])
    torch.testing.assert_close(first_layer_logits(model, x)[0], expected / math.sqrt(DIM // HEADS))

    model = perturbed(Transformer(config("alibi", causal=True)))
    attn, q, k = qkv(model, x)
    expected = q @ k.transpose(-1, -2) / math.sqrt(DIM // HEADS) + alibi_bias(HEADS, SEQ, dtype=torch.float64)
    expected = expected.masked_fill(torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1), torch.finfo(expected.dtype).min)
    torch.testing.assert_close(first_layer_logits(model, x)[0], expected)


@pytest.mark.parametrize("position", POSITIONS)
def test_every_parameter_gets_gradient(position):
    torch.manual_seed(0)
    lm = CausalLM(config(position, causal=True, num_layers=1), tie_weights=False)
    clf = EncoderClassifier(config(position, num_layers=1), num_classes=3)
    x = tokens()
    loss = torch.nn.functional.cross_entropy(lm(x).flatten(0, 1), x.flatten())
    loss = loss + torch.nn.functional.cross_entropy(clf(x), torch.tensor([0, 2]))
    loss.backward()
    for name, p in [*lm.named_parameters(), *clf.named_parameters()]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("position", POSITIONS)
def test_position_is_the_only_difference(position):
    # Same seed: the extra parameters are exactly the encoding's, the shared ones are identical.
    torch.manual_seed(0)
    baseline = Transformer(config("none")).state_dict()
    torch.manual_seed(0)
    params = dict(Transformer(config(position)).named_parameters())
    extra = {name for name in params if name not in baseline}
    fragments = POSITION_PARAMS[position]
    assert all(any(f in name for f in fragments) for name in extra)
    assert all(any(f in name for name in extra) for f in fragments)
    for name, p in params.items():
        if name in baseline:
            assert torch.equal(p, baseline[name]), name


def test_eval_mode_is_deterministic():
    model = CausalLM(config("rope", causal=True, dropout=0.3))
    x = tokens()
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))


def test_longer_than_max_len():
    x = tokens(seq=40)  # max_len is 32
    for position in ("sinusoidal", "rope", "alibi", "t5", "shaw", "xl", "cope"):
        assert Transformer(config(position))(x).shape == (2, 40, DIM)
    with pytest.raises(ValueError, match="max_len=32"):
        Transformer(config("learned"))(x)


def test_dtype_follows_the_model():
    x = tokens()
    for position in ("alibi", "xl", "t5", "rope"):
        out = Transformer(config(position, causal=True)).double()(x)
        assert out.dtype == torch.float64


def test_compiles_fullgraph():
    model = CausalLM(config("xl", causal=True, num_layers=1)).eval()
    x = tokens()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"position": "absolute"}, ValueError, "position must be one of 'none', 'sinusoidal'.*'cope'"),
        ({"num_heads": 3}, ValueError, "num_heads must divide dim=16"),
        ({"position": "rope", "dim": 12, "num_heads": 4}, ValueError, "head_dim must be even"),
        ({"dim": 0}, ValueError, "dim"),
        ({"num_layers": 1.5}, TypeError, "num_layers"),
        ({"dropout": 1.0}, ValueError, "dropout"),
        ({"causal": 1}, TypeError, "causal"),
        ({"rope_base": -1.0}, ValueError, "rope_base"),
        ({"cope_max_pos": 0}, ValueError, "cope_max_pos"),
    ],
)
def test_bad_config(kwargs, error, match):
    arguments = {k: v for k, v in kwargs.items() if k != "position"}  # the parameters are shared: no pop
    with pytest.raises(error, match=match):
        config(kwargs.get("position", "none"), **arguments)


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="causal"):
        CausalLM(config("rope"))
    with pytest.raises(ValueError, match="num_classes"):
        EncoderClassifier(config("rope"), num_classes=0)
    with pytest.raises(TypeError, match="tie_weights must be a bool"):
        CausalLM(config("rope", causal=True), tie_weights="no")
    model = Transformer(config("none"))
    with pytest.raises(TypeError, match="tokens"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="tokens must be 2-D"):
        model(torch.zeros(3, dtype=torch.long))


# --- Positions, padding and the KV cache: what real models do, for every encoding --------------


def lm(position: str) -> CausalLM:
    return perturbed(CausalLM(config(position, causal=True)))


@pytest.mark.parametrize("position", POSITIONS)
def test_cached_decoding_equals_the_full_pass(position):
    model, x = lm(position), tokens(batch=2, seq=9, seed=3)
    full = model(x)
    cache = KVCache()
    one_by_one = torch.cat([model(x[:, t : t + 1], cache=cache) for t in range(x.shape[1])], dim=1)
    torch.testing.assert_close(one_by_one, full, rtol=0, atol=1e-10)
    assert len(cache) == x.shape[1]
    cache = KVCache()
    chunks = torch.cat([model(x[:, :4], cache=cache), model(x[:, 4:6], cache=cache), model(x[:, 6:], cache=cache)], 1)
    torch.testing.assert_close(chunks, full, rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("causal", [True, False])
def test_a_left_padded_batch_equals_its_sequences_alone(position, causal):
    model = perturbed(Transformer(config(position, causal=causal)))
    short, long = tokens(batch=1, seq=4, seed=4), tokens(batch=1, seq=7, seed=5)
    pad = 3
    batch = torch.cat([torch.cat([torch.zeros(1, pad, dtype=torch.long), short], 1), long])
    mask = torch.ones_like(batch)
    mask[0, :pad] = 0
    out = model(batch, attention_mask=mask)
    torch.testing.assert_close(out[0, pad:], model(short)[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(out[1], model(long)[0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", POSITIONS)
def test_left_padded_decoding_with_a_cache_equals_the_sequence_alone(position):
    model = lm(position)
    short = tokens(batch=1, seq=6, seed=6)
    pad = 2
    padded = torch.cat([torch.zeros(1, pad, dtype=torch.long), short], 1)
    mask = torch.ones_like(padded)
    mask[0, :pad] = 0
    cache = KVCache()
    steps = [model(padded[:, : pad + 3], attention_mask=mask[:, : pad + 3], cache=cache)[:, pad:]]
    for t in range(pad + 3, padded.shape[1]):
        steps.append(model(padded[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache))
    torch.testing.assert_close(torch.cat(steps, 1), model(short), rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", POSITIONS)
def test_explicit_default_positions_change_nothing(position):
    model, x = lm(position), tokens(batch=2, seq=7)
    positions = torch.arange(7)[None].expand(2, -1)
    torch.testing.assert_close(model(x, position_ids=positions), model(x), rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "rope"])
def test_shifted_positions_change_absolute_and_rotary_outputs_only_as_they_should(position):
    model, x = lm(position), tokens(batch=1, seq=5)
    shifted = model(x, position_ids=torch.arange(3, 8)[None])
    if position == "rope":  # relative: a common shift changes nothing
        torch.testing.assert_close(shifted, model(x), rtol=0, atol=1e-9)
    else:
        assert (shifted - model(x)).abs().amax() > 1e-3


def test_padded_mean_pooling_ignores_padding():
    model = perturbed(EncoderClassifier(config("sinusoidal"), num_classes=3))
    short = tokens(batch=1, seq=4, seed=7)
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), short], 1)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    torch.testing.assert_close(model(padded, attention_mask=mask), model(short), rtol=0, atol=1e-10)


def test_bad_positions_masks_and_caches():
    model = CausalLM(config("learned", causal=True))
    x = tokens(batch=2, seq=5)
    with pytest.raises(ValueError, match=r"position_ids must have shape \(batch, seq\)"):
        model(x, position_ids=torch.arange(4)[None])
    with pytest.raises(TypeError, match="position_ids"):
        model(x, position_ids=torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(batch, cached \+ seq\) = \(2, 5\)"):
        model(x, attention_mask=torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="attention_mask must be an integer or bool"):
        model(x, attention_mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="past the learned table"):
        model(x, position_ids=torch.arange(30, 35)[None])
    for position in ("learned", "sinusoidal", "rope"):
        with pytest.raises(ValueError, match="position_ids must be >= 0, got a minimum of -1"):
            CausalLM(config(position, causal=True))(x, position_ids=torch.arange(-1, 4)[None])
    with pytest.raises(TypeError, match="cache must be a posenc.models.KVCache"):
        model(x, cache={})
    with pytest.raises(ValueError, match="needs a causal model"):
        Transformer(config("rope"))(x, cache=KVCache())
    cache = KVCache()
    model(x, cache=cache)
    with pytest.raises(ValueError, match="the cache holds a batch of 2"):
        model(tokens(batch=3, seq=1), cache=cache)


# --- The training helper ---------------------------------------------------------------------


def copy_task_batch(generator: torch.Generator) -> torch.Tensor:
    """Sequences whose second half repeats the first: learnable only by attending back."""
    half = torch.randint(1, VOCAB, (16, 6), generator=generator)
    return torch.cat([half, half], dim=1)


def test_train_is_repeatable_and_learns():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # train() runs on 1 thread by default and must restore this

    def run(seed):
        torch.manual_seed(0)
        model = CausalLM(config("rope", causal=True, dropout=0.1))
        return model, train(model, next_token_loss, copy_task_batch, steps=60, lr=3e-3, seed=seed, warmup=5)

    model, log = run(seed=1)
    _, again = run(seed=1)
    _, other = run(seed=2)
    assert log.losses == again.losses  # same seed, same bits
    assert log.losses != other.losses
    assert len(log.losses) == 60 and log.seconds > 0
    assert sum(log.losses[-10:]) / 10 < sum(log.losses[:10]) / 10 - 0.3  # it learns
    assert not model.training
    assert torch.get_num_threads() == 2
    torch.set_num_threads(threads)


def test_next_token_loss_is_cross_entropy_of_the_shifted_tokens():
    model = lm("alibi")
    x = tokens(batch=2, seq=6)
    logits = model(x[:, :-1])
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    torch.testing.assert_close(next_token_loss(model, x), expected)
    with pytest.raises(ValueError, match="at least 2 positions"):
        next_token_loss(model, x[:, :1])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": 0}, ValueError, "steps"),
        ({"lr": 0.0}, ValueError, "lr"),
        ({"weight_decay": -1.0}, ValueError, "weight_decay"),
        ({"max_grad_norm": 0.0}, ValueError, "max_grad_norm"),
        ({"warmup": -1}, ValueError, "warmup"),
        ({"warmup": 1.5}, TypeError, "warmup must be an int"),
        ({"threads": 0}, ValueError, "threads"),
        ({"seed": 1.5}, TypeError, "seed"),
    ],
)
def test_train_rejects_bad_arguments(kwargs, error, match):
    model = CausalLM(config("none", causal=True))
    options = {"steps": 1, **kwargs}
    with pytest.raises(error, match=match):
        train(model, next_token_loss, copy_task_batch, **options)


def test_rope_layout_and_scaling_reach_the_rotary_module():
    model = Transformer(config("rope", rope_layout="interleaved", rope_scaling={"rope_type": "linear", "factor": 4.0}))
    assert model.position.rope.layout == "interleaved"
    plain = Transformer(config("rope"))
    # Linear scaling: position 4p rotates like position p of the unscaled model.
    q = torch.randn(1, 1, 1, DIM // HEADS)
    scaled = model.position.rope(q, q, positions=torch.tensor([8]))[0]
    unscaled = Transformer(config("rope", rope_layout="interleaved")).position.rope(q, q, positions=torch.tensor([2]))[0]
    torch.testing.assert_close(scaled, unscaled)
    assert plain.position.rope.layout == "half"
    with pytest.raises(ValueError, match="rope_layout"):
        config("rope", rope_layout="neox")
    with pytest.raises(TypeError, match="rope_scaling must be a dict"):
        config("rope", rope_scaling="linear")


# --- The character corpus of the language-model pages ------------------------------------------


def test_char_corpus_vocabulary_encoding_and_windows():
    corpus = CharCorpus.from_text("abcab\n", "cab é!")
    assert corpus.chars == "\nabc" and corpus.unknown == 4 and corpus.vocab_size == 5
    assert corpus.train.tolist() == [1, 2, 3, 1, 2, 0]
    assert corpus.held_out.tolist() == [3, 1, 2, 4, 4, 4]  # " ", "é" and "!" are not in the training text
    assert corpus.decode(corpus.held_out) == "cab???"
    make_batch = corpus.windows(3, 5)
    batch = make_batch(torch.Generator().manual_seed(0))
    again = make_batch(torch.Generator().manual_seed(0))
    assert batch.shape == (5, 4) and torch.equal(batch, again)
    text = corpus.train.tolist()
    for row in batch.tolist():  # each window is a contiguous piece of the training ids
        assert any(text[s : s + 4] == row for s in range(len(text) - 3))
    # Every start is drawn, the last one included: a window can end on the last id, and
    # length + 1 ids are enough for one window.
    drawn = {tuple(row) for row in corpus.windows(4, 200)(torch.Generator().manual_seed(0)).tolist()}
    assert drawn == {tuple(text[0:5]), tuple(text[1:6])}
    whole = corpus.windows(5, 20)(torch.Generator().manual_seed(0))
    assert (whole == corpus.train).all()
    with pytest.raises(ValueError, match="at least length"):
        corpus.windows(6, 2)
    with pytest.raises(ValueError, match="length"):
        corpus.windows(0, 2)


def test_stdlib_corpus_reads_the_interpreters_own_modules():
    corpus = stdlib_corpus(["textwrap"], ["shlex"])
    source = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text(encoding="utf-8")
    assert corpus.decode(corpus.train) == "".join(c if c.isascii() else "?" for c in source)
    assert corpus.held_out.numel() > 0
    with pytest.raises(ValueError, match="missing: \\['no_such_module'\\]"):
        stdlib_corpus(["textwrap", "no_such_module"], ["shlex"])


@pytest.mark.parametrize("position", POSITIONS)
def test_gapped_positions_reach_every_encoding_that_reads_positions(position):
    # Positions with a gap (kept after evicting tokens from a cache, say): every encoding that reads
    # positions must see the gap; contiguous positions shifted by a constant change only the
    # absolute encodings. NoPE and CoPE (positions counted from gates) read none.
    model = perturbed(CausalLM(config(position, causal=True)))
    x = tokens(batch=1)
    plain = model(x, position_ids=torch.arange(SEQ)[None])
    gapped = model(x, position_ids=torch.tensor([[0, 1, 2, 9, 10, 11, 12]]))
    shifted = model(x, position_ids=torch.arange(5, 5 + SEQ)[None])
    reads_positions = position not in ("none", "cope")
    assert ((gapped - plain).abs().max() > 1e-3) == reads_positions
    assert ((shifted - plain).abs().max() > 1e-3) == (position in ("sinusoidal", "learned"))


def test_alibi_and_t5_biases_at_gapped_positions_match_the_formula():
    positions = torch.tensor([[0, 1, 2, 9, 10, 11, 12]])
    x = tokens(batch=1)
    for position, bias in (
        ("alibi", lambda m: alibi_bias(HEADS, positions[0], positions[0], dtype=torch.float64)),
        ("t5", lambda m: m.position.t5(positions[0], positions[0])),
    ):
        model = perturbed(Transformer(config(position, causal=True)))
        hidden = model.embed(x)
        attn, q, k = qkv(model, x)
        context = model._context(hidden, positions, positions, True)
        expected = q @ k.transpose(-1, -2) / math.sqrt(DIM // HEADS) + bias(model)
        expected = expected.masked_fill(torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1), torch.finfo(expected.dtype).min)
        torch.testing.assert_close(attn.scores(model.blocks[0].norm1(hidden), context)[0][0], expected, rtol=0, atol=1e-12)
