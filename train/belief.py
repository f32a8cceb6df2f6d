"""Train a learned belief for a blueprint checkpoint (LBS paper, "Belief Learning").

    python train/belief.py --blueprint runs/blueprint/best.pt --preset tiny
    python train/belief.py --blueprint checkpoints/blueprint_2p.pt --preset paper --device auto
    python train/belief.py --resume runs/belief/latest.pt --total_steps 5000   # continue the same run
    python train/belief.py --blueprint bp.pt --preset tiny --model.hidden 128 --batch_size 32

--resume takes the run's config from the checkpoint (then applies any overrides), checks that the
blueprint (by default the path stored in the checkpoint) is the same file by sha256, and continues
the step counter, weights and optimizer state. Logs go to wandb (offline unless WANDB_MODE says else).
"""

from __future__ import annotations

import argparse

import torch

from lbs import ckpt
from lbs.belief.config import PRESETS, BeliefTrainConfig, apply_preset
from lbs.belief.trainer import BeliefTrainer
from lbs.configs import add_dataclass_args, apply_overrides, from_dict
from lbs.models import BELIEF_KIND as KIND


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blueprint", default=None, help="blueprint checkpoint whose games the belief learns")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--resume", default=None, help="belief checkpoint to continue")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--no-progress", action="store_true")
    add_dataclass_args(ap, BeliefTrainConfig)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    blueprint = args.blueprint
    if args.resume:
        blob = ckpt.load(args.resume, KIND)
        cfg = from_dict(BeliefTrainConfig, blob["config"])
        blueprint = blueprint or blob["blueprint"]["path"]
    else:
        if blueprint is None:
            ap.error("--blueprint is required (unless --resume names a belief checkpoint)")
        cfg = apply_preset(args.preset)
    cfg = apply_overrides(cfg, args)
    trainer = BeliefTrainer(cfg, blueprint, resume=args.resume, progress=not args.no_progress)
    result = trainer.run()
    print(f"final: {result}")
    print(f"checkpoint: {result.checkpoint}")


if __name__ == "__main__":
    main()
