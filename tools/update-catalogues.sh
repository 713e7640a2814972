#!/usr/bin/env bash
# Refreshes the catalogues docs/locale/<lang>/LC_MESSAGES/*.po of every translation
# (docs/languages.toml) from the English sources.
# New messages arrive untranslated and changed ones fuzzy: translate them, remove the
# fuzzy flags, then `make html` (which fails until every message is translated).
set -euo pipefail
cd "$(dirname "$0")/.."
sphinx-build -b gettext -W --keep-going -n -q -d docs/_build/doctrees/gettext docs docs/_build/gettext
for lang in $(python tools/languages.py translations); do
    sphinx-intl update -p docs/_build/gettext -l "$lang" -d docs/locale --no-obsolete -w 0
    python tools/check_translations.py docs/_build/gettext "docs/locale/$lang/LC_MESSAGES" || true
done
python tools/lint_terms.py docs/locale/zh_CN/LC_MESSAGES || true
python tools/length_check.py docs/locale/zh_CN/LC_MESSAGES || true
