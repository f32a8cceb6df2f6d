"""Environment throughput: the batched torch engine against hanabi-learning-environment (HLE).

    python -m experiments.bench_env --device auto --batch-sizes 1 64 1024 4096 16384 --threads 1

One "game step" is the work an actor needs per move: the legal-move mask, the canonical observation
of every player, a uniformly random legal move (lbs.hanabi.engine.random_moves, on the device), the
step itself and the automatic reset of finished games (as BatchedHanabi does). The HLE baseline does
the same through its Python API in the same run: deal moves, legal moves, encode every player's
observation, apply a random legal move, start a new game when one ends. Results (date, machine,
command, table, HLE baseline) go to experiments/results/bench_env/bench_env_<date>.md.

Memory per game: CUDA, torch.cuda.max_memory_allocated over a few steps minus what was allocated
before, divided by the batch; CPU, the peak RSS of a fresh process doing a few steps at this batch
size minus that of one at batch 1, divided by the extra games (coarse for small batches). "state
B/game" is the exact size of one game's HanabiState.
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

from experiments.common import command, cpu_name, sync
from lbs.hanabi import BatchedHanabi, GameConfig
from lbs.hanabi.random_play import actor_step, core_step, start


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
    """untimed steps first (allocator, caches, compilation); a compiled step also runs until it stops
    recompiling"""
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
    out: str = "experiments/results/bench_env"
    mem_probe: int = 0
    """internal: print the peak RSS of a few actor steps at this batch size and exit"""


def _compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _peak_rss(args: Args, batch: int) -> int | None:
    """Peak RSS in bytes of a fresh process running a few actor steps for `batch` games (CPU)."""
    cmd = [sys.executable, "-m", "experiments.bench_env", "--mem-probe", str(batch)]
    cmd += ["--players", str(args.players), "--obs-dtype", args.obs_dtype, "--threads", str(args.threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True,
                              cwd=Path(__file__).resolve().parent.parent)
        return int(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def mem_probe(args: Args) -> int:
    """Body of --mem-probe: reset, a few actor steps, then the peak RSS of this address space.

    VmHWM, not ru_maxrss: on Linux ru_maxrss survives exec, so a child would report its parent's peak."""
    cfg, batch = GameConfig(players=args.players), args.mem_probe
    seeds = torch.arange(batch)
    episodes = torch.zeros_like(seeds)
    state = start(cfg, actor_step, seeds)
    for _ in range(4):
        state, episodes, *_ = actor_step(cfg, state, seeds, episodes, getattr(torch, args.obs_dtype))
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # reported in kB
    raise OSError("no VmHWM in /proc/self/status")


def time_torch(args: Args, cfg: GameConfig, device: torch.device, batch: int, fn) -> dict:
    """Game-steps/s of fn (actor_step or its compiled version) for `batch` games."""
    dtype = getattr(torch, args.obs_dtype)
    seeds = (args.seed * 1_000_003 + torch.arange(batch)).to(device)
    episodes = torch.zeros_like(seeds)
    state = start(cfg, fn, seeds)
    st = state.state if isinstance(state, BatchedHanabi) else state
    state_bytes = sum(getattr(st, f.name).nbytes for f in fields(st)) / batch
    for _ in range(args.warmup):
        state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
    if hasattr(fn, "_torchdynamo_orig_callable"):  # compiled: recompiles belong to the warm-up too
        graphs, quiet = _compiled_graphs(), 0  # (one graph per value of BatchedHanabi's refresh counter, ...)
        while quiet < 2 * (cfg.min_steps + 1):
            state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
            quiet, graphs = (quiet + 1, graphs) if _compiled_graphs() == graphs else (0, _compiled_graphs())
    sync(device)
    mem = None
    if device.type == "cuda":  # memory pass (short, before timing)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        for _ in range(3):
            state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
        sync(device)
        mem = (torch.cuda.max_memory_allocated(device) - base) / batch
    # timed pass
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while n < args.steps:
        state, episodes, *_ = fn(cfg, state, seeds, episodes, dtype)
        n += 1
        if n % 8 == 0 or n == args.steps:
            sync(device)
            if time.perf_counter() - t0 > args.seconds:
                break
    sync(device)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": batch * n / wall, "cpu": batch * n / cpu, "us_per_call": wall / n * 1e6, "mem": mem,
            "state": state_bytes}


def time_hle(cfg: GameConfig, steps: int, seed: int) -> tuple[float, float]:
    """HLE Python API moves/s (wall clock, CPU time) doing the same work as actor_step for one game."""
    from hanabi_learning_environment import pyhanabi

    game = pyhanabi.HanabiGame({**cfg.hle_params(), "seed": seed})
    enc = pyhanabi.ObservationEncoder(game, pyhanabi.ObservationEncoderType.CANONICAL)
    rng = random.Random(seed)
    state = game.new_initial_state()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        while state.cur_player() == pyhanabi.CHANCE_PLAYER_ID:
            state.deal_random_card()
        legal = state.legal_moves()
        for p in range(cfg.players):
            enc.encode(state.observation(p))
        state.apply_move(rng.choice(legal))
        if state.is_terminal():
            state = game.new_initial_state()
    return steps / (time.perf_counter() - t0), steps / (time.process_time() - c0)


def machine(devices: list[torch.device]) -> list[str]:
    cpu = cpu_name()
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
    """Run the benchmark and write the dated results file; returns its path."""
    args = parse(argv)
    torch.set_num_threads(args.threads)
    if args.mem_probe:
        print(mem_probe(args))
        sys.exit(0)
    cfg = GameConfig(players=args.players)
    devices = {"cpu": [torch.device("cpu")], "cuda": [torch.device("cuda")]}.get(args.device)
    if devices is None:
        devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    header = machine(devices)
    print("\n".join(header), flush=True)
    hle_before = time_hle(cfg, args.hle_steps, args.seed)
    print(f"HLE Python API: {hle_before[0]:,.0f} moves/s wall, {hle_before[1]:,.0f}/CPU-s", flush=True)

    fns = [("core", "eager", core_step), ("actor", "eager", actor_step)]
    if args.compile:
        fns += [("actor", "compiled", torch.compile(actor_step, dynamic=False, fullgraph=True))]
    results, compile_note = [], ""
    for device in devices:
        for work, mode, fn in fns:
            for batch in args.batch_sizes:
                try:
                    res = time_torch(args, cfg, device, batch, fn)
                except Exception as e:  # noqa: BLE001 - report (e.g. a compile failure) and go on
                    failure = f"{work} {mode} {device.type} B={batch} failed: {type(e).__name__}: {e}"
                    compile_note += "\n- " + failure[:400]
                    print(failure[:400], flush=True)
                    continue
                results.append((device.type, work, mode, batch, res))
                print(
                    f"{device.type:4s} {work:5s} {mode:8s} B={batch:6d}  {res['wall']:12,.0f} steps/s wall "
                    f"{res['cpu']:12,.0f} per CPU-s ({res['cpu'] / hle_before[1]:6.1f}x HLE)  "
                    f"{res['us_per_call']:9.0f} us/call",
                    flush=True,
                )
    if any(d.type == "cpu" for d in devices):  # CPU memory: peak RSS of fresh processes, batch 1 as the base
        base = _peak_rss(args, 1)
        for dev, work, mode, batch, res in results:
            if dev == "cpu" and work == "actor" and mode == "eager" and batch > 1:
                peak = _peak_rss(args, batch)
                if base is not None and peak is not None:
                    res["mem"] = max(peak - base, 0) / (batch - 1)
    hle_after = time_hle(cfg, args.hle_steps, args.seed + 1)
    hle_wall, hle_cpu = (hle_before[0] + hle_after[0]) / 2, (hle_before[1] + hle_after[1]) / 2
    print(f"HLE Python API again: {hle_after[0]:,.0f} moves/s wall, {hle_after[1]:,.0f}/CPU-s", flush=True)

    date = datetime.date.today().isoformat()
    out = Path(args.out) / f"bench_env_{date}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Environment throughput, {date}",
        "",
        f"Command: `{command(argv)}`",
        "",
        *header,
        "",
        f"Game: {cfg}; obs dtype {args.obs_dtype}. Work per game step: legal mask, canonical observation of "
        f"all {cfg.players} players, a random legal move and the step (`core`), plus BatchedHanabi's "
        "auto-reset of finished games (`actor`).",
        "",
        "HLE Python API baseline (same work, one game, this run): "
        f"{hle_before[0]:,.0f} / {hle_after[0]:,.0f} moves/s wall clock before / after the torch runs, "
        f"{hle_before[1]:,.0f} / {hle_after[1]:,.0f} per CPU-second. Ratios use the means ({hle_cpu:,.0f} "
        "per CPU-second for CPU rows, which is robust to other jobs on a shared machine; "
        f"{hle_wall:,.0f} wall for CUDA rows).",
        "",
        "| device | work | mode | batch | steps/s wall | steps/CPU-s | x HLE | us/call | mem/game"
        " | state B/game |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dev, work, mode, batch, res in results:
        mem = "n/a" if res["mem"] is None else f"{res['mem'] / 1024:.1f} KiB"
        ratio = res["wall"] / hle_wall if dev == "cuda" else res["cpu"] / hle_cpu
        lines.append(
            f"| {dev} | {work} | {mode} | {batch} | {res['wall']:,.0f} | {res['cpu']:,.0f} | {ratio:.1f} | "
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
