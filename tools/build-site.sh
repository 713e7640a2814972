#!/usr/bin/env bash
# Builds every language of the site (docs/languages.toml) into docs/_build/html/<code>/ plus a root
# index.
# Warnings are errors, cross-references are checked, and the build stops if any Chinese
# message is missing or fuzzy. Unchanged examples and notebooks are not re-run, unless posenc/
# changed (docs/_ext/posenc_rerun.py).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
opts=(-W --keep-going -n -q)
# Sphinx runs quietly (-q); these lines, and one per gallery example that runs
# (posenc_docs.report_progress), show progress.
step() { echo "[$1/4 $(( $(date +%s) - start )) s] $2" >&2; }
out=docs/_build

mkdir -p "$out"
# 1. Extract the English messages (this also runs the gallery examples that changed).
step 1 "extracting messages; running the examples and notebooks that changed"
sphinx-build -b gettext "${opts[@]}" -d "$out/doctrees/gettext" docs "$out/gettext"
# 2. Every message (figure words included) must have a Chinese translation that is not fuzzy,
#    and the translations must follow the glossary's terms and punctuation.
translations=$(python tools/languages.py translations)
step 2 "checking the catalogues of: $translations"
for lang in $translations; do
    python tools/check_translations.py "$out/gettext" "docs/locale/$lang/LC_MESSAGES"
done
# The terminology lint and the length check are written for Chinese (docs/glossary.toml, Chinese
# punctuation, Han characters per English word).
python tools/lint_terms.py docs/locale/zh_CN/LC_MESSAGES
python tools/length_check.py docs/locale/zh_CN/LC_MESSAGES
# 3. One HTML tree per language, side by side.
step 3 "writing the English pages"
sphinx-build -b html "${opts[@]}" -d "$out/doctrees/en" docs "$out/html/en"
for lang in $translations; do
    step 4 "writing the $lang pages (figures re-rendered in that language)"
    sphinx-build -b html "${opts[@]}" -D language="$lang" -d "$out/doctrees/$lang" docs "$out/html/$lang"
done
python tools/languages.py root-index > "$out/html/index.html"
touch "$out/html/.nojekyll"
echo "site built in $(( $(date +%s) - start )) s: $out/html/index.html"
