"""M-RoPE against transformers 5.x: Qwen2-VL's blocked sections and Qwen3-VL's interleaved ones."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig  # noqa: E402
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding  # noqa: E402
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig  # noqa: E402
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding  # noqa: E402

from posenc import apply_rope, mrope_cos_sin, rope_cos_sin  # noqa: E402

# (model, reference class, config class, sections, interleaved); head_dim 128 as in the released models.
MODELS = [
    ("Qwen2-VL", Qwen2VLRotaryEmbedding, Qwen2VLTextConfig, [16, 24, 24], False),
    ("Qwen3-VL", Qwen3VLTextRotaryEmbedding, Qwen3VLTextConfig, [24, 20, 20], True),
]
HEAD_DIM, BASE = 128, 1_000_000.0


def positions() -> torch.Tensor:
    """(3, batch 2, seq 12): text, then a 2 x 3 image grid at one time, then text again."""
    text = torch.arange(3)
    t = torch.full((6,), 3)
    h = 3 + torch.arange(2).repeat_interleave(3)
    w = 3 + torch.arange(3).repeat(2)
    after = 6 + torch.arange(3)
    row = torch.stack([torch.cat([text, t, after]), torch.cat([text, h, after]), torch.cat([text, w, after])])
    return torch.stack([row, row + 5], dim=1)  # (3, 2, 12)


def reference(cls, config_cls, sections: list[int], position_ids: torch.Tensor):  # type: ignore[no-untyped-def]
    config = config_cls(hidden_size=HEAD_DIM * 2, num_attention_heads=2, head_dim=HEAD_DIM,
                        rope_parameters={"rope_type": "default", "rope_theta": BASE, "mrope_section": sections})
    rotary = cls(config)
    return rotary(torch.zeros(1, dtype=torch.float32), position_ids)


@pytest.mark.parametrize(("name", "cls", "config_cls", "sections", "interleaved"), MODELS, ids=[m[0] for m in MODELS])
def test_cos_sin_equal_transformers(name, cls, config_cls, sections, interleaved) -> None:  # type: ignore[no-untyped-def]
    position_ids = positions()
    want_cos, want_sin = reference(cls, config_cls, sections, position_ids)
    cos, sin = mrope_cos_sin(position_ids, HEAD_DIM, sections, base=BASE, interleaved=interleaved)
    assert cos.shape == want_cos.shape == (2, 12, HEAD_DIM)
    # transformers computes the angles in float32; posenc in float64, rounded once.
    torch.testing.assert_close(cos, want_cos, rtol=0, atol=2e-6)
    torch.testing.assert_close(sin, want_sin, rtol=0, atol=2e-6)


@pytest.mark.parametrize(("name", "cls", "config_cls", "sections", "interleaved"), MODELS, ids=[m[0] for m in MODELS])
def test_text_tokens_get_plain_rope(name, cls, config_cls, sections, interleaved) -> None:  # type: ignore[no-untyped-def]
    position_ids = torch.arange(9).expand(3, 1, 9)
    cos, sin = mrope_cos_sin(position_ids, HEAD_DIM, sections, base=BASE, interleaved=interleaved, dtype=torch.float64)
    plain_cos, plain_sin = rope_cos_sin(9, HEAD_DIM, base=BASE, dtype=torch.float64)
    assert torch.equal(cos[0], plain_cos) and torch.equal(sin[0], plain_sin)


def test_blocked_and_interleaved_differ_on_images_only() -> None:
    position_ids = positions()
    blocked = mrope_cos_sin(position_ids, HEAD_DIM, [24, 20, 20], base=BASE)[0]
    interleaved = mrope_cos_sin(position_ids, HEAD_DIM, [24, 20, 20], base=BASE, interleaved=True)[0]
    image = slice(3, 9)
    assert torch.equal(blocked[:, :3], interleaved[:, :3]) and torch.equal(blocked[:, 9:], interleaved[:, 9:])
    assert (blocked[:, image] - interleaved[:, image]).abs().max() > 0.1
    q = torch.randn(2, 4, 12, HEAD_DIM)
    assert apply_rope(q, blocked[:, None], blocked[:, None] * 0).shape == q.shape


# -- Positions of a multimodal prompt: get_rope_index -----------------------------------------

import functools  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel  # noqa: E402
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel  # noqa: E402

from posenc import mrope_position_ids  # noqa: E402

MERGE = 2


def prompt() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two rows: text, an image, text, a video, text; and a shorter one, left-padded."""
    first = [0] * 3 + [1] * 6 + [0] * 2 + [2] * 12 + [0] * 4  # image (1, 4, 6) and video (3, 4, 4), merged by 2
    second = [0] * 5 + [1] * 1 + [0] * 3  # image (1, 2, 2)
    pad = len(first) - len(second)
    token_types = torch.tensor([first, [0] * pad + second])
    mask = torch.ones_like(token_types)
    mask[1, :pad] = 0
    images = torch.tensor([[1, 4, 6], [1, 2, 2]])
    videos = torch.tensor([[3, 4, 4]])
    return token_types, mask, images, videos


def get_rope_index(cls, token_types, mask, images, videos, **extra):  # type: ignore[no-untyped-def]
    # get_rope_index reads only the merge size (and, for Qwen2.5-VL, tokens_per_second) from its
    # model, and calls get_vision_position_ids: a stand-in model avoids building vision towers.
    vision = SimpleNamespace(spatial_merge_size=MERGE, tokens_per_second=extra.pop("tokens_per_second", None))
    model = SimpleNamespace(config=SimpleNamespace(vision_config=vision))
    model.get_vision_position_ids = functools.partial(cls.get_vision_position_ids, model)
    return cls.get_rope_index(model, input_ids=torch.zeros_like(token_types), mm_token_type_ids=token_types,
                              image_grid_thw=images, video_grid_thw=videos, attention_mask=mask, **extra)


def test_positions_equal_qwen2_vl_get_rope_index() -> None:
    token_types, mask, images, videos = prompt()
    want, want_deltas = get_rope_index(Qwen2VLModel, token_types, mask, images, videos)
    got, deltas = mrope_position_ids(token_types, images, videos, spatial_merge_size=MERGE, attention_mask=mask)
    assert torch.equal(got, want) and torch.equal(deltas, want_deltas.long())


def test_positions_equal_qwen2_5_vl_with_time_spacing() -> None:
    token_types, mask, images, videos = prompt()
    seconds = torch.tensor([0.5])  # second_per_grid_ts: 2 frames per grid at 4 fps
    want, want_deltas = get_rope_index(Qwen2_5_VLModel, token_types, mask, images, videos,
                                       tokens_per_second=25, second_per_grid_ts=seconds)
    got, deltas = mrope_position_ids(token_types, images, videos, spatial_merge_size=MERGE, attention_mask=mask,
                                     time_interval=[25 * 0.5])
    assert torch.equal(got, want) and torch.equal(deltas, want_deltas.long())
    assert got[0, 0].max() > got[1, 0].max()  # the video's frames are spread out in time
