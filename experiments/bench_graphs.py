"""Eager vs captured (CUDA graph) lockstep play: the blueprint's step and a recorded actor round.

    python -m experiments.bench_graphs --device cuda --games 1024 8192

The step is lbs.acting.play's: every seat's observation, the Q-network (served by the InferenceServer),
greedy or epsilon-greedy actions, the engine step. "play" times greedy play from a fresh deal (what
evaluation and search rollouts run); "round" times a recorded actor round (exploration, other-play
colour shuffles, the recording hook) and reports slot-steps/s (games x seats x steps), the
actor's unit. Captured timings exclude the one-off capture, reported apart. Off CUDA the captured path
runs eagerly on its static buffers, so its numbers there only show that path's overhead.
Writes experiments/results/bench_graphs/bench_graphs_<date>_<device>.md with --record, else a scratch
file.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from experiments.common import command, machine, sync, write_result
from lbs.acting import play
from lbs.graphs import Graphs
from lbs.hanabi import GameConfig, engine
from lbs.infer import InferenceServer
from lbs.models import NetConfig, load_blueprint, make_qnet, resolve_device
from lbs.rl.actors import ActorConfig, run_round
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parent.parent


def time_play(game: GameConfig, server: InferenceServer, n: int, steps: int, graphs: Graphs | None,
              repeats: int) -> tuple[float, float]:
    """(seconds per step, seconds of the first call: capture included) for greedy play of n games."""
    state = engine.reset(game, game_seeds(Stream.EVAL, 0, n, device=server.device))
    blueprint = server.qnet()

    def once():
        with torch.no_grad():
            play(game, state, blueprint.step, blueprint.initial_state(n * game.players), steps, graphs=graphs)
        sync(server.device)

    t0 = time.perf_counter()
    once()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        once()
    return (time.perf_counter() - t0) / (repeats * steps), first


def time_round(game: GameConfig, server: InferenceServer, n: int, steps: int, graphs: Graphs | None,
               repeats: int) -> tuple[float, float]:
    """(slot-steps/s, seconds of the first round) of recorded, exploring, colour-shuffled actor rounds."""
    cfg = ActorConfig(num_games=n, max_len=steps, shuffle_colors=True)
    seeds = game_seeds(Stream.BLUEPRINT_TRAIN, 0, n, device=server.device)
    blueprint = server.qnet()
    eps = torch.full((n,), 0.05, device=server.device)

    def once(r: int):
        with torch.no_grad(), server.pinned() as weights:
            run_round(game, blueprint.step, blueprint.initial_state, seeds, r, cfg, eps=eps, graphs=graphs,
                      weights=weights)
        sync(server.device)

    t0 = time.perf_counter()
    once(0)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for r in range(repeats):
        once(r + 1)
    return n * game.players * steps * repeats / (time.perf_counter() - t0), first


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--games", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--steps", type=int, default=40, help="steps per call (default 40)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--net", choices=["shipped", "paper"], default="shipped",
                    help="the shipped full-game blueprint, or the paper-size network (random weights)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None, help="write results/bench_graphs/..._<date>_NAME.md")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    if args.net == "shipped":
        game, net = load_blueprint(ROOT / "checkpoints" / "blueprint_2p.pt", device=dev)
    else:
        game = GameConfig()
        net = make_qnet(game, NetConfig())
    server = InferenceServer(net, device=dev)
    lines = [
        f"# Eager vs captured lockstep play ({args.net} network, {game})",
        "",
        f"- Machine: {machine()}; device {dev}.",
        f"- Command: `{command(argv)}`",
        f"- {args.steps} steps per call, {args.repeats} timed calls after one untimed first call (its time, "
        "capture included, is the last column).",
        "" if dev.type == "cuda" else "- Not CUDA: the captured path runs eagerly here (no capture).",
        "",
        "| work | games | eager | captured | speed-up | first captured call (s) |",
        "|---|---|---|---|---|---|",
    ]
    for n in args.games:
        e, _ = time_play(game, server, n, args.steps, None, args.repeats)
        c, first = time_play(game, server, n, args.steps, Graphs(dev), args.repeats)
        lines.append(f"| play (ms / step) | {n} | {1e3 * e:.2f} | {1e3 * c:.2f} | {e / c:.1f}x | {first:.2f} "
                     "|")
        print(lines[-1], flush=True)
        e, _ = time_round(game, server, n, args.steps, None, args.repeats)
        c, first = time_round(game, server, n, args.steps, Graphs(dev), args.repeats)
        lines.append(f"| round (slot-steps/s) | {n} | {e:,.0f} | {c:,.0f} | {c / e:.1f}x | {first:.2f} |")
        print(lines[-1], flush=True)
    return write_result("\n".join(lines) + "\n", "bench_graphs", args.record, args.out)


if __name__ == "__main__":
    main()
