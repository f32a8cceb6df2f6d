"""Run folders and the one-line messages the trainers print: where a run writes, why it stopped, what
it saved. A run owns its folder; a new run never writes into a folder that holds another run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .shards import process_rank

RUN_FILES = ("latest.pt", "best.pt")


class RunDirError(ValueError):
    """A new run was pointed at a folder that already holds a run."""


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal after saving its checkpoint; `signum` gives the exit status 128 + signum."""

    def __init__(self, reason: str, signum: int):
        super().__init__(reason)
        self.reason, self.signum = reason, signum


def default_out_dir(kind: str, preset: str) -> str:
    """runs/<kind>/<preset>-<date>-<time>: every run its own readable folder."""
    return str(Path("runs") / kind / f"{preset}-{time.strftime('%Y%m%d-%H%M%S')}")


def check_out_dir(out: str | Path, resuming: bool, overwrite: bool) -> None:
    """Refuse to start a new run in a folder that holds one, unless told to resume or overwrite it."""
    out = Path(out)
    held = [f for f in RUN_FILES if (out / f).exists()]
    if held and not resuming and not overwrite:
        raise RunDirError(f"{out} already holds a run ({', '.join(held)}): continue it with --resume "
                          f"{out / 'latest.pt'}, replace it with --overwrite, or choose another --out_dir")


def say(msg: str) -> None:
    """One line on stderr, visible next to a progress bar and in logs; only rank 0 of a multi-process run
    speaks."""
    if process_rank() == 0:
        print(f"lbs: {msg}", file=sys.stderr, flush=True)


def signal_name(signum: int) -> str:
    import signal

    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
