"""``python -m posenc.experiments``: run an experiment and write its record, or list stale records.

    python -m posenc.experiments run NAME [--size full|short] [--seeds 0 1 2] [--set steps=20] [--out DIR]
    torchrun --standalone --nproc-per-node 2 -m posenc.experiments run NAME ...
    python -m posenc.experiments stale [--out DIR]

Under torchrun the process group is initialised here (gloo on the CPU, nccl with CUDA), every
process runs every seed on its share of each batch, and the first process writes the record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from posenc.experiments import EXPERIMENTS, RECORDS, SIZES, run, save, stale_records


def _value(text: str) -> object:
    """A --set value: JSON (numbers, lists, true/false), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc.experiments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run an experiment and write its record")
    run_parser.add_argument("name", choices=EXPERIMENTS)
    run_parser.add_argument("--size", choices=SIZES, default="full")
    run_parser.add_argument("--seeds", type=int, nargs="+", help="default: the configuration's seeds")
    run_parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help="replace a configuration value (e.g. steps=20), for quick checks")
    run_parser.add_argument("--out", type=Path, default=RECORDS, help=f"folder of the record (default {RECORDS})")
    stale_parser = commands.add_parser("stale", help="list the records whose experiment has changed")
    stale_parser.add_argument("--out", type=Path, default=RECORDS)
    args = parser.parse_args(argv)
    if args.command == "stale":
        names = stale_records(args.out)
        print("\n".join(names) if names else "no stale records")
        return 1 if names else 0
    overrides = {}
    for item in args.set:
        key, sep, text = item.partition("=")
        if not sep:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
        overrides[key] = _value(text)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        record = run(args.name, args.size, args.seeds, overrides=overrides)
        if not distributed or torch.distributed.get_rank() == 0:
            print(f"wrote {save(record, args.out)} ({record.seconds:.0f} s, {record.machine['processes']} process(es))")
    except ValueError as error:
        print(f"posenc.experiments: {error}", file=sys.stderr)
        return 2
    finally:
        if distributed:
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
