"""The skip policy of `make test`: a skip other than "needs CUDA" fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SAMPLE = '''
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="needs CUDA")
def test_gpu():
    pass
'''


def _run(tmp_path: Path, skipping: str, no_skips: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "test_skipping.py").write_text(skipping)
    env = {k: v for k, v in os.environ.items() if k != "POSENC_NO_SKIPS"}
    if no_skips:
        env["POSENC_NO_SKIPS"] = "1"
    env["PYTHONPATH"] = str(TESTS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "skip_policy", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )


@pytest.mark.parametrize(
    "skipping",
    [
        # A conformance test whose reference package is missing (module level, at collection).
        'import pytest\npytest.importorskip("a_reference_package_that_is_not_installed")\n',
        # A docs test without the built site (inside the test).
        'import pytest\n\ndef test_site():\n    pytest.skip("the site is not built")\n',
    ],
)
def test_other_skips_fail_the_run(tmp_path: Path, skipping: str) -> None:
    assert _run(tmp_path, skipping, no_skips=False).returncode == 0
    strict = _run(tmp_path, skipping, no_skips=True)
    assert strict.returncode == 1, strict.stdout
    assert "SKIP-FAILED" in strict.stdout


def test_cuda_skips_pass(tmp_path: Path) -> None:
    result = _run(tmp_path, "", no_skips=True)
    assert result.returncode == 0, result.stdout
    assert "1 passed, 1 skipped" in result.stdout
