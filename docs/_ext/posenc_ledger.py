"""The claims ledger: rows contributed by the pages that measure them, assembled by the build.

A gallery example that tests a claim ends with a list named ``claims`` — plain Python, visible to
the reader as the page's summary (a notebook page ends with the same list, in a code cell)::

    claims = [
        {
            "claim": "...",          # the claim as usually stated, in English
            "source": "...",         # where it comes from
            "measured": f"...",      # what this run measured (formatted from computed values)
            "verdict": "holds",      # one of VERDICTS
        },
    ]

:func:`claims_scraper`, a sphinx-gallery scraper, reads that variable from the example's namespace
after each code block and writes it to ``<example>.claims.json`` beside the generated page (kept,
like the figures, until the example changes). A notebook page's kernel does the same after each
cell (``posenc_notebook_kernel.py``), into myst-nb's cache. The ``claims-ledger`` directive turns every such
file into one table. Claim, source and verdict are page text, so gettext extracts them into the
ledger page's catalogue; the measured value is run output and, like printed output, is not
translated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from posenc_figures import notebook_outputs_folder

#: The verdicts a row may carry.
VERDICTS = ("holds", "holds with conditions", "does not hold", "inconclusive", "not testable here")
FIELDS = ("claim", "source", "measured", "verdict")


def _check_rows(rows: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{where}: 'claims' must be a non-empty list of dicts")
    for row in rows:
        if not isinstance(row, dict) or set(row) != set(FIELDS):
            raise ValueError(f"{where}: each claim needs exactly the keys {FIELDS}, got {row!r}")
        if not all(isinstance(row[key], str) and row[key].strip() for key in FIELDS):
            raise ValueError(f"{where}: every field of a claim must be non-empty text, got {row!r}")
        if row["verdict"] not in VERDICTS:
            raise ValueError(f"{where}: verdict must be one of {VERDICTS}, got {row['verdict']!r}")
    return rows


def claims_scraper(block: Any, block_vars: dict[str, Any], gallery_conf: dict[str, Any], **kwargs: Any) -> str:
    """Record the example's ``claims`` once the block that defines it has run. Adds no images."""
    rows = block_vars["example_globals"].get("claims")
    if rows is None:
        return ""
    source = Path(block_vars["src_file"])
    target = Path(block_vars["target_file"])
    _check_rows(rows, str(source))
    target.with_name(target.stem + ".claims.json").write_text(
        json.dumps({"example": source.stem, "rows": rows}, ensure_ascii=False, indent=1)
    )
    return ""


def forget_claims(gallery_conf: dict[str, Any], fname: str, when: str) -> None:
    """Before an example runs, delete the rows its previous run recorded (a sphinx-gallery reset hook).

    The run writes them again if the page still ends with ``claims``; a page that no longer tests
    claims then leaves the ledger instead of keeping the rows of its last run.
    """
    if when != "before":
        return
    dirs = gallery_conf["gallery_dirs"]
    for folder in [dirs] if isinstance(dirs, str) else dirs:
        for path in (Path(gallery_conf["src_dir"]) / folder).rglob(Path(fname).stem + ".claims.json"):
            path.unlink()


class ClaimsLedgerDirective(SphinxDirective):
    """A table of every claim recorded by the gallery and the notebook pages, grouped by the page
    that measured it, in reading order."""

    def run(self) -> list[nodes.Node]:
        # The rows come from files the gallery writes during this build: re-read every time.
        self.env.note_reread()
        gallery = Path(self.env.srcdir) / "auto_examples"
        pages = {  # docname -> its claims file, from the gallery and from the notebook kernels
            str(path.relative_to(self.env.srcdir).with_suffix("")).removesuffix(".claims"): path
            for path in gallery.rglob("*.claims.json")
        }
        notebooks = notebook_outputs_folder(self.env.app) / "claims"
        for path in notebooks.rglob("*.claims.json"):
            docname = path.relative_to(notebooks).as_posix().removesuffix(".claims.json")
            if docname in self.env.found_docs:  # the page may have been removed since it ran
                pages[docname] = path
        order = _reading_order(self.env)
        files = [(docname, pages[docname]) for docname in sorted(pages, key=lambda d: (order.get(d, len(order)), d))]
        table = nodes.table(classes=["posenc-ledger", "colwidths-given"])
        group = nodes.tgroup(cols=5)
        table += group
        for width in (28, 13, 28, 13, 18):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += self._row([self._text(t) for t in ("Claim", "Source", "Measured", "Verdict", "Page")])
        body = nodes.tbody()
        group += body
        for docname, path in files:
            data = json.loads(path.read_text())
            self.env.note_dependency(str(path))
            for row in _check_rows(data["rows"], str(path)):
                link = nodes.paragraph()
                link += self._page_link(docname)
                # Run output, like printed output: no source position, so gettext skips it.
                measured = nodes.paragraph()
                measured += nodes.literal(text=row["measured"])
                body += self._row(
                    [self._text(row["claim"]), self._text(row["source"]), measured, self._text(row["verdict"]), link]
                )
        if not files:
            raise self.error("no page has recorded claims yet: run the gallery (make html)")
        return [table]

    def _text(self, text: str) -> nodes.paragraph:
        """A paragraph gettext extracts and the zh_CN build translates (it needs a source position)."""
        paragraph = nodes.paragraph(text, text)
        paragraph.source, paragraph.line = self.get_source_info()
        return paragraph

    @staticmethod
    def _row(cells: list[nodes.Node]) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += cell
            row += entry
        return row

    def _page_link(self, docname: str) -> nodes.Node:
        from sphinx.addnodes import pending_xref

        ref = pending_xref("", refdomain="std", reftype="doc", reftarget="/" + docname, refexplicit=False)
        ref += nodes.inline(text=docname)
        return ref


def _reading_order(env: Any) -> dict[str, int]:
    """Each page's place in the site's reading order (the toctrees, depth first from the root)."""
    order: dict[str, int] = {}

    def visit(doc: str) -> None:
        if doc not in order:
            order[doc] = len(order)
            for child in env.toctree_includes.get(doc, []):
                visit(child)

    visit(env.config.root_doc)
    return order


def read_the_ledger_last(app: Any, env: Any, docnames: list[str]) -> None:
    """Read the pages that hold the ledger after every other page: a notebook page records its
    claims while it is read (its kernel runs then), unlike a gallery example, which runs before."""
    holders = [doc for doc in docnames if "claims-ledger" in Path(env.doc2path(doc)).read_text(encoding="utf-8")]
    for doc in holders:
        docnames.remove(doc)
    docnames.extend(holders)


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("claims-ledger", ClaimsLedgerDirective)
    app.connect("env-before-read-docs", read_the_ledger_last)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
