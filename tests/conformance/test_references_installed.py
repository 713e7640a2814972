"""Conformance tests skip when their reference package is missing; `make test` must not.

`make test` sets POSENC_REQUIRE_REFERENCES=1, so a reference that failed to install (or stopped
importing) fails the run instead of silently skipping its conformance tests.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest

# "mlx.core", not "mlx": mlx is a namespace package (no __init__.py), which imports even when its
# compiled core is missing; mlx.core is the extension module the MLX tests call.
REFERENCES = ["transformers", "x_transformers", "rotary_embedding_torch", "positional_encodings", "timm", "torchtune",
              "torch_geometric", "scipy", "mlx.core", "mlx_lm", "gguf"]


@pytest.mark.skipif(not os.environ.get("POSENC_REQUIRE_REFERENCES"), reason="set by `make test` only")
@pytest.mark.parametrize("package", REFERENCES)
def test_reference_package_is_installed(package: str) -> None:
    assert importlib.util.find_spec(package) is not None, f"{package} is not installed: run `make venv`"
    # timm and torchtune are read file by file: timm's torchvision import is unavailable, and
    # torchtune/__init__.py imports torchao and more, which the Makefile does not install (--no-deps).
    if package not in ("timm", "torchtune"):
        importlib.import_module(package)
