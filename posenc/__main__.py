"""Command line.

``python -m posenc rope PATH [--json]`` explains a model's RoPE settings.
``python -m posenc rope-parity PATH (--cos F --sin F | --reference F --rotated F) [...]`` checks an
engine's RoPE against the config and names the porting bug a difference looks like.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from posenc.rope_config import rope_report
from posenc.parity import rope_parity

#: Exit status of rope-parity: match, mismatch, bad input.
MATCH, MISMATCH, BAD_INPUT = 0, 1, 2


def load_array(spec: str) -> torch.Tensor:
    """A tensor from ``FILE.npy``, ``FILE.safetensors`` (its only tensor) or ``FILE.safetensors:NAME``.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If the file is neither ``.npy`` nor ``.safetensors``, holds no array, or the name is
        missing or ambiguous.
    TypeError
        If the array does not hold real numbers.
    """
    path, name = Path(spec), None
    if not path.exists() and ":" in spec:
        head, name = spec.rsplit(":", 1)
        path = Path(head)
    if not path.is_file():
        raise OSError(f"{spec}: no such file")
    if path.suffix == ".npy":
        if name is not None:
            raise ValueError(f"{spec}: a .npy file holds one array; drop ':{name}'")
        try:
            array = np.load(path, allow_pickle=False)
        except ValueError as error:  # pickled objects, or not an .npy file
            raise ValueError(f"{spec}: not a numeric .npy array ({error})") from None
        if array.dtype.kind not in "iuf":
            raise TypeError(f"{spec}: holds {array.dtype} values, not real numbers")
        return torch.from_numpy(np.ascontiguousarray(array))
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            tensors = load_file(path)
        except SafetensorError as error:
            raise ValueError(f"{spec}: not a safetensors file ({error})") from None
        if name is None:
            if len(tensors) != 1:
                raise ValueError(f"{spec}: holds {sorted(tensors)}; name one as {path}:NAME")
            return next(iter(tensors.values()))
        if name not in tensors:
            raise ValueError(f"{spec}: no tensor {name!r}; the file holds {sorted(tensors)}")
        return tensors[name]
    raise ValueError(f"{spec}: expected a .npy or .safetensors file")


def _rope(args: argparse.Namespace) -> int:
    try:
        report = rope_report(args.config)
    except (OSError, TypeError, ValueError) as error:
        print(f"posenc rope: {args.config}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report.to_dict(), indent=2) if args.json else report)
    return 0


def _rope_parity(args: argparse.Namespace) -> int:
    try:
        arrays = {key: load_array(getattr(args, key)) for key in ("cos", "sin", "reference", "rotated", "positions")
                  if getattr(args, key) is not None}
        positions = arrays.pop("positions", None)
        if positions is not None and args.offset is not None:
            raise ValueError("give --positions or --offset, not both")
        first = arrays.get("cos", arrays.get("reference"))
        if args.offset is not None and first is not None and first.ndim >= 2:  # else rope_parity says why not
            positions = args.offset + torch.arange(first.shape[-2])
        result = rope_parity(args.config, **arrays, positions=positions, scheme=args.scheme, layout=args.layout,
                             tolerance=args.tolerance)
    except (OSError, TypeError, ValueError) as error:
        print(f"posenc rope-parity: {error}", file=sys.stderr)
        return BAD_INPUT
    print(json.dumps(result.to_dict(), indent=2) if args.json else result)
    return MATCH if result.matches else MISMATCH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    rope = commands.add_parser("rope", help="explain the RoPE settings of a Hugging Face config.json")
    rope.add_argument("config", help="path to config.json, or a model directory holding one")
    rope.add_argument("--json", action="store_true", help="print the report as JSON")
    rope.set_defaults(run=_rope)
    parity = commands.add_parser(
        "rope-parity", help="check an engine's cos/sin, or rotated queries/keys, against a config.json",
        description="Compare what an engine produced with posenc's reading of the config and name the known "
        "porting bug a difference looks like (exit status 0: match, 1: mismatch, 2: bad input). Arrays are "
        "FILE.npy, FILE.safetensors (its only tensor) or FILE.safetensors:NAME.")
    parity.add_argument("config", help="path to config.json, or a model directory holding one")
    parity.add_argument("--cos", help="the engine's cos table (..., seq, width)")
    parity.add_argument("--sin", help="the engine's sin table, same shape")
    parity.add_argument("--reference", help="queries or keys before RoPE, from the reference model (..., seq, head_dim)")
    parity.add_argument("--rotated", help="the same after the engine's RoPE, same shape")
    parity.add_argument("--positions", help="the positions of the seq rows (seq,); default 0 ... seq-1")
    parity.add_argument("--offset", type=int, help="positions offset ... offset+seq-1 (a cache offset)")
    parity.add_argument("--scheme", help="which RoPE setting of the config (e.g. sliding_attention); default the global one")
    parity.add_argument("--layout", choices=("half", "interleaved"),
                        help="pairing of the checkpoint's channels; default the config's")
    parity.add_argument("--tolerance", type=float, help="largest difference counted as equal")
    parity.add_argument("--json", action="store_true", help="print the result as JSON")
    parity.set_defaults(run=_rope_parity)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
