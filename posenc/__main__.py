"""Command line: ``python -m posenc rope PATH [--json]`` explains a model's RoPE settings."""

from __future__ import annotations

import argparse
import json
import sys

from posenc.rope_config import rope_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    rope = commands.add_parser("rope", help="explain the RoPE settings of a Hugging Face config.json")
    rope.add_argument("config", help="path to config.json, or a model directory holding one")
    rope.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = rope_report(args.config)
    except (OSError, TypeError, ValueError) as error:
        print(f"posenc rope: {args.config}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
