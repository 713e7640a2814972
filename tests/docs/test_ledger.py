"""The claims ledger: rows recorded by the examples, assembled into one page in both languages."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import posenc_ledger  # noqa: E402

GALLERY = ROOT / "docs" / "auto_examples"
#: posenc_ledger.VERDICTS as the Chinese ledger shows them, in the same order.
ZH_VERDICTS = ("成立", "有条件成立", "不成立", "无定论", "本站无法检验")
ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.DOTALL)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.DOTALL)
TAG = re.compile(r"<[^>]+>")


def _rows(page: Path) -> list[list[str]]:
    html = page.read_text()
    table = html[html.index('class="posenc-ledger'):]
    table = table[: table.index("</table>")]
    rows = [CELL.findall(row) for row in ROW.findall(table)]
    return [cells for cells in rows if cells]  # the header row has <th>, not <td>


NOTEBOOK_CLAIMS = ROOT / "docs" / "_build" / ".jupyter_cache" / "posenc" / "claims"
NEXT = re.compile(r'<link rel="next" title="[^"]*" href="([^"]+)"')


def _reading_order(site: Path) -> list[str]:
    """The site's pages from the root, following each page's "next" link (docnames)."""
    order, page = [], site / "index.html"
    while page.name and page not in [site / f"{d}.html" for d in order]:
        order.append(page.relative_to(site).with_suffix("").as_posix())
        found = NEXT.search(page.read_text())
        if not found:
            break
        page = (page.parent / found[1]).resolve()
    return order


def _recorded(site: Path) -> list[tuple[str, dict[str, str]]]:
    """(page, row) of every recorded claim, gallery and notebooks, pages in reading order."""
    pages = {str(p.relative_to(ROOT / "docs").with_suffix("")).removesuffix(".claims"): p
             for p in GALLERY.rglob("*.claims.json")}
    pages |= {p.relative_to(NOTEBOOK_CLAIMS).as_posix().removesuffix(".claims.json"): p
              for p in NOTEBOOK_CLAIMS.rglob("*.claims.json")}
    order = _reading_order(site.resolve())
    assert set(pages) <= set(order), set(pages) - set(order)
    return [(doc, row) for doc in sorted(pages, key=order.index) for row in json.loads(pages[doc].read_text())["rows"]]


@pytest.mark.docs
@pytest.mark.parametrize(
    ("lang", "verdicts"),
    [
        ("en", set(posenc_ledger.VERDICTS)),
        ("zh_CN", set(ZH_VERDICTS)),
    ],
)
def test_ledger_holds_every_recorded_claim(site: Path, lang: str, verdicts: set[str]) -> None:
    recorded = _recorded(site / lang)
    assert len(recorded) >= 8 and any(doc.startswith("properties/") for doc, _ in recorded)  # notebooks too
    rows = _rows(site / lang / "claims.html")
    assert len(rows) == len(recorded)
    for cells, (doc, row) in zip(rows, recorded):
        claim, _, measured, verdict, page = (TAG.sub("", c).strip() for c in cells)
        assert TAG.sub("", measured) == html.escape(row["measured"], quote=False)
        assert verdict in verdicts
        # This row's own verdict, in the page's language.
        expected = row["verdict"] if lang == "en" else ZH_VERDICTS[posenc_ledger.VERDICTS.index(row["verdict"])]
        assert verdict == expected, (verdict, row)
        if lang == "en":
            # Sphinx's smart quotes turn ' into ’, "…" into “…” and ... into … in page text.
            plain = claim.replace("\u2019", "'").replace("\u2026", "...")
            plain = plain.replace("\u201c", '"').replace("\u201d", '"')
            assert plain == html.escape(row["claim"], quote=False)
        else:
            assert re.search(r"[\u4e00-\u9fff]", claim), claim  # translated
        href = re.search(r'href="([^"#]+)', cells[4]).group(1)
        assert (site / lang / href).resolve() == (site / lang / f"{doc}.html").resolve(), (href, doc)
        assert page


def test_rows_are_checked() -> None:
    good = {"claim": "c", "source": "s", "measured": "m", "verdict": "holds"}
    assert posenc_ledger._check_rows([good], "x") == [good]
    for bad in ([], [{**good, "verdict": "mostly"}], [{**good, "measured": ""}], [{"claim": "c"}]):
        with pytest.raises(ValueError):
            posenc_ledger._check_rows(bad, "example.py")


def test_an_example_that_runs_again_forgets_its_previous_rows(tmp_path: Path) -> None:
    # A page that drops its claims must leave the ledger: its old rows go before it runs again.
    part = tmp_path / "auto_examples" / "02_properties"
    part.mkdir(parents=True)
    (part / "plot_a.claims.json").write_text("{}")
    (part / "plot_b.claims.json").write_text("{}")
    conf = {"src_dir": str(tmp_path), "gallery_dirs": ["auto_examples"]}
    posenc_ledger.forget_claims(conf, "plot_a.py", "after")
    assert (part / "plot_a.claims.json").exists()
    posenc_ledger.forget_claims(conf, "plot_a.py", "before")
    assert not (part / "plot_a.claims.json").exists() and (part / "plot_b.claims.json").exists()
