"""What every experiment records about where it ran."""

from __future__ import annotations

import datetime
import itertools
import re
import shlex
import sys
from pathlib import Path

import torch

from lbs import cli
from lbs.ckpt import SaveError, write_atomic
from lbs.machine import cpu_name, machine  # noqa: F401  (experiments name their machine through here)
from lbs.runs import InUseError, hold


def command(argv: list[str] | None = None) -> str:
    """How this run was started, as typed at the repository root: `python -m experiments.NAME ARGS` (argv:
    the arguments a caller passed to main, else the process's own)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", "-m", f"experiments.{Path(sys.argv[0]).stem}", *map(shlex.quote, args)])


def sync(device: torch.device | str) -> None:
    """Wait for the device's queued kernels, so a timer around them measures them (nothing on a CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


RESULTS = Path(__file__).parent / "results"
"""Tracked results, one folder per experiment (results/<name>/). A table joined from runs (table1
--combine) keeps their per-deal scores, commands and machines in its own .json: the runs' files need not
stay."""


RECORD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def result_path(name: str, record: str | None, scratch: str) -> Path:
    """Where a result goes: experiments/results/<name>/<name>_<date>_<record>.md when asked to record (a
    plain name: nothing outside that folder), else a timestamped file in the scratch folder; never an
    existing file. Checked writable and locked for this process now, before the work, so a run started in
    the same second takes the next free name."""
    if record is not None:
        if not RECORD_NAME.fullmatch(record) or ".." in record:
            raise SystemExit(f"--record {record!r}: must be a plain name (letters, digits, '.', '_', '-'); "
                             f"the result is written to {RESULTS / name}/")
        out = RESULTS / name / f"{name}_{datetime.date.today()}_{record}.md"
        if out.exists():
            raise SystemExit(f"{out} exists; choose another --record name")
        try:
            return claim(out, "--record")
        except InUseError as e:
            raise SystemExit(str(e)) from None
    stamp = Path(scratch) / f"{name}_{datetime.datetime.now():%Y%m%d-%H%M%S}"
    out = stamp.with_suffix(".md")
    for i in itertools.count(2):
        if not out.exists():
            try:
                return claim(out, "--out")
            except InUseError:
                pass
        out = stamp.with_name(f"{stamp.name}-{i}.md")
    raise AssertionError("unreachable")


def claim(out: Path, flag: str) -> Path:
    """`out` checked writable and locked for this process (InUseError: another live run holds it)."""
    try:
        cli.writable_file(out, flag)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    hold(out.with_name(f".{out.name}.lock"), f"the result file {out}")
    return out


def write_result(text: str, name: str, record: str | None, scratch: str, path: Path | None = None) -> Path:
    """Write (and print) a result at `path` (from result_path before the work) or result_path(...),
    atomically (a failure leaves the previous file and says so in one line)."""
    out = path or result_path(name, record, scratch)
    try:
        write_atomic(out, text.encode())
    except SaveError as e:
        raise SystemExit(str(e)) from None
    print(text)
    print(f"written: {out}")
    return out
