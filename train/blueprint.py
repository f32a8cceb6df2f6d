"""Train a Hanabi blueprint with R2D2 + VDN self-play.

python train/blueprint.py --preset tiny                  # minutes on a laptop CPU
python train/blueprint.py --preset paper --device auto   # the reference settings
python train/blueprint.py --resume runs/blueprint/latest.pt
python train/blueprint.py --preset tiny --net.hidden 128 --game.colors 3 --total_updates 5000
"""

from __future__ import annotations

import argparse

from lbs import ckpt
from lbs.configs import add_dataclass_args, apply_overrides, from_dict
from lbs.models import BLUEPRINT_KIND as KIND
from lbs.rl.trainer import PRESETS, TrainConfig, Trainer, apply_preset


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument(
        "--resume", default=None, help="checkpoint to continue (its config is used, then overrides)"
    )
    ap.add_argument("--no-progress", action="store_true")
    add_dataclass_args(ap, TrainConfig)
    args = ap.parse_args(argv)
    if args.resume:
        cfg = from_dict(TrainConfig, ckpt.load(args.resume, KIND)["config"])
    else:
        cfg = apply_preset(args.preset)
    cfg = apply_overrides(cfg, args)
    trainer = Trainer(cfg, resume=args.resume, progress=not args.no_progress)
    result = trainer.run()
    print(f"final: {result}")


if __name__ == "__main__":
    main()
