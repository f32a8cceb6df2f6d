"""Finished games of a long search run, kept as they finish, so a stop loses at most the batch in play.

A journal is one JSON-lines file: a header line with the settings that decide every game's moves (its
`key`), then one line per finished batch of games (their numbers, seconds and results). Each line is
flushed and fsynced before the next batch starts; a line torn by a kill mid-write is dropped on reading.
Its name is a hash of the key, so a rerun with the same flags finds it and plays only the games it lacks
(a game's moves depend on its number alone, never on the batch it was played in). One process at a time
holds a journal (lbs.runs.hold); the run deletes it once its result file is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..ckpt import SaveError
from ..hanabi.interop.record import GameRecord
from ..runs import hold, release
from ..shards import ONE, Shard
from .agent import GameResult, Progress, play_games

if TYPE_CHECKING:
    from .setup import SearchSetup


def result_to_dict(r: GameResult) -> dict:
    """A finished game as the JSON result and the journal store it."""
    return {"record": r.record.to_dict(), "bombed": r.bombed, "searched": r.searched, "deviated": r.deviated,
            "fallbacks": r.fallbacks, "rollouts": r.rollouts, "decisions": r.decisions}


def result_from_dict(d: dict) -> GameResult:
    return GameResult(GameRecord.from_dict(d["record"]), bool(d["bombed"]), int(d["searched"]),
                      int(d["deviated"]), int(d["fallbacks"]), int(d["rollouts"]), list(d["decisions"]))


class Journal:
    """The finished games of one search setting (`key`), in `folder`; `games`: game number -> result."""

    def __init__(self, folder: str | Path, name: str, key: dict, writer: bool = True):
        """Read the journal of this setting if there is one; `writer` (rank 0 of a run): hold its lock for
        this process's life and append to it."""
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
        self.path = Path(folder) / f".{name}-{digest}.journal"
        self.key, self.writer = json.loads(json.dumps(key, default=str)), writer
        if writer:
            hold(self.path.with_name(self.path.name + ".lock"), f"the journal {self.path} of this search")
        self.games: dict[int, GameResult] = {}
        self.seconds_of: dict[int, float] = {}  # a game's share of its batch's seconds
        self._good = 0  # bytes of whole lines
        if self.path.is_file():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        for i, line in enumerate(lines[:-1]):  # the part after the last newline is a torn write
            try:
                row = json.loads(line)
            except ValueError:
                break
            if i == 0:
                if row.get("key") != self.key:
                    return  # another setting with the same hash: start afresh
            else:
                for n, g in zip(row["numbers"], row["games"], strict=True):
                    self.games[int(n)] = result_from_dict(g)
                    self.seconds_of[int(n)] = float(row["seconds"]) / len(row["numbers"])
            self._good += len(line) + 1

    def append(self, numbers: list[int], seconds: float, results: list[GameResult]) -> None:
        """Keep a finished batch: one line, on disk (fsync) before this returns."""
        if self.writer:
            self._write(numbers, seconds, results)
        for n, r in zip(numbers, results, strict=True):
            self.games[n], self.seconds_of[n] = r, seconds / len(numbers)

    def _write(self, numbers: list[int], seconds: float, results: list[GameResult]) -> None:
        try:
            self._append(numbers, seconds, results)
        except OSError as e:  # disk full: the lines before stay (a torn one is dropped next time)
            raise SaveError(f"could not write {self.path}: {e.strerror or e}; it keeps the "
                            f"{len(self.games)} games finished before") from None

    def _append(self, numbers: list[int], seconds: float, results: list[GameResult]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "r+b" if self.path.exists() else "wb") as f:
            f.truncate(self._good)  # drop a torn line (or another setting's header)
            f.seek(self._good)
            if self._good == 0:
                f.write(json.dumps({"key": self.key}).encode() + b"\n")
            row = {"numbers": numbers, "seconds": seconds, "games": [result_to_dict(r) for r in results]}
            f.write(json.dumps(row).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
            self._good = f.tell()

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
