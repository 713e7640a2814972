"""Under ``make test`` (``POSENC_NO_SKIPS=1``) a skipped test fails the run, unless it needs CUDA.

A conformance test skips when its reference package is missing, a docs test when the site is not
built, a browser test without Playwright: convenient while working, but in CI a skip would hide
exactly the failure the test exists to catch. Loaded by ``tests/conftest.py``.
"""

from __future__ import annotations

import os

import pytest

#: Skip reasons that stay skips: no GPU on the CI machine.
ALLOWED_REASONS = ("needs CUDA",)

_unexpected: list[str] = []


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _record(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if not any(allowed in reason for allowed in ALLOWED_REASONS):
        _unexpected.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _record(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("POSENC_NO_SKIPS") and _unexpected and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if os.environ.get("POSENC_NO_SKIPS") and _unexpected:
        terminalreporter.section("skips are failures under POSENC_NO_SKIPS=1")
        for line in _unexpected:
            terminalreporter.line(f"SKIP-FAILED {line}")
