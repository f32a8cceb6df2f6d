"""Games sharded over processes: `--devices N` for scoring and search.

N games are split into N contiguous slices of game numbers, one per process (rank); each process plays
its slice exactly as one process would (a game's moves depend only on its number, never on its batch),
and rank 0 gathers the results in game order, so a sharded run equals a one-process run game for game.

Processes: rank 0 re-runs the script (`sys.argv`) once per other rank with RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT set, as Lightning and torchrun do; a process started that way (or by torchrun) joins
instead of starting more. The only traffic is one gather of Python objects at the end of each call,
through gloo on CPU and CUDA alike (no tensor collectives are needed). One process starts no process
group. The blueprint learner does not use this: it runs on Lightning Fabric's DDP (lbs.rl.learner).
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")

TIMEOUT = datetime.timedelta(days=7)
"""How long a rank waits in the gather for the slowest rank (a long search run is hours; a crashed rank
closes its connections, so the others fail at once rather than wait)."""


@dataclass(frozen=True)
class Shard:
    """This process's place in a run over `world` processes."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the process that prints, writes files and receives the gathered results."""
        return self.rank == 0

    def games(self, n: int) -> range:
        """This rank's contiguous slice of game numbers 0..n-1 (sizes differ by at most one)."""
        return range(n * self.rank // self.world, n * (self.rank + 1) // self.world)

    def gather(self, items: list[T]) -> list[T]:
        """Every rank's items, concatenated in rank order (so in game order), on rank 0; [] on the others.
        Every rank must call it. One process: `items` itself."""
        if self.world == 1:
            return items
        parts: list | None = [None] * self.world if self.main else None
        dist.gather_object(items, parts, dst=0)
        return [x for part in parts for x in part] if parts is not None else []


ONE = Shard()
"""A plain one-process run."""


def plan(devices: int) -> Shard:
    """This process's Shard in a run over `devices` processes: rank 0, unless this process was started
    as another rank (RANK and WORLD_SIZE in the environment, by launch() or torchrun). ValueError when
    `devices` < 1 or disagrees with WORLD_SIZE."""
    if not isinstance(devices, int) or devices < 1:
        raise ValueError(f"--devices {devices}: must be an int >= 1")
    if devices == 1:
        return ONE
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        world = int(os.environ["WORLD_SIZE"])
        if world != devices:
            raise ValueError(f"--devices {devices}, but WORLD_SIZE={world} started this process")
        return Shard(int(os.environ["RANK"]), world)
    return Shard(0, devices)


def rank_device(shard: Shard, device: torch.device) -> torch.device:
    """The device of this rank: CUDA device `rank` (ValueError if there are fewer), or the CPU."""
    if shard.world == 1:
        return device
    if device.type == "cuda":
        if torch.cuda.device_count() < shard.world:
            raise ValueError(f"--devices {shard.world} needs {shard.world} CUDA devices, found "
                             f"{torch.cuda.device_count()}")
        return torch.device("cuda", shard.rank)
    if device.type != "cpu":
        raise ValueError(f"--devices {shard.world} runs on cpu or cuda, not {device.type}")
    return device


def process_rank() -> int:
    """This process's rank in a multi-process run, 0 in a plain one: the process group's once it runs,
    else RANK or LOCAL_RANK as a launcher set them (Lightning sets LOCAL_RANK before the group starts)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    name = "RANK" if "RANK" in os.environ else "LOCAL_RANK"
    value, world = os.environ.get(name, "0"), os.environ.get("WORLD_SIZE", "1")
    try:
        rank, size = int(value), int(world)
    except ValueError:
        raise ValueError(f"{name}={value!r} and WORLD_SIZE={world!r} must be whole numbers") from None
    if not 0 <= rank < size:  # a rank without its group would write as if another process held the run
        raise ValueError(f"{name}={rank} is set, but WORLD_SIZE={size} makes no group with such a rank: "
                         "unset it, or start the processes with a launcher (torchrun, --devices N)")
    return rank


@contextmanager
def launch(shard: Shard, device: torch.device) -> Iterator[Shard]:
    """Run the body on every rank: rank 0 first starts the other ranks (this script again, same
    arguments), then every rank joins the process group; on leaving, rank 0 waits for the others (and
    ends them if the body failed on rank 0). A rank that dies ends the run at once instead of leaving
    the others waiting: rank 0 watches the processes it started, and they watch rank 0. One process:
    nothing is started. On the CPU each process gets cpu_count / world torch threads unless
    OMP_NUM_THREADS says otherwise (as Lightning does)."""
    if shard.world == 1:
        yield shard
        return
    procs: list[subprocess.Popen] = []
    if shard.main and "WORLD_SIZE" not in os.environ:  # not started by torchrun: start the others
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(_free_port())
        for r in range(1, shard.world):
            env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(shard.world),
                   PARENT: str(os.getpid())}
            procs.append(subprocess.Popen(_script_command(), env=env))
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // shard.world))
    done = threading.Event()
    _watch(procs, done)
    ok = False
    try:
        dist.init_process_group("gloo", init_method="env://", rank=shard.rank, world_size=shard.world,
                                timeout=TIMEOUT)
        yield shard
        ok = True
    finally:
        done.set()
        if dist.is_initialized():
            dist.destroy_process_group()
        for p in procs if not ok else ():
            p.terminate()
        codes = [p.wait() for p in procs]
    if any(codes):
        failed = ", ".join(f"rank {r} exited with {c}" for r, c in enumerate(codes, 1) if c)
        raise RuntimeError(f"another process of this run failed: {failed}")


PARENT = "LBS_PARENT_PID"
"""Set in the environment of the ranks that launch() starts: the pid of rank 0, which they watch."""


def _watch(procs: list[subprocess.Popen], done: threading.Event) -> None:
    """A daemon thread that ends this process (and the ranks it started) when another rank has died: a
    started rank exiting with an error, or rank 0 gone (this process re-parented). Polls every second
    until `done` is set."""
    parent = int(os.environ.get(PARENT, "0"))

    def failure() -> str | None:
        for r, p in enumerate(procs, 1):
            if p.poll():
                return f"rank {r} exited with {p.returncode}: ending this run"
        if parent and os.getppid() != parent:
            return "rank 0 has gone: ending this rank"
        return None

    def run() -> None:
        while not done.wait(1.0):
            msg = failure()
            if msg is not None:
                print(f"lbs: {msg}", file=sys.stderr, flush=True)
                for p in procs:
                    p.kill()
                os._exit(1)

    if procs or parent:
        threading.Thread(target=run, name="lbs-rank-watch", daemon=True).start()


def _script_command() -> list[str]:
    """How this script was started: `python path args` or `python -m module args`."""
    import __main__

    spec = getattr(__main__, "__spec__", None)
    if spec is None:
        return [sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]]
    return [sys.executable, "-m", spec.name, *sys.argv[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
