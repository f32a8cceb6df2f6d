"""Train BAD (the Bayesian action decoder) on Hanabi: a public agent acting by sampled partial policies, its
public belief updated by Bayes on them, learnt by advantage actor-critic on self-play.

python train/bad.py --preset tiny                    # minutes on one CPU core
python train/bad.py --preset small --threads 1       # the 2-colour game: long on a CPU
python train/bad.py --preset paper --device auto     # the paper's settings (full game; needs a GPU)
python train/bad.py --resume runs/bad/tiny-20261201-120000/latest.pt --total_updates 600
python train/bad.py --preset tiny --net.hidden 128 --samples 500 --lr 1e-3

Every run gets its own folder (runs/bad/<preset>-<date>-<time>, printed at start) unless --out_dir names
one; a folder that holds a run is never written into unless --resume continues it or --overwrite replaces
it. --resume continues next to the file it is given, with the checkpoint's config and then any overrides
(game, network and optimizer cannot change). Bad values are refused in one line before anything is
written. Flags are accepted with underscores or dashes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from lbs import ckpt, cli
from lbs.bad.config import PRESETS, BadConfig, apply_preset
from lbs.configs import from_dict, preset_named, trainer_parser
from lbs.runs import Stopped, training_state

KIND = "bad"


def parser(preset: str) -> argparse.ArgumentParser:
    return trainer_parser(__doc__, BadConfig, PRESETS, preset,
                          preset_help="starting config of a new run [tiny]",
                          resume_help="latest.pt of a BAD run to continue",
                          progress_help="fewer lines (also --no-progress)")


def build(args: argparse.Namespace) -> tuple[BadConfig, str | None]:
    """The run's config: the preset's, or the resumed checkpoint's, then the flags."""
    if args.resume:
        if args.preset is not None:
            raise ValueError("--preset with --resume: a resume continues the checkpoint's config; drop it "
                             "(other flags still override its config)")
        cfg = from_dict(BadConfig, training_state(args.resume, KIND, needs=("optimizer",))["config"])
        if args.out_dir is None:
            args.out_dir = str(Path(args.resume).parent)
    else:
        cfg = apply_preset(args.preset or "tiny")
    return cli.with_flags(cfg, args, "bad"), args.resume


def main(argv: list[str] | None = None) -> None:
    args = parser(preset_named(argv)).parse_args(argv)
    try:  # everything up to the first update is user input: errors are one line
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        cfg, resume = build(args)
        from lbs.bad.trainer import BadTrainer

        trainer = BadTrainer(cfg, resume=resume, progress=not args.no_progress, overwrite=args.overwrite)
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"bad: {e}")
    try:
        command = " ".join(["python", "train/bad.py", *(sys.argv[1:] if argv is None else argv)])
        result = trainer.run(tags=[f"preset:{args.preset or 'tiny'}"] if not resume else [], command=command)
    except ckpt.CheckpointError as e:
        sys.exit(f"bad: {e}")
    except Stopped as e:
        sys.exit(128 + e.signum)
    if result is not None:
        print(f"final: {result}")


if __name__ == "__main__":
    main()
