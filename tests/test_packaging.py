"""posenc installs like a package: a wheel with its type marker and metadata, importable away
from the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    (path,) = out.glob("posenc-*.whl")
    return path


def test_wheel_holds_the_package_its_type_marker_and_metadata(wheel: Path) -> None:
    import posenc

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "posenc/py.typed" in names
    assert "posenc/__init__.py" in names and "posenc/_rotation.py" in names
    assert not [n for n in names if n.startswith(("tests/", "docs/", "examples/"))]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert f"Version: {posenc.__version__}" in metadata
    assert "License-Expression: MIT" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Project-URL: Documentation," in metadata


def test_wheel_installs_and_imports_away_from_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    script = (
        "import pathlib, posenc, torch; "
        "print(pathlib.Path(posenc.__file__).parent); "
        "print((pathlib.Path(posenc.__file__).parent / 'py.typed').is_file()); "
        "cos, sin = posenc.rope_cos_sin(4, 8); "
        "print(posenc.apply_rope(torch.ones(1, 4, 8), cos, sin).shape == (1, 4, 8))"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, check=True, capture_output=True, text=True
    )
    location, typed, works = result.stdout.split()
    assert Path(location) == target / "posenc"
    assert typed == "True" and works == "True"


def test_version_is_the_installed_metadata() -> None:
    from importlib.metadata import version

    import posenc

    assert posenc.__version__ == version("posenc")
