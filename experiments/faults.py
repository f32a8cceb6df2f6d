"""Run the entry points under faults and count what survives: kill -9 at random moments (some mid-write),
SIGTERM and Ctrl-C, two processes on one run folder or result file, a full disk, a stopped search's journal
damaged in every way we know, and a stop while a belief run writes best.pt.

    python -m experiments.faults --kills 6 --record cpu          # a few minutes on a 2-core CPU

Every fault runs a real process (tiny blueprint and belief runs, 2-colour search games) in a scratch folder.
After each, every checkpoint and journal left is read back (a checkpoint by its sha256, a journal line by line
by its checksums; a corrupt one is counted, never repaired), and the work lost is measured: seconds of
training since the last latest.pt for a blueprint kill, finished search games not kept for a search kill (a
rerun must play exactly the games it lacks, with the same moves as an uninterrupted run). A full disk is a
writer raising ENOSPC (mounting a small tmpfs needs root). Writes
experiments/results/faults/faults_<date>_NAME.md with --record NAME, else a scratch file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from experiments.common import command, machine, result_path, write_result
from lbs import ckpt
from lbs.search.journal import Journal, result_from_dict

ROOT = Path(__file__).resolve().parent.parent
PAIR = ["--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt"),
        "--belief", str(ROOT / "checkpoints" / "belief_2c.pt")]
BLUEPRINT = [sys.executable, str(ROOT / "train" / "blueprint.py"), "--preset", "tiny", "--no-progress",
             "--total_updates", "1000000", "--min_replay", "8", "--actor.num_games", "8",
             "--actor.max_len", "10",
             "--batch_size", "4", "--eval_every", "20", "--eval_games", "16", "--net.hidden", "16",
             "--checkpoint_minutes", "0.002"]
SEARCH = [sys.executable, str(ROOT / "search" / "run.py"), "--mode", "lbs-1", *PAIR, "--rollouts", "170",
          "--min-rollouts", "10", "--batch-games", "1", "--no-blueprint-baseline", "--no-progress"]
BELIEF = [sys.executable, str(ROOT / "train" / "belief.py"), "--preset", "tiny", "--no-progress",
          "--threads", "1", "--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt"),
          "--total_steps", "1000000",
          "--games_per_round", "8", "--min_replay", "16", "--batch_size", "8", "--eval_games", "0",
          "--model.hidden", "16", "--model.lstm_layers", "1", "--log_every", "2", "--data_ratio", "0",
          "--checkpoint_every", "1000000", "--val_every", "2", "--val_games", "8"]
ENV = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@dataclass
class Tally:
    """One kind of fault: how many were injected, files read back, bad outcomes, and work lost."""

    fault: str
    injected: int = 0
    files: int = 0
    corrupt: int = 0
    wrong: int = 0
    """outcomes other than the promised one (exit status, lines, a second holder let in, ...)"""
    lost: list[float] = field(default_factory=list)
    unit: str = ""
    journals: int = 0
    """of the files checked, search journals (read back line by line by their checksums)"""
    notes: list[str] = field(default_factory=list)

    def row(self) -> str:
        lost = (f"max {max(self.lost):.1f}, mean {sum(self.lost) / len(self.lost):.1f} {self.unit}"
                if self.lost else "—")
        return (f"| {self.fault} | {self.injected} | {self.files} | {self.corrupt} | {self.wrong} | {lost} "
                f"| {'; '.join(self.notes)} |")


def start(cmd: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=ENV, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(pred, proc: subprocess.Popen, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"{proc.args[1]} exited ({proc.returncode}) or stalled: "
                               f"{proc.stderr.read()[-800:] if proc.poll() is not None else ''}")
        time.sleep(0.05)


def continue_run(out: Path, i: int) -> list[str]:
    """The i-th start of one blueprint run: a new run in `out`, then resumes of its latest.pt."""
    return [*BLUEPRINT, "--out_dir", str(out)] if i == 0 else [*BLUEPRINT, "--resume", str(out / "latest.pt")]


def check_run(folder: Path, t: Tally) -> None:
    """Every checkpoint the run left loads; temp files of a killed write are counted."""
    for name in ("latest.pt", "best.pt"):
        if (folder / name).exists():
            t.files += 1
            try:
                ckpt.load(folder / name, "blueprint")
            except ckpt.CheckpointError:
                t.corrupt += 1


def blueprint_kills(n: int, rng: random.Random, tmp: Path) -> Tally:
    """kill -9 a blueprint run at a random moment, resume it, kill it again: n kills in one run folder."""
    t = Tally("kill -9, blueprint run (resumed after each)", unit="s of training")
    out = tmp / "bp_kill"
    mid_write = 0
    for i in range(n):
        proc = start(continue_run(out, i), tmp)
        wait_for(lambda: (out / "latest.pt").exists(), proc)
        time.sleep(rng.uniform(0.0, 3.0))
        proc.send_signal(signal.SIGKILL)
        killed = time.time()
        proc.communicate()
        t.injected += 1
        mid_write += bool(list(out.glob(".*.tmp")))
        t.lost.append(killed - (out / "latest.pt").stat().st_mtime)
        check_run(out, t)
    t.notes.append(f"{mid_write} kills left a half-written temp file (the kill landed mid-write)")
    return t


def tail(err: str) -> str:
    """The last lines of a stderr, for a table cell."""
    return " / ".join(err.strip().splitlines()[-3:]).replace("|", "/")


def signals(tmp: Path) -> Tally:
    """SIGTERM and Ctrl-C to a blueprint run and a search run: 128 + signal, one stop line, files load."""
    t = Tally("SIGTERM / Ctrl-C, blueprint and search")
    for sig in (signal.SIGTERM, signal.SIGINT):
        out = tmp / f"bp_{sig.name}"
        proc = start([*BLUEPRINT, "--out_dir", str(out)], tmp)
        wait_for(lambda out=out: (out / "latest.pt").exists(), proc)
        stopped(t, proc, sig, "stopped by", "blueprint")
        check_run(out, t)
        res = tmp / f"search_{sig.name}" / "r.json"
        proc = start([*SEARCH, "--games", "4", "--out", str(res)], tmp)
        wait_for(lambda res=res: any(len(p.read_text().splitlines()) >= 2
                                     for p in res.parent.glob(".*.journal")), proc)
        stopped(t, proc, sig, "games finished and kept in", "search")
        for j in res.parent.glob(".*.journal"):
            t.files, t.journals = t.files + 1, t.journals + 1
            t.corrupt += journal_problems(j) > 0
    return t


def stopped(t: Tally, proc: subprocess.Popen, sig: signal.Signals, line: str, what: str) -> None:
    """Send sig; the promise: exit 128 + sig, no traceback, exactly one stop line containing `line`."""
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    t.injected += 1
    bad = proc.returncode != 128 + sig or "Traceback" in err or sum(line in x for x in err.splitlines()) != 1
    t.wrong += bad
    if bad:
        t.notes.append(f"{what} {sig.name}: exit {proc.returncode}, stderr `{tail(err)}`")


def search_kills(n: int, rng: random.Random, tmp: Path) -> Tally:
    """kill -9 a search run at random moments while it plays (once its journal is there, so some kills land
    mid-write) and rerun the same command until it finishes; its games must be those of an uninterrupted
    run."""
    t = Tally("kill -9, search/run.py (rerun after each)", unit="s of play (the game in play)")
    games = 6
    res = tmp / "search_kill" / "r.json"
    for _ in range(n):
        proc = start([*SEARCH, "--games", str(games), "--out", str(res)], tmp)
        while proc.poll() is None and not list(res.parent.glob(".*.journal")):
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 2.0))
        proc.send_signal(signal.SIGKILL)
        killed = time.time()
        proc.communicate()
        t.injected += 1
        for j in res.parent.glob(".*.journal"):  # read back, as a rerun does (a torn last line is dropped)
            t.files, t.journals = t.files + 1, t.journals + 1
            t.lost.append(killed - j.stat().st_mtime)
            t.corrupt += journal_problems(j) > 0
        if res.exists():  # it finished before the kill: nothing to rerun
            break
    r = None if res.exists() else subprocess.run([*SEARCH, "--games", str(games), "--out", str(res)], env=ENV,
                                                 cwd=tmp, capture_output=True, text=True)
    ref = tmp / "search_ref" / "r.json"
    subprocess.run([*SEARCH, "--games", str(games), "--out", str(ref)], env=ENV, cwd=tmp, capture_output=True)
    same = [g["record"] for g in json.loads(res.read_text())["games"]] == \
        [g["record"] for g in json.loads(ref.read_text())["games"]]
    t.wrong += (r is not None and r.returncode != 0) or not same
    t.files += 2
    t.notes.append(f"the rerun's {games} games {'equal' if same else 'DIFFER from'} an uninterrupted run's")
    return t


def two_holders(tmp: Path) -> Tally:
    """Two blueprint runs on one --out_dir at once, and two new runs started in the same second."""
    t = Tally("two processes on one run folder / two new runs whose clocks read the same second")
    out = tmp / "shared"
    a = start([*BLUEPRINT, "--out_dir", str(out)], tmp)
    wait_for(lambda: (out / "latest.pt").exists(), a)
    b = subprocess.run([*BLUEPRINT, "--resume", str(out / "latest.pt")], env=ENV, cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    a.send_signal(signal.SIGTERM)
    a.communicate(timeout=120)
    t.injected += 1
    t.wrong += b.returncode == 0 or "in use by another process" not in b.stderr or \
        len(b.stderr.strip().splitlines()) != 1
    check_run(out, t)
    cwd = tmp / "same_second"
    cwd.mkdir()
    procs = [start(patched("same-second", [*BLUEPRINT, "--total_updates", "4"]), cwd) for _ in range(2)]
    for p in procs:
        p.communicate(timeout=300)
    t.injected += 1
    folders = list((cwd / "runs" / "blueprint").iterdir())
    t.wrong += len(folders) != 2 or any(p.returncode != 0 for p in procs)
    for f in folders:
        check_run(f, t)
    names = ", ".join(sorted(f.name for f in folders))
    t.notes.append(f"runs started together got {len(folders)} folders: {names}")
    return t


PATCHED = """
import errno, os, runpy, sys, time
from lbs import ckpt
from lbs.search.journal import Journal, result_from_dict
fault, sys.argv = sys.argv[1], [sys.argv[2], *sys.argv[3:]]
if fault.startswith("full:"):  # the disk fills after N files were written
    real, count, room = os.fdopen, [0], int(fault[5:])
    def fdopen(fd, mode="r", *a, **k):
        f = real(fd, mode, *a, **k)
        if "w" in mode:
            count[0] += 1
            if count[0] > room:
                def write(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                f.write = write
        return f
    ckpt.os.fdopen = fdopen
elif fault == "slow-write":  # each checkpoint write takes a second between its bytes and its rename
    fsync = os.fsync
    ckpt.os.fsync = lambda fd: (time.sleep(1.0), fsync(fd))
elif fault == "slow-best":  # each write of best.pt takes two seconds between its bytes and its rename
    fsync = os.fsync
    def slow(fd):
        if ".best.pt." in os.readlink(f"/proc/self/fd/{fd}"):
            time.sleep(2.0)
        fsync(fd)
    ckpt.os.fsync = slow
elif fault == "same-second":  # every clock reads the same second
    time.strftime = lambda fmt, *a: "20260101-000000"
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def patched(fault: str, args: list[str]) -> list[str]:
    """A command (a script's argv) run with `fault` patched in (see PATCHED)."""
    return [sys.executable, "-c", PATCHED, fault, *args[1:]]


def mid_write_kills(n: int, tmp: Path) -> Tally:
    """kill -9 while latest.pt is being written (its temp file exists): the previous latest.pt must load,
    and a resume must go on."""
    t = Tally("kill -9 mid-write of latest.pt, blueprint run", unit="s of training")
    out = tmp / "bp_mid_write"
    for i in range(n):
        stale = set(out.glob(".latest.pt.*.tmp"))  # the last kill's (the next save removes them)
        proc = start(patched("slow-write", continue_run(out, i)), tmp)
        def writing(stale: set = stale) -> bool:
            return (out / "latest.pt").exists() and bool(set(out.glob(".latest.pt.*.tmp")) - stale)

        wait_for(writing, proc)
        proc.send_signal(signal.SIGKILL)
        killed = time.time()
        proc.communicate()
        t.injected += 1
        t.wrong += not set(out.glob(".latest.pt.*.tmp")) - stale  # the kill must have landed mid-write
        t.lost.append(killed - (out / "latest.pt").stat().st_mtime)
        check_run(out, t)
    return t


def full_disk(tmp: Path) -> Tally:
    """The disk fills after a few checkpoints: one line, exit non-zero, the previous latest.pt intact."""
    t = Tally("full disk (ENOSPC from the writer), blueprint run")
    out = tmp / "full"
    r = subprocess.run(patched("full:3", [*BLUEPRINT, "--total_updates", "400", "--out_dir", str(out)]),
                       env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
    t.injected += 1
    lines = r.stderr.strip().splitlines()
    t.wrong += r.returncode == 0 or "Traceback" in r.stderr or "No space left on device" not in lines[-1] or \
        any(" saved " in x for x in lines)
    check_run(out, t)
    t.notes.append(f"last line: `{lines[-1] if lines else ''}`")
    return t


def journal_problems(path: Path) -> int:
    """Lines of a journal that a reader would skip, other than a last line cut short by a kill (0: intact):
    each line's checksum and settings against the journal's own header."""
    try:
        key = json.loads(path.read_bytes().split(b"\n", 1)[0])["key"]
        j = Journal(path.parent, path.name[1:].rsplit("-", 1)[0], key, writer=False)
    except (ValueError, KeyError, TypeError):
        return 1
    if j.path != path:  # its header names another command's settings
        return 1
    return sum(n for why, n in j.skipped.items() if why != "torn")


def records(result: Path) -> list[dict]:
    return [g["record"] for g in json.loads(result.read_text())["games"]]


def journal_damage(tmp: Path) -> Tally:
    """A search stopped by SIGTERM after two games, its journal then damaged (a garbage line, `{}`, a `[]`
    header, an edited game, a line of another command, a torn last line, an older lbs's lines without
    checksums): the same command run again must skip the bad lines in one line naming the journal, keep the
    games after them, and end with an uninterrupted run's games; another command in the same folder must
    neither use nor delete it. The stop line must count the games on disk."""
    t = Tally("journal damaged after a stop, search/run.py (rerun after each)")
    games, folder = 4, tmp / "journal"
    res = folder / "r.json"
    cmd = [*SEARCH, "--games", str(games), "--out", str(res)]
    ref = tmp / "journal_ref" / "r.json"
    subprocess.run([*SEARCH, "--games", str(games), "--out", str(ref)], env=ENV, cwd=tmp, capture_output=True)
    proc = start(cmd, tmp)
    wait_for(lambda: any(len(p.read_bytes().split(b"\n")) > 3 for p in folder.glob(".*.journal")), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    (journal,) = folder.glob(".*.journal")
    said = re.search(r"(\d+) of 4 games finished and kept", err)
    on_disk = sum(len(json.loads(x)["numbers"]) for x in journal.read_bytes().split(b"\n")[1:-1])
    t.injected += 1
    t.files, t.journals = t.files + 1, t.journals + 1
    t.corrupt += journal_problems(journal) > 0
    t.wrong += proc.returncode != 128 + signal.SIGTERM or said is None or int(said.group(1)) != on_disk
    t.notes.append(f"the stop line: {said.group(0) if said else tail(err)}, {on_disk} on disk")
    pristine = journal.read_bytes()
    lines = pristine.split(b"\n")[:-1]
    other = Journal(tmp / "journal_other", "lbs-1", {"another": "command"})
    other.append([0], 1.0, [result_from_dict(json.loads(lines[1])["games"][0])])
    foreign = other.path.read_bytes().split(b"\n")[1]
    edited = json.loads(lines[1])
    edited["games"][0]["record"]["score"] += 1
    damages = {
        "a garbage line in the middle": [lines[0], lines[1], b"\x00garbage{", *lines[2:]],
        "a line {}": [lines[0], b"{}", *lines[1:]],
        "a header []": [b"[]", *lines[1:]],
        "an edited game": [lines[0], json.dumps(edited).encode(), *lines[2:]],
        "a line of another command": [*lines, foreign],
        "an older lbs's lines": [json.dumps({k: v for k, v in json.loads(x).items()
                                             if k not in ("sha256", "settings")}).encode() for x in lines],
    }
    for what, rows in [*damages.items(), ("a torn last line", None)]:
        if rows is None:
            journal.write_bytes(pristine + lines[-1][: len(lines[-1]) // 2])
        else:
            journal.write_bytes(b"".join(x + b"\n" for x in rows))
        r = subprocess.run(cmd, env=ENV, cwd=tmp, capture_output=True, text=True)
        t.injected += 1
        t.files, t.journals = t.files + 2, t.journals + 1  # the damaged journal (the rerun's), the result
        said = [x for x in r.stderr.splitlines() if x.startswith(f"lbs: journal {journal}: skipped")]
        same = res.exists() and records(res) == records(ref)
        bad = r.returncode != 0 or "Traceback" in r.stderr or len(said) != 1 or not same or journal.exists()
        t.wrong += bad
        if bad:
            t.notes.append(f"{what}: exit {r.returncode}, games {'equal' if same else 'DIFFER'}, "
                           f"`{tail(r.stderr)}`")
        res.unlink(missing_ok=True)
    journal.write_bytes(pristine)
    r = subprocess.run([*SEARCH, "--games", "2", "--out", str(folder / "other.json")], env=ENV, cwd=tmp,
                       capture_output=True, text=True)
    t.injected += 1
    t.wrong += r.returncode != 0 or "kept from an earlier run" in r.stderr or journal.read_bytes() != pristine
    t.notes.append(f"{len(damages) + 1} damages, each rerun's games equal to an uninterrupted run's; a "
                   "2-game command in the same folder left the 4-game journal alone")
    return t


def belief_best_stops(tmp: Path) -> Tally:
    """Ctrl-C and SIGTERM while a belief run writes a new best.pt over an older one (each write slowed to two
    seconds): the write finishes, the stop line names the best, and best.pt holds the best latest.pt
    records."""
    t = Tally("Ctrl-C / SIGTERM while best.pt is written, belief run")
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = tmp / f"belief_best_{sig.name}"
        proc = start(patched("slow-best", [*BELIEF, "--out_dir", str(out)]), tmp)
        def rewriting(out: Path = out) -> bool:  # a new best while best.pt holds an older one
            return (out / "best.pt").exists() and bool(list(out.glob(".best.pt.*.tmp")))

        wait_for(rewriting, proc, timeout=600)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=180)
        t.injected += 1
        best = re.search(r"best\.pt holds the best so far \(validation NLL per card [\d.]+ at step (\d+)\)",
                         err)
        blobs = {}
        for name in ("latest.pt", "best.pt"):
            t.files += 1
            try:
                blobs[name] = ckpt.load(out / name, "belief")
            except ckpt.CheckpointError:
                t.corrupt += 1
        step = int(best.group(1)) if best else None
        kept = len(blobs) == 2 and step == blobs["best.pt"]["step"] == blobs["best.pt"]["validation"][
            "best_step"] == blobs["latest.pt"]["validation"]["best_step"]
        stops = [x for x in err.splitlines() if "stopped by" in x]
        bad = proc.returncode != 128 + sig or "Traceback" in err or len(stops) != 1 or not kept or bool(
            list(out.glob(".best.pt.*.tmp")))
        t.wrong += bad
        t.notes.append(f"{sig.name}: `{stops[0] if stops else tail(err)}`".replace(str(tmp), "<tmp>"))
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=6, help="kill -9s per killed entry point (default 6)")
    ap.add_argument("--seed", type=int, default=0, help="random moments of the kills (default 0)")
    ap.add_argument("--out", default="runs/experiments")
    ap.add_argument("--record", default=None)
    args = ap.parse_args()
    if args.kills < 1:
        sys.exit(f"faults: --kills {args.kills}: must be >= 1")
    out = result_path("faults", args.record, args.out)
    rng = random.Random(args.seed)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tallies = [blueprint_kills(args.kills, rng, tmp), mid_write_kills(max(args.kills // 2, 1), tmp),
                   search_kills(args.kills, rng, tmp), signals(tmp), two_holders(tmp), full_disk(tmp),
                   journal_damage(tmp), belief_best_stops(tmp)]
    lines = [
        "# Faults: kills, signals, two holders, a full disk, damaged journals, a stop during best.pt",
        "",
        f"- Date: {time.strftime('%Y-%m-%d')}; machine: {machine()}.",
        f"- Command: `{command()}`; {time.time() - t0:.0f} s.",
        "- Files checked: every latest.pt / best.pt read back with its sha256 (ckpt.load), every search "
        "journal read back line by line with its checksums and settings hash (journals checked: see the "
        "totals); corrupt: any that fails (a journal: any line skipped but a last one cut short by the "
        "kill). Wrong: an outcome other than the promised one (exit 128 + signal and one stop line; a second "
        "holder refused in one line; same-second runs in two folders; a full disk in one line, never "
        "\"saved\"; a rerun's games equal to an uninterrupted run's; a damaged journal's bad lines skipped "
        "in one line naming it and its good games kept; another command leaves a journal alone; a stop "
        "line's count equal to the games on disk; a stop while best.pt is written leaves best.pt holding the "
        "best latest.pt records, and the stop line says so).",
        "- Work lost, blueprint: seconds between the last latest.pt written and the kill (latest.pt every "
        "round here; a real run's loss is at most checkpoint_minutes). Search: seconds between the last game "
        "kept in the journal and the kill (the game in play, replayed by the rerun; kills before any kept "
        "game are not timed).",
        "",
        "| fault | injected | files checked | corrupt | wrong | work lost | notes |",
        "|---|---|---|---|---|---|---|",
        *[t.row() for t in tallies],
        "",
        f"- Totals: {sum(t.injected for t in tallies)} faults injected; {sum(t.files for t in tallies)} "
        f"files checked, {sum(t.journals for t in tallies)} of them search journals; "
        f"{sum(t.corrupt for t in tallies)} corrupt; {sum(t.wrong for t in tallies)} broken promises.",
    ]
    write_result("\n".join(lines) + "\n", "faults", args.record, args.out, out)
    if any(t.corrupt or t.wrong for t in tallies):
        sys.exit("faults: some fault broke a promise (see the table)")


if __name__ == "__main__":
    main()
