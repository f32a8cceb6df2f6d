"""A training run's life, written once for every trainer: its folder, the resume it may continue, the W&B run
it logs to, and the one-line messages it prints (where it writes, why it stopped, what it saved).

A run owns its folder: a process holds an exclusive lock on it (and a search its result file) for its whole
life, so a second process on the same folder is refused in one line; a new run never writes into a folder
that holds another run, nor a resume into a folder that holds a run other than its own. A resume reads a
training state, never a weights-only (shipped) file; best.pt can be newer than the latest.pt a run resumes
from, so the best so far is reconciled from both. A stop by a signal saves latest.pt, says so in one line
and raises `Stopped`, whose signal gives the script its exit status; a stop that arrives while best.pt is
written takes effect once the file is complete (`Lifecycle.write_best`), so a best found before the stop is
on disk. Folders a process makes and leaves empty (a run refused after claiming its folder) are removed
when it exits.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import ckpt
from .shards import process_rank

RUN_FILES = ("latest.pt", "best.pt")
WANDB_MODES = ("offline", "online", "disabled")
PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "64-true")
"""Lightning precisions a trainer's learner takes."""
T = TypeVar("T")


class RunDirError(ValueError):
    """A new run was pointed at a folder that already holds a run."""


class InUseError(RunDirError):
    """Another live process holds the folder or file (its lock)."""


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal after saving its checkpoint; `signum` gives the exit status 128 + signum."""

    def __init__(self, reason: str, signum: int):
        super().__init__(reason)
        self.reason, self.signum = reason, signum


def default_out_dir(kind: str, preset: str) -> str:
    """runs/<kind>/<preset>-<date>-<time>: every run its own readable folder, claimed by creating it (mkdir
    is atomic), so two runs started in the same second get two folders (the second: ...-2). Ranks other
    than 0 of a multi-process run only name it (rank 0 alone writes)."""
    stamp = Path("runs") / kind / f"{preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    if process_rank() != 0:
        return str(stamp)
    out, i = stamp, 1
    while True:
        try:
            make_folder(out, exist_ok=False)
            return str(out)
        except FileExistsError:
            i += 1
            out = stamp.with_name(f"{stamp.name}-{i}")
        except OSError as e:
            raise RunDirError(f"cannot make the run folder {out}: {e.strerror or e}") from None


_MADE: list[Path] = []
"""Folders this process made, outermost first: those still empty when it exits are removed (a run refused
after it claimed or made its folder leaves nothing behind)."""


def make_folder(path: str | Path, exist_ok: bool = True) -> Path:
    """mkdir -p `path`, remembering each level this process made itself (removed at exit if still empty);
    FileExistsError when the folder exists and not `exist_ok` (a claim, as default_out_dir makes one)."""
    path = Path(path)
    full = Path(os.path.abspath(path))
    for attempt in range(3):
        try:
            for level in [*reversed(full.parents), full]:
                try:
                    os.mkdir(level)
                except FileExistsError:
                    if level == full and not (exist_ok and full.is_dir()):
                        raise
                    continue
                _MADE.append(level)
            return path
        except FileNotFoundError:  # another process removed an empty parent between two levels: again
            if attempt == 2:
                raise
    return path


def _remove_empty_made() -> None:
    for folder in reversed(_MADE):  # innermost first; a folder holding anything stays
        try:
            os.rmdir(folder)
        except OSError:
            pass
    _MADE.clear()


_HELD: dict[str, int] = {}
"""Locks this process holds: lock file path -> open descriptor (kept open: the kernel drops the lock when
the process dies, however it dies)."""


def hold(lock: Path, what: str) -> Path:
    """Take an exclusive lock on the file `lock` for the life of this process (released at exit, or by
    `release`); InUseError naming `what` and the holder's pid when another live process holds it. A lock
    taken by this process already is kept. The lock file is removed at a clean exit; a killed holder's
    stale file is simply locked again (flock dies with its process)."""
    key = str(Path(os.path.abspath(lock)))
    if key in _HELD:
        return lock
    while True:
        make_folder(Path(key).parent)
        try:
            fd = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # another process removed the (empty) folder just now: make it again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InUseError(f"{what} is in use by another process (pid {pid}); wait for it to end or "
                             "choose another") from None
        try:  # the holder we waited on may have removed the file: then lock the new one
            same = os.fstat(fd).st_ino == os.stat(key).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[key] = fd
    return lock


def release(lock: Path) -> None:
    """Give up a lock taken by `hold` (its file removed first, while still held)."""
    fd = _HELD.pop(str(Path(os.path.abspath(lock))), None)
    if fd is not None:
        Path(os.path.abspath(lock)).unlink(missing_ok=True)
        os.close(fd)


@atexit.register
def _release_all() -> None:
    for key in list(_HELD):
        release(Path(key))
    _remove_empty_made()  # after the locks: a refused run's folder held only its lock file


def hold_folder(out: str | Path) -> None:
    """Lock a run folder (out/.lock, the folder made if needed) for this process's life; rank 0 only (the
    other ranks of one run write nothing)."""
    if process_rank() == 0:
        hold(Path(out) / ".lock", f"run folder {out}")


def check_out_dir(out: str | Path, resuming: bool | str | Path, overwrite: bool) -> None:
    """Refuse to start a new run in a folder that holds one, unless told to resume or overwrite it; refuse a
    resume (`resuming`: the file it continues) into a folder that holds another run."""
    out = Path(out)
    held = [f for f in RUN_FILES if (out / f).exists()]
    if not held or overwrite:
        return
    if not resuming:
        cont = (f"continue it with --resume {out / 'latest.pt'}" if "latest.pt" in held else
                "it has no latest.pt to continue (it stopped before its first one)")
        raise RunDirError(f"{out} already holds a run ({', '.join(held)}): {cont}, replace it with "
                          "--overwrite, or choose another --out_dir")
    if isinstance(resuming, (str, Path)) and Path(resuming).resolve().parent != out.resolve():
        raise RunDirError(f"{out} holds another run ({', '.join(held)}), not the one in "
                          f"{Path(resuming).parent}: resume into an empty folder or the run's own")


def say(msg: str) -> None:
    """One line on stderr, visible next to a progress bar and in logs; only rank 0 of a multi-process run
    speaks."""
    if process_rank() == 0:
        print(f"lbs: {msg}", file=sys.stderr, flush=True)


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def stop_reason(exc: BaseException, sigterm: bool = False) -> tuple[str, Stopped | None]:
    """Why a run's loop ended by `exc` (`sigterm`: the loop's owner recorded a SIGTERM), as its closing
    line says it, and the Stopped to raise when a signal ended it (None: an error, raised as it is)."""
    if isinstance(exc, KeyboardInterrupt) or sigterm:
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGTERM if sigterm else signal.SIGINT
        reason = f"stopped by {signal_name(signum)}"
        return reason, Stopped(reason, signum)
    return f"stopped by an error ({type(exc).__name__})", None


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside the block are held and delivered, to the handlers in place
    before it, when the block ends: a write begun is finished before a stop takes effect. (SIGKILL still
    ends a write that hangs; outside the main thread, where no handler runs, nothing is held.)"""
    sigs = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or any(
            signal.getsignal(s) is None for s in sigs):  # a handler set outside Python cannot be put back
        yield
        return
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if held:
            signal.raise_signal(held[0])  # its handler runs now (Ctrl-C: KeyboardInterrupt from here)


class StopSignals:
    """Signals that stop a loop the run owns. One process: SIGTERM raises Stopped at once, like Ctrl-C (the
    loop's finally writes latest.pt). Several (DDP): SIGTERM and SIGINT are only recorded in `pending`; the
    loop agrees on them at the top of its next round, so every rank stops there together rather than one
    rank leaving the others blocked in a gradient all-reduce. A loop installs them deferred before it
    announces itself and makes them immediate once it runs, so a signal in between is kept, not fatal. (A
    loop Lightning owns uses Lightning's.)"""

    def __init__(self, deferred: bool):
        self.deferred, self.pending = deferred, 0

    def install(self) -> Callable[[], Any]:
        """Install the handlers; returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):
            if not self.deferred:
                raise Stopped(signal_name(signum), signum)
            self.pending = self.pending or signum

        sigs = (signal.SIGTERM, signal.SIGINT) if self.deferred else (signal.SIGTERM,)
        old = {s: signal.signal(s, handler) for s in sigs}
        return lambda: [signal.signal(s, h) for s, h in old.items()]


def training_state(path: str | Path, kind: str, needs: tuple[str, ...], game: dict | None = None) -> dict:
    """The checkpoint a resume continues, read to the CPU; a weights-only file (a shipped model, without the
    `needs` fields of a training state) is refused before anything in it is trusted."""
    blob = ckpt.load(path, kind, game=game, map_location="cpu")
    if not all(k in blob for k in needs):
        raise ckpt.CheckpointError(f"{path} holds weights only (a shipped model), not a training state: "
                                   "it cannot be resumed; start a new run instead")
    return blob


@dataclass
class Lifecycle:
    """One training run's folder and the steps of its life that every trainer shares."""

    kind: str
    """the checkpoint kind ("blueprint", "belief"): also the W&B job type and the first word of its lines"""
    out: Path
    """the run folder: latest.pt, best.pt and the W&B files"""
    unit: str
    """what the run counts ("update", "step"); its config's total is the field total_<unit>s"""
    best_written: str = ""
    """what best.pt holds when this process wrote it (write_best), for the closing line; "" before that"""

    def check_folder(self, resuming: bool | str | Path, overwrite: bool) -> None:
        """Lock the folder for this process, then refuse it if it holds another run (see check_out_dir);
        also refused: a folder that cannot be written, before any work."""
        try:
            hold_folder(self.out)
        except OSError as e:  # (a holder's refusal, InUseError, is not an OSError: it goes up as it is)
            raise RunDirError(f"cannot write the run folder {self.out}: {e.strerror or e}") from None
        check_out_dir(self.out, resuming, overwrite)

    def training_state(self, path: str | Path, needs: tuple[str, ...], game: dict | None = None) -> dict:
        """The checkpoint a resume continues (see training_state)."""
        return training_state(path, self.kind, needs, game)

    @staticmethod
    def refuse_changes(path: str | Path, stored: Any, cfg: Any, names: tuple[str, ...]) -> None:
        """The parts of a config that a resume cannot change (the game, the network): equal or refused."""
        for name in names:
            theirs, mine = getattr(stored, name), getattr(cfg, name)
            if theirs != mine:
                raise ckpt.CheckpointError(f"{path} was trained with {name} {theirs}, this run uses {mine}: "
                                           f"--{name}.* cannot change on resume")

    def best_so_far(self, mine: T, read: Callable[[dict], T], better: Callable[[T, T], bool],
                    game: dict | None = None) -> T:
        """best.pt is written at each new best, latest.pt less often: after a crash the best so far is the
        better of latest.pt's (`mine`) and best.pt's (`read` from its payload), so a worse model never
        replaces best.pt."""
        path = self.out / "best.pt"
        if not path.is_file():
            return mine
        theirs = read(ckpt.load(path, self.kind, game=game))
        return theirs if better(theirs, mine) else mine

    def write_best(self, write: Callable[[], Any], undo: Callable[[], Any], what: str) -> None:
        """Write best.pt (`write`, the run's record already set to the new best, which the file carries) to
        its end: a stop signal that arrives meanwhile is held and takes effect once the file is complete, so
        a best found before a stop is on disk when the process exits, and the closing line names it
        (`what`, e.g. "eval mean 21.3 at update 400"). A write that fails (a full disk) calls `undo`, so the
        run never records a best that no file holds, and raises."""
        with signals_held():
            try:
                write()
            except BaseException:
                undo()
                raise
            self.best_written = what

    def finished(self, done: int, total: int) -> bool:
        """True (and said) when a resumed run already reached its total: there is nothing to do."""
        if done < total:
            return False
        say(f"the run in {self.out} already finished ({done} of total_{self.unit}s={total}): nothing to do; "
            f"pass a larger --total_{self.unit}s to train further")
        return True

    def begin(self, done: int, device: str) -> None:
        """Make the folder (rank 0 alone writes) and say where the run starts."""
        if process_rank() == 0:
            make_folder(self.out)
        say(f"{self.kind} run in {self.out} from {self.unit} {done} on {device}")

    def end(self, reason: str, done: int, saved: Path) -> None:
        """The run's closing line: why it ended, where, the file that holds it, and the best this process
        wrote to best.pt (a stop never drops it: write_best)."""
        best = f"; best.pt holds the best so far ({self.best_written})" if self.best_written else ""
        say(f"{reason} at {self.unit} {done}: saved {saved}{best}")

    def wandb_settings(self, project: str, group: str, mode: str, run_id: str | None,
                       tags: list[str]) -> dict[str, Any]:
        """wandb.init arguments: one W&B run per run folder, named after it, resumed by its id (a new one
        when `run_id` is None), offline unless the config or WANDB_MODE (which wins; tests: disabled) says
        otherwise."""
        return dict(project=project, dir=str(self.out), name=self.out.name, id=run_id or secrets.token_hex(4),
                    resume="allow", group=group or None, tags=tags, job_type=self.kind,
                    mode=os.environ.get("WANDB_MODE", mode))

    @staticmethod
    def declare_metrics(run: Any, step: str, best: str, summary: str) -> None:
        """Every metric plotted against the run's own counter; `best` summarised by `summary` (max, min)."""
        run.define_metric(step)
        run.define_metric("*", step_metric=step)
        run.define_metric(best, step_metric=step, summary=summary)
