"""Contracts of the train-short-test-long experiment (posenc.experiments.train_short_test_long): the
models, the tables, what each loss and change is of, on the tiniest configurations."""

from __future__ import annotations

import pytest
import torch

from posenc.experiments import train_short_test_long as experiment
from posenc.models import CausalLM, CharCorpus, TrainingLog, next_token_loss, stdlib_corpus, token_losses

TINY = {**experiment.SHORT, "train_len": 4, "factors": [1, 2], "batch": 2, "warmup": 1, "heads": 2, "layers": 1,
        "eval_tokens": 16, "group": 2, "steps": 2, "dim": 8}
#: T5's buckets need a training length past their 16 exact ones.
T5_TINY = {**TINY, "train_len": 20, "eval_tokens": 40, "group": 8}
TEXT = CharCorpus.from_text("the quick brown fox jumps over the lazy dog " * 3,
                            "pack my box with five dozen liquor jugs, then sphinx of black quartz judge my vow")


def test_the_corpus_is_the_standard_library_modules() -> None:
    corpus = experiment.corpus()
    want = stdlib_corpus(["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"],
                         ["textwrap", "shutil"])
    assert corpus.chars == want.chars
    assert torch.equal(corpus.train, want.train) and torch.equal(corpus.held_out, want.held_out)


def test_model_config_has_room_for_the_longest_evaluation() -> None:
    config = experiment.model_config({**TINY, "factors": [1, 3, 2]}, 30, "t5")
    assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (30, 8, 2, 1, 12)
    assert config.position == "t5" and config.causal and config.t5_max_distance == 4


@pytest.mark.parametrize(("position", "shape"), [("learned", (40, 8)), ("t5", None)])
def test_position_table_is_a_copy_of_the_trained_parameters(position: str, shape) -> None:
    torch.manual_seed(0)
    model = CausalLM(experiment.model_config(T5_TINY, 30, position))
    table = experiment.position_table(model, position)
    encoding = model.transformer.position
    weight = encoding.table.weight if position == "learned" else encoding.t5.relative_attention_bias.weight
    assert torch.equal(table, weight) and not table.requires_grad
    if shape:
        assert table.shape == shape
    else:
        assert table.shape[1] == 2  # (buckets, heads)
    with torch.no_grad():
        weight.add_(1.0)
    assert not torch.equal(table, weight)


def test_train_model_is_seeded_and_reports_the_mean_of_the_last_20_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)),
                    weights=[p.detach().clone() for p in model.parameters()])
        return TrainingLog(losses=seen.get("losses", [50.0] * 5 + [float(i) for i in range(20)]), seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    model, loss = experiment.train_model(TINY, TEXT, "rope", seed=3)
    assert loss == sum(range(20)) / 20
    assert seen["model"] is model and seen["loss_fn"] is next_token_loss
    assert seen["kwargs"] == {"steps": 2, "lr": TINY["lr"], "seed": 3, "warmup": 1}
    assert torch.equal(seen["batch"], TEXT.windows(4, 2)(torch.Generator().manual_seed(0)))
    assert model.transformer.config.position == "rope" and model.transformer.config.vocab_size == TEXT.vocab_size
    torch.manual_seed(3)
    fresh = CausalLM(experiment.model_config(TINY, TEXT.vocab_size, "rope"))
    assert all(torch.equal(a, b) for a, b in zip(seen["weights"], fresh.parameters()))
    seen["losses"] = [1.0, 2.0, 6.0]  # fewer than 20 steps: the mean of all
    assert experiment.train_model(TINY, TEXT, "rope", seed=3)[1] == 3.0


def test_evaluate_compares_each_character_read_short_and_long() -> None:
    torch.manual_seed(0)
    model = CausalLM(experiment.model_config(TINY, TEXT.vocab_size, "rope")).eval()
    got = experiment.evaluate(TINY, TEXT, model)
    with torch.no_grad():  # each of the 16 characters' losses, in text order
        short = token_losses(model, TEXT.held_out_windows(4, 16)).flatten()
        long = token_losses(model, TEXT.held_out_windows(8, 16)).flatten()
    assert got["loss"] == [short.mean().item(), long.mean().item()]
    change = [sum((long - short)[w * 8 + i].item() for w in range(2)) / 2 for i in range(8)]  # by position in 8
    torch.testing.assert_close(torch.tensor(got["change_curve"]),
                               torch.tensor([(change[i] + change[i + 1]) / 2 for i in range(0, 8, 2)]))
    assert got["just_past"] == pytest.approx(sum(change[4:8]) / 4, abs=1e-6)
    assert got["farthest"] == pytest.approx(sum(change[-4:]) / 4, abs=1e-6)
    first = [(long - short)[w * 8 + i].abs().item() for w in range(2) for i in range(4)]
    assert got["same_context_gap"] == pytest.approx(max(first), abs=1e-7)
    assert list(got) == ["loss", "change_curve", "just_past", "farthest", "same_context_gap"]


def test_evaluate_just_past_and_farthest_differ_for_four_lengths() -> None:
    torch.manual_seed(0)
    config = {**TINY, "factors": [1, 4], "eval_tokens": 32, "group": 4}
    model = CausalLM(experiment.model_config(config, TEXT.vocab_size, "learned")).eval()
    got = experiment.evaluate(config, TEXT, model)
    with torch.no_grad():
        short = token_losses(model, TEXT.held_out_windows(4, 32)).flatten()
        long = token_losses(model, TEXT.held_out_windows(16, 32)).flatten()
    change = ((long - short).view(2, 16)).mean(0)
    assert got["just_past"] == pytest.approx(change[4:8].mean().item(), abs=1e-6)
    assert got["farthest"] == pytest.approx(change[12:].mean().item(), abs=1e-6)
    assert len(got["change_curve"]) == 4


def _learned_model() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(experiment.model_config(TINY, 30, "learned"))


def test_table_metrics_of_a_learned_table() -> None:
    model = _learned_model()
    before = experiment.position_table(model, "learned")
    with torch.no_grad():
        model.transformer.position.table.weight[1, 2] += 0.5  # a trained row moves by 0.5
        model.transformer.position.table.weight[6, 0] -= 2.0  # an untrained one by 2
    after = model.transformer.position.table.weight.detach()
    got = experiment.table_metrics(TINY, model, "learned", before)
    assert got["trained_row_change"] == pytest.approx(0.5) and got["untrained_row_change"] == pytest.approx(2.0)
    assert got["trained_row_norm"] == pytest.approx(after[:4].norm(dim=1).mean().item())
    assert got["untrained_row_norm"] == pytest.approx(after[4:].norm(dim=1).mean().item())
    with torch.no_grad():
        tokens = model.transformer.embed(torch.arange(30))
    assert got["token_norm"] == pytest.approx(tokens.norm(dim=1).mean().item())
    assert list(got) == ["trained_row_norm", "untrained_row_norm", "token_norm", "trained_row_change",
                         "untrained_row_change"]


def test_table_metrics_of_the_t5_bias() -> None:
    torch.manual_seed(0)
    model = CausalLM(experiment.model_config(T5_TINY, 30, "t5"))
    before = experiment.position_table(model, "t5")
    with torch.no_grad():
        model.transformer.position.t5.relative_attention_bias.weight[2, 1] += 3.0
        model.transformer.position.t5.relative_attention_bias.weight[0, 0] -= 1.0
    got = experiment.table_metrics(T5_TINY, model, "t5", before)
    want = [0.0] * before.shape[0]
    want[0], want[2] = 1.0, 3.0
    assert list(got) == ["bucket_change"]
    assert got["bucket_change"] == pytest.approx(want)


def test_run_names_every_metric_and_compares_tables_with_their_seeded_start(monkeypatch: pytest.MonkeyPatch) -> None:
    trained, tabled = [], []

    def fake_train_model(config, data, position, seed):
        assert data is TEXT
        torch.manual_seed(seed)
        model = CausalLM(experiment.model_config(config, data.vocab_size, position))
        trained.append((position, seed))
        return model, float(len(position))

    def fake_table_metrics(config, model, position, before):
        tabled.append(position)
        assert torch.equal(before, experiment.position_table(model, position))  # the same seeded start
        return {"x": position}

    monkeypatch.setattr(experiment, "corpus", lambda: TEXT)
    monkeypatch.setattr(experiment, "train_model", fake_train_model)
    monkeypatch.setattr(experiment, "evaluate", lambda config, data, model: {"loss": [1.0], "farthest": 2.0})
    monkeypatch.setattr(experiment, "table_metrics", fake_table_metrics)
    metrics = experiment.run(T5_TINY, seed=4)
    assert trained == [(p, 4) for p in experiment.ENCODINGS]
    assert tabled == ["learned", "t5"]
    want = {}
    for position in experiment.ENCODINGS:
        want |= {f"train_loss/{position}": float(len(position)), f"loss/{position}": [1.0],
                 f"farthest/{position}": 2.0}
    want |= {"learned/x": "learned", "t5/x": "t5"}
    assert metrics == want


def test_a_tiny_run_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "corpus", lambda: TEXT)
    monkeypatch.setattr(experiment, "ENCODINGS", ("learned", "t5"))
    metrics = experiment.run(T5_TINY, seed=0)
    assert experiment.run(T5_TINY, seed=0) == metrics
    assert metrics["learned/untrained_row_change"] == 0.0  # rows past train_len get no gradient
    assert metrics["learned/trained_row_change"] > 0.0
