"""The conventions table: which library uses which layout, frequencies, position origin and precision.

Every row is data (``docs/conventions.toml``, read into :data:`ROWS`) and names the conformance tests that establish what it says, as
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
import tomllib
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

#: Groups, in page order, and the column headers that differ from :data:`HEADERS` in a group.
GROUPS: dict[str, dict[str, str]] = {
    "sinusoidal": {},
    "rope": {},
    "images": {},
    "alibi": {"frequencies": "Slopes"},
    "graphs": {},
    "engines": {},
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


#: The table's data: docs/conventions.toml.
DATA = ROOT / "docs" / "conventions.toml"


def load_rows(path: Path = DATA) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The rows (test ids made ``tests/conformance/<file>::<test>``) and the libraries to cover."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rows = []
    for row in data["row"]:
        rows.append({"package": None, **row, "tests": [f"tests/conformance/{t}" for t in row.get("tests", [])]})
    return rows, tuple(data["libraries"])


#: The rows of the table and the libraries the table must cover, each with a row (checked or not).
ROWS, LIBRARIES = load_rows()


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
        # The conformance folder may gain test files: re-read on every build (cheap, two pages).
        self.env.posenc_conventions_docs = getattr(self.env, "posenc_conventions_docs", set()) | {self.env.docname}
        self.env.note_reread()


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
    app.connect("env-check-consistency", _check_conformance_page)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
