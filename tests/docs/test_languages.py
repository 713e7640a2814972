"""The site's languages are listed once (docs/languages.toml); the build and the root page follow it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from site_languages import HTML_LANG, LANGUAGES, TRANSLATIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import languages  # noqa: E402


def test_the_source_language_comes_first_and_every_translation_has_catalogues() -> None:
    assert LANGUAGES[0] == "en" and TRANSLATIONS == LANGUAGES[1:]
    for code in TRANSLATIONS:
        assert (ROOT / "docs" / "locale" / code / "LC_MESSAGES").is_dir(), code


def test_the_root_page_links_every_language_in_order() -> None:
    page = languages.root_index()
    links = re.findall(r'<a href="([^"]+)/index.html" hreflang="([^"]+)" lang="([^"]+)">', page)
    assert links == [(code, HTML_LANG[code], HTML_LANG[code]) for code in LANGUAGES]


def test_a_new_language_reaches_the_scripts(tmp_path: Path) -> None:
    data = tmp_path / "languages.toml"
    source = (ROOT / "docs" / "languages.toml").read_text(encoding="utf-8")
    data.write_text(source + '\n[[language]]\ncode = "ja"\nhtml = "ja"\nname = "日本語"\ntitle = "t"\ntagline = "t"\n',
                    encoding="utf-8")
    assert [lang.code for lang in languages.translations(data)] == TRANSLATIONS + ["ja"]
    assert 'href="ja/index.html"' in languages.root_index(data)


def test_the_command_line_prints_the_translations() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "languages.py"), "translations"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.split() == TRANSLATIONS
