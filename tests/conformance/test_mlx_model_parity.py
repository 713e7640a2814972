r"""End-to-end parity: a transformers Llama converted to mlx-lm's ``llama`` model, on the CPU.

Versions run and read: transformers 5.24 (``LlamaForCausalLM``, ``Phi3ForCausalLM``), mlx 0.32.4
(``mlx[cpu]``), mlx-lm 0.32.2 (``mlx_lm/models/llama.py``, ``phi3.py``, ``rope_utils.py``,
``mlx_lm/utils.py`` ``load_model``). The pages ``examples/08_todays_models/plot_engine_parity.py``
and ``plot_rope_porting_bugs.py`` print the same measurements.

The model: 2 layers, hidden 64, 4 query heads and 2 key/value heads of width 16, vocabulary 97,
``rope_theta`` 500 000, seeded random weights of standard deviation 0.2 (attention far from uniform,
so that positions matter), float32, evaluation mode; 64 tokens, the scaled types stretching an
original context of 16 positions by 4. The conversion copies the state dict under its own names and
permutes nothing: transformers rotates pairs ``(i, i + d/2)`` and so does mlx-lm's ``llama`` unless
``rope_traditional`` is set. transformers 5.24 keeps the RoPE settings in ``rope_parameters``;
mlx-lm 0.32.2's ``llama.ModelArgs`` reads ``rope_theta`` and ``rope_scaling``, which the conversion
writes (test_transformers5_config_loses_rope_settings shows what happens otherwise).

Tolerance: a relative change :math:`\|\Delta\ell_t\| / \|\ell_t\|` of the logits of each position
:math:`t` below ``TOL = 1e-4``. Both engines compute in float32 (unit roundoff 6e-8) but in different
orders: transformers forms the angles from float32 ``inv_freq``, MLX its own way
(``test_mlx_refs.py``), and the matrix products sum differently; each logit ends thousands of such
operations. Measured: at most 3.4e-6 for the four RoPE types (max absolute difference 1.7e-5 at
logits up to 7.2), so TOL leaves a margin of more than 10. Each porting bug below moves some
position by more than ``10 * TOL``, and none moves position 0 (every angle is 0 there and the
first query attends to itself only), so a parity test must look past the first token.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.rope import half_to_interleaved, rope_inv_freq

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
from mlx_lm.models import llama, phi3  # noqa: E402
from mlx_lm.utils import load_model  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Phi3Config, Phi3ForCausalLM  # noqa: E402

TOL = 1e-4
HEAD, BASE, CONTEXT, LENGTH = 16, 500000.0, 16, 64
SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=97, max_position_embeddings=LENGTH, initializer_range=0.2,
             tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
ROPES = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": CONTEXT},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": CONTEXT},
}
TOKENS = torch.randint(0, 97, (1, LENGTH), generator=torch.Generator().manual_seed(1))


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _reference(rope: dict, family: tuple = (LlamaConfig, LlamaForCausalLM), **extra) -> torch.nn.Module:
    torch.manual_seed(0)
    config = family[0](**SHAPE, rope_parameters={**rope, "rope_theta": BASE}, **extra)
    return family[1](config).eval()


def _mlx_args(config) -> dict:  # type: ignore[no-untyped-def]
    """A transformers 5.24 config with its RoPE settings under the keys mlx-lm 0.32.2 reads."""
    args = config.to_dict()
    rope = dict(args.pop("rope_parameters"))
    args["rope_theta"] = rope.pop("rope_theta")
    args["rope_scaling"] = None if rope["rope_type"] == "default" else rope
    return args


def _convert(  # type: ignore[no-untyped-def]
    model: torch.nn.Module, module=llama, state: dict | None = None, **override
):
    """The MLX model of ``module`` (llama or phi3) holding ``state`` (default: the model's own)."""
    engine = module.Model(module.ModelArgs.from_dict({**_mlx_args(model.config), **override}))
    state = model.state_dict() if state is None else state
    engine.load_weights([(name, mx.array(t.detach().numpy())) for name, t in state.items()], strict=True)
    return engine


def _logits(model) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Next-token logits (LENGTH, vocab) as float64, from a transformers or an MLX model."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(TOKENS).logits[0].double()
    return torch.from_numpy(np.array(model(mx.array(TOKENS.numpy()))[0])).double()


def _change(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative logit change of each position, (LENGTH,)."""
    return (got - ref).norm(dim=-1) / ref.norm(dim=-1)


def _rotate_with(inv_freq: torch.Tensor):  # type: ignore[no-untyped-def]
    """A RoPE callable for mlx-lm's attention: the first 2 * len(inv_freq) channels, half layout."""
    periods = mx.array((1.0 / inv_freq).numpy().astype(np.float32))  # mx.fast.rope takes periods
    return lambda x, offset=0: mx.fast.rope(x, 2 * len(inv_freq), traditional=False, base=None, scale=1.0,
                                            offset=offset, freqs=periods)


def _set_rope(engine, **attributes):  # type: ignore[no-untyped-def]
    """Replace each layer's RoPE module (``rope=``) or set attributes of it (``mscale=``...)."""
    for layer in engine.layers:
        for key, value in attributes.items():
            setattr(layer.self_attn if key == "rope" else layer.self_attn.rope, key, value)
    return engine


def _assert_bug_visible(got: torch.Tensor, want: torch.Tensor) -> None:
    """Position 0 bit-identical; some later position moved beyond 10 * TOL."""
    assert torch.equal(got[0], want[0])
    assert float(_change(got, want)[1:].max()) > 10 * TOL


@pytest.fixture(scope="module")
def models() -> dict:
    built = {name: _reference(rope) for name, rope in ROPES.items()}
    built["partial"] = _reference(ROPES["default"], (Phi3Config, Phi3ForCausalLM), partial_rotary_factor=0.5)
    return built


@pytest.fixture(scope="module")
def engine_logits(models: dict) -> dict:
    """Logits of the correct MLX conversion of each model."""
    return {name: _logits(_convert(model, phi3 if name == "partial" else llama)) for name, model in models.items()}


# ---------------------------------------------------------------------------------------------
# Parity
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ROPES))
def test_llama_logits_match_transformers(models: dict, engine_logits: dict, name: str) -> None:
    want, got = _logits(models[name]), engine_logits[name]
    assert float(_change(got, want).max()) < TOL
    assert torch.equal(got.argmax(-1), want.argmax(-1))


@pytest.mark.parametrize("name", list(ROPES))
def test_engine_rope_holds_the_config_frequencies(models: dict, name: str) -> None:
    rope = _convert(models[name]).layers[0].self_attn.rope
    want, attention_factor = rope_inv_freq(HEAD, base=BASE, scaling=ROPES[name])
    if hasattr(rope, "_freqs"):  # Llama3RoPE and YarnRoPE store float32 periods 1 / theta_i
        got = 1.0 / torch.from_numpy(np.array(rope._freqs)).double()
        torch.testing.assert_close(got, want, rtol=16 * 2.0**-24, atol=0)
    else:  # nn.RoPE: base ** (-2i / dims), positions multiplied by scale
        assert (rope.base, rope.dims, rope.traditional) == (BASE, HEAD, False)
        torch.testing.assert_close(rope.scale * BASE ** -(torch.arange(0, HEAD, 2).double() / HEAD), want)
    assert getattr(rope, "mscale", 1.0) == pytest.approx(attention_factor, rel=1e-12)


def test_partial_rotary_phi3_logits_match_transformers(models: dict, engine_logits: dict) -> None:
    # Phi-3 code in both engines, partial_rotary_factor 0.5: 8 of 16 channels at base^(-2i/8).
    want, got = _logits(models["partial"]), engine_logits["partial"]
    assert float(_change(got, want).max()) < TOL
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    # Replacing the engine's rotation by posenc's frequencies over the rotated width changes nothing.
    right = rope_inv_freq(HEAD, base=BASE, scaling={"partial_rotary_factor": 0.5})[0]
    swapped = _set_rope(_convert(models["partial"], phi3), rope=_rotate_with(right))
    assert float(_change(_logits(swapped), got).max()) < TOL


def test_interleaved_weights_with_traditional_rope_match(models: dict) -> None:
    # The Q/K permutation at conversion: rows of each head reordered to interleaved pairs, run with
    # rope_traditional=True, give the transformers logits again.
    def to_interleaved(weight: torch.Tensor, heads: int) -> torch.Tensor:
        rows = weight.T.reshape(weight.shape[1], heads, -1)  # (in, heads, head_dim)
        return half_to_interleaved(rows).reshape(weight.shape[1], -1).T  # (heads * head_dim, in)

    heads = {"q_proj": SHAPE["num_attention_heads"], "k_proj": SHAPE["num_key_value_heads"]}
    state = {name: next((to_interleaved(t, n) for key, n in heads.items() if key in name), t)
             for name, t in models["default"].state_dict().items()}
    engine = _convert(models["default"], state=state, rope_traditional=True)
    assert float(_change(_logits(engine), _logits(models["default"])).max()) < TOL


# ---------------------------------------------------------------------------------------------
# Porting bugs: each leaves position 0 alone and moves later logits beyond the tolerance
# ---------------------------------------------------------------------------------------------


def test_bug_qk_permutation_skipped(models: dict, engine_logits: dict) -> None:
    # Interleaved pairs rotated on weights laid out for the half layout.
    _assert_bug_visible(_logits(_convert(models["default"], rope_traditional=True)), engine_logits["default"])


def test_bug_rope_theta_defaulted(models: dict, engine_logits: dict) -> None:
    _assert_bug_visible(_logits(_convert(models["default"], rope_theta=10000.0)), engine_logits["default"])


@pytest.mark.parametrize("power", [2, 0], ids=["twice", "dropped"])
def test_bug_yarn_attention_factor(models: dict, engine_logits: dict, power: int) -> None:
    # mlx-lm multiplies q and k by mscale; applied twice it is mscale**2, dropped it is 1.
    factor = rope_inv_freq(HEAD, base=BASE, scaling=ROPES["yarn"])[1]
    assert factor == pytest.approx(0.1 * np.log(4.0) + 1.0, rel=1e-12)
    engine = _set_rope(_convert(models["yarn"]), mscale=factor**power)
    _assert_bug_visible(_logits(engine), engine_logits["yarn"])


def test_bug_llama3_rule_dropped(models: dict, engine_logits: dict) -> None:
    _assert_bug_visible(_logits(_convert(models["llama3"], rope_scaling=None)), engine_logits["llama3"])


def test_bug_partial_rotary_over_the_head_width(models: dict, engine_logits: dict) -> None:
    # The first 4 frequencies of base^(-2i/16) instead of base^(-2i/8).
    wrong = rope_inv_freq(HEAD, base=BASE)[0][: HEAD // 4]
    engine = _set_rope(_convert(models["partial"], phi3), rope=_rotate_with(wrong))
    _assert_bug_visible(_logits(engine), engine_logits["partial"])


def test_transformers5_config_loses_rope_settings(models: dict, engine_logits: dict, tmp_path: Path) -> None:
    # transformers 5.24's save_pretrained writes only rope_parameters; mlx-lm 0.32.2's
    # llama.ModelArgs.from_dict drops unknown keys, so load_model runs the Llama 3 model at the
    # default base without scaling. A later mlx-lm that reads rope_parameters fails this test.
    models["llama3"].save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert [key for key in saved if "rope" in key] == ["rope_parameters"]
    loaded, _ = load_model(tmp_path)
    assert (loaded.args.rope_theta, loaded.args.rope_scaling) == (10000, None)
    _assert_bug_visible(_logits(loaded), engine_logits["llama3"])
