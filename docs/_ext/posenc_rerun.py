"""The two changes that no tool of the build notices: the library and the navigation.

Sphinx re-reads a page when its source, its catalogue or a file it declared changes; the site's
directives declare what they read where they read it (``env.note_dependency`` for a file,
``env.note_reread`` for a folder that may gain files). sphinx-gallery re-runs an example when
the example's text changes, myst-nb a notebook when its cells change. Two changes fall outside
all of these, and this extension handles both (docs/dev/site-pipeline.md, "When pages run
again"):

- **The library.** Examples and notebooks call ``posenc``, whose code none of the tools hashes,
  and read its recorded runs (``records/*.json``). When either differs from the stamp the last
  complete build left beside the gallery,
  every example runs again (sphinx-gallery's public ``run_stale_examples``), the notebook cache
  is emptied (myst-nb's ``nb_execution_cache_path``), and notebook pages, which depend on the
  stamp, are read and run again. The stamp is written when the build that ran them finishes
  without an error, so the other languages' builds, which follow, run nothing again; a build
  stopped halfway leaves the old stamp, and the next one runs everything again.
- **The navigation.** Sphinx writes the pages it re-read; a page's sidebar and its previous /
  next links also depend on other pages' toctrees, so when the navigation changed, every page is
  written again (a few seconds).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import posenc

#: The stamp's name, in the gallery's output folder (it describes the outputs there).
STAMP = "posenc-library.sha256"
#: A MyST page that myst-nb executes: front matter naming its format (as ``file_format: mystnb``).
_MYST_NOTEBOOK = re.compile(r"---\s*\n(?:.*\n)*?file_format:\s*mystnb\s*\n")


#: The library's code, and the recorded runs that pages read (posenc.experiments.RECORDS).
LIBRARY = Path(posenc.__file__).parent
RECORDS = LIBRARY.parent / "records"


def library_digest(package: Path = LIBRARY, records: Path = RECORDS) -> str:
    """SHA-256 of every ``.py`` file of ``package`` and every ``.json`` record in ``records``, each
    with its path."""
    digest = hashlib.sha256()
    for folder, pattern in ((package, "*.py"), (records, "*.json")):
        for path in sorted(folder.rglob(pattern)):
            name = f"{folder.name}/{path.relative_to(folder).as_posix()}"
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _stamp(app: Any) -> Path:
    return Path(app.srcdir, app.config.sphinx_gallery_conf["gallery_dirs"], STAMP)


def _run_again_if_the_library_changed(app: Any, config: Any) -> None:
    """Before the gallery runs: when posenc changed since the last complete build, run every page."""
    app.posenc_library = library_digest()
    stamp = _stamp(app)
    if stamp.is_file() and stamp.read_text().strip() == app.posenc_library:
        return
    config.sphinx_gallery_conf["run_stale_examples"] = True
    shutil.rmtree(config.nb_execution_cache_path, ignore_errors=True)
    if stamp.is_file():
        # Newer than every page read so far: the notebook pages, which depend on it, are read
        # (and run) again in this build, not only in the one after the new stamp is written.
        os.utime(stamp)
    # To the terminal, like the examples' progress lines (make html runs Sphinx quietly).
    print("posenc/ changed since the last build: every example and notebook runs again", file=sys.stderr, flush=True)


def _notebooks_follow_the_stamp(app: Any, docname: str, source: list[str]) -> None:
    """A notebook page is re-read (and so, its cache emptied, run again) when the stamp changes.

    Sphinx reads a notebook, and myst-nb executes it, only when the page's own source changed.
    """
    if app.env.doc2path(docname).suffix == ".ipynb" or _MYST_NOTEBOOK.match(source[0]):
        app.env.note_dependency(str(_stamp(app)))


def _write_stamp(app: Any, exception: BaseException | None) -> None:
    """After a complete build that ran the examples, when the library changed: the new stamp."""
    stamp = _stamp(app)
    if exception is not None or not app.config.sphinx_gallery_conf["plot_gallery"]:
        return
    if not stamp.is_file() or stamp.read_text().strip() != app.posenc_library:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(app.posenc_library + "\n")


def _navigation_changed(app: Any, env: Any) -> list[str]:
    """Every page when the navigation (toctrees, previous / parent / next) differs from the last build's."""
    navigation = (
        {doc: list(children) for doc, children in sorted(env.toctree_includes.items())},
        env.collect_relations(),
    )
    previous = getattr(env, "posenc_navigation", None)
    env.posenc_navigation = navigation
    if previous == navigation:
        return []
    return sorted(env.found_docs)


def setup(app: Any) -> dict[str, Any]:
    # After sphinx-gallery fills its configuration's defaults (priority 10).
    app.connect("config-inited", _run_again_if_the_library_changed, priority=50)
    app.connect("source-read", _notebooks_follow_the_stamp)
    app.connect("build-finished", _write_stamp)
    app.connect("env-updated", _navigation_changed)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
