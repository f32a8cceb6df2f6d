"""Train a learned belief for a blueprint checkpoint (LBS paper, "Belief Learning").

    python train/belief.py --blueprint runs/blueprint/tiny-20261122-120000/best.pt --preset tiny
    python train/belief.py --blueprint checkpoints/blueprint_2p.pt --preset paper --device auto
    python train/belief.py --resume runs/belief/tiny-20261122-130000/latest.pt --total_steps 5000
    python train/belief.py --blueprint bp.pt --preset tiny --model.hidden 128 --batch_size 32
    python train/belief.py --blueprint smartbot --preset tiny     # SmartBot's games (2 players); no file
    python train/belief.py --blueprint smartbot --players 3 --preset tiny   # ... and 3 players
    python train/belief.py --blueprint bp.pt --init checkpoints/belief_smartbot_2p.pt   # fine-tune a belief

Every run gets its own folder (runs/belief/<preset>-<date>-<time>, printed at start) unless --out_dir
names one; a folder that holds a run is never written into unless --resume continues it or
--overwrite replaces it. --resume continues next to the file it is given, takes the run's config from
the checkpoint (then any overrides, which take effect; the model cannot change, and --preset or --init,
which would do nothing, are refused), checks that the
blueprint (by default the one the checkpoint names, relative to its folder) is the same file by
sha256, and continues the step counter, weights and optimizer state. Logs go to wandb (offline
unless WANDB_MODE says else). Flags are accepted with underscores or dashes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from lbs import ckpt, cli
from lbs.belief.config import PRESETS, BeliefTrainConfig, apply_preset
from lbs.configs import from_dict, preset_named, trainer_parser
from lbs.models import BELIEF_KIND as KIND
from lbs.models import BeliefConfig, stored_blueprint_path
from lbs.runs import Stopped


def parser(preset: str) -> argparse.ArgumentParser:
    def blueprint(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--blueprint", default=None,
                        help="blueprint checkpoint whose games the belief learns, or a rule bot: smartbot")

    return trainer_parser(__doc__, BeliefTrainConfig, PRESETS, preset, extra=blueprint,
                          preset_help="starting config of a new run [tiny]; a resume keeps its checkpoint's",
                          resume_help="latest.pt of a belief run to continue")


def build(args: argparse.Namespace, ap: argparse.ArgumentParser) -> tuple[BeliefTrainConfig, str]:
    """The run's config (the preset's or the resumed checkpoint's, then the flags) and its blueprint."""
    blueprint = args.blueprint
    if args.resume:
        given = [flag for flag, v in (("--preset", args.preset), ("--init", args.init)) if v is not None]
        if given:  # a resume continues its own weights and config: these would do nothing
            raise ValueError(f"{' and '.join(given)} with --resume: a resume continues the checkpoint's "
                             "config and weights; drop them (other flags still override its config)")
        blob = ckpt.load(args.resume, KIND)
        if "config" not in blob:
            raise ckpt.CheckpointError(f"{args.resume} is not a belief training checkpoint")
        cfg = from_dict(BeliefTrainConfig, blob["config"])
        blueprint = blueprint or str(stored_blueprint_path(blob, args.resume))
        if args.out_dir is None:  # continue next to the file given
            args.out_dir = str(Path(args.resume).parent)
    else:
        if blueprint is None:
            raise ValueError("--blueprint is required (unless --resume names a belief checkpoint)")
        cfg = apply_preset(args.preset or "tiny")
        if args.init:  # a warm start takes the model of the belief it starts from; --model.* may only agree
            # with it, or add --model.blueprint_features
            init = ckpt.load(args.init, KIND)
            cfg = replace(cfg, model=from_dict(BeliefConfig, init.get("config", {}).get("model", {})))
    return cli.with_flags(cfg, args, "belief"), blueprint


def main(argv: list[str] | None = None) -> None:
    ap = parser(preset_named(argv))
    args = ap.parse_args(argv)
    try:  # everything before training is user input: errors are one line
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        cfg, blueprint = build(args, ap)
        from lbs.belief.trainer import BeliefTrainer  # Lightning: imported once the flags are checked

        trainer = BeliefTrainer(cfg, blueprint, resume=args.resume, progress=not args.no_progress,
                                overwrite=args.overwrite)
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"belief: {e}")
    try:
        result = trainer.run(tags=[f"preset:{args.preset or 'tiny'}"] if not args.resume else [])
    except ckpt.CheckpointError as e:  # a failed save (disk full): one line, the previous file intact
        sys.exit(f"belief: {e}")
    except Stopped as e:
        sys.exit(128 + e.signum)
    if result is not None:
        print(f"final: {result}")
        print(f"checkpoint: {result.checkpoint}")


if __name__ == "__main__":
    main()
