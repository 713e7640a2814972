"""Recorded benchmark results: a directive that shows the files in ``benchmarks/results/``.

GPU timings cannot be measured while the site is built (the build machine has no GPU), so they
are recorded by hand with ``benchmarks/bench_rope.py --json`` on a machine that has one, committed
as ``benchmarks/results/*.json``, and shown by ``.. recorded-benchmarks::`` under their own
heading, with the environment they came from — never as results of this build.

The directive takes a bullet list of its interface strings, in the order of :data:`LABELS` (page
text, so the zh_CN page shows them in Chinese). The page that holds it is re-read on every build,
so a new results file appears without touching the page's source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docutils import nodes
from posenc_ledger import ClaimsLedgerDirective
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: The directive's interface strings, in the order of its bullet list.
LABELS = (
    "none",  # shown when no file is recorded
    "recorded",  # introduces each file's environment line
    "shape",
    "dtype",
    "implementation",
    "ms",
    "gb_per_s",
    "fraction",
)

#: Keys every results file must have (the output of ``posenc.benchmark.main --json``).
ROW_KEYS = {"implementation", "shape", "dtype", "device", "ms", "bytes_moved", "gb_per_s", "fraction_of_copy"}
ENVIRONMENT_KEYS = ("date", "gpu", "cuda", "torch", "triton", "transformers", "posenc")


def read_results(folder: Path = RESULTS) -> list[tuple[Path, dict[str, Any]]]:
    """Every results file of ``folder``, checked; a malformed one is an error naming the file."""
    records = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("environment"), dict)
            or not isinstance(data.get("rows"), list)
        ):
            raise ValueError(f"{path}: expected an object with 'environment' and 'rows'")
        for row in data["rows"]:
            missing = ROW_KEYS - set(row)
            if missing:
                raise ValueError(f"{path}: a row lacks {sorted(missing)}")
        records.append((path, data))
    return records


class RecordedBenchmarksDirective(SphinxDirective):
    has_content = True

    def run(self) -> list[nodes.Node]:
        self.env.note_reread()  # the results folder may gain files
        holder = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, holder)
        items = [item.children[0] for item in holder.findall(nodes.list_item)]
        if len(items) != len(LABELS):
            raise self.error(
                f"recorded-benchmarks takes {len(LABELS)} interface strings as a bullet list "
                f"({', '.join(LABELS)}), got {len(items)}"
            )
        label = dict(zip(LABELS, items))
        try:
            records = read_results()
        except ValueError as error:
            raise self.error(str(error)) from error
        if not records:
            return [label["none"].deepcopy()]
        out: list[nodes.Node] = []
        for path, data in records:
            self.env.note_dependency(str(path))
            env = data["environment"]
            line = label["recorded"].deepcopy()
            details = ", ".join(f"{key} {env[key]}" for key in ENVIRONMENT_KEYS if key in env)
            line += nodes.Text(" ")
            line += nodes.literal(text=f"{path.relative_to(ROOT)}: {details}")
            out.append(line)
            out.append(self._table(data["rows"], label))
        return out

    def _table(self, rows: list[dict[str, Any]], label: dict[str, nodes.Node]) -> nodes.table:
        table = nodes.table(classes=["posenc-recorded-benchmarks"])
        group = nodes.tgroup(cols=6)
        table += group
        for width in (22, 10, 24, 12, 12, 12):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += _row([label[key].deepcopy() for key in LABELS[2:]])
        body = nodes.tbody()
        group += body
        for row in rows:
            # Measured values: literals without a source position, which gettext does not extract.
            cells = [
                str(tuple(row["shape"])),
                row["dtype"],
                row["implementation"],
                f"{row['ms']:.3f}",
                f"{row['gb_per_s']:.0f}",
                f"{row['fraction_of_copy']:.0%}",
            ]
            body += _row([_literal(text) for text in cells])
        return table


_row = ClaimsLedgerDirective._row


def _literal(text: str) -> nodes.paragraph:
    paragraph = nodes.paragraph()
    paragraph += nodes.literal(text=text)
    return paragraph


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("recorded-benchmarks", RecordedBenchmarksDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
