"""The long conformance run: many games of our engine against hanabi-learning-environment (HLE).

Every game is played in lockstep in both (lbs.hanabi.interop.differential): legal moves, every player's
canonical observation, tokens, fireworks, deck size, current player, reward, score and termination
are compared before every move and at the end. Writes experiments/results/conformance/conformance_<date>.md
(date, machine, command, games, steps, mismatches, time) and saves any mismatching game as a
GameRecord JSON next to it.

    nice -n 10 python -m experiments.conformance --games 100000 --workers 2
    python -m experiments.conformance --games 2000 --players 2 3 --batch 128
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from experiments.common import command, machine
from lbs.hanabi import GameConfig
from lbs.hanabi.interop.differential import EDGE_CASES, DiffReport, differential
from lbs.hanabi.policies import conformance_policy
from lbs.hanabi.variants import VARIANTS

# The named configs plus more corners of the rules.
CONFIGS: dict[str, GameConfig] = {
    **VARIANTS,
    "p3_c3_r4_h2_i1": GameConfig(players=3, colors=3, ranks=4, hand_size=2, max_info_tokens=1),
    "p5_c2_r2_h1": GameConfig(players=5, colors=2, ranks=2, hand_size=1),
    "p2_c1_r1_h1": GameConfig(players=2, colors=1, ranks=1, hand_size=1),
    "p5_l1_nobomb": GameConfig(players=5, max_life_tokens=1, bomb_zero=False),
    "p3_h6_i4": GameConfig(players=3, hand_size=6, max_info_tokens=4),
    "p4_c4_r4": GameConfig(players=4, colors=4, ranks=4),
    "p2_h8_l5": GameConfig(players=2, hand_size=8, max_life_tokens=5),
}


@dataclass
class Args:
    games: int = 10_000  # games in total, split evenly over the chosen configs
    players: list[int] = field(default_factory=lambda: [2, 3, 4, 5])  # keep configs with these player counts
    configs: list[str] = field(default_factory=list)  # config names (default: all in CONFIGS)
    batch: int = 256  # games per lockstep batch
    workers: int = 1  # processes (at most 2: the machine is shared)
    seed: int = 1  # games of config k use seeds seed * 10**9 + k * 10**7 + i
    out: str = "experiments/results/conformance"


def run_chunk(name: str, seeds: list[int]) -> tuple[str, DiffReport]:
    torch.set_num_threads(1)
    return name, differential(CONFIGS[name], conformance_policy(), torch.tensor(seeds), max_mismatches=8)


def hle_version() -> str:
    try:
        from importlib.metadata import version

        return version("hanabi-learning-environment")
    except Exception:  # noqa: BLE001 - only for the report
        return "unknown"


def write_report(args: Args, reports: dict[str, DiffReport], wall: float, path: Path) -> None:
    total = DiffReport()
    for r in reports.values():
        total = total.merge(r)
    mism_dir = path.with_suffix("")
    saved = []
    for name, r in reports.items():
        for m in r.mismatches:
            saved.append((name, m, m.record.save(mism_dir / f"{name}_game{m.game}_step{m.step}.json")))
    lines = [
        f"# Conformance: lbs engine vs hanabi-learning-environment ({datetime.date.today().isoformat()})",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- machine: {machine()}",
        f"- software: python {platform.python_version()}, torch {torch.__version__}, "
        f"hanabi-learning-environment {hle_version()}",
        f"- command: `{command()}`",
        f"- games: {total.games}, steps (moves compared): {total.steps}, mismatches: {len(total.mismatches)}",
        f"- time: {wall:.0f} s wall with {args.workers} worker(s) "
        f"({total.steps / max(wall, 1e-9):.0f} steps/s); "
        f"{total.seconds:.0f} s summed over workers",
        "- compared before every move and at the end, for every observer: legal moves (non-terminal), the "
        "full canonical observation, hint and life tokens, fireworks, deck size, current player, reward, "
        "score (bomb-zero view for bomb_zero=False), termination",
        "- moves: lbs.hanabi.policies.conformance_policy (per game: cheater, noisy cheater, cheater + "
        "discards, bomber, hint-heavy, discard-heavy, safe_play, random)",
        "",
        "| config | rules | games | steps | mismatches | mean score | " + " | ".join(EDGE_CASES) + " | s |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * len(EDGE_CASES) + "---:|",
    ]
    for name, r in reports.items():
        c = CONFIGS[name]
        rules = (
            f"{c.players}p {c.colors}c {c.ranks}r h{c.hand_size} i{c.max_info_tokens} "
            f"l{c.max_life_tokens}{'' if c.bomb_zero else ' no-bomb-zero'}"
        )
        edges = " | ".join(str(r.edges[k]) for k in EDGE_CASES)
        lines.append(
            f"| {name} | {rules} | {r.games} | {r.steps} | {len(r.mismatches)} | "
            f"{r.score_sum / max(r.games, 1):.2f} | {edges} | {r.seconds:.0f} |"
        )
    edges = " | ".join(str(total.edges[k]) for k in EDGE_CASES)
    lines.append(
        f"| **total** | | {total.games} | {total.steps} | {len(total.mismatches)} | "
        f"{total.score_sum / max(total.games, 1):.2f} | {edges} | {total.seconds:.0f} |"
    )
    if saved:
        lines += ["", "## Mismatches", ""]
        lines += [f"- {name}: {m} (record: `{p}`)" for name, m, p in saved]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=Args.games)
    p.add_argument("--players", type=int, nargs="+", default=[2, 3, 4, 5])
    p.add_argument("--configs", nargs="+", default=[], choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, default=Args.batch)
    p.add_argument("--workers", type=int, default=Args.workers, choices=[1, 2])
    p.add_argument("--seed", type=int, default=Args.seed)
    p.add_argument("--out", default=Args.out)
    args = Args(**vars(p.parse_args(argv)))
    names = [n for n in (args.configs or CONFIGS) if CONFIGS[n].players in args.players]
    if not names or args.games < len(names) or args.batch < 1:
        p.error(f"need at least one game per config and batch >= 1 ({len(names)} configs chosen)")
    chunks = []
    for k, name in enumerate(CONFIGS):
        if name not in names:
            continue
        n = args.games // len(names) + (names.index(name) < args.games % len(names))
        base = args.seed * 10**9 + k * 10**7
        chunks += [
            (name, list(range(base + i, base + min(i + args.batch, n)))) for i in range(0, n, args.batch)
        ]
    reports = {name: DiffReport() for name in names}
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool, tqdm(total=args.games, unit="game") as bar:
        futures = [pool.submit(run_chunk, name, seeds) for name, seeds in chunks]
        for fut in as_completed(futures):
            name, rep = fut.result()
            reports[name] = reports[name].merge(rep)
            bar.update(rep.games)
            bar.set_postfix(mismatches=sum(len(r.mismatches) for r in reports.values()))
    wall = time.perf_counter() - start
    path = Path(args.out) / f"conformance_{datetime.date.today().isoformat()}.md"
    write_report(args, reports, wall, path)
    bad = sum(len(r.mismatches) for r in reports.values())
    print(f"{sum(r.games for r in reports.values())} games, {bad} mismatches; wrote {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
