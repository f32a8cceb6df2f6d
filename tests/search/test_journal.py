"""Search journals trust each line on its own: a checksum over its content and the settings hash of the
command that wrote it. Corrupt, edited, foreign, torn and unchecked lines are skipped (never the valid
lines after them) with one line naming the file and what was kept; only the same command uses a journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lbs.hanabi.interop.record import GameRecord
from lbs.search.agent import GameResult
from lbs.search.journal import Journal, JournalError, _canonical, _digest

ROOT = Path(__file__).resolve().parents[2]
KEY = {"mode": "lbs-1", "games": 6}


def game(n: int) -> GameResult:
    return GameResult(GameRecord({"players": 2}, [n], [0], n), False, 1, 0, 0, 10, [])


def three_batches(folder: Path) -> Journal:
    """A journal of games 0..5 in three lines of two, after its header."""
    j = Journal(folder, "lbs-1", KEY)
    for start in (0, 2, 4):
        j.append([start, start + 1], 2.0, [game(start), game(start + 1)])
    return j


def reread(folder: Path, capsys) -> tuple[Journal, str]:
    """The journal as the same command run again reads it, and what it said on stderr."""
    capsys.readouterr()
    j = Journal(folder, "lbs-1", KEY)
    return j, capsys.readouterr().err


def lines(j: Journal) -> list[bytes]:
    return j.path.read_bytes().split(b"\n")[:-1]


def put(j: Journal, rows: list[bytes]) -> None:
    j.path.write_bytes(b"".join(r + b"\n" for r in rows))


def signed(row: dict) -> bytes:
    """A line with a valid checksum over `row` (what only a forger, or another lbs, would write)."""
    return _canonical({**row, "sha256": _digest(row)})


@pytest.mark.parametrize("bad", [b"garbage \xff{", b"{}", b"[]", b"null", b'"text"'])
def test_a_bad_line_in_the_middle_is_skipped_and_the_games_after_it_kept(tmp_path, capsys, bad):
    j = three_batches(tmp_path)
    rows = lines(j)
    put(j, [rows[0], rows[1], bad, rows[2], rows[3]])
    again, err = reread(tmp_path, capsys)
    assert sorted(again.games) == [0, 1, 2, 3, 4, 5]
    assert err.strip().splitlines() == [f"lbs: journal {j.path}: skipped 1 corrupt line(s) (not JSON, "
                                        "malformed, or edited: the checksum differs); kept 6 finished games "
                                        "(the others are played again)"]
    again.append([6], 1.0, [game(6)])  # the next write leaves only valid lines
    assert bad not in lines(again) and sorted(reread(tmp_path, capsys)[0].games) == list(range(7))


def test_a_bad_header_alone_loses_no_game(tmp_path, capsys):
    j = three_batches(tmp_path)
    rows = lines(j)
    put(j, [b"[]", *rows[1:]])
    again, err = reread(tmp_path, capsys)
    assert sorted(again.games) == list(range(6)) and "skipped 1 corrupt line(s)" in err


def test_an_edited_line_is_caught_by_its_checksum(tmp_path, capsys):
    j = three_batches(tmp_path)
    rows = lines(j)
    row = json.loads(rows[2])
    row["games"][0]["record"]["score"] = 25  # well-formed, a better result than the game played
    put(j, [rows[0], rows[1], _canonical(row), rows[3]])
    again, err = reread(tmp_path, capsys)
    assert sorted(again.games) == [0, 1, 4, 5] and "edited: the checksum differs" in err
    assert "kept 4 finished games" in err


def test_a_malformed_line_with_a_valid_checksum_is_skipped_naming_the_file(tmp_path, capsys):
    j = three_batches(tmp_path)
    rows = lines(j)
    settings = json.loads(rows[0])["settings"]
    uneven = signed({"numbers": [6, 7], "seconds": 1.0, "games": [{}], "settings": settings})
    put(j, [*rows, uneven])
    again, err = reread(tmp_path, capsys)
    assert sorted(again.games) == list(range(6)) and str(j.path) in err and "1 corrupt line(s)" in err


def test_lines_of_another_command_are_foreign(tmp_path, capsys):
    j = three_batches(tmp_path)
    other = Journal(tmp_path / "other", "lbs-1", {**KEY, "games": 16})
    other.append([7], 1.0, [game(7)])
    assert other.path.name != j.path.name  # another command: another journal
    put(j, [*lines(j), lines(other)[1]])
    again, err = reread(tmp_path, capsys)
    assert 7 not in again.games and "1 line(s) of other settings" in err


def test_an_older_journal_without_checksums_is_refused_in_one_line(tmp_path, capsys):
    j = Journal(tmp_path, "lbs-1", KEY)
    old = [json.dumps({"key": KEY}).encode(),
           json.dumps({"numbers": [0], "seconds": 1.0, "games": [json.loads(json.dumps(
               {"record": game(0).record.to_dict(), "bombed": False, "searched": 1, "deviated": 0,
                "fallbacks": 0, "rollouts": 10, "decisions": []}))]}).encode()]
    put(j, old)
    again, err = reread(tmp_path, capsys)
    assert again.games == {}
    assert err.strip().splitlines() == [f"lbs: journal {j.path}: skipped 2 line(s) without a checksum (an "
                                        "older lbs's journal); kept 0 finished games (the others are played "
                                        "again)"]


def test_a_torn_last_line_is_said_and_replaced(tmp_path, capsys):
    j = three_batches(tmp_path)
    j.path.write_bytes(j.path.read_bytes()[:-40])  # the last line cut short by a kill
    again, err = reread(tmp_path, capsys)
    assert sorted(again.games) == [0, 1, 2, 3] and "a last line cut short" in err
    again.append([4, 5], 1.0, [game(4), game(5)])
    assert sorted(reread(tmp_path, capsys)[0].games) == list(range(6))


def test_what_a_stop_kept_is_counted_on_disk(tmp_path):
    j = three_batches(tmp_path)
    assert j.on_disk(range(0, 6)) == 6 and j.on_disk(range(2, 4)) == 2
    j.path.write_bytes(b"".join(r + b"\n" for r in lines(j)[:2]))  # only the first batch made it to disk
    assert len(j.games) == 6 and j.on_disk(range(0, 6)) == 2


def test_a_journal_that_cannot_be_read_is_one_line(tmp_path):
    path = Journal(tmp_path, "lbs-1", KEY).path
    path.mkdir()  # a folder where the file should be
    with pytest.raises(JournalError, match=f"cannot read the journal {path}"):
        Journal(tmp_path, "lbs-1", KEY)


STOP_AT_BATCH = r"""
import os, runpy, signal, sys
import lbs.search.journal as journal
real, calls, stop_at = journal.play_games, [0], int(sys.argv[1])
def play(*a, **k):  # SIGTERM as batch N starts: the batches before are kept
    calls[0] += 1
    if calls[0] == stop_at:
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*a, **k)
journal.play_games = play
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_only_the_command_that_made_a_journal_uses_it(tmp_path):
    """A 16-game run from deal 12 stopped after 4 batches of 2: its stop line counts the 8 games on disk; a
    4-game run with the same settings writing elsewhere in the same folder neither uses nor deletes that
    journal; the stopped command run again does."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    script = str(ROOT / "search" / "run.py")
    flags = ["--mode", "blueprint", "--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt"),
             "--batch-games", "2", "--no-progress"]
    big = [*flags, "--games", "16", "--first-game", "12", "--out", str(tmp_path / "big.json")]
    stopped = subprocess.run([sys.executable, "-c", STOP_AT_BATCH, "5", script, *big], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-2000:]
    assert f"stopped by SIGTERM: 8 of 16 games finished and kept in {tmp_path}" in stopped.stderr
    (journal,) = tmp_path.glob(".blueprint-*.journal")
    small = subprocess.run([sys.executable, script, *flags, "--games", "4", "--first-game", "12", "--out",
                            str(tmp_path / "small.json")], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert small.returncode == 0 and "kept from an earlier run" not in small.stderr, small.stderr[-2000:]
    assert journal.exists()
    again = subprocess.run([sys.executable, script, *big], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and "8 of 16 games kept from an earlier run" in again.stderr
    assert not journal.exists() and len(json.loads((tmp_path / "big.json").read_text())["games"]) == 16
