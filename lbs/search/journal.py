"""Finished games of a long search run, kept as they finish, so a stop loses at most the batch in play.

A journal is one JSON-lines file: a header line with the settings of the command that made it (its `key`:
what decides every game's moves, and which games it plays), then one line per finished batch of games
(their numbers, seconds and results). Its name is a hash of the key, so the same command run again finds it
and plays only the games it lacks (a game's moves depend on its number alone, never on the batch it was
played in); any other command, even one with the same search settings, has another journal. Every line
carries the settings hash and a sha256 of its content, so a line is trusted on its own: a torn, corrupt,
edited or foreign line (or one from an older lbs, without a checksum) is skipped, never the valid lines
after it, and one line on stderr names the file and what was kept; the next write rewrites the file with
the valid lines only. Each line is flushed and fsynced before the next batch starts. One process at a time
holds a journal (lbs.runs.hold); the run deletes it once its result file is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..ckpt import SaveError, write_atomic
from ..hanabi.interop.record import GameRecord
from ..runs import hold, release, say
from ..shards import ONE, Shard
from .agent import GameResult, Progress
from .play import play_games

if TYPE_CHECKING:
    from .setup import SearchSetup


class JournalError(ValueError):
    """A journal that cannot be read at all (a folder in its place, no permission)."""


def result_to_dict(r: GameResult) -> dict:
    """A finished game as the JSON result and the journal store it."""
    return {"record": r.record.to_dict(), "bombed": r.bombed, "searched": r.searched, "deviated": r.deviated,
            "fallbacks": r.fallbacks, "rollouts": r.rollouts, "decisions": r.decisions}


def result_from_dict(d: dict) -> GameResult:
    return GameResult(GameRecord.from_dict(d["record"]), bool(d["bombed"]), int(d["searched"]),
                      int(d["deviated"]), int(d["fallbacks"]), int(d["rollouts"]), list(d["decisions"]))


def _canonical(obj: object) -> bytes:
    """One JSON text per value (sorted keys, no spaces): what a checksum covers, the same read back."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def _digest(obj: object) -> str:
    return hashlib.sha256(_canonical(obj)).hexdigest()


SKIPPED = {"torn": "a last line cut short by a stop mid-write",
           "corrupt": "{n} corrupt line(s) (not JSON, malformed, or edited: the checksum differs)",
           "foreign": "{n} line(s) of other settings",
           "unchecked": "{n} line(s) without a checksum (an older lbs's journal)"}
"""Why lines were skipped, as the reading line says it."""


Batch = dict[int, tuple[float, GameResult]]
"""A batch line's games: number -> (its share of the batch's seconds, its result)."""


class Journal:
    """The finished games of one command (`key`), in `folder`; `games`: game number -> result."""

    def __init__(self, folder: str | Path, name: str, key: dict, writer: bool = True):
        """Read the journal of this command if there is one; `writer` (rank 0 of a run): hold its lock for
        this process's life, say what was skipped, and append to it."""
        self.key = json.loads(json.dumps(key, default=str))
        self.settings = _digest(self.key)
        self.path = Path(folder) / f".{name}-{self.settings[:12]}.journal"
        self.writer = writer
        if writer:
            hold(self.path.with_name(self.path.name + ".lock"), f"the journal {self.path} of this search")
        self.games: dict[int, GameResult] = {}
        self.seconds_of: dict[int, float] = {}  # a game's share of its batch's seconds
        self.skipped: Counter[str] = Counter()  # lines skipped on reading, by why (a key of SKIPPED)
        for verdict, _, batch in self._lines():
            if verdict != "ok":
                self.skipped[verdict] += 1
            for n, (seconds, result) in (batch or {}).items():
                self.games[n], self.seconds_of[n] = result, seconds
        self._clean = not self.skipped  # the file holds only valid lines of this command, each with a newline
        if self.skipped and writer:
            why = ", ".join(SKIPPED[k].format(n=n) for k, n in self.skipped.items())
            say(f"journal {self.path}: skipped {why}; kept {len(self.games)} finished games (the others are "
                "played again)")

    def _lines(self) -> Iterator[tuple[str, bytes, Batch | None]]:
        """(verdict, raw line, its games) of every line on disk: "ok" (checksum and settings this command's;
        games None for the header), or why it is skipped (a key of SKIPPED)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as e:
            raise JournalError(f"cannot read the journal {self.path}: {e.strerror or e}; move it away or "
                               "remove it to play its games again") from None
        lines = data.split(b"\n")
        last = lines.pop()  # after the last newline: empty, or a write cut short
        for raw in lines:
            yield self._verdict(raw)
        if last:
            yield "torn", last, None

    def _verdict(self, raw: bytes) -> tuple[str, bytes, Batch | None]:
        try:
            row = json.loads(raw)
        except ValueError:
            return "corrupt", raw, None
        if not isinstance(row, dict):
            return "corrupt", raw, None
        if "sha256" not in row:
            return ("unchecked" if row.keys() & {"key", "numbers"} else "corrupt"), raw, None
        if row.pop("sha256") != _digest(row):
            return "corrupt", raw, None
        if row.get("settings") != self.settings or ("key" in row and row["key"] != self.key):
            return "foreign", raw, None
        if "key" in row:
            return "ok", raw, None
        try:
            numbers, games, seconds = row["numbers"], row["games"], float(row["seconds"])
            if len(numbers) != len(games) or not math.isfinite(seconds) or seconds < 0:
                raise ValueError("a malformed batch")
            share = seconds / max(len(numbers), 1)
            return "ok", raw, {int(n): (share, result_from_dict(g))
                               for n, g in zip(numbers, games, strict=True)}
        except (KeyError, TypeError, ValueError, AttributeError):  # a checksum over content no lbs writes
            return "corrupt", raw, None

    def on_disk(self, within: range) -> int:
        """How many of the games numbered `within` the file holds in valid lines now (what a stop kept)."""
        try:
            return len({n for verdict, _, batch in self._lines() for n in (batch or {}) if n in within})
        except JournalError:
            return 0

    def append(self, numbers: list[int], seconds: float, results: list[GameResult]) -> None:
        """Keep a finished batch: one line, on disk (fsync) before this returns."""
        if self.writer:
            self._write(numbers, seconds, results)
        for n, r in zip(numbers, results, strict=True):
            self.games[n], self.seconds_of[n] = r, seconds / len(numbers)

    def _line(self, body: dict) -> bytes:
        body = {**body, "settings": self.settings}
        return _canonical({**body, "sha256": _digest(body)}) + b"\n"

    def _write(self, numbers: list[int], seconds: float, results: list[GameResult]) -> None:
        games = [result_to_dict(r) for r in results]
        line = self._line({"numbers": numbers, "seconds": seconds, "games": games})
        if not (self._clean and self.path.is_file()):  # new, or with skipped lines: the valid ones and this
            kept = [raw + b"\n" for verdict, raw, batch in self._lines() if batch]
            write_atomic(self.path, self._line({"key": self.key}), *kept, line)  # SaveError: the old stays
            self._clean = True
            return
        try:
            self._append(line)
        except OSError as e:  # disk full: the lines before stay (a torn one is skipped next time)
            raise SaveError(f"could not write {self.path}: {e.strerror or e}; it keeps the {len(self.games)} "
                            "games finished before") from None

    def _append(self, line: bytes) -> None:
        self._clean = False  # until the whole line is on disk
        with open(self.path, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._clean = True

    def remove(self) -> None:
        """The run's result is written: the journal is no longer needed."""
        if self.writer:
            self.path.unlink(missing_ok=True)
            release(self.path.with_name(self.path.name + ".lock"))


def play_kept(setup: SearchSetup, journal: Journal, games: int, seed: int, batch_games: int, *,
              first: int = 0, progress: Callable[[Progress], None] | None = None, groups: int = 1,
              shard: Shard = ONE) -> tuple[list[GameResult], float]:
    """play_games over games first..first+games-1, one batch per process at a time, each finished batch kept
    in the journal; games the journal holds are not played again. (Results in game order on rank 0, [] on
    the others; seconds: the journal's time for these games plus this session's.)"""
    chunk = batch_games * shard.world
    before = dict(journal.games)
    seconds, done, searched = 0.0, 0, 0
    for start in range(first, first + games, chunk):
        numbers = list(range(start, min(first + games, start + chunk)))
        if all(n in before for n in numbers):
            done += len(numbers)
            continue

        def moved(p: Progress, done: int = done, searched: int = searched) -> None:
            if progress is not None:
                progress(dataclasses.replace(p, games=p.games + done, searched=p.searched + searched))

        t0 = time.perf_counter()
        results = play_games(setup, len(numbers), seed, batch_games, first=start, progress=moved,
                             groups=groups, shard=shard)
        took = time.perf_counter() - t0
        seconds += took
        done += len(numbers)
        if shard.main:
            searched += sum(r.searched for r in results)
            for n in numbers:
                before.pop(n, None)
            journal.append(numbers, took, results)
    if not shard.main:
        return [], seconds
    earlier = sum(journal.seconds_of[n] for n in range(first, first + games) if n in before)
    return [journal.games[n] for n in range(first, first + games)], seconds + earlier
