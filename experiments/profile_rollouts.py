"""Where one batch of search rollouts spends its time: eager and CUDA-graph wall time, then the costliest
operations of one eager batch under torch.profiler.

    python experiments/profile_rollouts.py --rows 1024 --device cpu
    python experiments/profile_rollouts.py --rows 8192 --device cuda     # on a GPU

The batch is `--rows` games of the shipped blueprint played `--warm` moves in, each making a random legal
first move and then `--depth` greedy blueprint moves (LBS-k's rollout; lbs.search.rollouts.rollout_returns).
This is the profile that found cuDNN's one-step LSTM kernel taking 90% of a rollout on an H100
(experiments/results/bench_search/bench_search_2026-11-22_h100.md). Prints only; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from lbs.acting import play
from lbs.ckpt import CheckpointError
from lbs.graphs import Graphs
from lbs.hanabi import engine
from lbs.models import load_blueprint, resolve_device
from lbs.search.rollouts import rollout_returns
from lbs.search.samplers import serve

if __package__:  # python -m experiments.profile_rollouts, or imported
    from .common import machine
else:  # python experiments/profile_rollouts.py: this folder is first on the import path
    from common import machine

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1024, help="rollouts in the batch")
    ap.add_argument("--depth", type=int, default=16, help="blueprint moves after the first (LBS-k's k)")
    ap.add_argument("--warm", type=int, default=10, help="blueprint moves played before the batch's root")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--blueprint", default=str(ROOT / "checkpoints" / "blueprint_2p.pt"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--top", type=int, default=15, help="operations listed")
    args = ap.parse_args()
    try:
        device = resolve_device(args.device)
        game, net = load_blueprint(args.blueprint, device=device)
    except (CheckpointError, ValueError) as e:
        sys.exit(f"profile_rollouts: {e}")
    cuda = device.type == "cuda"
    server = serve(net, None, device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    print(f"{machine()}; device {device}; {args.rows} rollouts x {args.depth} moves")
    with torch.no_grad():
        state = engine.reset(game, torch.arange(args.rows, device=device))
        hid = server.qnet().initial_state(args.rows * game.players)
        state, hid = play(game, state, server.qnet().step, hid, args.warm)
        gen = torch.Generator(device=device).manual_seed(0)
        first = torch.multinomial(engine.legal_moves(game, state).float(), 1, generator=gen).squeeze(1)
        horizon = int(engine.moves_left_bound(game, state).max()) - 1

        def batch(graphs: Graphs | None) -> torch.Tensor:
            return rollout_returns(game, state, hid, first, server.qnet().step, args.depth, horizon, graphs)

        for name, graphs in [("eager", None)] + ([("CUDA graph", Graphs(device))] if cuda else []):
            for _ in range(2):  # warm-up (and the capture)
                batch(graphs)
            sync()
            t0 = time.perf_counter()
            for _ in range(args.repeats):
                batch(graphs)
            sync()
            sec = (time.perf_counter() - t0) / args.repeats
            print(f"{name}: {1e3 * sec:.1f} ms per batch, {args.rows / sec:,.0f} rollouts/s")
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            batch(None)
            sync()
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=args.top, max_name_column_width=70))
    server.close()


if __name__ == "__main__":
    main()
