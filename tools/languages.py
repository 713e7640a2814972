"""The site's languages, from docs/languages.toml (the one place that lists them).

Usage:
  python tools/languages.py translations    the codes of the translated languages, one per line
  python tools/languages.py root-index      the root page (html/index.html) linking every language
"""

from __future__ import annotations

import html
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "docs" / "languages.toml"


@dataclass(frozen=True)
class Language:
    code: str
    html: str
    name: str
    title: str
    tagline: str


def languages(path: Path = DATA) -> list[Language]:
    """Every language of the site, the source language first."""
    return [Language(**entry) for entry in tomllib.loads(path.read_text(encoding="utf-8"))["language"]]


def translations(path: Path = DATA) -> list[Language]:
    """The languages the pages are translated into."""
    return languages(path)[1:]


def root_index(path: Path = DATA) -> str:
    """The root page: the site's name, each language's title and tagline, and a link to each language."""
    langs = languages(path)
    source = langs[0]
    title = " / ".join(html.escape(lang.title) for lang in langs)
    links = "\n".join(
        f'  <a href="{lang.code}/index.html" hreflang="{lang.html}" lang="{lang.html}">{html.escape(lang.name)}</a>'
        for lang in langs
    )
    taglines = "<br>\n     ".join(html.escape(lang.tagline) for lang in langs)
    return f"""<!DOCTYPE html>
<html lang="{source.html}">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="icon" href="{source.code}/_static/favicon.svg" type="image/svg+xml">
  <title>posenc — {title}</title>
  <style>
    body {{ font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem; line-height: 1.6; }}
    a {{ display: block; font-size: 1.3rem; margin: 0.6rem 0; }}
  </style>
</head>
<body>
  <h1>posenc</h1>
  <p>{taglines}</p>
{links}
</body>
</html>
"""


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) == 2 else ""
    if command == "translations":
        print("\n".join(lang.code for lang in translations()))
    elif command == "root-index":
        sys.stdout.write(root_index())
    else:
        sys.exit(__doc__)
