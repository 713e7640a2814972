"""Hand-written mutants of the functions that mutmut does not mutate (``make mutation-decorated``).

    python tools/decorated_mutants.py [--only posenc/rope.py]

mutmut 3 skips every function with a decorator other than ``@staticmethod`` and ``@classmethod``
(a property, a cached loader, a fake-tensor registration, a Triton kernel), so its kill rates
say nothing about them. ``tools/decorated_mutants.json`` lists, for each decorated function of
``posenc/``, realistic mutants (one textual change each, ``[old, new]``; ``[old, new, reason]``
for one judged equivalent) and the tests that should kill them.

This script first checks that the list names every decorated function and no other, then
applies each mutant to a copy of the repository (under ``mutants/``), runs its tests there
(stopping at the first failure), and writes ``mutation-results/decorated.txt``: each mutant
killed, survived or recorded as equivalent. It exits with status 1 if a function is not listed,
a change no longer applies, a mutant survived, or a recorded equivalent was killed. See
docs/dev/mutation-testing.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tools" / "decorated_mutants.json"
RESULTS = ROOT / "mutation-results"
# What the tests need beside the package (the experiment tests read the records).
COPIED = ["posenc", "tests", "records", "tools", "pyproject.toml"]
# Decorators mutmut handles: their functions are mutated like any other.
MUTATED_DECORATORS = {"staticmethod", "classmethod"}


def _decorator_name(node: ast.expr) -> str:
    return ast.unparse(node.func if isinstance(node, ast.Call) else node)


def decorated_functions(path: Path) -> dict[str, tuple[int, int]]:
    """``{name: (first line, last line)}`` of the functions of ``path`` that mutmut skips.

    The name is the qualified name (``Class.method``); a function named ``_`` (a registration)
    takes its decorator's name (``_@_rope_rotate.register_fake``).
    """
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = [_decorator_name(d) for d in child.decorator_list]
                if decorators and not set(decorators) <= MUTATED_DECORATORS:
                    name = prefix + child.name
                    if child.name == "_":
                        name += "@" + decorators[0]
                    first = min(d.lineno for d in child.decorator_list)
                    found[name] = (first, child.end_lineno or child.lineno)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def mutated_source(text: str, lines: tuple[int, int], old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new`` inside ``lines`` (1-based, inclusive), where it
    must occur exactly once."""
    all_lines = text.splitlines(keepends=True)
    head, body, tail = all_lines[: lines[0] - 1], "".join(all_lines[lines[0] - 1: lines[1]]), all_lines[lines[1]:]
    if body.count(old) != 1:
        raise ValueError(f"{old!r} occurs {body.count(old)} times in the function, not once")
    return "".join(head) + body.replace(old, new) + "".join(tail)


def run_tests(copy: Path, tests: list[str]) -> tuple[bool, float]:
    """Whether ``tests`` pass in ``copy``, and the seconds they took."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=copy, env=env, capture_output=True, text=True)
    return done.returncode == 0, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="check only the functions of this module (posenc/rope.py)")
    args = parser.parse_args()
    listed = json.loads(LIST.read_text(encoding="utf-8"))["functions"]
    problems: list[str] = []

    spans: dict[str, tuple[int, int]] = {}
    for path in sorted((ROOT / "posenc").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        spans |= {f"{module}:{name}": span for name, span in decorated_functions(path).items()}
    names = [entry["function"] for entry in listed]
    problems += [f"not listed in {LIST.name}: {name}" for name in spans if name not in names]
    problems += [f"listed but not a decorated function: {name}" for name in names if name not in spans]
    if args.only:
        listed = [entry for entry in listed if entry["function"].startswith(args.only + ":")]

    lines = []
    # The copy lives inside the repository (in mutants/, which git ignores): the experiment
    # runner's tests ask git for the commit.
    (ROOT / "mutants").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "mutants", prefix="decorated-") as folder:
        copy = Path(folder)
        for item in COPIED:
            source = ROOT / item
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, copy / item)
        where = subprocess.run([sys.executable, "-c", "import posenc; print(posenc.__file__)"], cwd=copy,
                               capture_output=True, text=True).stdout.strip()
        if not where.startswith(str(copy)):
            sys.exit(f"the copy's tests would import posenc from {where}, not from the copy")
        for entry in listed:
            function, tests = entry["function"], entry["tests"]
            if function not in spans:
                continue
            module = copy / function.partition(":")[0]
            original = module.read_text(encoding="utf-8")
            passed, _ = run_tests(copy, tests)
            if not passed:
                problems.append(f"{function}: its tests fail without a mutant")
                continue
            for old, new, *equivalent in entry["mutants"]:
                try:
                    module.write_text(mutated_source(original, spans[function], old, new), encoding="utf-8")
                except ValueError as error:
                    problems.append(f"{function}: {error}")
                    continue
                try:
                    survived, seconds = run_tests(copy, tests)
                finally:
                    module.write_text(original, encoding="utf-8")
                status = ("equivalent" if equivalent else "SURVIVED") if survived else "killed"
                reason = f": {equivalent[0]}" if equivalent else ""
                lines.append(f"{status:10} {function}: `{old}` -> `{new}` ({seconds:.0f} s){reason}")
                print(lines[-1], flush=True)
                if survived and not equivalent:
                    problems.append(f"survived: {function}: `{old}` -> `{new}`")
                if equivalent and not survived:
                    problems.append(f"recorded as equivalent but killed: {function}: `{old}` -> `{new}`")

    killed = sum(line.startswith("killed") for line in lines)
    equivalents = sum(line.startswith("equivalent") for line in lines)
    summary = [f"decorated functions {len(spans)}, mutants {len(lines)}: killed {killed}, "
               f"recorded as equivalent {equivalents}, survived {len(lines) - killed - equivalents}", *lines]
    if problems:
        summary += ["", "PROBLEMS", *problems]
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if not args.only else "." + args.only.replace("/", ".").removesuffix(".py")
    (RESULTS / f"decorated{suffix}.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
    print("\n".join(summary[:1] + (["", "PROBLEMS", *problems] if problems else [])))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
