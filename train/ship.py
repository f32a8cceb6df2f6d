"""Ship a trained model into checkpoints/: fp16 weights and configs, scored as shipped, with a model card.

    python train/ship.py blueprint runs/blueprint/recipe/best.pt --name blueprint_2p --games 10000
    python train/ship.py belief runs/belief/recipe/best.pt --blueprint checkpoints/blueprint_2p.pt \\
        --name belief_2p --games 1000

A blueprint comes from a train/blueprint.py run, a belief from a train/belief.py run trained for exactly the
--blueprint given (its sha256; a rule bot by name). checkpoints/<name>.pt and <name>.md replace any previous
ones; the card says how the run was made (its recipe, phase by phase) and how well the file does.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import torch

from lbs import ckpt, cli
from lbs.models import OtherBlueprint, resolve_device
from lbs.ship import ship_belief, ship_blueprint

NAME = r"[A-Za-z0-9][A-Za-z0-9_-]*"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("blueprint", "belief"), help="what the run trained")
    ap.add_argument("checkpoint", help="the run's checkpoint (best.pt or latest.pt)")
    ap.add_argument("--name", required=True, help="checkpoints/<name>.pt and .md (replaced)")
    ap.add_argument("--blueprint", default=None, help="belief: the blueprint it was trained for")
    ap.add_argument("--games", type=int, default=1000, help="games it is scored on, as shipped")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--folder", default="checkpoints", help="where shipped files live")
    ap.add_argument("--notes", default="", help="a paragraph for the card's end")
    args = ap.parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(given):  # the card ends with the paragraph itself; the command names it only
        if a.startswith("--notes="):
            given[i] = "--notes=<the paragraph below>"
        elif a == "--notes" and i + 1 < len(given):
            given[i + 1] = "<the paragraph below>"
    command = shlex.join(["python", "train/ship.py", *given])
    try:
        if not re.fullmatch(NAME, args.name):
            raise ValueError(f"--name {args.name!r}: a plain file name (letters, digits, '_', '-')")
        cli.at_least("--games", args.games, 2)
        if args.kind == "belief" and args.blueprint is None:
            raise ValueError("a belief ships with --blueprint, the blueprint it was trained for")
        if args.kind == "blueprint" and args.blueprint is not None:
            raise ValueError("--blueprint is for a belief; a blueprint run's checkpoint is shipped alone")
        if cli.threads(args.threads):
            torch.set_num_threads(args.threads)
        device = resolve_device(args.device)
        folder = Path(args.folder)
        if not folder.is_dir():
            raise ValueError(f"--folder {folder}: not a folder")
        if args.kind == "blueprint":
            card = ship_blueprint(args.checkpoint, args.name, args.games, device, folder, command, args.notes)
        else:
            card = ship_belief(args.checkpoint, args.blueprint, args.name, args.games, device, folder,
                               command, args.notes)
    except (ValueError, OtherBlueprint, ckpt.CheckpointError) as e:
        sys.exit(f"ship: {e}")
    print(card)


if __name__ == "__main__":
    main()
