"""The conventions table: which library uses which layout, frequencies, position origin and precision.

Every row is data (:data:`ROWS`) and names the conformance tests that establish what it says, as
``tests/conformance/<file>.py::<test>``. A cell states only what those tests show; where no test
checks a column it says "not checked", and "—" means the column does not apply (or, in the
*docs* column, that no test shows a disagreement). A library with no conformance test here gets a
row with ``"checked": False`` and the reason, never an unchecked fact.

Two directives:

* ``conventions-table`` (argument: a group of :data:`GROUPS`) renders that group's rows. It fails the
  build if a named test is not a test function of its file (read with :mod:`ast`, not imported).
  Under each row, a row across the table gives the posenc call and the tests, each test name
  linked to its source on the conformance page.
* ``conformance-source`` renders every ``tests/conformance/test_*.py`` file on that page, in file
  order, with an anchor per test function (:func:`test_anchor`).

Prose cells (library names, layout, frequencies, ...) are MyST inline text (`code`, $math$) and page
messages, translated in the page's catalogue. Identifiers (components, the posenc equivalent, test
ids, versions), cells of math, numbers or code only, and source code are not messages: they carry
no source position, so gettext skips them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "conformance"
#: The page that shows the conformance tests' source (``conformance-source``).
CONFORMANCE_DOC = "reference/conformance"

#: The libraries the issue asks about; each must have a row (checked or not).
LIBRARIES = (
    "Hugging Face transformers",
    "timm",
    "MAE",
    "x-transformers",
    "rotary-embedding-torch",
    "positional-encodings",
    "PyG",
    "torchtune",
    "Meta's reference code",
    "PyTorch tutorial",
)

#: Groups, in page order, and the column headers that differ from :data:`HEADERS` in a group.
GROUPS: dict[str, dict[str, str]] = {
    "sinusoidal": {},
    "rope": {},
    "images": {},
    "alibi": {"frequencies": "Slopes"},
    "graphs": {},
}
#: Table columns: row key and header.
HEADERS = {
    "library": "Library",
    "layout": "Layout",
    "frequencies": "Frequencies",
    "origin": "Position origin",
    "precision": "Precision",
    "docs": "Disagrees with its docs",
}
#: The label of the row under each checked row: the posenc call and the tests.
CHECKED_BY = "Checked by"
PROSE = ("layout", "frequencies", "origin", "precision", "docs")
NOT_APPLICABLE = "—"
NOT_CHECKED = "not checked"
TRANSCRIBED = "transcribed in the test file"


def _t(file: str, *names: str) -> list[str]:
    return [f"tests/conformance/{file}::{name}" for name in names]


# Keys of a checked row: library, package (its distribution, None for a transcription), component
# (identifiers), the five PROSE cells, posenc (the posenc call that reproduces it) and tests.
ROWS: list[dict[str, Any]] = [
    # ------------------------------------------------------------------ sinusoidal tables
    {
        "group": "sinusoidal",
        "library": "Hugging Face transformers",
        "package": "transformers",
        "component": ["MarianSinusoidalPositionalEmbedding"],
        "layout": "concatenated; an odd $d$ gets one more sine than cosines",
        "frequencies": "$10000^{-2i/d}$",
        "origin": "0, shifted by `cache_length`",
        "precision": "float32 values, even in a float64 model",
        "docs": "The docstring puts the cosines at `[dim // 2:]`; for an odd $d$ they start "
        "one column later.",
        "posenc": 'sinusoidal_table(n, d, style="concat")',
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_marian_sinusoidal_equals_concat",
            "test_marian_model_positions_and_cache_length",
            "test_marian_table_has_float32_precision_even_in_float64",
            "test_marian_odd_dim_puts_cosines_one_column_later_than_its_docstring",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "x-transformers",
        "package": "x-transformers",
        "component": ["ScaledSinusoidalEmbedding"],
        "layout": "concatenated, times `scale` (initially $d^{-1/2}$); even $d$ only",
        "frequencies": "$\\theta^{-2i/d}$ (`theta`)",
        "origin": "0 plus `offset`, or explicit `pos`",
        "precision": "float32, whatever the input's dtype",
        "docs": NOT_APPLICABLE,
        "posenc": 'sinusoidal_table(n, d, base=theta, style="concat")',
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_x_transformers_scaled_sinusoidal_over_scale_equals_concat",
            "test_x_transformers_scaled_sinusoidal_needs_even_dim",
            "test_x_transformers_scaled_sinusoidal_is_float32_whatever_the_input",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "positional-encodings",
        "package": "positional-encodings",
        "component": ["PositionalEncoding1D"],
        "layout": "interleaved; an odd $d$ gets the table of $d + 1$ channels, last "
        "column dropped",
        "frequencies": "$10000^{-2i/d}$, $d$ rounded up to even",
        "origin": "0",
        "precision": "float32 angles, returned in the input's dtype",
        "docs": NOT_APPLICABLE,
        "posenc": "sinusoidal_table(n, d)",
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_positional_encodings_1d_equals_interleaved",
            "test_positional_encodings_1d_computes_in_float32_for_float64_input",
            "test_positional_encodings_1d_odd_dim_is_the_next_even_table_truncated",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "PyTorch tutorial",
        "package": None,
        "component": ["PositionalEncoding"],
        "layout": "interleaved; an odd $d$ fails with a `RuntimeError`",
        "frequencies": "$10000^{-2i/d}$, computed as $\\exp(-2i \\ln 10000 / d)$",
        "origin": "0",
        "precision": "torch's default dtype (float32 unless changed)",
        "docs": NOT_APPLICABLE,
        "posenc": "sinusoidal_table(n, d)",
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_tutorial_and_annotated_transformer_equal_interleaved_up_to_float32",
            "test_tutorial_formula_in_float64",
            "test_tutorial_fails_on_odd_dim",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "fairseq",
        "package": None,
        "component": ["SinusoidalPositionalEmbedding"],
        "layout": "concatenated; an odd $d$ gets a zero column",
        "frequencies": "$\\lfloor d/2 \\rfloor$ of them, geometric from 1 to exactly "
        "$1/10000$ (not $10000^{-2i/d}$); $d$ = 2 or 3 divides by zero",
        "origin": "`padding_idx + 1`; padding tokens get a zero row",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": 'sinusoidal_table(n, d, style="tensor2tensor", offset=padding_idx + 1)',
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_fairseq_get_embedding_equals_tensor2tensor_style",
            "test_fairseq_positions_start_after_padding_idx",
            "test_fairseq_divides_by_zero_where_tensor2tensor_clamps",
            "test_tensor2tensor_frequencies_differ_from_the_paper",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "tensor2tensor",
        "package": None,
        "component": ["get_timing_signal_1d"],
        "layout": "concatenated; an odd $d$ gets a zero column",
        "frequencies": "$\\lfloor d/2 \\rfloor$ of them, geometric from 1 to exactly "
        "$1/10000$ (not $10000^{-2i/d}$)",
        "origin": "`start_index`",
        "precision": "float32",
        "docs": NOT_APPLICABLE,
        "posenc": 'sinusoidal_table(n, d, style="tensor2tensor", offset=start_index)',
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_tensor2tensor_timing_signal_equals_tensor2tensor_style",
            "test_tensor2tensor_frequencies_differ_from_the_paper",
        ),
    },
    {
        "group": "sinusoidal",
        "library": "Transformer-XL",
        "package": None,
        "component": ["PositionalEmbedding"],
        "layout": "concatenated; an odd $d$ gives $d + 1$ columns",
        "frequencies": "$10000^{-2i/d}$",
        "origin": "descending: $k - 1, \\dots, 1, 0$ for $k$ keys",
        "precision": "torch's default dtype (float32 unless changed)",
        "docs": NOT_APPLICABLE,
        "posenc": 'sinusoidal_table(k, d, style="concat").flip(0)',
        "tests": _t(
            "test_sinusoidal_refs.py",
            "test_transformer_xl_positional_embedding_equals_concat",
            "test_transformer_xl_formula_in_float64",
            "test_transformer_xl_odd_dim_gives_one_extra_column",
        ),
    },
    # ------------------------------------------------------------------------------ RoPE
    {
        "group": "rope",
        "library": "Hugging Face transformers",
        "package": "transformers",
        "component": ["LlamaRotaryEmbedding", "apply_rotary_pos_emb"],
        "layout": "half-split (`rotate_half`)",
        "frequencies": "$\\theta^{-2i/d}$, and every `rope_type` of `ROPE_INIT_FUNCTIONS`",
        "origin": "the caller's `position_ids`",
        "precision": "float32 angles, even in a float64 model; cos/sin in the input's dtype",
        "docs": NOT_APPLICABLE,
        "posenc": "rope_cos_sin(positions, d, base=theta, scaling=config)",
        "tests": _t(
            "test_rope_transformers.py",
            "test_apply_rope_equals_llama_apply_rotary_pos_emb",
            "test_module_equals_llama_rotary_embedding_and_apply",
            "test_every_hf_rope_type_is_covered",
            "test_inv_freq_and_attention_factor_equal_hf",
            "test_cos_sin_equal_hf_rotary_embedding",
            "test_llama_rotary_embedding_angles_stay_float32_in_a_float64_model",
        ),
    },
    {
        "group": "rope",
        "library": "Hugging Face transformers",
        "package": "transformers",
        "component": ["GPTNeoXRotaryEmbedding", "partial_rotary_factor"],
        "layout": "half-split over the first `partial_rotary_factor` share of the channels; the "
        "others pass through",
        "frequencies": "$\\theta^{-2i/r}$ for $r$ rotated channels",
        "origin": "the caller's `position_ids`",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": 'RotaryEmbedding(d, scaling={"partial_rotary_factor": f})',
        "tests": _t("test_rope_transformers.py", "test_partial_rotary_equals_gpt_neox"),
    },
    {
        "group": "rope",
        "library": "Hugging Face transformers",
        "package": None,
        "component": ["convert_llama_weights_to_hf.py", "permute"],
        "layout": "reorders the rows of Meta's query and key weights from interleaved to "
        "half-split: the attention scores stay identical",
        "frequencies": NOT_APPLICABLE,
        "origin": NOT_APPLICABLE,
        "precision": NOT_APPLICABLE,
        "docs": NOT_APPLICABLE,
        "posenc": "permute_for_half_layout(weight, num_heads)",
        "tests": _t(
            "test_rope_other_refs.py",
            "test_permute_for_half_layout_equals_conversion_script",
            "test_permuted_weights_give_identical_scores_under_half_layout",
        ),
    },
    {
        "group": "rope",
        "library": "Meta's reference code",
        "package": None,
        "component": ["precompute_freqs_cis", "apply_rotary_emb", "apply_scaling"],
        "layout": "interleaved: channels $2i$ and $2i + 1$ form one complex number",
        "frequencies": "$\\theta^{-2i/d}$; Llama 3.1's `apply_scaling` is "
        '`rope_type="llama3"`',
        "origin": "0, 1, 2, … (the rows of `freqs_cis`)",
        "precision": "float32 (complex64), cast back to the input's dtype",
        "docs": NOT_APPLICABLE,
        "posenc": 'rope_cos_sin(n, d, base=theta, layout="interleaved")',
        "tests": _t(
            "test_rope_other_refs.py",
            "test_interleaved_equals_meta_apply_rotary_emb",
            "test_interleaved_cos_sin_are_meta_freqs_cis",
            "test_llama3_scaling_equals_meta_apply_scaling",
            "test_meta_rotation_is_float32_for_float64_inputs",
        ),
    },
    {
        "group": "rope",
        "library": "rotary-embedding-torch",
        "package": "rotary-embedding-torch",
        "component": ["RotaryEmbedding", "rotate_queries_or_keys"],
        "layout": "interleaved; a `dim` below the head width rotates the first channels only",
        "frequencies": "$\\theta^{-2i/d}$; `interpolate_factor` divides the positions, "
        "`theta_rescale_factor` $s$ multiplies $\\theta$ by $s^{d/(d-2)}$",
        "origin": "0 plus `offset`",
        "precision": "positions in the input's dtype: in float16, those past 2048 are rounded",
        "docs": NOT_APPLICABLE,
        "posenc": 'rope_cos_sin(positions, d, layout="interleaved")',
        "tests": _t(
            "test_rope_other_refs.py",
            "test_rotary_embedding_torch_default_is_interleaved",
            "test_rotary_embedding_torch_partial_interpolate_and_theta_rescale",
            "test_rotary_embedding_torch_holds_positions_in_input_dtype",
        ),
    },
    {
        "group": "rope",
        "library": "x-transformers",
        "package": "x-transformers",
        "component": ["RotaryEmbedding", "apply_rotary_pos_emb"],
        "layout": "interleaved; a `dim` below the head width rotates the first channels only",
        "frequencies": "$\\theta^{-2i/d}$; `interpolation_factor` divides the positions",
        "origin": "the last rows of `freqs`: the queries are the newest positions",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": 'rope_cos_sin(positions, d, layout="interleaved")',
        "tests": _t(
            "test_rope_other_refs.py",
            "test_x_transformers_rotary_is_interleaved",
            "test_x_transformers_apply_uses_last_positions",
        ),
    },
    {
        "group": "rope",
        "library": "torchtune",
        "package": "torchtune",
        "component": ["RotaryPositionalEmbeddings"],
        "layout": "interleaved: channels $2i$ and $2i + 1$ form one pair",
        "frequencies": "$\\theta^{-2i/d}$ (`base`)",
        "origin": "`input_pos`, per sequence or per sample; without it 0, 1, 2, …",
        "precision": "float32, cast back to the input's dtype",
        "docs": "The docstring says the cache is recomputed past `max_seq_len`; a longer sequence or "
        "a later position raises an error instead.",
        "posenc": 'rope_cos_sin(positions, d, base=base, layout="interleaved")',
        "tests": _t(
            "test_rope_other_refs.py",
            "test_interleaved_equals_torchtune_rope",
            "test_torchtune_input_pos_are_the_positions",
            "test_torchtune_rotation_is_float32_for_float64_inputs",
            "test_torchtune_does_not_recompute_past_max_seq_len_as_its_docstring_says",
        ),
    },
    # ---------------------------------------------------------------------------- images
    {
        "group": "images",
        "library": "MAE",
        "package": None,
        "component": ["get_2d_sincos_pos_embed"],
        "layout": "blocks [sin column | cos column | sin row | cos row], tokens row by row; "
        "`cls_token=True` adds a zero row in front",
        "frequencies": "$10000^{-i/(d/4)}$, $d/4$ per axis",
        "origin": "0 on both axes",
        "precision": "float64 (NumPy)",
        "docs": "A comment says the first half encodes `grid_h` (the row); it encodes the column.",
        "posenc": 'sinusoidal_2d(h, w, d, style="mae")',
        "tests": _t(
            "test_multidim_refs.py",
            "test_sinusoidal_2d_mae_equals_mae",
            "test_mae_blocks_are_sin_col_cos_col_sin_row_cos_row",
            "test_mae_class_token_is_a_zero_row_in_front",
            "test_mae_half_named_grid_h_encodes_the_column",
        ),
    },
    {
        "group": "images",
        "library": "timm",
        "package": "timm",
        "component": ["build_sincos2d_pos_embed"],
        "layout": "blocks [sin row | sin column | cos row | cos column], tokens row by row",
        "frequencies": "$10000^{-i/(d/4)}$, $d/4$ per axis",
        "origin": "0 on both axes",
        "precision": "float32",
        "docs": NOT_APPLICABLE,
        "posenc": 'sinusoidal_2d(h, w, d, style="timm")',
        "tests": _t(
            "test_multidim_refs.py",
            "test_sinusoidal_2d_timm_equals_timm",
            "test_timm_sincos2d_blocks_are_sin_row_sin_col_cos_row_cos_col",
        ),
    },
    {
        "group": "images",
        "library": "timm",
        "package": "timm",
        "component": ["build_rotary_pos_embed(in_pixels=False)"],
        "layout": "axial RoPE, row angles then column angles; interleaved, or half-split with "
        "`rotate_half=True`",
        "frequencies": "$\\theta^{-4i/d}$, those of a $d/2$-wide head, per axis",
        "origin": "0 on both axes",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": "axial_rope_cos_sin(h, w, d, layout=layout)",
        "tests": _t("test_multidim_refs.py", "test_axial_rope_equals_timm_rotary"),
    },
    {
        "group": "images",
        "library": "rotary-embedding-torch",
        "package": "rotary-embedding-torch",
        "component": ["RotaryEmbedding(dim=d // 2).get_axial_freqs"],
        "layout": "axial RoPE, row angles then column angles; interleaved",
        "frequencies": "$\\theta^{-4i/d}$, those of a $d/2$-wide head, per axis",
        "origin": "0 on both axes",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": 'axial_rope_cos_sin(h, w, d, layout="interleaved")',
        "tests": _t(
            "test_multidim_refs.py",
            "test_axial_rope_equals_rotary_embedding_torch_axial_freqs",
            "test_axial_rope_rotation_equals_rotary_embedding_torch",
        ),
    },
    {
        "group": "images",
        "library": "positional-encodings",
        "package": "positional-encodings",
        "component": ["PositionalEncoding2D", "PositionalEncoding3D"],
        "layout": "one interleaved block of $c = 2\\lceil d/2n \\rceil$ channels per axis "
        "($n$ axes), in axis order, cut to $d$ channels",
        "frequencies": "$10000^{-2i/c}$ in each block",
        "origin": "0 on every axis",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": "sinusoidal_nd(shape, d)",
        "tests": _t(
            "test_multidim_refs.py",
            "test_sinusoidal_nd_equals_positional_encodings",
            "test_positional_encodings_2d_is_one_interleaved_block_per_axis",
        ),
    },
    # ----------------------------------------------------------------------------- ALiBi
    {
        "group": "alibi",
        "library": "Hugging Face transformers",
        "package": "transformers",
        "component": ["build_alibi_tensor"],
        "layout": NOT_APPLICABLE,
        "frequencies": "the paper's, including its rule for head counts that are not powers of two",
        "origin": "$m\\,j$, from the first key rather than from the query: it differs from "
        "$-m|i - j|$ by a constant per row, the same attention only under the causal mask",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": "alibi_bias(heads, n)",
        "tests": _t(
            "test_alibi_refs.py",
            "test_slopes_equal_bloom",
            "test_bloom_differs_by_a_row_constant_equal_under_causal_softmax",
        ),
    },
    {
        "group": "alibi",
        "library": "Hugging Face transformers",
        "package": "transformers",
        "component": ["build_mpt_alibi_tensor"],
        "layout": NOT_APPLICABLE,
        "frequencies": "the paper's, including its rule for head counts that are not powers of two",
        "origin": "one row, $m (j - (n - 1))$: the row of the last query",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": "alibi_bias(heads, 1, n)",
        "tests": _t("test_alibi_refs.py", "test_slopes_equal_hf_mpt", "test_last_row_equals_hf_mpt"),
    },
    {
        "group": "alibi",
        "library": "x-transformers",
        "package": "x-transformers",
        "component": ["AlibiPositionalBias"],
        "layout": NOT_APPLICABLE,
        "frequencies": "the paper's, including its rule for head counts that are not powers of two; "
        "heads beyond `heads` get no bias",
        "origin": "the queries end at the last key",
        "precision": NOT_CHECKED,
        "docs": NOT_APPLICABLE,
        "posenc": "alibi_bias(heads, q_len, k_len)",
        "tests": _t(
            "test_alibi_refs.py",
            "test_slopes_equal_x_transformers",
            "test_bias_equals_x_transformers",
            "test_x_transformers_pads_unalibied_heads_with_zeros",
        ),
    },
    # ---------------------------------------------------------------------------- graphs
    {
        "group": "graphs",
        "library": "PyG",
        "package": "torch-geometric",
        "component": ["AddLaplacianEigenvectorPE"],
        "layout": "eigenvectors 2 to $k + 1$ of the symmetric normalised Laplacian, by "
        "ascending eigenvalue; each column's sign is random on every call",
        "frequencies": NOT_APPLICABLE,
        "origin": NOT_APPLICABLE,
        "precision": "float32",
        "docs": NOT_APPLICABLE,
        "posenc": "laplacian_pe(edge_index, num_nodes, k)",
        "tests": _t(
            "test_graph_refs.py",
            "test_laplacian_pe_equals_pyg_up_to_column_sign",
            "test_pyg_flips_signs_at_random_on_every_call",
            "test_pyg_encodings_are_float32",
        ),
    },
    {
        "group": "graphs",
        "library": "PyG",
        "package": "torch-geometric",
        "component": ["AddRandomWalkPE"],
        "layout": "return probabilities after 1 to $k$ steps; an edge listed twice changes the "
        "result (posenc counts it once)",
        "frequencies": NOT_APPLICABLE,
        "origin": NOT_APPLICABLE,
        "precision": "float32",
        "docs": NOT_APPLICABLE,
        "posenc": "random_walk_pe(edge_index, num_nodes, k)",
        "tests": _t(
            "test_graph_refs.py",
            "test_random_walk_pe_equals_pyg_undirected",
            "test_random_walk_pe_equals_pyg_directed_self_loops_isolated",
            "test_repeated_edges_pyg_counts_them_in_the_degree_only",
            "test_pyg_encodings_are_float32",
        ),
    },
]


# ----------------------------------------------------------------------------- the tests


@lru_cache(maxsize=None)
def _test_functions(path: Path, mtime: float) -> dict[str, tuple[int, int]]:
    """Module-level test functions of a file (pytest's default ``test`` prefix): name -> lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found[node.name] = (start, node.end_lineno or node.lineno)
    return found


def test_functions(path: Path) -> dict[str, tuple[int, int]]:
    """``{name: (first line, last line)}`` of the test functions of ``path``, decorators included."""
    return _test_functions(path, path.stat().st_mtime)


def conformance_files() -> list[Path]:
    return sorted(CONFORMANCE.glob("test_*.py"))


def split_test_id(test_id: str) -> tuple[Path, str]:
    """``tests/conformance/<file>.py::<name>`` -> (path, name); ValueError if it is not one."""
    file, sep, name = test_id.partition("::")
    path = ROOT / file
    if not sep or not name or path.parent != CONFORMANCE or not path.name.startswith("test_"):
        raise ValueError(f"not a conformance test id: {test_id!r}")
    return path, name


def missing_tests(test_ids: list[str]) -> list[str]:
    """The ids among ``test_ids`` that are not a test function of their file."""
    missing = []
    for test_id in test_ids:
        path, name = split_test_id(test_id)
        if not path.is_file() or name not in test_functions(path):
            missing.append(test_id)
    return missing


def test_anchor(test_id: str) -> str:
    """The HTML id of a test on the conformance page."""
    path, name = split_test_id(test_id)
    return nodes.make_id(f"{path.stem}-{name}")


def check_rows(rows: list[dict[str, Any]]) -> None:
    """Every row complete, in a known group; a checked row names at least one existing test."""
    for row in rows:
        where = f"{row.get('library')!r} {row.get('component')!r}"
        if row.get("group") not in GROUPS:
            raise ValueError(f"{where}: group must be one of {list(GROUPS)}")
        if not row.get("library") or not row.get("component"):
            raise ValueError(f"{where}: library and component are required")
        if row.get("checked", True):
            for key in (*PROSE, "posenc"):
                if not isinstance(row.get(key), str) or not row[key].strip():
                    raise ValueError(f"{where}: {key!r} must be non-empty text")
            if not row.get("tests"):
                raise ValueError(f"{where}: a checked row names at least one conformance test")
            missing = missing_tests(row["tests"])
            if missing:
                raise ValueError(f"{where}: no such conformance test: {', '.join(missing)}")
        elif not row.get("reason"):
            raise ValueError(f"{where}: a row that is not checked says why")


def has_words(text: str) -> bool:
    """Whether MyST inline text has words outside its math (``$...$``) and code (`` `...` ``)."""
    return re.search(r"[^\W\d_]{2,}", re.sub(r"\$[^$]*\$|`[^`]*`", " ", text)) is not None


def _version(package: str | None) -> str | None:
    if package is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------------------ the directives


class _Directive(SphinxDirective):
    def _message(self, text: str) -> nodes.paragraph:
        """A paragraph of inline text (MyST) that gettext extracts and the zh_CN build translates."""
        children, messages = self.state.inline_text(text, self.lineno)
        paragraph = nodes.paragraph(text, "", *children, *messages)
        paragraph.source, paragraph.line = self.get_source_info()
        return paragraph

    @staticmethod
    def _code(*texts: str) -> nodes.paragraph:
        """Identifiers: no source position, so not a message."""
        paragraph = nodes.paragraph()
        for i, text in enumerate(texts):
            if i:
                paragraph += nodes.Text(", ")
            paragraph += nodes.literal(text, text)
        return paragraph

    def _always_reread(self) -> None:
        self.env.posenc_conventions_docs = getattr(self.env, "posenc_conventions_docs", set()) | {self.env.docname}
        for path in conformance_files():
            self.env.note_dependency(str(path))
        self.env.note_dependency(__file__)


class ConventionsTableDirective(_Directive):
    """The rows of one group of :data:`ROWS` as a table."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        self._always_reread()
        group = self.arguments[0]
        if self.env.doc2path(self.env.docname).suffix != ".md":
            raise self.error("conventions-table belongs on a MyST page: its cells are MyST inline text")
        if group not in GROUPS:
            raise self.error(f"unknown group {group!r}; one of {list(GROUPS)}")
        try:
            check_rows(ROWS)
        except ValueError as error:
            raise self.error(str(error)) from None
        headers = {**HEADERS, **GROUPS[group]}
        widths = {"library": 18, "layout": 26, "frequencies": 18, "origin": 14, "precision": 12, "docs": 12}
        table = nodes.table(classes=["posenc-conventions", "colwidths-given"])
        tgroup = nodes.tgroup(cols=len(headers))
        table += tgroup
        for key in headers:
            tgroup += nodes.colspec(colwidth=widths[key])
        head = nodes.thead()
        tgroup += head
        head += self._row([self._message(headers[key]) for key in headers])
        body = nodes.tbody()
        tgroup += body
        for row in ROWS:
            if row["group"] == group:
                body.extend(self._table_row(row))
        return [table]

    def _table_row(self, row: dict[str, Any]) -> list[nodes.row]:
        """The conventions, then (for a checked row) the posenc call and the tests, across the table."""
        library = [self._message(row["library"]), self._code(*row["component"])]
        version = _version(row["package"])
        if version is not None:
            library.append(self._code(f"{row['package']} {version}"))
        elif row["package"] is None:
            library.append(self._message(TRANSCRIBED))
        if not row.get("checked", True):
            reason = nodes.entry(morecols=len(PROSE) - 1)
            reason += self._message(row["reason"])
            return [self._row([library, reason], "posenc-unchecked")]
        main = self._row([library, *(self._cell(row[key]) for key in PROSE)], "posenc-conventions-row")
        tests = nodes.paragraph()
        for i, test_id in enumerate(row["tests"]):
            if i:
                tests += nodes.Text(" · ")
            tests += self._test_link(test_id)
        checked = nodes.entry(morecols=len(PROSE) - 1)
        checked += [self._code(row["posenc"]), tests]
        return [main, self._row([self._message(CHECKED_BY), checked], "posenc-checked-by")]

    def _cell(self, text: str) -> nodes.paragraph:
        """Prose is a message; a cell of math, numbers and code only (or a dash) is not."""
        paragraph = self._message(text)
        if not has_words(text):
            paragraph.source, paragraph.line = None, None
        return paragraph

    @staticmethod
    def _test_link(test_id: str) -> nodes.reference:
        _, name = split_test_id(test_id)
        # The URI is filled in when the page is written (resolve_test_links), for any builder.
        link = nodes.reference("", "", nodes.literal(name, name), internal=True, refuri="#", reftitle=test_id)
        link["posenc_test"] = test_id
        return link

    @staticmethod
    def _row(cells: list[Any], kind: str = "") -> nodes.row:
        row = nodes.row(classes=[kind] if kind else [])
        for cell in cells:
            if isinstance(cell, nodes.entry):
                row += cell
                continue
            entry = nodes.entry()
            entry.extend(cell if isinstance(cell, list) else [cell])
            row += entry
        return row


class ConformanceSourceDirective(_Directive):
    """Every conformance test file, split at its test functions, each with an anchor."""

    def run(self) -> list[nodes.Node]:
        self._always_reread()
        if self.env.docname != CONFORMANCE_DOC:
            raise self.error(f"conformance-source belongs on {CONFORMANCE_DOC!r} (the test links point there)")
        sections = []
        for path in conformance_files():
            relative = path.relative_to(ROOT).as_posix()
            section = nodes.section(ids=[nodes.make_id(relative)])
            title = nodes.title(path.name, path.name)
            title["translatable"] = False  # a file name, not a message
            section += title
            lines = path.read_text(encoding="utf-8").splitlines()
            position = 1  # next line to show
            for name, (start, end) in sorted(test_functions(path).items(), key=lambda item: item[1]):
                while start > 1 and lines[start - 2].lstrip().startswith("#"):
                    start -= 1  # a comment right above the test belongs to it
                if start > position:
                    section += self._code_block(lines, position, start - 1)
                test_id = f"{relative}::{name}"
                heading = nodes.paragraph("", "", nodes.literal(name, name), ids=[test_anchor(test_id)],
                                          classes=["posenc-test-name"])
                section += heading
                section += self._code_block(lines, start, end)
                position = end + 1
            if position <= len(lines):
                section += self._code_block(lines, position, len(lines))
            sections.append(section)
        return sections

    @staticmethod
    def _code_block(lines: list[str], first: int, last: int) -> list[nodes.Node]:
        chunk = lines[first - 1 : last]
        while chunk and not chunk[0].strip():
            chunk, first = chunk[1:], first + 1
        while chunk and not chunk[-1].strip():
            chunk = chunk[:-1]
        if not chunk:
            return []
        text = "\n".join(chunk)
        block = nodes.literal_block(text, text, language="python", linenos=True)
        block["highlight_args"] = {"linenostart": first}
        return [block]


def resolve_test_links(app: Any, doctree: nodes.document, docname: str) -> None:
    """Point each test id at its anchor on the conformance page."""
    for ref in doctree.findall(nodes.reference):
        test_id = ref.get("posenc_test")
        if test_id:
            uri = app.builder.get_relative_uri(docname, CONFORMANCE_DOC)
            ref["refuri"] = f"{uri}#{test_anchor(test_id)}"


def _always_outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    # New or changed test files and rows: cheap to re-read both pages on every build.
    return sorted(getattr(env, "posenc_conventions_docs", set()) & env.found_docs)


def _check_conformance_page(app: Any, env: Any) -> None:
    used = getattr(env, "posenc_conventions_docs", set())
    if used and CONFORMANCE_DOC not in env.found_docs:
        logger.warning(f"the conventions table links to {CONFORMANCE_DOC!r}, which does not exist")


def _merge(app: Any, env: Any, docnames: set, other: Any) -> None:
    env.posenc_conventions_docs = getattr(env, "posenc_conventions_docs", set()) | getattr(
        other, "posenc_conventions_docs", set()
    )


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("conventions-table", ConventionsTableDirective)
    app.add_directive("conformance-source", ConformanceSourceDirective)
    app.connect("doctree-resolved", resolve_test_links)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("env-check-consistency", _check_conformance_page)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
