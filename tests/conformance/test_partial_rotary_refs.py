"""Partial rotary against transformers 5.x model code: which channels rotate, and by which frequencies.

GPT-NeoX (Pythia, ``rotary_pct``) rotates the first quarter of each head inside its
``apply_rotary_pos_emb``; Phi (``partial_rotary_factor``) splits the head in its attention and
rotates the first part. In both, the frequency exponent divides by the rotated width, not the head
width. posenc: ``rope_cos_sin`` with ``partial_rotary_factor`` gives tables of the rotated width,
and ``apply_rope`` rotates the first channels and passes the rest through.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoConfig  # noqa: E402

from posenc import apply_rope, rope_cos_sin, rope_report  # noqa: E402

CONFIGS = Path(__file__).parent.parent / "data" / "configs"
MODELS = [("pythia-1.4b", "gpt_neox", "GPTNeoXRotaryEmbedding"), ("phi-2", "phi", "PhiRotaryEmbedding")]


@pytest.mark.parametrize(("name", "module_name", "rotary_class"), MODELS, ids=[m[0] for m in MODELS])
def test_partial_rotation_equals_the_model_code(name: str, module_name: str, rotary_class: str, tmp_path: Path) -> None:
    path = CONFIGS / f"{name}.json"
    shutil.copy(path, tmp_path / "config.json")
    config = AutoConfig.from_pretrained(tmp_path)
    module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    report = rope_report(path)
    head_dim, rotary_dim = report.head_dim, report.scheme.rotary_dim
    assert rotary_dim < head_dim

    positions = torch.tensor([[0, 3, 17, 400]])
    cos, sin = getattr(module, rotary_class)(config)(torch.zeros(1), positions)  # (1, seq, rotary_dim)
    assert cos.shape[-1] == rotary_dim
    q = torch.randn(1, 2, 4, head_dim, generator=torch.Generator().manual_seed(0))
    if module_name == "gpt_neox":  # its apply_rotary_pos_emb passes the channels past cos through
        want, _ = module.apply_rotary_pos_emb(q, q, cos, sin)
    else:  # Phi splits the head in its attention, then rotates the first part
        rotated, _ = module.apply_rotary_pos_emb(q[..., :rotary_dim], q[..., :rotary_dim], cos, sin)
        want = torch.cat([rotated, q[..., rotary_dim:]], dim=-1)

    ours_cos, ours_sin = rope_cos_sin(positions[0], head_dim, base=report.scheme.base,
                                      scaling={"rope_type": "default", "partial_rotary_factor": rotary_dim / head_dim})
    got = apply_rope(q, ours_cos, ours_sin)
    # transformers computes the angles in float32: an angle near 400 is off by up to half an ulp,
    # which moves each rotated pair by that angle times its size.
    angle_error = torch.finfo(torch.float32).eps * positions.max().item()
    torch.testing.assert_close(got, want, rtol=0, atol=2 * angle_error * q.abs().max().item())
    assert torch.equal(got[..., rotary_dim:], q[..., rotary_dim:])


def test_the_denominator_is_the_rotated_width() -> None:
    # The frequency exponent 2i / w divides by the rotated width w: with the head width instead, every
    # frequency but the first would be higher (slower turning is what the model was trained with).
    report = rope_report(CONFIGS / "pythia-1.4b.json")
    w = report.scheme.rotary_dim
    i = torch.arange(w // 2, dtype=torch.float64)
    torch.testing.assert_close(report.scheme.inv_freq, report.scheme.base ** (-2 * i / w), rtol=1e-15, atol=0)
    wrong = report.scheme.base ** (-2 * i / report.head_dim)
    assert bool((wrong[1:] > report.scheme.inv_freq[1:]).all())
