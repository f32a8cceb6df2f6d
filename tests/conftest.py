"""Shared fixtures; CONFIGS is lbs.hanabi.variants.VARIANTS (the one registry of game variants)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from lbs.acting import legal_with_noop
from lbs.bots.smartbot import EAGER_VARIABLE
from lbs.hanabi import GameConfig, encode, engine, public_features
from lbs.hanabi.variants import FULL_GAMES, VARIANTS  # noqa: F401  (suites import FULL_GAMES from here)

# SmartBot compiles its step on the CPU once per process and game shape (half a minute on a cold cache): the
# suite, its subprocesses included, runs it eagerly; tests/bots/test_smartbot.py checks the compiled path.
os.environ[EAGER_VARIABLE] = "1"

CONFIGS = VARIANTS  # every suite that loops over game rules uses the package's one registry


def pytest_configure(config) -> None:
    """In CI the HLE conformance tests must run, never skip: fail early if HLE did not install."""
    import importlib.util
    import os

    if os.environ.get("CI") and importlib.util.find_spec("hanabi_learning_environment") is None:
        raise RuntimeError("CI: hanabi-learning-environment is missing, so conformance tests would skip")


DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]
"""Parametrise a test over devices; CUDA runs where a GPU is present."""


@pytest.fixture(scope="module")
def one_thread():
    """Small ops on a shared 2-core machine: one torch thread is several times faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def wait_for_file(path: Path, proc, timeout: float = 600) -> None:
    """Wait until a child process has written `path` (a sign of progress that no fixed sleep gives on a
    loaded machine); fail if it exits first or the time runs out."""
    import time

    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the process exited ({proc.returncode}) before writing {path}")
        if time.monotonic() > end:
            pytest.fail(f"{path} not written within {timeout:.0f} s")
        time.sleep(0.2)


def run_ranks(code: str, world: int, cwd, imports: Path | None = None, timeout: float = 240) -> list:
    """`python -c code` as ranks 0..world-1 of one process group on this machine, started at once with
    RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun and Lightning's launcher
    set them; os.environ extended, one torch thread each); `imports`: a folder the code imports from
    (put first on PYTHONPATH). Every rank's CompletedProcess, in rank order."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": str(world), "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    if imports is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(imports), os.environ.get("PYTHONPATH")]))
    procs = [subprocess.Popen([sys.executable, "-c", code], env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    finally:
        for p in procs:
            p.kill()
    return out


def random_rollout(game: GameConfig, batch: int, steps: int, seed: int = 0, observe: bool = True):
    """Random play: per step (state, priv [B, P, D], publ, legal [B, P, A]), finished games included."""
    state = engine.reset(game, torch.arange(batch) + 1000 * seed)
    out = []
    for t in range(steps):
        priv = encode(game, state) if observe else None
        publ = public_features(game, priv) if observe else None
        out.append((state, priv, publ, legal_with_noop(game, state)))
        state = engine.step(game, state, engine.random_moves(game, state, torch.arange(batch) + 7 * t))[0]
    return out
