"""Contracts of posenc.models' data parallelism (posenc/models/_distributed.py).

``share`` is tested directly; ``world``, ``data_parallel`` and ``mean_over_processes`` are tested in
two real processes joined by a gloo process group on the CPU, started from a script so that each
child imports the same ``posenc`` as this test (its ``sys.path`` is passed on).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import posenc

from posenc.models._distributed import data_parallel, mean_over_processes, share, world


def test_the_shares_of_all_processes_are_the_batch_in_order() -> None:
    batch = torch.arange(24).view(8, 3)
    for size in (2, 4, 8):
        shares = [share(batch, rank, size) for rank in range(size)]
        assert all(s.shape == (8 // size, 3) for s in shares)
        assert torch.equal(torch.cat(shares), batch)


def test_a_tuple_or_list_batch_keeps_its_type_and_shares_each_part() -> None:
    tokens, targets = torch.arange(6).view(6, 1), torch.arange(6) + 100
    for container in (tuple, list):
        shared = share(container([tokens, targets]), 2, 3)
        assert type(shared) is container and len(shared) == 2
        assert torch.equal(shared[0], tokens[4:]) and torch.equal(shared[1], targets[4:])


def test_bad_batches_are_named() -> None:
    batch = torch.zeros(6, 5)
    with pytest.raises(ValueError, match="^batch size 6 is not a multiple of the 4 processes$"):
        share(batch, 0, 4)
    with pytest.raises(TypeError, match="^a batch to share between processes must be a tensor or a tuple/list of "
                                        "tensors, got dict$"):
        share({"tokens": batch}, 0, 2)
    with pytest.raises(TypeError, match="^a batch to share between processes must be a tensor or a tuple/list of "
                                        "tensors, got str$"):
        share((batch, "targets"), 1, 2)


def test_one_process_is_rank_0_of_1_and_changes_nothing() -> None:
    assert world() == (0, 1)
    model = torch.nn.Linear(2, 2)
    assert data_parallel(model) is model
    value = torch.tensor(3.0, requires_grad=True)
    assert mean_over_processes(value) is value


WORKER = textwrap.dedent("""
    import json, sys
    import torch
    from torch import distributed as dist
    import posenc
    from posenc.models._distributed import data_parallel, mean_over_processes, world

    def worker(rank, port, out):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        model = torch.nn.Linear(2, 2)
        wrapped = data_parallel(model)
        value = torch.tensor(float(rank + 1), requires_grad=True)
        mean = mean_over_processes(value)
        result = {"world": list(world()), "ddp": isinstance(wrapped, torch.nn.parallel.DistributedDataParallel),
                  "wraps_model": getattr(wrapped, "module", None) is model, "mean": mean.item(),
                  "value_after": value.item(), "mean_requires_grad": mean.requires_grad,
                  "posenc": posenc.__file__}
        with open(f"{out}/{rank}.json", "w") as f:
            json.dump(result, f)
        dist.destroy_process_group()

    if __name__ == "__main__":
        torch.multiprocessing.spawn(worker, args=(int(sys.argv[1]), sys.argv[2]), nprocs=2)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_average_and_wrap(tmp_path: Path) -> None:
    # Here, without a process group, the same calls do nothing (this also tells mutmut, which picks
    # the tests of a function by the calls it sees in this process, that this test covers them).
    model, value = torch.nn.Linear(2, 2), torch.tensor(1.0)
    assert world() == (0, 1) and data_parallel(model) is model and mean_over_processes(value) is value
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    # The children import the posenc this test imported (under mutation testing, the mutated copy).
    package_root = str(Path(posenc.__file__).resolve().parents[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([package_root, *(p or os.getcwd() for p in sys.path)])}
    done = subprocess.run([sys.executable, str(script), str(free_port()), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    for rank, result in enumerate(results):
        assert Path(result["posenc"]).resolve() == Path(posenc.__file__).resolve()
        assert result["world"] == [rank, 2]
        assert result["ddp"] and result["wraps_model"]
        assert result["mean"] == 1.5  # (1 + 2) / 2 processes
        assert result["value_after"] == rank + 1  # the caller's tensor is not reduced in place
        assert not result["mean_requires_grad"]  # a number to log, outside the graph
