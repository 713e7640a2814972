"""Fail unless every English message of the site has a finished Chinese translation.

Usage: python tools/check_translations.py POT_DIR PO_DIR

POT_DIR holds the templates from ``sphinx-build -b gettext`` (the pages' and ``figures.pot``, the
words of the gallery figures, written by ``docs/_ext/posenc_figures.py``); PO_DIR the catalogues
(``docs/locale/zh_CN/LC_MESSAGES``). A message is missing if its catalogue lacks it, has an
empty translation, or marks it fuzzy. Exit status 1 lists them (run ``make i18n``, translate).
"""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.pofile import read_po


def _ids(message) -> str:  # type: ignore[no-untyped-def]
    return message.id if isinstance(message.id, str) else message.id[0]


def problems(pot_dir: Path, po_dir: Path) -> list[str]:
    """Return one line per message that is untranslated, fuzzy or absent from its catalogue."""
    found: list[str] = []
    pots = sorted(pot_dir.rglob("*.pot"))
    if not pots:
        return [f"no .pot files under {pot_dir}: run the gettext builder first"]
    if (po_dir / "figures.po").is_file() and not (pot_dir / "figures.pot").is_file():
        found.append("figures.pot: missing (the gettext build did not extract the figures' words)")
    for pot in pots:
        rel = pot.relative_to(pot_dir).with_suffix(".po")
        with pot.open("rb") as f:
            template = read_po(f)
        po = po_dir / rel
        if not po.is_file():
            found.append(f"{rel}: catalogue missing ({len(template)} messages)")
            continue
        with po.open("rb") as f:
            catalogue = read_po(f)
        for message in template:
            if not message.id:
                continue
            key = _ids(message)
            translated = catalogue.get(message.id, message.context)
            if translated is None:
                found.append(f"{rel}: untranslated (not in catalogue): {key[:70]!r}")
            elif translated.fuzzy:
                found.append(f"{rel}: fuzzy: {key[:70]!r}")
            elif not (translated.string if isinstance(translated.string, str) else all(translated.string)):
                found.append(f"{rel}: untranslated: {key[:70]!r}")
    for po in sorted(po_dir.rglob("*.po")):
        with po.open("rb") as f:
            catalogue = read_po(f)
        for message in catalogue:
            if message.id and message.fuzzy:
                line = f"{po.relative_to(po_dir)}: fuzzy: {_ids(message)[:70]!r}"
                if line not in found:
                    found.append(line)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    found = problems(Path(argv[1]), Path(argv[2]))
    if found:
        print(f"check_translations: {len(found)} Chinese message(s) missing or fuzzy:", file=sys.stderr)
        for line in found[:40]:
            print("  " + line, file=sys.stderr)
        if len(found) > 40:
            print(f"  ... and {len(found) - 40} more", file=sys.stderr)
        print("Run `make i18n`, translate in docs/locale/zh_CN/LC_MESSAGES, remove fuzzy flags.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
