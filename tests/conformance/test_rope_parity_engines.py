"""``posenc.rope_parity`` on what real code produces: the RoPE of mlx 0.32.4 / mlx-lm 0.32.2 with
each classic porting bug reproduced in it, and transformers 5.24's rotary tables.

Each bug is made the way it happens in a port: the engine's RoPE built from a misread config
(``rope_theta`` defaulted, ``rope_scaling`` dropped), with the other pairing of channels, or with
its attention factor changed. The check must name that bug, and must pass the correct engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")
rope_utils = pytest.importorskip("mlx_lm.models.rope_utils")
pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

from posenc import half_to_interleaved, rope_inv_freq  # noqa: E402
from posenc.parity import rope_parity  # noqa: E402

HEAD, HEADS, BASE, CONTEXT, TARGET = 64, 2, 500000.0, 256, 1024
LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": CONTEXT}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": CONTEXT}
LINEAR = {"rope_type": "linear", "factor": 4.0}
POSITIONS = torch.arange(0, TARGET, 3)  # inside and past the original context


def config(scaling: dict | None = None, base: float = BASE, **extra) -> dict:
    """A Llama config.json as transformers 4 wrote it (rope_theta and rope_scaling side by side)."""
    return {"model_type": "llama", "hidden_size": HEAD * HEADS, "num_attention_heads": HEADS,
            "num_key_value_heads": HEADS, "max_position_embeddings": TARGET, "rope_theta": base,
            "rope_scaling": scaling, **extra}


def queries() -> torch.Tensor:
    return torch.randn(1, HEADS, len(POSITIONS), HEAD, generator=torch.Generator().manual_seed(0))


def engine_rotates(rope, x: torch.Tensor) -> torch.Tensor:
    """mlx-lm applies its RoPE to (batch, heads, seq, dim) at offset 0; our rows are POSITIONS."""
    rows = []
    for row, position in enumerate(POSITIONS.tolist()):  # one position at a time, as a cache offset
        rows.append(np.array(rope(mx.array(x[:, :, row : row + 1].numpy()), offset=position)))
    return torch.from_numpy(np.concatenate(rows, axis=2))


def check(cfg: dict, rope, x: torch.Tensor | None = None, engine_input: torch.Tensor | None = None):
    x = queries() if x is None else x
    rotated = engine_rotates(rope, x if engine_input is None else engine_input)
    return rope_parity(cfg, reference=x, rotated=rotated, positions=POSITIONS)


@pytest.mark.parametrize("scaling", [None, LINEAR, LLAMA3, YARN], ids=["default", "linear", "llama3", "yarn"])
def test_the_correct_engine_matches(scaling: dict | None) -> None:
    result = check(config(scaling), rope_utils.initialize_rope(HEAD, BASE, False, scaling, TARGET))
    assert result.matches and result.diagnosis is None, result
    assert result.errors["config"] < result.tolerance / 10  # a margin, not a near miss


def test_base_defaulted() -> None:
    result = check(config(LLAMA3), rope_utils.initialize_rope(HEAD, 10000.0, False, LLAMA3, TARGET))
    assert not result.matches and result.diagnosis == "base", result


def test_llama3_rule_dropped() -> None:
    result = check(config(LLAMA3), rope_utils.initialize_rope(HEAD, BASE, False, None, TARGET))
    assert not result.matches and result.diagnosis == "scaling", result


def test_transformers5_config_read_by_old_code() -> None:
    # What mlx-lm 0.32.2 builds from a config saved by transformers 5.24 (the engine-parity page).
    result = check(config(LLAMA3), rope_utils.initialize_rope(HEAD, 10000.0, False, None, TARGET))
    assert not result.matches and result.diagnosis == "base and scaling", result


@pytest.mark.parametrize(("power", "bug"), [(2, "factor twice"), (0, "factor dropped")])
def test_yarn_attention_factor(power: int, bug: str) -> None:
    rope = rope_utils.initialize_rope(HEAD, BASE, False, YARN, TARGET)
    factor = rope_inv_freq(HEAD, base=BASE, scaling=YARN)[1]
    assert math.isclose(rope.mscale, factor, rel_tol=1e-6)  # mlx-lm multiplies q and k by it
    rope.mscale = factor**power
    result = check(config(YARN), rope)
    assert not result.matches and result.diagnosis == bug, result


def test_permutation_skipped() -> None:
    # The engine rotates adjacent pairs (Meta's layout) on a checkpoint in transformers' half layout.
    result = check(config(), rope_utils.initialize_rope(HEAD, BASE, True, None, TARGET))
    assert not result.matches and result.diagnosis == "permutation", result


def test_an_engine_that_permuted_the_weights_matches() -> None:
    # llama.cpp's way: permute the q/k rows at conversion, rotate adjacent pairs. Its output is in
    # the permuted order, which the check accepts.
    x = queries()
    result = check(config(), rope_utils.initialize_rope(HEAD, BASE, True, None, TARGET), x, half_to_interleaved(x))
    assert result.matches, result


def test_partial_rotary_denominator() -> None:
    cfg = config(partial_rotary_factor=0.5)
    rotated = HEAD // 2
    right = mx.fast.rope  # mx.fast.rope with `freqs` takes periods, one per rotated pair
    head_width = rope_inv_freq(HEAD, base=BASE)[0][: rotated // 2]  # base^(-2i/64): the bug
    rotated_width = rope_inv_freq(rotated, base=BASE)[0]  # base^(-2i/32): right

    def rope_with(inv_freq: torch.Tensor):
        periods = mx.array((1.0 / inv_freq).numpy().astype(np.float32))
        return lambda x, offset=0: right(x, rotated, traditional=False, base=None, scale=1.0, offset=offset,
                                         freqs=periods)

    assert check(cfg, rope_with(rotated_width)).matches
    result = check(cfg, rope_with(head_width))
    assert not result.matches and result.diagnosis == "denominator", result


def test_a_difference_no_known_bug_explains() -> None:
    # mlx-lm's SuScaledRoPE uses LongRoPE's long factors at every length; transformers uses the short
    # ones within the original context (tests/conformance/test_mlx_refs.py). Not one of the known bugs.
    pairs = HEAD // 2
    longrope = {"rope_type": "longrope", "original_max_position_embeddings": CONTEXT,
                "short_factor": [1.0 + i / pairs for i in range(pairs)],
                "long_factor": [1.0 + 3 * i / pairs for i in range(pairs)]}
    cfg = config(longrope)
    rope = rope_utils.initialize_rope(HEAD, BASE, False, longrope, TARGET)
    x = queries()[:, :, : CONTEXT // 3]  # positions within the original context
    rows = POSITIONS[: CONTEXT // 3]
    rotated = torch.from_numpy(np.concatenate(
        [np.array(rope(mx.array(x[:, :, i : i + 1].numpy()), offset=p)) for i, p in enumerate(rows.tolist())], axis=2))
    result = rope_parity(cfg, reference=x, rotated=rotated, positions=rows)
    assert not result.matches and result.diagnosis is None, result


@pytest.mark.parametrize(("read_base", "bug"), [(BASE, None), (10000.0, "base")])
def test_transformers_tables(read_base: float, bug: str | None) -> None:
    # cos/sin as transformers 5.24's LlamaRotaryEmbedding returns them, from a config whose base was
    # read right, or defaulted.
    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=HEAD * HEADS, num_attention_heads=HEADS,
                                              max_position_embeddings=TARGET,
                                              rope_parameters={**LLAMA3, "rope_theta": read_base}))
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), POSITIONS[None])  # (1, seq, head_dim)
    result = rope_parity(config(LLAMA3), cos=cos, sin=sin, positions=POSITIONS)
    assert result.matches == (bug is None) and result.diagnosis == bug, result
    assert result.layout == "half"
