"""Mutation testing of one posenc module with the tests that cover it (``make mutation``).

    python tools/mutation.py posenc/rope_config.py [--jobs 2] [--resume]

Runs mutmut 3 (configured in pyproject.toml, ``[tool.mutmut]``) on that module only, with the
test files that ``tools/mutation_targets.json`` lists for it, then writes a summary to
``mutation-results/<module>.txt`` (readable: counts, kill rate, every surviving mutant with its
diff) and ``mutation-results/<module>.json``. Survivors recorded in
``tools/mutation_equivalents.json`` are marked equivalent and left out of the kill rate.
mutmut keeps its copies and per-mutant results in ``mutants/``. See docs/dev/mutation-testing.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ROOT / "tools" / "mutation_targets.json"
EQUIVALENTS = ROOT / "tools" / "mutation_equivalents.json"
RESULTS = ROOT / "mutation-results"
# Counted as detected: the tests failed, or the mutant made them hang past the time limit.
DETECTED = ("killed", "timeout")


def module_tests(module: str) -> tuple[list[str], float]:
    """The test files that cover ``module``, and its kill-rate target."""
    targets = json.loads(TARGETS.read_text(encoding="utf-8"))
    tests = next((g["tests"] for g in targets["groups"] if module in g["modules"]), None)
    if tests is None:
        known = sorted(m for g in targets["groups"] for m in g["modules"])
        sys.exit(f"{module} has no tests listed in {TARGETS.relative_to(ROOT)}; add a group for it "
                 f"(listed: {', '.join(known)})")
    missing = [t for t in tests if not t.startswith("-") and not (ROOT / t.partition("::")[0]).exists()]
    if missing:
        sys.exit(f"{TARGETS.relative_to(ROOT)} lists test files that do not exist: {missing}")
    target = next(rate for pattern, rate in targets["kill_rate_targets"] if fnmatch.fnmatch(module, pattern))
    return tests, target


def change_of(diff: str) -> str:
    """One line for a mutant's diff: ``function: `old` -> `new```."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return f"`{' / '.join(removed)}` -> `{' / '.join(added)}`"


def described(entry: dict) -> str:
    """A mutant as ``tools/mutation_equivalents.json`` records it: ``function: `old` -> `new```."""
    return f"{entry['function']}: {entry['change']}"


def function_of(mutant: str) -> str:
    """The function a mutant id belongs to (``_Reader.get``, ``_head_widths``)."""
    name = mutant.rpartition(".")[2].rpartition("__mutmut_")[0]
    if name.startswith("xǁ"):
        return ".".join(name[2:].split("ǁ"))
    return name[2:]


def timed_out(module: str) -> list[str]:
    """The mutants of ``module`` whose last result in mutants/ is a timeout."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code

    data = SourceFileMutationData(path=Path(module))
    data.load()
    return sorted(key for key, code in data.exit_code_by_key.items() if status_by_exit_code[code] == "timeout")


def summarise(module: str, tests: list[str], target: float, wall_s: float | None) -> dict:
    """Counts, kill rate and survivors of ``module`` from mutmut's records in mutants/."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    import mutmut

    data = SourceFileMutationData(path=Path(module))
    data.load()
    status = {key: status_by_exit_code[code] for key, code in data.exit_code_by_key.items()}
    counts: dict[str, int] = {}
    for s in status.values():
        counts[s] = counts.get(s, 0) + 1

    recorded = [e for e in json.loads(EQUIVALENTS.read_text(encoding="utf-8"))["equivalents"]
                if e["module"] == module]
    by_id = {e["mutant"]: e for e in recorded}
    survivors, equivalents, stale = [], [], []
    for key in sorted(status, key=lambda k: (function_of(k), int(k.rpartition("_")[2]))):
        if status[key] in DETECTED or status[key] == "not checked":
            continue
        diff = get_diff_for_mutant(key, path=module)
        entry = {"mutant": key, "status": status[key], "function": function_of(key), "change": change_of(diff),
                 "diff": diff}
        record = by_id.get(key)
        if record is not None and status[key] == "survived" and record["change"] == described(entry):
            equivalents.append({**entry, "reason": record["reason"]})
        else:
            survivors.append(entry)
    for record in recorded:
        key = record["mutant"]
        if key not in status:
            stale.append(f"{key}: no such mutant any more")
        elif status[key] != "survived":
            stale.append(f"{key}: recorded as equivalent but {status[key]}")
        else:
            actual = described({"function": function_of(key), "change": change_of(get_diff_for_mutant(key, path=module))})
            if record["change"] != actual:
                stale.append(f"{key}: recorded change {record['change']} is not this mutant's ({actual})")

    total = len(status)
    detected = sum(counts.get(s, 0) for s in DETECTED)
    checked = total - counts.get("not checked", 0)
    judged = checked - len(equivalents)
    rate = detected / judged if judged else 1.0
    return {
        "module": module,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mutmut": mutmut.__version__ if hasattr(mutmut, "__version__") else "",
        "tests": tests,
        "wall_s": None if wall_s is None else round(wall_s),
        "total": total,
        "counts": dict(sorted(counts.items())),
        "equivalent": len(equivalents),
        "kill_rate": round(rate, 4),
        "kill_rate_raw": round(detected / checked, 4) if checked else 1.0,
        "not_checked": total - checked,
        "target": target,
        "meets_target": rate >= target,
        "survivors": survivors,
        "equivalents": equivalents,
        "stale_equivalents": stale,
    }


def write_summary(summary: dict) -> Path:
    """mutation-results/<module>.json and .txt; returns the .txt path."""
    RESULTS.mkdir(exist_ok=True)
    stem = summary["module"].removesuffix(".py").replace("/", ".")
    (RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    c = summary["counts"]
    lines = [
        f"module      {summary['module']}  ({summary['date']}, mutmut {summary['mutmut']})",
        f"tests       {' '.join(summary['tests'])}",
        f"wall time   {'-' if summary['wall_s'] is None else str(summary['wall_s']) + ' s'}",
        f"mutants     {summary['total']}: " + ", ".join(f"{k} {v}" for k, v in c.items()),
        f"equivalent  {summary['equivalent']} (tools/mutation_equivalents.json)",
        f"kill rate   {summary['kill_rate']:.1%} of checked non-equivalent mutants (killed + timeout); "
        f"target {summary['target']:.0%}: {'met' if summary['meets_target'] else 'NOT met'}"
        f"  [{summary['kill_rate_raw']:.1%} of all]",
    ]
    if summary["not_checked"]:
        lines.append(f"INCOMPLETE  {summary['not_checked']} mutants not checked (interrupted run): the rates "
                     f"count the checked ones only; `make mutation MODULE=... RESUME=1` tests the rest")
    if summary["stale_equivalents"]:
        lines += ["", "stale entries in tools/mutation_equivalents.json (fix or remove them):"]
        lines += [f"  {s}" for s in summary["stale_equivalents"]]
    lines += ["", f"not killed and not recorded as equivalent ({len(summary['survivors'])}):"]
    for s in summary["survivors"]:
        lines += ["", f"{s['mutant']}  [{s['status']}]  {s['function']}: {s['change']}", s["diff"]]
    if summary["equivalents"]:
        lines += ["", f"recorded as equivalent ({len(summary['equivalents'])}):"]
        lines += [f"  {e['mutant']}  {e['function']}: {e['change']}  -- {e['reason']}"
                  for e in summary["equivalents"]]
    path = RESULTS / f"{stem}.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a file under posenc/, e.g. posenc/rope_config.py")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the results already in mutants/ and test only the mutants without one "
                             "(after an interrupted run); by default every mutant of the module is retested")
    parser.add_argument("--summary-only", action="store_true",
                        help="rewrite the summary from the results in mutants/ without running anything")
    args = parser.parse_args()
    os.chdir(ROOT)
    module = Path(args.module).as_posix().removeprefix("./")
    if not (module.startswith("posenc/") and module.endswith(".py") and Path(module).is_file()):
        sys.exit(f"MODULE must be a .py file under posenc/, got {args.module!r}")
    tests, target = module_tests(module)
    try:
        import mutmut.__main__ as mutmut_cli
        from mutmut.configuration import config
    except ImportError:
        sys.exit('mutmut is not installed: .venv/bin/python -m pip install -c requirements/constraints.txt -e ".[mutation]"')

    wall_s = None
    if not args.summary_only:
        # The module and its tests replace pyproject's whole-package defaults; the rest of the
        # [tool.mutmut] configuration stands.
        config().only_mutate = [module]
        config().pytest_add_cli_args_test_selection = list(tests)
        # A package's __init__.py names its mutants after the package (posenc.experiments.x_…).
        pattern = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".") + ".*"
        # mutmut takes a copy newer than its source for an already mutated file; a module that
        # the last run only copied (another MODULE) would then get no mutants. Regenerating is
        # cheap, and results of unchanged functions are kept (mutants/<module>.meta).
        (ROOT / "mutants" / module).unlink(missing_ok=True)
        # Which tests reach which function is recorded only for the functions mutated at the time
        # (mutants/mutmut-stats.json): collect it again, one clean run of the module's tests.
        (ROOT / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        start = time.monotonic()
        run_args = ["run", "--max-children", str(args.jobs)] + ([] if args.resume else [pattern])
        try:
            mutmut_cli.cli.main(args=run_args, standalone_mode=False)
        except SystemExit as stop:
            if stop.code:
                raise
        # mutmut also stops a mutant at a wall-clock deadline, which a loaded machine can reach
        # without any hang: test each timeout once more, alone, before counting it as detected.
        timeouts = timed_out(module)
        if timeouts:
            print(f"re-testing {len(timeouts)} timed-out mutant(s) one at a time")
            try:
                mutmut_cli.cli.main(args=["run", "--max-children", "1", *timeouts], standalone_mode=False)
            except SystemExit as stop:
                if stop.code:
                    raise
        wall_s = time.monotonic() - start
    path = write_summary(summarise(module, tests, target, wall_s))
    print(path.read_text(encoding="utf-8").split("\n\n")[0])
    print(f"\nsummary and surviving mutants: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
