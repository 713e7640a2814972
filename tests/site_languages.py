"""The site's languages for the tests, from docs/languages.toml (through tools/languages.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import languages  # noqa: E402

#: Every language's code, the source language first.
LANGUAGES = [lang.code for lang in languages.languages()]
#: The codes of the translations.
TRANSLATIONS = [lang.code for lang in languages.translations()]
#: code -> the <html lang> tag.
HTML_LANG = {lang.code: lang.html for lang in languages.languages()}
