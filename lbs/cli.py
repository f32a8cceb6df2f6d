"""Checks the scripts share for their flags, each written once: a bad value is one line naming the flag
(ValueError), raised before any work; and the blueprint flags every script that loads one reads alike.
(Files a script reads are checked where they are read: lbs.ckpt.read_file.)"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import tempfile
from pathlib import Path

from .configs import apply_overrides
from .runs import default_out_dir, make_folder
from .seeding import MAX_INDEX, MAX_SEED


def threads(n: int) -> int:
    """--threads: torch CPU threads, 0 for torch's default."""
    if n < 0:
        raise ValueError(f"--threads {n}: must be >= 0 (0: torch's default)")
    return n


def at_least(flag: str, value: int | float, low: int | float) -> None:
    if not value >= low:
        raise ValueError(f"{flag} {value}: must be >= {low}")


def finite(flag: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueError(f"{flag} {value}: must be a finite number")


def seed(flag: str, value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise ValueError(f"{flag} {value}: must be in 0..{MAX_SEED}")
    return value


def games(games: int, first: int = 0, flag: str = "--games", first_flag: str = "--first-game") -> None:
    """Game numbers first .. first+games-1: at least one game, and every number within the game index of
    the seeds (lbs.seeding: 0..MAX_INDEX), so a huge count is refused now rather than overflowing or
    playing for ever."""
    if games < 1:
        raise ValueError(f"{flag} {games}: must be >= 1")
    if not 0 <= first <= MAX_INDEX:
        raise ValueError(f"{first_flag} {first}: must be in 0..{MAX_INDEX} (the seeds' game index)")
    if first + games - 1 > MAX_INDEX:
        raise ValueError(f"{flag} {games}" + (f" from {first_flag} {first}" if first else "")
                         + f": games beyond number {MAX_INDEX} (the seeds' game index) do not exist")


def writable_file(path: str | Path, flag: str) -> Path:
    """A file this run will write at the end: its folder is made (or must be makeable) and must take a new
    file now, and the path must not be a folder, so an unwritable --out fails before the work."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a folder, not a file")
    folder = next((p for p in path.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise ValueError(f"{flag} {path}: {folder} is a file, not a folder")
    try:
        make_folder(path.parent)  # removed at exit if the run is refused before it writes there
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot be written ({e.strerror or e})") from None
    return path


def add_blueprint_args(ap: argparse.ArgumentParser, default: str | Path) -> None:
    """--blueprint (a checkpoint, or a rule bot by name) and --players (a rule bot's player count; a
    checkpoint carries its own game), as every entry point that loads a blueprint reads them."""
    ap.add_argument("--blueprint", default=str(default), help="blueprint checkpoint, or a rule bot: smartbot "
                    f"(default {default})")
    ap.add_argument("--players", type=int, default=None,
                    help="players, for a rule bot (default 2); a checkpoint carries its own game")


def with_flags(cfg, args: argparse.Namespace, kind: str):
    """A train/ run's config with the command line's overrides (checked, ValueError, before any folder is
    made) and, without --out_dir, a fresh runs/<kind>/<preset>-<time> folder."""
    cfg = apply_overrides(cfg, args)
    if args.out_dir is None:
        cfg = dataclasses.replace(cfg, out_dir=default_out_dir(kind, args.preset or "tiny"))
    return cfg
