"""Contracts of the two-languages experiment (posenc.experiments.two_languages): the prose filter, the
corpora, what each loss is of, on the tiniest configurations."""

from __future__ import annotations

import pydoc_data.topics
import pytest
import torch

from posenc.experiments import two_languages as experiment
from posenc.models import CausalLM, CharCorpus, TrainingLog, next_token_loss, stdlib_corpus, token_losses

TINY = {**experiment.SHORT, "train_len": 4, "factor": 2, "batch": 2, "warmup": 1, "heads": 2, "layers": 1,
        "train_chars": 300, "group": 2, "steps": 2, "dim": 8, "eval_tokens": 16}
TEXT = CharCorpus.from_text("the quick brown fox jumps over the lazy dog " * 3,
                            "pack my box with five dozen liquor jugs, then sphinx of black quartz judge my vow")


def test_prose_keeps_paragraphs_that_end_with_a_full_stop_on_one_line() -> None:
    text = "A first\n   paragraph.\n\nNot a sentence\n\n  Second one.  \n"
    assert experiment.prose(text) == "A first paragraph.\nSecond one."


@pytest.mark.parametrize("paragraph", [
    "Ends with dots...",
    ">>> x = 1\nA session.",
    "target ::= expression.",
    "a code line",
])
def test_prose_drops_code_sessions_grammar_and_ellipses(paragraph: str) -> None:
    assert experiment.prose(f"Kept.\n\n{paragraph}\n\nAlso kept.") == "Kept.\nAlso kept."


@pytest.mark.parametrize("underline", ["*****", "=====", "-----", "~~~~~", "^^^^^"])
def test_prose_drops_underlined_headings(underline: str) -> None:
    assert experiment.prose(f"Heading.\n{underline}\n\nBody text.") == "Body text."


@pytest.mark.parametrize("underline", ["*****", "=====", "-----", "~~~~~", "^^^^^"])
def test_prose_drops_a_heading_and_its_underline_but_not_the_lines_around_them(underline: str) -> None:
    text = f"Text above.\nA heading of words\n{underline}\nText below."
    assert experiment.prose(text) == "Text above. Text below."
    # ...and a heading on the first line of its paragraph.
    assert experiment.prose(f"A heading\n{underline}\nText below.") == "Text below."


def test_prose_keeps_a_line_of_marks_with_nothing_above_it() -> None:
    assert experiment.prose("=====\nNot a heading.") == "===== Not a heading."


def test_prose_keeps_the_first_and_last_characters_of_a_paragraph() -> None:
    assert experiment.prose("Xenon is a gas. X") == ""
    assert experiment.prose("Xenon is a noble gas.\n\nXX marks the spot.") == "Xenon is a noble gas.\nXX marks the spot."


def test_prose_keeps_a_line_of_mixed_marks() -> None:
    assert experiment.prose("One.\n*=*=\nTwo.") == "One. *=*= Two."


def test_prose_separates_paragraphs_at_lines_holding_only_spaces() -> None:
    assert experiment.prose("First.\n   \nSecond.") == "First.\nSecond."


def test_english_texts_hold_out_every_fifth_topic() -> None:
    train, held_out = experiment.english_texts()
    topics = sorted(pydoc_data.topics.topics)
    texts = [experiment.prose(pydoc_data.topics.topics[t]) for t in topics]
    assert held_out == "\n".join(texts[0::5])
    assert train == "\n".join(t for i, t in enumerate(texts) if i % 5)


def test_corpora_cut_both_languages_to_the_same_sizes() -> None:
    corpora = experiment.corpora(TINY)
    assert list(corpora) == ["python", "english"]
    python = stdlib_corpus(["argparse", "difflib", "configparser", "inspect"], ["textwrap", "shlex"])
    english = CharCorpus.from_text(*experiment.english_texts())
    for got, full in ((corpora["python"], python), (corpora["english"], english)):
        assert got.chars == full.chars
        assert torch.equal(got.train, full.train[:300]) and torch.equal(got.held_out, full.held_out[:17])


def test_make_model_has_room_for_the_long_windows_and_is_seeded() -> None:
    model = experiment.make_model({**TINY, "factor": 3}, 30, "learned", seed=2)
    config = model.transformer.config
    assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (30, 8, 2, 1, 12)
    assert config.position == "learned" and config.causal
    again = experiment.make_model({**TINY, "factor": 3}, 30, "learned", seed=2)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    other = experiment.make_model({**TINY, "factor": 3}, 30, "learned", seed=3)
    assert not torch.equal(other.transformer.embed.embedding.weight, model.transformer.embed.embedding.weight)


def test_train_model_trains_on_training_length_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)),
                    weights=[p.detach().clone() for p in model.parameters()])
        return TrainingLog(losses=[3.0, 2.0], seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    model, losses = experiment.train_model(TINY, TEXT, "alibi", seed=5)
    assert losses == [3.0, 2.0]
    assert seen["model"] is model and seen["loss_fn"] is next_token_loss
    assert seen["kwargs"] == {"steps": 2, "lr": TINY["lr"], "seed": 5, "warmup": 1}
    assert torch.equal(seen["batch"], TEXT.windows(4, 2)(torch.Generator().manual_seed(0)))
    fresh = experiment.make_model(TINY, TEXT.vocab_size, "alibi", seed=5)
    assert all(torch.equal(a, b) for a, b in zip(seen["weights"], fresh.parameters()))


def test_evaluate_reads_the_same_characters_short_and_long() -> None:
    model = experiment.make_model(TINY, TEXT.vocab_size, "rope", seed=0).eval()
    got = experiment.evaluate(TINY, TEXT, model)
    with torch.no_grad():
        short = token_losses(model, TEXT.held_out_windows(4, 16))
        long = token_losses(model, TEXT.held_out_windows(8, 16))
    assert got["loss"] == [short.mean().item(), long.mean().item()]
    by_position = long.mean(0)
    want = [(by_position[i] + by_position[i + 1]).item() / 2 for i in range(0, 8, 2)]
    assert got["curve"] == pytest.approx(want, abs=1e-6)
    assert list(got) == ["loss", "curve"]


def test_run_names_every_metric_by_language_and_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    other = CharCorpus.from_text("abc abc abc abc", "cab cab cab cab")

    def fake_train_model(config, data, position, seed):
        calls.append((data, position, seed))
        return position, [100.0] * 5 + [float(len(position))] * 20

    def fake_corpora(config):
        assert config["train_chars"] == 300 and config["eval_tokens"] == 16
        return {"python": TEXT, "english": other}

    monkeypatch.setattr(experiment, "corpora", fake_corpora)
    monkeypatch.setattr(experiment, "train_model", fake_train_model)
    monkeypatch.setattr(experiment, "evaluate", lambda config, data, model: {"loss": [len(model), 0.0],
                                                                               "curve": [data is TEXT]})
    metrics = experiment.run(TINY, seed=6)
    assert calls == [(d, p, 6) for d in (TEXT, other) for p in experiment.ENCODINGS]
    want = {}
    for language, data in (("python", TEXT), ("english", other)):
        for position in experiment.ENCODINGS:
            want |= {f"train_loss/{language}/{position}": float(len(position)),
                     f"loss/{language}/{position}": [len(position), 0.0],
                     f"curve/{language}/{position}": [data is TEXT]}
    assert metrics == want


def test_run_train_loss_of_fewer_than_20_steps_is_their_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "corpora", lambda config: {"python": TEXT})
    monkeypatch.setattr(experiment, "train_model", lambda config, data, position, seed: (None, [1.0, 2.0, 6.0]))
    monkeypatch.setattr(experiment, "evaluate", lambda config, data, model: {})
    metrics = experiment.run(TINY, seed=0)
    assert set(metrics.values()) == {3.0}


def test_a_tiny_run_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "corpora", lambda config: {"python": TEXT})
    monkeypatch.setattr(experiment, "ENCODINGS", ("learned", "rope"))
    metrics = experiment.run(TINY, seed=0)
    assert experiment.run(TINY, seed=0) == metrics
    assert len(metrics) == 6
