"""When pages run again (docs/_ext/posenc_rerun.py): after a change to posenc, every example and
notebook runs again, once; with no change, nothing runs.

The builds use the one-example site of test_build_gates.py (the real docs/conf.py).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from test_build_gates import _NOTEBOOK, _build, _sphinx, pytestmark  # noqa: F401  (same skip rule)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import posenc_rerun  # noqa: E402

_EXAMPLE = '''
    """
    Runs
    ====
    """
    print("the example ran")
'''
# The notebook prints a fresh random number each time it runs; a cached run shows the old one.
_RANDOM = _NOTEBOOK % "import uuid; print('run', uuid.uuid4().hex)"


_RAN = re.compile(r"ran .*plot_case\.py in")


def _build_and_count(tmp_path: Path, first: bool = False) -> tuple[bool, str, str]:
    result = _build(tmp_path, _EXAMPLE, notebook=_RANDOM) if first else _sphinx(tmp_path, "en")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "out" / "notebook.html").read_text(encoding="utf-8")
    return bool(_RAN.search(result.stderr)), re.search(r"run ([0-9a-f]{32})", page)[1], result.stderr


def test_a_changed_library_runs_every_page_again_once(tmp_path: Path) -> None:
    ran, notebook_run, _ = _build_and_count(tmp_path, first=True)
    stamp = tmp_path / "src" / "auto_examples" / "posenc-library.sha256"
    assert ran and stamp.read_text().strip() == posenc_rerun.library_digest()
    # No change: nothing runs, the notebook's output comes from the cache.
    ran, again, log = _build_and_count(tmp_path)
    assert not ran and again == notebook_run and "posenc/ changed" not in log
    # The last complete build saw another library: the example and the notebook run again. The
    # stamp keeps its time, as when the library changes and the stamp does not.
    written = stamp.stat()
    stamp.write_text("0" * 64 + "\n")
    os.utime(stamp, ns=(written.st_atime_ns, written.st_mtime_ns))
    ran, after_change, log = _build_and_count(tmp_path)
    assert ran and after_change != notebook_run and "posenc/ changed since the last build" in log
    assert stamp.read_text().strip() == posenc_rerun.library_digest()
    # And once only.
    ran, last, _ = _build_and_count(tmp_path)
    assert not ran and last == after_change


def test_the_library_digest_covers_every_module_and_record_with_its_path(tmp_path: Path) -> None:
    package, records = tmp_path / "package", tmp_path / "records"
    (package / "sub").mkdir(parents=True)
    records.mkdir()
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    (package / "notes.txt").write_text("not code")
    (records / "run.json").write_text("{}")

    def digest() -> str:
        return posenc_rerun.library_digest(package, records)

    first = digest()
    (package / "notes.txt").write_text("still not code")
    assert digest() == first
    (package / "sub" / "b.py").write_text("y = 3\n")
    changed = digest()
    assert changed != first
    (package / "sub" / "b.py").rename(package / "b.py")  # same contents, another path
    moved = digest()
    assert moved != changed
    (records / "run.json").write_text('{"seeds": [0]}')  # a page reads it: a new record runs the pages again
    assert digest() != moved
    assert posenc_rerun.RECORDS == ROOT / "records" and posenc_rerun.LIBRARY == ROOT / "posenc"
