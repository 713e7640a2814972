"""posenc.mrope: which axis turns each frequency, the tables, and bad input."""

from __future__ import annotations

import pytest
import torch

from posenc import mrope_axes, mrope_cos_sin, mrope_position_ids, rope_cos_sin


def test_blocked_axes_are_contiguous_sections() -> None:
    assert mrope_axes(16, [2, 3, 3]).tolist() == [0, 0, 1, 1, 1, 2, 2, 2]


def test_interleaved_axes_cycle_then_fall_back_to_time() -> None:
    # 10 frequencies, height 3 and width 3: k % 3 == 1 below 9 is height, k % 3 == 2 below 9 width.
    assert mrope_axes(20, [4, 3, 3], interleaved=True).tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]


def test_each_frequency_turns_by_the_position_of_its_axis() -> None:
    position_ids = torch.stack([torch.tensor([[5, 6]]), torch.tensor([[1, 2]]), torch.tensor([[7, 9]])])  # (3, 1, 2)
    cos, sin = mrope_cos_sin(position_ids, 8, [1, 1, 2], base=100.0, dtype=torch.float64)
    theta = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    axis_position = position_ids[:, 0].T[:, [0, 1, 2, 2]].double()  # (seq, 4): the position each frequency reads
    angles = axis_position * theta
    torch.testing.assert_close(cos[0], torch.cat([angles.cos(), angles.cos()], dim=-1), rtol=0, atol=1e-15)
    torch.testing.assert_close(sin[0], torch.cat([angles.sin(), angles.sin()], dim=-1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("interleaved", [False, True])
def test_equal_positions_give_plain_rope(interleaved: bool) -> None:
    position_ids = torch.arange(7).expand(3, 7)  # (3, seq): no batch axis
    cos, sin = mrope_cos_sin(position_ids, 24, [4, 4, 4], interleaved=interleaved, dtype=torch.float64)
    plain = rope_cos_sin(7, 24, dtype=torch.float64)
    assert torch.equal(cos, plain[0]) and torch.equal(sin, plain[1])


def test_dtype_and_device() -> None:
    cos, _ = mrope_cos_sin(torch.zeros(3, 2, 4, dtype=torch.long), 8, [2, 1, 1], dtype=torch.bfloat16, device="meta")
    assert cos.dtype == torch.bfloat16 and cos.device.type == "meta" and cos.shape == (2, 4, 8)


def test_bad_input() -> None:
    good = torch.zeros(3, 1, 4, dtype=torch.long)
    with pytest.raises(TypeError, match="position_ids must have an integer dtype, got torch.float32"):
        mrope_cos_sin(good.float(), 8, [2, 1, 1])
    with pytest.raises(ValueError, match=r"position_ids must be \(3, \.\.\., seq\): time, height and width positions, "
                                         r"got shape \(2, 1, 4\)"):
        mrope_cos_sin(good[:2], 8, [2, 1, 1])
    with pytest.raises(ValueError, match=r"got shape \(3,\)"):
        mrope_cos_sin(torch.zeros(3, dtype=torch.long), 8, [2, 1, 1])
    with pytest.raises(TypeError, match=r"sections must be three integers \(time, height, width\), got \[2, 2\]"):
        mrope_cos_sin(good, 8, [2, 2])
    with pytest.raises(ValueError, match=r"sections must add up to dim // 2 = 4 frequencies \(dim even\), got \[2, 2, 2\] "
                                         r"\(sum 6\) for dim=8"):
        mrope_cos_sin(good, 8, [2, 2, 2])
    with pytest.raises(ValueError, match=r"dim // 2 = 4 frequencies \(dim even\), got \[2, 1, 1\] \(sum 4\) for dim=9"):
        mrope_axes(9, [2, 1, 1])
    with pytest.raises(ValueError, match=r"sections\[1\] must be a positive integer, got 0"):
        mrope_axes(8, [4, 0, 0])
    with pytest.raises(ValueError, match=r"interleaved sections \[2, 3, 3\] give the time axis 3 frequencies, not 2"):
        mrope_axes(16, [2, 3, 3], interleaved=True)
    with pytest.raises(ValueError, match="base must be a finite number > 0, got -1.0"):
        mrope_cos_sin(good, 8, [2, 1, 1], base=-1.0)
    with pytest.raises(TypeError, match="interleaved must be a bool, got 1"):
        mrope_axes(8, [2, 1, 1], interleaved=1)


def test_positions_of_text_and_an_image() -> None:
    # 2 text tokens, a 4 x 6 patch grid merged 2 x 2 (a 2 x 3 grid of tokens), 2 text tokens.
    token_types = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 0, 0]])
    positions, deltas = mrope_position_ids(token_types, torch.tensor([[1, 4, 6]]), spatial_merge_size=2)
    assert positions[:, 0].tolist() == [
        [0, 1, 2, 2, 2, 2, 2, 2, 5, 6],  # time: the image's one frame at 2, text resumes at 2 + max(2, 3)
        [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],  # height: rows 0, 1
        [0, 1, 2, 3, 4, 2, 3, 4, 5, 6],  # width: columns 0, 1, 2
    ]
    assert deltas.tolist() == [[7 - 10]]


def test_text_only_is_plain_counting_and_padding_gets_zero() -> None:
    token_types = torch.zeros(2, 5, dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    positions, deltas = mrope_position_ids(token_types, attention_mask=mask)
    assert positions[:, 0].tolist() == [[0, 1, 2, 3, 4]] * 3
    assert positions[:, 1].tolist() == [[0, 0, 0, 1, 2]] * 3
    assert deltas.tolist() == [[0], [0]]


def test_two_images_back_to_back_and_video_time_spacing() -> None:
    # Two one-token images, then a video of 2 frames of 1 x 2 tokens, frames 3 positions apart.
    token_types = torch.tensor([[1, 1, 2, 2, 2, 2]])
    positions, _ = mrope_position_ids(token_types, torch.tensor([[1, 1, 1], [1, 1, 1]]), torch.tensor([[2, 1, 2]]),
                                      time_interval=[3.0])
    assert positions[0, 0].tolist() == [0, 1, 2, 2, 5, 5]  # frames 0 and 1 at 2 + 0 and 2 + 3
    assert positions[2, 0].tolist() == [0, 1, 2, 3, 2, 3]


def test_bad_position_inputs() -> None:
    types = torch.tensor([[0, 1, 1, 0]])
    grid = torch.tensor([[1, 2, 2]])
    with pytest.raises(TypeError, match="token_types must have an integer dtype, got torch.float32"):
        mrope_position_ids(types.float(), grid)
    with pytest.raises(ValueError, match=r"token_types must be \(batch, seq\), got shape \(4,\)"):
        mrope_position_ids(types[0], grid)
    with pytest.raises(ValueError, match=r"token_types must be 0 \(text\), 1 \(image\) or 2 \(video\), got \[0, 1, 3\]"):
        mrope_position_ids(torch.tensor([[0, 1, 3]]), grid)
    with pytest.raises(ValueError, match=r"image_grid_thw must be \(n, 3\): \(time, height, width\) per item, got shape \(3,\)"):
        mrope_position_ids(types, grid[0])
    with pytest.raises(ValueError, match=r"image_grid_thw must be positive, got \[\[0, 2, 2\]\]"):
        mrope_position_ids(types, torch.tensor([[0, 2, 2]]))
    with pytest.raises(ValueError, match=r"image_grid_thw heights and widths must be divisible by spatial_merge_size=2, "
                                         r"got \[\(1, 3, 2\)\]"):
        mrope_position_ids(types, torch.tensor([[1, 3, 2]]), spatial_merge_size=2)
    with pytest.raises(ValueError, match="row 0 has more image tokens than the grids given cover"):
        mrope_position_ids(types, torch.tensor([[1, 1, 1]]))
    with pytest.raises(ValueError, match=r"row 0: a run of 2 image tokens is shorter than the grid \[1, 2, 4\] \(merge 1\), "
                                         "which needs 8"):
        mrope_position_ids(types, torch.tensor([[1, 2, 4]]))
    with pytest.raises(ValueError, match="image_grid_thw has 2 grids, the token types use 1"):
        mrope_position_ids(types, torch.tensor([[1, 1, 2], [1, 1, 1]]))
    with pytest.raises(ValueError, match="time_interval has 2 values for 0 videos"):
        mrope_position_ids(types, grid, spatial_merge_size=2, time_interval=[1.0, 2.0])
    with pytest.raises(TypeError, match=r"attention_mask must be an integer or bool tensor \(1 = token, 0 = padding\)"):
        mrope_position_ids(types, grid, spatial_merge_size=2, attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of token_types \(1, 4\), got \(1, 3\)"):
        mrope_position_ids(types, grid, spatial_merge_size=2, attention_mask=torch.ones(1, 3, dtype=torch.long))


def test_a_fully_padded_row_gets_zeros_and_no_offset() -> None:
    token_types = torch.tensor([[0, 1, 0], [0, 0, 0]])
    mask = torch.tensor([[1, 1, 1], [0, 0, 0]])
    positions, deltas = mrope_position_ids(token_types, torch.tensor([[1, 1, 1]]), attention_mask=mask)
    assert positions[:, 1].tolist() == [[0, 0, 0]] * 3
    assert deltas.tolist() == [[0], [0]]


def test_whole_messages_for_bad_sizes_and_videos() -> None:
    # Anchored: the message is the whole message, names included.
    with pytest.raises(ValueError, match=r"^dim must be a positive integer, got 0$"):
        mrope_axes(0, [1, 1, 1])
    with pytest.raises(TypeError, match=r"^dtype must be a floating-point dtype, got torch.int64$"):
        mrope_cos_sin(torch.zeros(3, 1, 2, dtype=torch.long), 8, [2, 1, 1], dtype=torch.long)
    with pytest.raises(ValueError, match=r"^interleaved sections \[3, 3, 4\] give the time axis 4 frequencies, not 3: "):
        mrope_axes(20, [3, 3, 4], interleaved=True)
    video = torch.tensor([[0, 2, 2, 0]])
    with pytest.raises(ValueError, match=r"^spatial_merge_size must be a positive integer, got 0$"):
        mrope_position_ids(video, spatial_merge_size=0)
    with pytest.raises(TypeError, match=r"^video_grid_thw must have an integer dtype, got torch.float32$"):
        mrope_position_ids(video, video_grid_thw=torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"^video_grid_thw heights and widths must be divisible by spatial_merge_size=2, "):
        mrope_position_ids(video, video_grid_thw=torch.tensor([[2, 3, 2]]), spatial_merge_size=2)
    with pytest.raises(ValueError, match=r"^row 0 has more video tokens than the grids given cover$"):
        mrope_position_ids(video, video_grid_thw=torch.tensor([[1, 1, 1]]))
    with pytest.raises(ValueError, match=r"^row 0: a run of 2 video tokens is shorter than the grid \[1, 1, 4\] "):
        mrope_position_ids(video, video_grid_thw=torch.tensor([[1, 1, 4]]))
    with pytest.raises(ValueError, match=r"^video_grid_thw has 2 grids, the token types use 1$"):
        mrope_position_ids(video, video_grid_thw=torch.tensor([[2, 1, 1], [1, 1, 1]]))
    with pytest.raises(TypeError, match=r"^attention_mask must be an integer or bool tensor \(1 = token, 0 = padding\)$"):
        mrope_position_ids(video, video_grid_thw=torch.tensor([[2, 1, 1]]), attention_mask=torch.ones(1, 4))


def test_tables_follow_the_positions_device_by_default() -> None:
    cos, sin = mrope_cos_sin(torch.zeros(3, 1, 4, dtype=torch.long, device="meta"), 8, [2, 1, 1])
    assert cos.device.type == sin.device.type == "meta" and cos.shape == (1, 4, 8)
