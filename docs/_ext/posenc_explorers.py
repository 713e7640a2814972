"""Interactive explorers: a directive that places one on a page, and the reference values that pin
its JavaScript to ``posenc``.

``.. posenc-explorer:: sinusoidal`` takes a bullet list of the explorer's interface strings, in
the order of :data:`LABELS`. They are ordinary page text, so gettext extracts them into the page's
catalogue and the zh_CN build shows them in Chinese. The HTML is a ``<div>`` whose
``data-labels`` carry the translated strings; ``_static/explorers/<name>.js`` draws into it.

At ``builder-inited`` the build writes ``_static/explorers/reference/<name>.json``: values computed
by ``posenc`` at several settings, which the browser tests compare with what the JavaScript
computes in Chromium.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives

#: The interface strings of each explorer, in the order the directive's bullet list gives them.
LABELS: dict[str, tuple[str, ...]] = {
    "sinusoidal": (
        "width",
        "base",
        "positions",
        "column",
        "layout",
        "interleaved",
        "concat",
        "table_title",
        "position_axis",
        "column_axis",
        "curve_title",
        "value_axis",
        "dot_title",
        "offset_axis",
        "dot_axis",
    ),
    "rope_scaling": (
        "type",
        "dim",
        "base",
        "factor",
        "original",
        "seq_len",
        "attention",
        "unchanged",
        "scale_title",
        "ratio_axis",
        "slow_axis",
        "wavelength_title",
        "pair_axis",
        "wavelength_axis",
        "context",
        "extended",
    ),
    "alibi": (
        "heads",
        "head",
        "length",
        "slopes",
        "matrix_title",
        "key_axis",
        "query_axis",
        "lines_title",
        "distance_axis",
        "bias_axis",
    ),
    "t5": (
        "mode",
        "bidirectional",
        "causal",
        "num_buckets",
        "max_distance",
        "length",
        "exact",
        "last_start",
        "curve_title",
        "distance_axis",
        "bucket_axis",
        "matrix_title",
        "key_axis",
        "query_axis",
    ),
}

#: Settings at which the JavaScript is compared with posenc: (dim, base, length, style).
SINUSOIDAL_SETTINGS = (
    (16, 10000.0, 64, "interleaved"),
    (16, 10000.0, 64, "concat"),
    (7, 10000.0, 50, "interleaved"),
    (7, 10000.0, 50, "concat"),
    (64, 500.0, 200, "interleaved"),
    (128, 1_000_000.0, 300, "concat"),
)


#: T5 settings: (bidirectional, num_buckets, max_distance). The last two are settings where
#: float32 and float64 arithmetic give different buckets, so the JavaScript's float32 steps count.
T5_SETTINGS = (
    (True, 32, 128),
    (False, 32, 128),
    (True, 8, 20),
    (False, 64, 256),
    (True, 166, 1000),
    (False, 159, 2048),
)
T5_SPAN = 3000

#: RoPE scaling settings: (rope_type, dim, base, factor, original context, sequence length,
#: extra keys). LongRoPE uses the page's illustrative lists (see _longrope_lists).
ROPE_SETTINGS = (
    ("default", 128, 10000.0, 1.0, 4096, 4096, {}),
    ("linear", 128, 10000.0, 4.0, 4096, 4096, {}),
    ("dynamic", 128, 10000.0, 4.0, 4096, 16384, {}),
    ("dynamic", 64, 500000.0, 8.0, 8192, 2048, {}),
    ("yarn", 128, 10000.0, 4.0, 4096, 16384, {"beta_fast": 32.0, "beta_slow": 1.0}),
    ("yarn", 64, 500000.0, 16.0, 2048, 4096, {"beta_fast": 16.0, "beta_slow": 2.0}),
    ("llama3", 128, 500000.0, 8.0, 8192, 8192, {"low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    ("llama3", 64, 10000.0, 4.0, 2048, 2048, {"low_freq_factor": 2.0, "high_freq_factor": 8.0}),
    ("longrope", 96, 10000.0, 8.0, 4096, 8192, {}),
    ("longrope", 96, 10000.0, 8.0, 4096, 1024, {}),
)


class explorer(nodes.General, nodes.Element):
    """An explorer: its name, and its interface strings as (translatable) list items."""


class ExplorerDirective(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"height": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        if name not in LABELS:
            raise self.error(f"unknown explorer {name!r}; known: {sorted(LABELS)}")
        # The page loads these scripts (with checksums in their URLs), and this file picks them and
        # holds the labels: a change to any of them re-reads and rewrites the page.
        env = self.state.document.settings.env
        for path in (Path(__file__), SCRIPTS / "kit.js", SCRIPTS / f"{name}.js", SCRIPTS / "explorers.css"):
            env.note_dependency(str(path))
        node = explorer(name=name)
        self.state.nested_parse(self.content, self.content_offset, node)
        items = list(node.findall(nodes.list_item))
        if len(items) != len(LABELS[name]):
            raise self.error(
                f"explorer {name!r} takes {len(LABELS[name])} interface strings as a bullet list "
                f"({', '.join(LABELS[name])}), got {len(items)}"
            )
        return [node]


def _visit_explorer_html(self: Any, node: explorer) -> None:
    name = node["name"]
    texts = [item.astext().strip() for item in node.findall(nodes.list_item)]
    labels = json.dumps(dict(zip(LABELS[name], texts)), ensure_ascii=False)
    self.body.append(
        f'<div class="posenc-explorer" data-explorer="{name}" '
        f'data-labels="{self.attval(labels)}"></div>\n'
    )
    raise nodes.SkipNode


def _sinusoidal_reference() -> list[dict[str, Any]]:
    import torch

    import posenc
    from posenc import diagnostics

    cases = []
    for dim, base, length, style in SINUSOIDAL_SETTINGS:
        table = posenc.sinusoidal_table(length, dim, base=base, style=style, dtype=torch.float64)
        cases.append(
            {
                "dim": dim,
                "base": base,
                "length": length,
                "layout": style,
                "table": table.flatten().tolist(),
                "dot": diagnostics.dot_product_by_offset(table).tolist(),
            }
        )
    return cases


def _t5_reference() -> list[dict[str, Any]]:
    import torch

    import posenc

    relative = torch.arange(-T5_SPAN, T5_SPAN + 1)
    return [
        {
            "bidirectional": bidirectional,
            "numBuckets": num_buckets,
            "maxDistance": max_distance,
            "low": -T5_SPAN,
            "high": T5_SPAN,
            "buckets": posenc.t5_relative_position_bucket(
                relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
            ).tolist(),
        }
        for bidirectional, num_buckets, max_distance in T5_SETTINGS
    ]


def _longrope_lists(dim: int, factor: float) -> tuple[list[float], list[float]]:
    """The illustrative LongRoPE lists of the scaling-atlas page and its explorer."""
    pairs = dim // 2
    return [1.0] * pairs, [factor ** (i / (pairs - 1)) for i in range(pairs)]


def _rope_scaling_reference() -> list[dict[str, Any]]:
    import posenc

    cases = []
    for rope_type, dim, base, factor, original, seq_len, extra in ROPE_SETTINGS:
        scaling: dict[str, Any] = {"rope_type": rope_type}
        if rope_type != "default":
            scaling["factor"] = factor
        if rope_type == "dynamic":
            scaling["max_position_embeddings"] = original
        elif rope_type in ("yarn", "llama3", "longrope"):
            scaling["original_max_position_embeddings"] = original
        if rope_type == "longrope":
            scaling["short_factor"], scaling["long_factor"] = _longrope_lists(dim, factor)
        scaling.update(extra)
        inv_freq, attention = posenc.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=seq_len)
        cases.append(
            {
                "type": rope_type,
                "dim": dim,
                "base": base,
                "factor": factor,
                "original": original,
                "seqLen": seq_len,
                "betaFast": extra.get("beta_fast", 32.0),
                "betaSlow": extra.get("beta_slow", 1.0),
                "lowFreqFactor": extra.get("low_freq_factor", 1.0),
                "highFreqFactor": extra.get("high_freq_factor", 4.0),
                "invFreq": inv_freq.tolist(),
                "attention": attention,
            }
        )
    return cases


#: ALiBi settings: (heads, q_len, k_len); every head count from 1 to 64 for the slopes.
ALIBI_SETTINGS = ((8, 16, 16), (12, 5, 20), (5, 1, 9), (64, 7, 7))


def _alibi_reference() -> dict[str, Any]:
    import torch

    import posenc

    return {
        "slopes": {n: posenc.alibi_slopes(n, dtype=torch.float64).tolist() for n in range(1, 65)},
        "bias": [
            {
                "heads": heads,
                "qLen": q_len,
                "kLen": k_len,
                "bias": posenc.alibi_bias(heads, q_len, k_len, dtype=torch.float64).flatten().tolist(),
            }
            for heads, q_len, k_len in ALIBI_SETTINGS
        ],
    }


REFERENCES = {
    "sinusoidal": _sinusoidal_reference,
    "alibi": _alibi_reference,
    "t5": _t5_reference,
    "rope_scaling": _rope_scaling_reference,
}


def _write_references(app: Any) -> None:
    if app.builder.format != "html":
        return
    folder = Path(app.outdir) / "_static" / "explorers" / "reference"
    folder.mkdir(parents=True, exist_ok=True)
    for name, compute in REFERENCES.items():
        (folder / f"{name}.json").write_text(json.dumps(compute()))


SCRIPTS = Path(__file__).resolve().parent.parent / "_static" / "explorers"


def _add_scripts_to_explorer_pages(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Give a page the explorer scripts it shows, and no others (Sphinx adds them to this page only)."""
    if doctree is None:
        return
    names = sorted({node["name"] for node in doctree.findall(explorer)})
    if not names:
        return
    # Deferred scripts run in order: the shared kit first.
    app.add_js_file("explorers/kit.js", defer="defer")
    for name in names:
        app.add_js_file(f"explorers/{name}.js", defer="defer")
    app.add_css_file("explorers/explorers.css")


def setup(app: Any) -> dict[str, Any]:
    app.add_node(explorer, html=(_visit_explorer_html, None))
    app.add_directive("posenc-explorer", ExplorerDirective)
    app.connect("html-page-context", _add_scripts_to_explorer_pages)
    app.connect("builder-inited", _write_references)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
