"""One install list: every place that builds the site installs through `make html`."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def commands(steps: list) -> list[str]:  # type: ignore[type-arg]
    return [step if isinstance(step, str) else step.get("run", "") for step in steps]


def test_read_the_docs_builds_with_make_html_and_installs_nothing_itself() -> None:
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text())
    jobs = config["build"]["jobs"]
    assert set(jobs) == {"build"}, "Read the Docs must not have its own install job"
    html = jobs["build"]["html"]
    assert any(line.split()[-2:] == ["make", "html"] for line in html), html
    assert not any("pip install" in line or "npm " in line for line in html)


def test_github_pages_builds_with_make_html_and_installs_nothing_itself() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    runs = commands(workflow["jobs"]["build"]["steps"])
    assert "make html" in runs
    assert not any("pip install" in run or "npm " in run for run in runs)


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make html" in readme
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"
