"""``posenc.rope_parity``'s promises stated one by one: the report's text and fields, the exact error
messages, the candidates each kind of config gets, the default tolerance, and ties.

The contract tests of tests/test_rope_parity.py check that bugs are named; these pin what a user
reads and relies on, found missing by mutation testing (docs/dev/mutation-testing.md).
"""

from __future__ import annotations

import re

import pytest
import torch

from posenc import apply_rope, interleaved_to_half, rope_cos_sin, rope_inv_freq, rope_report
from posenc.parity import KNOWN_BUGS, RopeParityReport, rope_parity

HEAD = 32
LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 512}
LLAMA3 = {**LLAMA, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 64}}
POSITIONS = torch.arange(0, 300, 5)
EPS32 = torch.finfo(torch.float32).eps


def exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


# ---------------------------------------------------------------------------------------------
# The report: its text and its dictionary
# ---------------------------------------------------------------------------------------------


def report(**changes) -> RopeParityReport:
    fields = {"compared": "cos/sin", "matches": True, "diagnosis": None, "errors": {"config": 1e-7, "base": 0.25},
              "tolerance": 2e-6, "positions": 60, "max_position": 295.0, "layout": "half"}
    return RopeParityReport(**{**fields, **changes})


def test_the_text_of_a_match() -> None:
    text = str(report(notes=["cos/sin cannot show the Q/K permutation"]))
    assert text == ("match: the engine's cos/sin tables equal posenc's reading of the config\n"
                    "  compared 60 positions (up to 295), half layout, tolerance 2e-06\n"
                    "  largest difference from each candidate:\n"
                    "    config             1e-07\n"
                    "    base               0.25\n"
                    "  note: cos/sin cannot show the Q/K permutation")


def test_the_text_of_a_diagnosis_that_positions_cannot_single_out() -> None:
    text = str(report(compared="rotated", matches=False, diagnosis="base", positions=1, max_position=0.0,
                      layout="interleaved", also_within_tolerance=["scaling", "base and scaling"]))
    assert text == (f"mismatch, looks like 'base': {KNOWN_BUGS['base']}\n"
                    "  compared 1 position (up to 0), interleaved layout, tolerance 2e-06\n"
                    "  cannot be told apart at these positions: scaling, base and scaling\n"
                    "  largest difference from each candidate:\n"
                    "    config             1e-07\n"
                    "    base               0.25")


@pytest.mark.parametrize(("compared", "what"), [("cos/sin", "cos/sin tables"), ("rotated", "rotated queries/keys")])
def test_the_text_of_an_unexplained_mismatch(compared: str, what: str) -> None:
    first = str(report(compared=compared, matches=False, positions=2)).split("\n")[:2]
    assert first == [f"mismatch: the engine's {what} match neither the config nor a known bug",
                     "  compared 2 positions (up to 295), half layout, tolerance 2e-06"]


def test_the_dictionary_explains_the_diagnosis() -> None:
    diagnosed = report(matches=False, diagnosis="scaling").to_dict()
    assert diagnosed["explanation"] == KNOWN_BUGS["scaling"] and diagnosed["diagnosis"] == "scaling"
    assert report().to_dict() == {**vars(report()), "explanation": None}


# ---------------------------------------------------------------------------------------------
# What rope_parity fills in
# ---------------------------------------------------------------------------------------------


def test_the_fields_of_a_table_comparison() -> None:
    cos, sin = rope_cos_sin(POSITIONS, HEAD, base=10000.0, dtype=torch.float32)
    result = rope_parity(LLAMA, cos=cos, sin=sin, positions=POSITIONS)
    assert (result.compared, result.matches, result.diagnosis) == ("cos/sin", True, None)
    assert (result.positions, result.max_position, result.layout) == (60, 295.0, "half")
    # A plain config at the default base can only have been read one way.
    assert set(result.errors) == {"config"} and result.also_within_tolerance == []
    assert result.notes == ["cos/sin cannot show the Q/K permutation: compare rotated queries or keys for that"]


def test_the_fields_of_a_rotated_comparison() -> None:
    x = torch.randn(len(POSITIONS), HEAD, generator=torch.Generator().manual_seed(0))
    result = rope_parity(LLAMA, reference=x, rotated=apply_rope(x, *rope_cos_sin(POSITIONS, HEAD)),
                         positions=POSITIONS)
    assert (result.compared, result.matches, result.layout, result.positions) == ("rotated", True, "half", 60)
    assert set(result.errors) == {"config", "permutation"} and result.notes == []


def test_an_interleaved_family_is_compared_in_its_own_layout() -> None:
    # ChatGLM rotates the first half of each head in (2i, 2i+1) pairs and passes the rest through.
    config = {"model_type": "chatglm", "hidden_size": 64, "num_attention_heads": 2, "kv_channels": HEAD,
              "seq_length": 512}
    scheme = rope_report(config).scheme
    rotary = scheme.rotary_dim
    assert rotary == HEAD // 2 and scheme.parameters["rope_theta"] == 10000.0
    x = torch.randn(len(POSITIONS), HEAD, generator=torch.Generator().manual_seed(0))

    def engine(layout: str, channels: torch.Tensor) -> torch.Tensor:
        cos, sin = rope_cos_sin(POSITIONS, rotary, layout=layout)
        return torch.cat((apply_rope(channels[:, :rotary], cos, sin, layout=layout), channels[:, rotary:]), -1)

    result = rope_parity(config, reference=x, rotated=engine("interleaved", x), positions=POSITIONS)
    assert result.matches and result.layout == "interleaved"
    # An engine that permuted the weights to rotate-half order at conversion: the same values, with
    # the rotated channels in that order.
    permuted = torch.cat((interleaved_to_half(x[:, :rotary]), x[:, rotary:]), -1)
    assert rope_parity(config, reference=x, rotated=engine("half", permuted), positions=POSITIONS).matches
    # The permutation skipped: rotate-half pairing on the checkpoint's channels.
    skipped = rope_parity(config, reference=x, rotated=engine("half", x), positions=POSITIONS)
    assert skipped.diagnosis == "permutation"


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_table_that_fits_both_layouts_is_read_in_the_configs(layout: str) -> None:
    # At position 0 every angle is 0: cos is all ones and sin all zeros in either layout.
    zero = torch.zeros(1)
    cos, sin = rope_cos_sin(zero, HEAD, dtype=torch.float32)
    assert rope_parity(LLAMA, cos=cos, sin=sin, positions=zero, layout=layout).layout == layout


# ---------------------------------------------------------------------------------------------
# The candidates
# ---------------------------------------------------------------------------------------------


def test_partial_rotary_with_scaling_names_the_ignored_scaling() -> None:
    # The "scaling" candidate keeps the partial width: plain RoPE over the rotated channels only.
    partial = {**LLAMA, "rope_theta": 50000.0, "partial_rotary_factor": 0.5,
               "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    rotary = HEAD // 2
    for base, bug in ((50000.0, "scaling"), (10000.0, "base and scaling")):
        inv_freq, _ = rope_inv_freq(rotary, base=base)
        angles = POSITIONS[:, None] * inv_freq  # (seq, rotary / 2)
        result = rope_parity(partial, cos=angles.cos(), sin=angles.sin(), positions=POSITIONS)
        assert result.diagnosis == bug and result.errors[bug] < 1e-12


@pytest.mark.parametrize("scaling", [{"rope_type": "linear", "factor": 4.0},
                                     {"rope_type": "dynamic", "factor": 4.0}])
def test_the_partial_rotary_denominator_keeps_the_scaling(scaling: dict) -> None:
    # The whole head width in the exponents, with the config's scaling (dynamic at this length).
    partial = {**LLAMA, "max_position_embeddings": 64, "partial_rotary_factor": 0.5, "rope_scaling": scaling}
    positions = torch.arange(0, 200, 3)
    whole = {**scaling, "max_position_embeddings": 64}
    inv_freq, _ = rope_inv_freq(HEAD, base=10000.0, scaling=whole, seq_len=int(positions.max()) + 1)
    angles = positions[:, None] * inv_freq[: HEAD // 4]  # (seq, rotary / 2)
    result = rope_parity(partial, cos=angles.cos(), sin=angles.sin(), positions=positions)
    assert result.diagnosis == "denominator" and result.errors["denominator"] < 1e-12


def test_dynamic_scaling_starts_past_the_largest_position() -> None:
    # The length is max(positions) + 1: up to position 63 a 64-position dynamic model is unscaled.
    dynamic = {**LLAMA, "max_position_embeddings": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}
    for last, scaled in ((63, False), (64, True)):
        positions = torch.arange(last + 1)
        inv_freq, _ = rope_inv_freq(HEAD, scaling={"rope_type": "dynamic", "factor": 4.0,
                                                   "max_position_embeddings": 64}, seq_len=last + 1)
        assert torch.equal(inv_freq, rope_inv_freq(HEAD)[0]) == (not scaled)
        angles = positions[:, None] * inv_freq  # (seq, pairs)
        assert rope_parity(dynamic, cos=angles.cos(), sin=angles.sin(), positions=positions).errors["config"] < 1e-12


def test_the_closest_candidate_is_the_diagnosis() -> None:
    # The tables of the ignored scaling, with a tolerance loose enough to let another bug in.
    cos, sin = rope_cos_sin(POSITIONS, HEAD, base=500000.0, dtype=torch.float64)
    errors = rope_parity(LLAMA3, cos=cos, sin=sin, positions=POSITIONS).errors
    assert errors["scaling"] < 1e-12 < errors["base"] < errors["config"]
    loose = rope_parity(LLAMA3, cos=cos, sin=sin, positions=POSITIONS, tolerance=(errors["base"] + errors["config"]) / 2)
    assert loose.diagnosis == "scaling" and "base" in loose.also_within_tolerance


def test_a_difference_equal_to_the_tolerance_counts_as_equal() -> None:
    cos, sin = rope_cos_sin(POSITIONS, HEAD, base=10000.0, dtype=torch.float32)
    off = rope_parity(LLAMA, cos=cos + 3e-3, sin=sin, positions=POSITIONS).errors["config"]
    assert rope_parity(LLAMA, cos=cos + 3e-3, sin=sin, positions=POSITIONS, tolerance=off).matches
    assert not rope_parity(LLAMA, cos=cos + 3e-3, sin=sin, positions=POSITIONS, tolerance=off * (1 - 1e-9)).matches


# ---------------------------------------------------------------------------------------------
# The default tolerance (documented in rope_parity's docstring)
# ---------------------------------------------------------------------------------------------


def angle_tolerance(max_angle: float, dtype: torch.dtype) -> float:
    return 4.0 * (EPS32 * (1.0 + max_angle) + torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_default_tolerance_of_tables(dtype: torch.dtype) -> None:
    yarn = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}}
    scheme = rope_report(yarn).scheme
    cos, sin = rope_cos_sin(POSITIONS, HEAD, scaling={k: v for k, v in scheme.parameters.items() if k != "rope_theta"},
                            dtype=dtype)
    result = rope_parity(yarn, cos=cos, sin=sin, positions=POSITIONS)
    # Times the largest attention factor of any candidate: the factor applied twice, factor ** 2.
    # The fastest pair turns by one radian per position in every candidate.
    assert "factor twice" in result.errors and scheme.attention_factor > 1
    expected = angle_tolerance(295.0 * 1.0, dtype) * scheme.attention_factor**2
    assert result.tolerance == pytest.approx(expected, rel=1e-12)


def test_the_default_tolerance_of_rotated_values_scales_with_them() -> None:
    x = 3.0 * torch.randn(len(POSITIONS), HEAD, generator=torch.Generator().manual_seed(1))
    result = rope_parity(LLAMA, reference=x, rotated=apply_rope(x, *rope_cos_sin(POSITIONS, HEAD)), positions=POSITIONS)
    expected = 2 * angle_tolerance(295.0, torch.float32) * float(x.abs().max())
    assert result.tolerance == pytest.approx(expected, rel=1e-12)
    small = x / (2 * float(x.abs().max()))  # below 1: the tolerance does not shrink with the values
    result = rope_parity(LLAMA, reference=small, rotated=apply_rope(small, *rope_cos_sin(POSITIONS, HEAD)),
                         positions=POSITIONS)
    assert result.tolerance == pytest.approx(2 * angle_tolerance(295.0, torch.float32), rel=1e-12)


def test_the_default_tolerance_of_rotated_values_grows_with_the_attention_factor() -> None:
    yarn = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}}
    scheme = rope_report(yarn).scheme
    cos, sin = rope_cos_sin(POSITIONS, HEAD, scaling={k: v for k, v in scheme.parameters.items() if k != "rope_theta"})
    x = torch.randn(len(POSITIONS), HEAD, generator=torch.Generator().manual_seed(2))
    result = rope_parity(yarn, reference=x, rotated=apply_rope(x, cos, sin), positions=POSITIONS)
    expected = 2 * angle_tolerance(295.0, torch.float32) * float(x.abs().max()) * scheme.attention_factor**2
    assert result.matches and result.tolerance == pytest.approx(expected, rel=1e-12)


def test_the_default_tolerance_follows_the_fastest_pair() -> None:
    # LongRoPE factors below 1 speed a pair up: the largest angle is then past position times 1.
    short = [0.5] + [1.0] * (HEAD // 2 - 1)
    longrope = {**LLAMA, "max_position_embeddings": 1024,
                "rope_scaling": {"rope_type": "longrope", "short_factor": short, "long_factor": [2.0] * (HEAD // 2),
                                 "original_max_position_embeddings": 512}}
    scheme = rope_report(longrope).scheme
    cos, sin = rope_cos_sin(POSITIONS, HEAD, scaling={k: v for k, v in scheme.parameters.items() if k != "rope_theta"},
                            dtype=torch.float32)
    result = rope_parity(longrope, cos=cos, sin=sin, positions=POSITIONS)
    factor = max(1.0, scheme.attention_factor) ** 2  # the factor applied twice, if there is one
    assert result.matches
    assert result.tolerance == pytest.approx(angle_tolerance(295.0 * 2.0, torch.float32) * factor, rel=1e-12)


def test_a_table_with_no_attention_factor_keeps_the_angle_tolerance() -> None:
    positions = torch.arange(10)
    cos, sin = rope_cos_sin(positions, HEAD, dtype=torch.float32)
    assert rope_parity(LLAMA, cos=cos, sin=sin, positions=positions).tolerance == pytest.approx(
        angle_tolerance(9.0, torch.float32), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# Error messages, word for word: they name the argument at fault
# ---------------------------------------------------------------------------------------------


def tables(n: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    return rope_cos_sin(POSITIONS[:n], HEAD, dtype=torch.float32)


NAN = torch.full((60, HEAD), float("nan"))
QK = torch.zeros(60, HEAD)


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({}, ValueError, "give either cos and sin, or reference and rotated (not both, not neither)"),
    ({"cos": tables()[0]}, ValueError, "cos and sin go together: give both"),
    ({"rotated": QK}, ValueError, "reference and rotated go together: give both"),
    ({"cos": tables()[0], "sin": tables(3)[1]}, ValueError,
     "cos and sin must have the same shape, got (60, 32) and (3, 32)"),
    ({"reference": QK, "rotated": QK[:3]}, ValueError,
     "reference and rotated must have the same shape, got (60, 32) and (3, 32)"),
    ({"cos": torch.zeros(60), "sin": torch.zeros(60)}, ValueError,
     "cos must have at least 2 dimensions (..., seq, width), got shape (60,)"),
    ({"reference": torch.zeros(60), "rotated": torch.zeros(60)}, ValueError,
     "reference must have at least 2 dimensions (..., seq, width), got shape (60,)"),
    ({"cos": NAN, "sin": tables()[1]}, ValueError, "cos must be finite; got a tensor containing NaN or inf"),
    ({"cos": tables()[0], "sin": NAN}, ValueError, "sin must be finite; got a tensor containing NaN or inf"),
    ({"reference": NAN, "rotated": QK}, ValueError, "reference must be finite; got a tensor containing NaN or inf"),
    ({"reference": QK, "rotated": NAN}, ValueError, "rotated must be finite; got a tensor containing NaN or inf"),
    ({"reference": QK.long(), "rotated": QK}, TypeError, "reference must have a floating-point dtype, got torch.int64"),
    ({"reference": QK, "rotated": QK.long()}, TypeError, "rotated must have a floating-point dtype, got torch.int64"),
    ({"cos": tables()[0][None].expand(2, -1, -1), "sin": tables()[1][None].expand(2, -1, -1)}, ValueError,
     "cos of shape (2, 60, 32): leading axes must have size 1 (one table for all rows); give the table of one "
     "sequence"),
    ({"cos": tables()[0][None], "sin": tables()[1][None].expand(2, -1, -1).clone()}, ValueError,
     "cos and sin must have the same shape, got (1, 60, 32) and (2, 60, 32)"),
    ({"reference": torch.zeros(1, 60, 16), "rotated": torch.zeros(1, 60, 16)}, ValueError,
     "reference and rotated must be 32 wide (the config's head width), got 16"),
    ({"cos": tables()[0], "sin": tables()[1], "positions": torch.full((60,), float("nan"))}, ValueError,
     "positions must be finite; got a tensor containing NaN or inf"),
    ({"cos": tables()[0], "sin": tables()[1], "layout": "complex"}, ValueError,
     "layout must be one of 'half', 'interleaved'; got 'complex'"),
    ({"cos": tables()[0], "sin": tables()[1], "tolerance": -1.0}, ValueError,
     "tolerance must be a finite number > 0, got -1.0"),
], ids=["neither", "cos-alone", "rotated-alone", "table-shapes", "tensor-shapes", "table-1d", "tensor-1d", "nan-cos",
        "nan-sin", "nan-reference", "nan-rotated", "integer-reference", "integer-rotated", "leading-axes",
        "leading-axes-sin", "head-width", "nan-positions", "layout", "tolerance"])
def test_error_messages(arguments: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=exactly(message)):
        rope_parity(LLAMA, **arguments)


def test_proportional_rope_is_refused_in_words() -> None:
    config = {**LLAMA, "rope_scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.5}}
    cos, sin = tables()
    with pytest.raises(ValueError, match=exactly("rope_type 'proportional' (Gemma 4) is not supported by rope_parity")):
        rope_parity(config, cos=cos, sin=sin)
