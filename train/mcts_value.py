"""Train RIS-MCTS-NR's evaluation function from tree-search games (Goodman 2019, section VI).

    python search/run.py --mode ris-mcts --blueprint smartbot --players 4 --iterations 100 --rule-moves \
        --convention --games 48 --no-blueprint-baseline --out runs/search/ris_p4.json
    python train/mcts_value.py runs/search/ris_p4.json --out runs/mcts_value/p4.pt
    python search/run.py --mode ris-mcts --blueprint smartbot --players 4 --iterations 30 --rule-moves \
        --convention --evaluation runs/mcts_value/p4.pt

Every searched move of the games is replayed, and each root child with enough visits gives one pair: the
mover's observation and the move, with the child's mean scaled score as the target
(lbs.search.mcts_value). The network trains for a declared number of steps on all but the held-out games
and is saved with its config, its fit (RMS error in points on the training and held-out pairs, beside a
constant guess) and the files it learnt from. `--iterations 1` with it plays the function greedily over the
tree's moves (the paper's EvalFn rows); more iterations search with it at the leaves (RIS-MCTS-NR).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from lbs import cli
from lbs.ckpt import SaveError
from lbs.configs import add_dataclass_args, apply_overrides
from lbs.search.mcts_value import EvalFnConfig, fit, pairs_from_games, read_games, save


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("games", nargs="+", help="search/run.py result files of a tree search (--out)")
    ap.add_argument("--out", required=True, help="the evaluation function file to write (.pt)")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--no-progress", "--no_progress", action="store_true", help="no progress bar")
    add_dataclass_args(ap, EvalFnConfig, defaults=EvalFnConfig(), title="EvalFnConfig fields")
    args = ap.parse_args(argv)
    try:
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        cfg = apply_overrides(EvalFnConfig(), args)
        out = Path(args.out)
        if out.exists() and not args.overwrite:
            raise ValueError(f"--out {out} exists; pass --overwrite to replace it")
        game, pairs = pairs_from_games(read_games(args.games), cfg.min_visits)
    except ValueError as e:
        sys.exit(f"mcts_value: {e}")
    print(f"mcts_value: {pairs.move.numel()} pairs from {int(pairs.game.unique().numel())} games of {game}",
          file=sys.stderr, flush=True)
    net, stats = fit(game, pairs, cfg, progress=not args.no_progress)
    try:
        save(out, net, cfg, stats, [str(p) for p in args.games])
    except SaveError as e:
        sys.exit(f"mcts_value: {e}")
    print(f"mcts_value: saved {out}: RMS error {stats['rms_train']:.2f} points on {stats['pairs']} training "
          f"pairs, {stats['rms_held_out']:.2f} on {stats['held_out_pairs']} held-out pairs (a constant "
          f"guess: {stats['rms_constant']:.2f})")


if __name__ == "__main__":
    main()
