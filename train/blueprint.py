"""Train a Hanabi blueprint: a recipe of phases (imitation of a rule bot, TD action values, R2D2 improvement).

python train/blueprint.py --preset recipe --threads 1    # the shipped blueprint (3 hours of one CPU core)
python train/blueprint.py --preset recipe-small          # the same recipe on a small game, minutes
python train/blueprint.py --preset tiny                  # R2D2 alone, a minute on a laptop CPU
python train/blueprint.py --preset paper --device auto   # the reference settings (R2D2)
python train/blueprint.py --resume runs/blueprint/tiny-20261122-120000/latest.pt
python train/blueprint.py --preset tiny --net.hidden 128 --game.colors 3 --total_updates 500
python train/blueprint.py --preset tiny --phases '[{"kind": "improve", "updates": 5000}]'
python train/blueprint.py --preset paper --device cuda --devices 4   # data-parallel over 4 GPUs (DDP)
python train/blueprint.py --preset small --init runs/other/best.pt  # start from another blueprint's weights

A preset declares its recipe (TrainConfig.phases, each with its length in updates); --help shows it as the
JSON that --phases takes. --total_updates stops a run early (a resume goes on from there). With --resume,
--preset NAME takes that preset's phases for the rest of the run (a phase already begun must be the same);
its other settings stay the run's.

Every run gets its own folder (runs/blueprint/<preset>-<date>-<time>, printed at start) unless
--out_dir names one; a folder that holds a run is never written into unless --resume continues it
or --overwrite replaces it. --resume continues next to the file it is given, with the checkpoint's
config and then any overrides, which take effect (game and network cannot change). Flags are
accepted with underscores or dashes (--total_updates, --total-updates).

--devices N runs N processes (Lightning Fabric's DDP; on the CPU over gloo): this script is started
again for ranks 1..N-1 with the same arguments; only rank 0 prints, logs and writes. A stop (Ctrl-C,
SIGTERM, the time limit) takes effect on every rank at the end of the current round; rank 0 saves and
exits with 128 + the signal, the other ranks with 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from lbs import ckpt, cli
from lbs.configs import from_dict, preset_named, trainer_parser
from lbs.models import BLUEPRINT_KIND as KIND
from lbs.models import resolve_device
from lbs.rl.config import PRESETS, TrainConfig, apply_preset
from lbs.runs import Stopped, say, training_state


def parser(preset: str) -> argparse.ArgumentParser:
    return trainer_parser(
        __doc__, TrainConfig, PRESETS, preset,
        preset_help="starting config [tiny]; with --resume, the recipe (phases) to continue with",
        resume_help="latest.pt of a run to continue (its config is used, then any overrides)")


def build(args: argparse.Namespace) -> tuple[TrainConfig, str | None]:
    """The run's config: the preset's, or the resumed checkpoint's, then the flags."""
    if args.resume:
        # a shipped file is refused as weights only before its config (perhaps an older lbs's) is read
        cfg = from_dict(TrainConfig, training_state(args.resume, KIND, needs=("optimizer",))["config"])
        if args.preset is not None:  # that preset's recipe goes on (read_resume checks the phases begun)
            cfg = replace(cfg, phases=apply_preset(args.preset).phases)
            say(f"--preset {args.preset}: the run continues with that preset's phases; its other settings "
                "are the run's")
        if args.out_dir is None:  # continue next to the file given, wherever the run was first written
            args.out_dir = str(Path(args.resume).parent)
    else:
        cfg = apply_preset(args.preset or "tiny")
    return cli.with_flags(cfg, args, "blueprint"), args.resume


def main(argv: list[str] | None = None) -> None:
    args = parser(preset_named(argv)).parse_args(argv)
    try:  # everything up to the first update is user input: errors are one line
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        cfg, resume = build(args)
        device = resolve_device(cfg.device)
        if device.type == "cpu" and args.preset == "paper" and not resume:
            say("warning: the paper preset runs on the CPU here (no CUDA): expect days, not hours")
        from lbs.rl.trainer import Trainer  # Lightning: imported once the flags are checked

        trainer = Trainer(cfg, resume=resume, progress=not args.no_progress, overwrite=args.overwrite)
    except (ValueError, ckpt.CheckpointError) as e:
        sys.exit(f"blueprint: {e}")
    try:
        command = " ".join(["python", "train/blueprint.py", *(sys.argv[1:] if argv is None else argv)])
        result = trainer.run(tags=[f"preset:{args.preset or 'tiny'}"] if not resume else [], command=command)
    except ckpt.CheckpointError as e:  # a failed save (disk full): one line, the previous file intact
        sys.exit(f"blueprint: {e}")
    except Stopped as e:  # the other ranks exit 0: Lightning's launcher ends the run when one exits non-zero
        sys.exit(128 + e.signum if trainer.is_main else 0)
    if result is not None:
        print(f"final: {result}")


if __name__ == "__main__":
    main()
