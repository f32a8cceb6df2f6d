"""Environment throughput: the batched torch engine against hanabi-learning-environment (HLE).

    python experiments/bench_env.py --device auto --batch-sizes 1 64 1024 4096 16384 --threads 1

One "game step" is the work an actor needs per move: the legal-move mask, the canonical observation
of every player, a uniformly random legal move (lbs.hanabi.engine.random_moves, on the device), the
step itself and the automatic reset of finished games (as BatchedHanabi does). The HLE baseline does
the same through its Python API in the same run: deal moves, legal moves, encode every player's
observation, apply a random legal move, start a new game when one ends. Results (date, machine,
command, table, HLE baseline) go to experiments/results/bench_env_<date>.md.

Memory per game: CUDA, torch.cuda.max_memory_allocated over the timed steps minus what was allocated
before, per game; CPU, the peak resident-set growth over a short pass (coarse: the allocator keeps
freed pages, so small batches read ~0). "state B/game" is the exact size of one game's HanabiState.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from lbs.hanabi import BatchedHanabi, GameConfig, HanabiState
from lbs.hanabi.encode import encode
from lbs.hanabi.engine import legal_moves, random_moves, reset, step


@dataclass
class Args:
    """Benchmark settings (every field is a CLI flag, e.g. --batch-sizes 64 1024)."""

    batch_sizes: list[int] = field(default_factory=lambda: [1, 64, 1024, 4096, 16384])
    """games stepped in lockstep, one measurement each"""
    device: str = "auto"
    """auto (CPU, plus CUDA when present), cpu or cuda"""
    steps: int = 200
    """timed steps per batch size (fewer if --seconds runs out first)"""
    seconds: float = 8.0
    """time budget per measurement"""
    warmup: int = 5
    """untimed steps first (allocator, caches, compilation)"""
    threads: int = 1
    """torch CPU threads"""
    players: int = 2
    hle_steps: int = 3000
    """moves for the HLE baseline (measured before and after the torch runs)"""
    obs_dtype: str = "float32"
    """observation dtype: float32 (network input) or uint8"""
    compile: bool = False
    """also time torch.compile(actor_step)"""
    seed: int = 0
    out: str = "experiments/results"


def actor_step(
    cfg: GameConfig, state: HanabiState, seeds: torch.Tensor, episodes: torch.Tensor, dtype: torch.dtype
):
    """One actor move for every game: mask, observations, random legal move, step, auto-reset."""
    legal = legal_moves(cfg, state)  # [B, M]
    obs = encode(cfg, state, dtype=dtype)  # [B, P, D]
    moves = random_moves(cfg, state, seeds, legal)
    state, reward, done = step(cfg, state, moves)
    episodes = episodes + done.long()
    state = reset(cfg, seeds, episodes).where(done, state)
    return state, episodes, obs, legal, reward


def check_matches_env(cfg: GameConfig, device: torch.device, dtype: torch.dtype) -> None:
    """actor_step must be exactly what BatchedHanabi does, or the numbers would measure something else."""
    env = BatchedHanabi(cfg, 16, seed=3, device=device)
    state, episodes = env.state, env.episodes
    for _ in range(3 * cfg.max_steps // 4):
        legal = env.legal_moves()
        obs = env.observe(dtype=dtype)
        env.step(random_moves(cfg, env.state, env.seeds, legal))
        state, episodes, obs2, legal2, _ = actor_step(cfg, state, env.seeds, episodes, dtype)
        assert torch.equal(obs, obs2) and torch.equal(legal, legal2) and state.equal(env.state)
    assert bool((episodes > 0).any()), "no game finished: the auto-reset path was not checked"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rss_bytes() -> int | None:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def time_torch(args: Args, cfg: GameConfig, device: torch.device, batch: int, fn) -> dict:
    """Game-steps/s of fn (actor_step or its compiled version) for `batch` games."""
    dtype = getattr(torch, args.obs_dtype)
    seeds = (args.seed * 1_000_003 + torch.arange(batch)).to(device)
    episodes = torch.zeros_like(seeds)
    state = reset(cfg, seeds, episodes)
    state_bytes = sum(getattr(state, f.name).nbytes for f in fields(state)) / batch
    for _ in range(args.warmup):
        state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
    _sync(device)
    # memory pass (short, before timing)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    else:
        base = _rss_bytes()
    peak = base
    for _ in range(3):
        state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
        if device.type == "cpu" and base is not None:
            peak = max(peak, _rss_bytes() or 0)
    _sync(device)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    mem = None if base is None else max(peak - base, 0) / batch
    # timed pass
    n, t0 = 0, time.perf_counter()
    while n < args.steps:
        state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
        n += 1
        if n % 8 == 0 or n == args.steps:
            _sync(device)
            if time.perf_counter() - t0 > args.seconds:
                break
    _sync(device)
    dt = time.perf_counter() - t0
    return {"steps_per_s": batch * n / dt, "us_per_call": dt / n * 1e6, "mem": mem, "state": state_bytes}


def time_hle(cfg: GameConfig, steps: int, seed: int) -> float:
    """HLE Python API moves/s doing the same work as actor_step for one game."""
    from hanabi_learning_environment import pyhanabi

    game = pyhanabi.HanabiGame({**cfg.hle_params(), "seed": seed})
    enc = pyhanabi.ObservationEncoder(game, pyhanabi.ObservationEncoderType.CANONICAL)
    rng = random.Random(seed)
    state = game.new_initial_state()
    t0 = time.perf_counter()
    for _ in range(steps):
        while state.cur_player() == pyhanabi.CHANCE_PLAYER_ID:
            state.deal_random_card()
        legal = state.legal_moves()
        for p in range(cfg.players):
            enc.encode(state.observation(p))
        state.apply_move(rng.choice(legal))
        if state.is_terminal():
            state = game.new_initial_state()
    return steps / (time.perf_counter() - t0)


def machine(devices: list[torch.device]) -> list[str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], capture_output=True, text=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        commit += " (lbs/ has uncommitted changes)" if git("status", "--porcelain", "lbs") else ""
    except OSError:
        commit = "unknown"
    try:
        from importlib.metadata import version

        hle = version("hanabi-learning-environment")
    except Exception:  # noqa: BLE001 - any failure means "not installed"
        hle = "not installed"
    lines = [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores visible, torch threads {torch.get_num_threads()}",
        f"- torch {torch.__version__}, Python {platform.python_version()}, hanabi-learning-environment {hle}",
        f"- git: {commit}",
    ]
    if any(d.type == "cuda" for d in devices):
        lines.append(f"- GPU: {torch.cuda.get_device_name()}")
    try:
        load = os.getloadavg()
        lines.append(f"- load average at start: {load[0]:.2f} (other jobs share this machine when > 0)")
    except OSError:
        pass
    return lines


def parse(argv: list[str] | None = None) -> Args:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        if f.type == "bool":
            ap.add_argument(flag, action="store_true", default=default)
        elif f.type == "list[int]":
            ap.add_argument(flag, type=int, nargs="+", default=default)
        else:
            ap.add_argument(flag, type={"int": int, "float": float}.get(f.type, str), default=default)
    args = Args(**vars(ap.parse_args(argv)))
    if args.device not in ("auto", "cpu", "cuda"):
        ap.error(f"--device must be auto, cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch.cuda.is_available() is False")
    if args.obs_dtype not in ("float32", "uint8"):
        ap.error(f"--obs-dtype must be float32 or uint8, got {args.obs_dtype!r}")
    if min(args.batch_sizes) < 1:
        ap.error("--batch-sizes must be >= 1")
    return args


def main(argv: list[str] | None = None) -> Path:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    cfg = GameConfig(players=args.players)
    devices = {"cpu": [torch.device("cpu")], "cuda": [torch.device("cuda")]}.get(args.device)
    if devices is None:
        devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    header = machine(devices)
    print("\n".join(header), flush=True)
    hle_before = time_hle(cfg, args.hle_steps, args.seed)
    print(f"HLE Python API: {hle_before:,.0f} moves/s", flush=True)

    fns = [("eager", actor_step)]
    compile_note = ""
    if args.compile:
        fns.append(("compiled", torch.compile(actor_step, dynamic=False)))
    rows = []
    for device in devices:
        check_matches_env(cfg, device, getattr(torch, args.obs_dtype))
        for mode, fn in fns:
            for batch in args.batch_sizes:
                try:
                    res = time_torch(args, cfg, device, batch, fn)
                except Exception as e:  # noqa: BLE001 - report (e.g. a compile failure) and go on
                    failure = f"{mode} {device.type} B={batch} failed: {type(e).__name__}: {e}"
                    compile_note += "\n- " + failure[:400]
                    print(compile_note.splitlines()[-1], flush=True)
                    continue
                rows.append((device.type, mode, batch, res))
                print(
                    f"{device.type:4s} {mode:8s} B={batch:6d}  {res['steps_per_s']:12,.0f} steps/s  "
                    f"({res['steps_per_s'] / hle_before:6.1f}x HLE)  {res['us_per_call']:9.0f} us/call",
                    flush=True,
                )
    hle_after = time_hle(cfg, args.hle_steps, args.seed + 1)
    hle = (hle_before + hle_after) / 2
    print(f"HLE Python API again: {hle_after:,.0f} moves/s", flush=True)

    date = datetime.date.today().isoformat()
    command = " ".join(sys.argv) if argv is None else "experiments/bench_env.py " + " ".join(argv)
    out = Path(args.out) / f"bench_env_{date}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Environment throughput, {date}",
        "",
        f"Command: `python {command}`",
        "",
        *header,
        "",
        f"Game: {cfg}; obs dtype {args.obs_dtype}. One game step = legal mask + canonical observation of all "
        f"{cfg.players} players + random legal move + step + auto-reset.",
        "",
        f"HLE Python API baseline (same work, one game, this run): {hle_before:,.0f} moves/s before the "
        f"torch runs, {hle_after:,.0f} after; ratios below use the mean, {hle:,.0f}.",
        "",
        "| device | mode | batch | game steps/s | x HLE Python | us/call | peak mem/game | state B/game |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for dev, mode, batch, res in rows:
        mem = "n/a" if res["mem"] is None else f"{res['mem'] / 1024:.1f} KiB"
        lines.append(
            f"| {dev} | {mode} | {batch} | {res['steps_per_s']:,.0f} | {res['steps_per_s'] / hle:.1f} | "
            f"{res['us_per_call']:,.0f} | {mem} | {res['state']:.0f} |"
        )
    if compile_note:
        lines += ["", "Failures:", compile_note]
    notes = ""
    if out.exists() and "\n## Notes" in out.read_text():  # hand-written analysis survives a re-run
        notes = "\n" + out.read_text().split("\n## Notes", 1)[1].join(["## Notes", ""])
    out.write_text("\n".join(lines) + "\n" + notes)
    print(f"wrote {out}")
    return out


if __name__ == "__main__":
    main()
