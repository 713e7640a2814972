"""Shared fixtures: the built site for the docs and browser tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Without a GPU, the Triton kernel of apply_rope runs in Triton's CPU interpreter; the variable
# must be set before the kernel is defined (posenc imports it on first use).
if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

# Under `make test`, skips other than "needs CUDA" fail the run (tests/skip_policy.py).
from skip_policy import (  # noqa: E402, F401
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"


@pytest.fixture
def default_float64() -> Iterator[None]:
    """Run a test with float64 as torch's default dtype, restoring the previous one after."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(scope="session")
def site() -> Path:
    """The built static tree; `make test` builds it first and sets POSENC_REQUIRE_SITE=1."""
    # Imported here: the library tests also run from copies without the site's files
    # (mutation testing, docs/dev/mutation-testing.md).
    from site_languages import LANGUAGES

    if not all((SITE / lang / "index.html").is_file() for lang in LANGUAGES):
        message = f"the site is not built in {SITE}: run `make html` (or `make test`)"
        if os.environ.get("POSENC_REQUIRE_SITE"):
            pytest.fail(message)
        pytest.skip(message)
    return SITE


@pytest.fixture
def triton_launches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the Triton kernel's launches (each appends the number of tensors it rotated)."""
    from posenc import _triton_rope

    count: list[int] = []
    original = _triton_rope.launch

    def counted(pairs, *args):  # type: ignore[no-untyped-def]
        count.append(len(pairs))
        return original(pairs, *args)

    monkeypatch.setattr(_triton_rope, "launch", counted)
    return count


# Property tests run with a fixed seed and no per-example deadline: the same examples every run,
# and no spurious failures on a loaded two-core CI machine.
from hypothesis import settings  # noqa: E402

settings.register_profile("posenc", deadline=None, derandomize=True)
settings.load_profile("posenc")
