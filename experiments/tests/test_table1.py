"""python -m experiments.table1: tables played, stopped and resumed; --combine joins runs recorded on the
same deals into one Table 1 and refuses runs that are not; --compare pairs two tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from lbs.hanabi import GameConfig

ROOT = Path(__file__).resolve().parents[2]
TABLE1 = [sys.executable, "-m", "experiments.table1"]
ENV = {**os.environ, "LBS_EAGER": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
"""python -m experiments.table1 from any folder (the tests' scratch folders too)"""
GAME = GameConfig(players=2, colors=2, ranks=5, hand_size=5)


def summary(mode: str, scores: list[float], seconds: float, deviation_pct: float = 40.0) -> dict:
    """A SearchSummary.to_dict() of `scores`: `seconds` per game, 10 searched moves, 1,000 rollouts each."""
    n = len(scores)
    mean = sum(scores) / n
    score = {"games": n, "mean": mean, "sem": 0.1, "perfect": 0.0, "bombed": 0.0, "mean_length": 20.0}
    return {"mode": mode, "games": n, "score": score, "seconds": seconds * n, "seconds_per_game": seconds,
            "searched_moves": 10 * n, "rollouts": 1000 * n,
            "rollouts_per_s": 1000 / max(seconds, 1e-9), "deviation_pct": deviation_pct, "fallback_pct": 0.0}


CPU = "AMD EPYC (2 cores, load average {}), {} torch threads, no GPU, torch 2.13.0+cpu"


def run_json(path: Path, blueprint: list[float], modes: dict[str, list[float]], rollouts: int = 400,
             machine: str = CPU.format(1.0, 1), first: int = 0, seconds: float | None = None,
             deviation_pct: float = 40.0, **extra) -> Path:
    settings = {"game": GAME.to_dict(), "seed": 0, "first_game": first, "rollouts": rollouts,
                "min_rollouts": 20, "blueprint": "bp.pt", "belief": "belief.pt", "machine": machine, **extra}
    scores = {"blueprint": blueprint, **modes}
    summaries = {m: summary(m, s, 0.0 if m == "blueprint" else seconds or 2.0 + len(m), deviation_pct)
                 for m, s in scores.items()}
    path.write_text(json.dumps({"settings": settings, "scores": scores, "summaries": summaries}))
    return path


def combine(tmp_path: Path, *files: Path) -> subprocess.CompletedProcess:
    cmd = [*TABLE1, "--combine", *map(str, files), "--out", str(tmp_path)]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV)


def table_rows(text: str) -> dict[str, list[str]]:
    """The cells of a markdown table's rows, by their first cell (the header left out)."""
    return {line.split(" | ")[0].strip("| "): line.split(" | ") for line in text.splitlines()
            if line.startswith("| ") and "---" not in line and "mode" not in line}


def test_combine_pairs_each_mode_on_its_own_deals_and_compares_with_sparta_on_shared_ones(tmp_path):
    bp = [5.0, 6.0, 7.0, 4.0, 5.0, 6.0]
    a = run_json(tmp_path / "a.json", bp[:4], {"sparta": [7.0, 8.0, 8.0, 6.0], "lbs-8": [5.0, 6.0, 7.0, 4.0]})
    b = run_json(tmp_path / "b.json", bp, {"lbs-8": [6.0, 7.0, 8.0, 5.0, 6.0, 7.0]},
                 machine=CPU.format(2.3, 2))
    res = combine(tmp_path, a, b)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout.split("Paired gain by")[0])
    assert rows["blueprint"][1] == "6"  # the longest blueprint run
    assert rows["lbs-8"][1] == "6" and rows["lbs-8"][3] == "+1.000 ± 0.000"  # the run with the most games
    assert rows["sparta"][3] == "+1.750 ± 0.250"
    # gain kept on the 4 deals both played: lbs-8 gains 1.0 there, SPARTA 1.75
    assert rows["lbs-8"][9] == "57%"
    assert rows["lbs-8"][10] == "1.1x"  # the same CPU under another load: SPARTA's 8 s / lbs-8's 7 s
    data = json.loads(next(tmp_path.glob("table1_*.json")).read_text())
    assert data["sources"]["lbs-8"] == "b.json" and data["sources"]["sparta"] == "a.json"
    assert next(tmp_path.glob("table1_*.png")).stat().st_size > 0


def test_a_mode_on_fewer_deals_than_sparta_is_compared_with_it_on_those_deals(tmp_path):
    """SPARTA gains +1.0 over its 4 deals but +0.5 on the first 2, the only ones lbs-inf played: the block
    pairs both with the blueprint and with each other there, and counts perfect games on those deals."""
    top = GAME.max_score
    bp = [top - 1.0, top, top - 5.0, top - 4.0]
    a = run_json(tmp_path / "a.json", bp, {"sparta": [top, top, top - 4.0, top - 2.0]})
    b = run_json(tmp_path / "b.json", bp[:2], {"lbs-inf": [top, top - 1.0]})
    res = combine(tmp_path, a, b)
    assert res.returncode == 0, res.stderr
    block = res.stdout.split("when SPARTA played more")[1].split("Paired gain by")[0]
    assert table_rows(block)["lbs-inf"][1:] == ["2", "+0.500 ± 0.500", "+0.000 ± 1.000", "-0.500 ± 0.500",
                                                "50.0 / 100.0 / 50.0 |"]
    full = run_json(tmp_path / "c.json", bp, {"lbs-inf": [top, top - 1.0, top - 5.0, top - 4.0]})
    assert "SPARTA played more" not in combine(tmp_path, a, full).stdout  # every deal: no block


def test_combine_refuses_runs_on_other_deals_or_settings(tmp_path):
    a = run_json(tmp_path / "a.json", [5.0, 6.0], {"lbs-1": [5.0, 7.0]})
    b = run_json(tmp_path / "b.json", [5.0, 9.0, 1.0], {"lbs-8": [6.0, 7.0, 2.0]})
    res = combine(tmp_path, a, b)
    assert res.returncode != 0 and "not the same deals" in res.stderr and "Traceback" not in res.stderr
    c = run_json(tmp_path / "c.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, rollouts=1000)
    res = combine(tmp_path, a, c)
    assert res.returncode != 0 and "differ in rollouts" in res.stderr and "Traceback" not in res.stderr
    # the reference budget is another setting; a run recorded before the field existed spent the shared one
    ref = run_json(tmp_path / "ref.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, reference_budget=True)
    res = combine(tmp_path, a, ref)
    assert res.returncode != 0 and "differ in reference_budget" in res.stderr
    assert "Traceback" not in res.stderr
    shared = run_json(tmp_path / "shared.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, reference_budget=False)
    assert combine(tmp_path, a, shared).returncode == 0
    # so is the margin a search move must win by (runs before the field: 0.05)
    wide = run_json(tmp_path / "wide.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, delta=0.5)
    res = combine(tmp_path, a, wide)
    assert res.returncode != 0 and "differ in delta" in res.stderr
    assert combine(tmp_path, a, run_json(tmp_path / "narrow.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]},
                                         delta=0.05)).returncode == 0
    # so is how a rollout scores a lost game (runs before the field: HLE's 0)
    kept = run_json(tmp_path / "kept.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, keep_lost_points=True)
    res = combine(tmp_path, a, kept)
    assert res.returncode != 0 and "differ in keep_lost_points" in res.stderr
    # and where LBS drew its hands (runs before the field: the belief alone; runs that recorded it as
    # blueprint_knowledge read as the knowledge it names today)
    knows = run_json(tmp_path / "knows.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, knowledge="smartbot")
    res = combine(tmp_path, a, knows)
    assert res.returncode != 0 and "differ in knowledge" in res.stderr
    alone = run_json(tmp_path / "alone.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, knowledge="none")
    assert combine(tmp_path, a, alone).returncode == 0
    # and from which belief (runs before the field: the learned one)
    bayes = run_json(tmp_path / "bayes.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, belief_type="bayes")
    res = combine(tmp_path, a, bayes)
    assert res.returncode != 0 and "differ in belief_type" in res.stderr
    learned = run_json(tmp_path / "learned.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, belief_type="learned")
    assert combine(tmp_path, a, learned).returncode == 0
    lbs8 = {"lbs-8": [6.0, 7.0]}
    old_knows = run_json(tmp_path / "old_knows.json", [5.0, 6.0], lbs8, blueprint_knowledge=True)
    old_alone = run_json(tmp_path / "old_alone.json", [5.0, 6.0], lbs8, blueprint_knowledge=False)
    res = combine(tmp_path, old_knows, knows)
    assert res.returncode == 0, res.stderr
    assert ("LBS draws its hands from the learned belief within SmartBot's public card knowledge "
            "(--belief-type learned --knowledge smartbot)") in res.stdout
    written = Path(next(x for x in res.stdout.splitlines() if x.startswith("written: "))[9:])
    assert json.loads(written.with_suffix(".json").read_text())["settings"]["knowledge"] == "smartbot"
    assert combine(tmp_path, old_alone, alone).returncode == 0
    res = combine(tmp_path, old_alone, knows)
    assert res.returncode != 0 and "differ in knowledge" in res.stderr
    sparta = run_json(tmp_path / "sparta.json", [5.0, 6.0], {"sparta": [6.0, 7.0]}, knowledge=None)  # no LBS
    assert combine(tmp_path, knows, sparta).returncode == 0
    # nor from which belief: a run without LBS may have had none
    unbelieving = run_json(tmp_path / "none.json", [5.0, 6.0], {"sparta": [6.0, 7.0]}, belief=None)
    assert combine(tmp_path, a, unbelieving).returncode == 0
    other = run_json(tmp_path / "other.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, belief="other.pt")
    res = combine(tmp_path, a, other)
    assert res.returncode != 0 and "differ in belief" in res.stderr


def test_combine_takes_only_the_rows_a_file_is_named_with(tmp_path):
    """FILE:sparta takes that table's SPARTA row (and its blueprint row) and leaves its LBS rows, which drew
    from another belief, out of the settings check and out of the table."""
    old = run_json(tmp_path / "old.json", [5.0, 6.0], {"sparta": [7.0, 8.0], "lbs-8": [5.0, 6.0]},
                   belief="old.pt")
    new = run_json(tmp_path / "new.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}, belief="new.pt")
    res = combine(tmp_path, old, new)
    assert res.returncode != 0 and "differ in belief" in res.stderr
    res = subprocess.run([*TABLE1, "--combine", f"{old}:sparta", str(new), "--out", str(tmp_path)],
                         capture_output=True, text=True, env=ENV)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout.split("Paired gain by")[0])
    assert set(rows) == {"blueprint", "sparta", "lbs-8"} and rows["lbs-8"][3] == "+1.000 ± 0.000"
    assert rows["lbs-8"][9] == "50%"  # SPARTA's gain, 2.0, taken from the old table
    written = Path(next(x for x in res.stdout.splitlines() if x.startswith("written: "))[9:])
    data = json.loads(written.with_suffix(".json").read_text())
    assert data["settings"]["belief"] == "new.pt" and data["sources"]["sparta"] == "old.json"
    assert [sorted(r["games"]) for r in data["runs"]] == [["blueprint", "sparta"], ["blueprint", "lbs-8"]]
    res = subprocess.run([*TABLE1, "--combine", f"{old}:lbs-99", "--out", str(tmp_path)], capture_output=True,
                         text=True, env=ENV)
    assert res.returncode != 0 and "has no lbs-99 row" in res.stderr and "Traceback" not in res.stderr


def test_combine_joins_runs_on_adjacent_deals_into_one_row(tmp_path):
    """table1 --first-game F plays deals F.. ; --combine joins a mode's runs that tile deals 0..N-1."""
    bp = [5.0, 6.0, 7.0, 4.0, 5.0, 6.0]
    a = run_json(tmp_path / "a.json", bp[:2], {"lbs-inf": [6.0, 6.0]}, seconds=1.0, deviation_pct=10.0)
    b = run_json(tmp_path / "b.json", bp[2:], {"lbs-inf": [8.0, 4.0, 5.0, 9.0]}, first=2, seconds=4.0,
                 deviation_pct=40.0)
    c = run_json(tmp_path / "c.json", bp, {"lbs-8": [5.0] * 6})
    gap = run_json(tmp_path / "gap.json", bp[4:], {"lbs-1": [5.0, 6.0]}, first=4)  # deals 4..5 only
    res = combine(tmp_path, a, b, c, gap)
    assert res.returncode == 0, res.stderr
    assert "lbs-1 of gap.json left out" in res.stderr  # said, not silently dropped
    assert not any(x.startswith("| lbs-1 ") for x in res.stdout.splitlines())
    line = next(x for x in res.stdout.splitlines() if x.startswith("| lbs-inf ")).split(" | ")
    assert line[1] == "6"  # both runs, one row
    assert line[2] == "6.333 ± 0.760"  # the six games' mean ± s.e.m.
    assert line[3] == "+0.833 ± 0.477"  # paired with the blueprint deal by deal
    assert line[5] == "3.00"  # (2 x 1 s + 4 x 4 s) / 6 games
    assert line[7] == "30.0"  # searched moves: 20 at 10%, 40 at 40%
    data = json.loads(next(tmp_path.glob("table1_*.json")).read_text())
    assert data["sources"]["lbs-inf"] == "a.json + b.json"
    assert data["scores"]["lbs-inf"] == [6.0, 6.0, 8.0, 4.0, 5.0, 9.0]
    # a later run on other deals (another blueprint score on a deal it shares) is refused
    d = run_json(tmp_path / "d.json", [7.0, 1.0], {"lbs-1": [7.0, 1.0]}, first=3)
    res = combine(tmp_path, a, b, d)
    assert res.returncode != 0 and "not the same deals" in res.stderr and "Traceback" not in res.stderr


def test_combine_gives_no_speed_up_between_machines(tmp_path):
    bp = [5.0, 6.0, 7.0, 4.0]
    a = run_json(tmp_path / "a.json", bp, {"sparta": [7.0, 8.0, 8.0, 6.0]}, machine="Xeon (16 cores, load "
                 "average 1.0), 16 torch threads, NVIDIA H100 80GB HBM3, torch 2.11.0+cu130")
    b = run_json(tmp_path / "b.json", bp, {"lbs-8": [6.0, 7.0, 8.0, 5.0]})
    res = combine(tmp_path, a, b)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("| lbs-8 "))
    assert line.split(" | ")[9] == "57%" and line.split(" | ")[10] == "—"  # gain kept still compares
    assert "NVIDIA H100" in res.stdout  # each row names where it ran


def test_a_row_joined_from_two_machines_has_no_time(tmp_path):
    """Deals 0..1 searched on a GPU and 2..3 on a CPU join into one row of scores, but their seconds add up
    to no one machine's time: the row shows none."""
    bp = [5.0, 6.0, 7.0, 4.0]
    gpu = run_json(tmp_path / "gpu.json", bp[:2], {"lbs-8": [6.0, 7.0]}, seconds=0.2, machine="Xeon (16 "
                   "cores, load average 1.0), 16 torch threads, NVIDIA H100 80GB HBM3, torch 2.11.0+cu130")
    cpu = run_json(tmp_path / "cpu.json", bp[2:], {"lbs-8": [8.0, 5.0]}, first=2, seconds=8.0)
    same = run_json(tmp_path / "cpu2.json", bp[2:], {"lbs-1": [7.0, 4.0]}, first=2, seconds=3.0,
                    machine=CPU.format(2.0, 1))
    first = run_json(tmp_path / "cpu1.json", bp[:2], {"lbs-1": [5.0, 6.0]}, seconds=1.0)
    res = combine(tmp_path, gpu, cpu, first, same)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout.split("Paired gain by")[0])
    assert rows["lbs-8"][1] == "4" and rows["lbs-8"][3] == "+1.000 ± 0.000"  # the scores join
    assert rows["lbs-8"][5] == "—" and rows["lbs-8"][6] == "—"  # no time, no rate
    assert rows["lbs-1"][5] == "2.00"  # one CPU under two loads: its time still adds up


def test_a_run_saves_its_finished_modes_marked_partial(tmp_path):
    """table1 rewrites its files after every mode: a run stopped mid-way keeps the rows it finished."""
    from experiments import table1 as t1
    bp = [5.0, 6.0]
    rows = [t1.Row("blueprint", summary("blueprint", bp, 0.0), bp, bp),
            t1.Row("lbs-1", summary("lbs-1", [6.0, 6.0], 1.0), [6.0, 6.0], bp)]
    out = tmp_path / "table1_run.md"
    t1.write(rows, ["# head"], {"game": GAME.to_dict()}, GAME, out, done=False)
    assert "Partial: the modes finished so far (blueprint, lbs-1)" in out.read_text()
    assert list(json.loads(out.with_suffix(".json").read_text())["scores"]) == ["blueprint", "lbs-1"]
    t1.write(rows, ["# head"], {"game": GAME.to_dict()}, GAME, out)  # the end: the same files, whole
    assert "Partial" not in out.read_text() and "| lbs-1 | 2 |" in out.read_text()


def test_scratch_results_of_the_same_second_get_their_own_names(tmp_path, monkeypatch):
    """Two runs started within one second never share (so never overwrite) a scratch result file."""
    import datetime
    import types

    from experiments import common

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2026, 11, 22, 12, 0, 0)

    monkeypatch.setattr(common, "datetime", types.SimpleNamespace(datetime=Frozen, date=datetime.date))
    first = common.result_path("table1", None, str(tmp_path))
    first.write_text("run 1")
    second = common.result_path("table1", None, str(tmp_path))
    second.write_text("run 2")
    assert first.name == "table1_20261122-120000.md" and second.name == "table1_20261122-120000-2.md"
    assert common.result_path("table1", None, str(tmp_path)).name == "table1_20261122-120000-3.md"
    assert first.read_text() == "run 1"


def test_a_stopped_table_keeps_the_mode_in_play_and_a_rerun_resumes(tmp_path):
    """SIGTERM while a mode plays: one line says what was kept; the same command again plays only the
    games the journal lacks and writes the whole table."""
    import re
    import signal
    import time

    root = ROOT
    cmd = [*TABLE1, "--blueprint", str(root / "checkpoints" / "blueprint_2c.pt"),
           "--belief", str(root / "checkpoints" / "belief_2c.pt"), "--modes", "blueprint", "lbs-1",
           "--games", "5", "--batch-games", "1", "--rollouts", "170", "--min-rollouts", "10",
           "--threads", "1", "--out", str(tmp_path / "scratch")]
    env = {**ENV, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    end = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < end:  # two finished games of lbs-1
        found = list((tmp_path / "scratch").glob(".table1-lbs-1-*.journal"))
        if found and len(found[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("table1: stopped by SIGTERM: ") and "games of the mode in play are kept in" in last
    kept = int(re.search(r"(\d+) of 5 games of the mode in play", last).group(1))
    again = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"lbs-1: {kept} of 5 games kept from an earlier run" in again.stderr
    (result,) = (tmp_path / "scratch").glob("table1_*.json")  # the stopped run wrote no partial lbs-1 row
    assert len(json.loads(result.read_text())["scores"]["lbs-1"]) == 5
    assert not list((tmp_path / "scratch").glob(".table1-*.journal"))


def test_combine_refuses_a_file_that_is_not_a_table1_result(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"summary": {}, "games": []}))  # a search/run.py result
    r = subprocess.run([*TABLE1, "--combine", str(other), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        f"table1 --combine: {other} is not a table1 result (the .json with scores and summaries)"]


def test_combine_refuses_a_malformed_record_in_one_line_naming_the_file_and_the_field(tmp_path):
    """A record --combine cannot trust is refused before any row is built: the field and its fault."""
    from experiments import table1 as t1

    good = json.loads(run_json(tmp_path / "ok.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]}).read_text())
    summaries = good["summaries"]
    assert t1.malformed(good) is None
    cases = {
        "scores.lbs-8 is not a list of numbers": {**good, "scores": {**good["scores"], "lbs-8": ["6", 7.0]}},
        "summaries.lbs-8 is missing": {**good, "summaries": {"blueprint": summaries["blueprint"]}},
        "settings.game is no GameConfig": {**good, "settings": {**good["settings"],
                                                                 "game": {**GAME.to_dict(), "colours": 5}}},
        "blueprint_scores.lbs-8 has 1 scores for the 2 games of scores.lbs-8":
            {**good, "blueprint_scores": {"lbs-8": [5.0]}},
        "scores.lbs-8 holds a score that is not a finite number":
            {**good, "scores": {**good["scores"], "lbs-8": [float("nan"), 7.0]}},
        "summaries.lbs-8.seconds_per_game is not a number":
            {**good, "summaries": {**summaries, "lbs-8": {**summaries["lbs-8"], "seconds_per_game": "2.0"}}},
        "splits is not an object": {**good, "splits": [1, 2]},
        "splits.lbs-8 is not seconds in networks": {**good, "splits": {"lbs-8": {"networks": "1"}}},
        "sources holds a value that is not a string": {**good, "sources": {"lbs-8": 3}},
    }
    for want, d in cases.items():
        assert want in (t1.malformed(d) or ""), (want, t1.malformed(d))
    bad = tmp_path / "nan.json"  # end to end: one line, the file and the field, no row with +nan
    bad.write_text(json.dumps(cases["scores.lbs-8 holds a score that is not a finite number"]))
    r = subprocess.run([*TABLE1, "--combine", str(bad), "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=600, env=ENV)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        f"table1 --combine: {bad}: scores.lbs-8 holds a score that is not a finite number (NaN or inf)"]


def test_a_joined_tables_own_file_rebuilds_it(tmp_path):
    """The .json --combine writes keeps every row's per-deal scores, source and machine, and each run's
    command: combined alone it gives the same table, so the runs' own files need not be kept."""
    bp = [5.0, 6.0, 7.0, 4.0]
    a = run_json(tmp_path / "a.json", bp[:2], {"sparta": [7.0, 8.0], "lbs-8": [6.0, 7.0]},
                 command="python -m experiments.table1 --games 2")
    b = run_json(tmp_path / "b.json", bp[2:], {"sparta": [8.0, 6.0], "lbs-8": [8.0, 5.0]}, first=2,
                 machine=CPU.format(2.0, 1), command="python -m experiments.table1 --games 2 --first-game 2")
    first = combine(tmp_path / "one", a, b)
    assert first.returncode == 0, first.stderr
    joined = next((tmp_path / "one").glob("table1_*.json"))
    runs = json.loads(joined.read_text())["runs"]
    assert [(r["file"], r["command"], r["first_game"]) for r in runs] == [
        (str(a), "python -m experiments.table1 --games 2", 0),
        (str(b), "python -m experiments.table1 --games 2 --first-game 2", 2)]
    again = combine(tmp_path / "two", joined)
    assert again.returncode == 0, again.stderr
    def lines(out: str) -> list[str]:
        return [x for x in out.splitlines() if x.startswith("| ")]

    assert lines(again.stdout) == lines(first.stdout)
    assert table_rows(again.stdout.split("Paired gain by")[0])["lbs-8"][10] == "1.1x"  # one machine
    assert "`a.json + b.json`" in again.stdout  # each row still names the runs it joins
    assert json.loads(next((tmp_path / "two").glob("table1_*.json")).read_text())["runs"] == runs


def test_a_blueprint_without_a_belief_plays_the_modes_that_need_none(tmp_path):
    """A blueprint with no shipped belief (a copy outside checkpoints/): the blueprint row plays and is
    written; an LBS row is refused in one line before any game."""
    import shutil

    bp = tmp_path / "bp.pt"
    shutil.copy(ROOT / "checkpoints" / "blueprint_2c.pt", bp)
    base = [*TABLE1, "--blueprint", str(bp), "--games", "2", "--threads", "1",
            "--out", str(tmp_path / "scratch")]
    ok = subprocess.run([*base, "--modes", "blueprint"], capture_output=True, text=True, timeout=300,
                        env=ENV)
    assert ok.returncode == 0, ok.stderr
    assert list((tmp_path / "scratch").glob("table1_*.md"))
    lbs = subprocess.run([*base, "--modes", "blueprint", "lbs-1"], capture_output=True, text=True,
                         timeout=300, env=ENV)
    assert lbs.returncode != 0
    assert lbs.stderr.strip().splitlines() == ["table1: lbs-1: LBS needs a belief trained for this blueprint "
                                               "(--belief)"]


def test_a_table_without_lbs_loads_no_belief(tmp_path):
    """SPARTA and the blueprint draw no hands from a belief, so a table of those modes neither loads nor
    records one, and a --belief given to it is refused in one line (it would be ignored); with an LBS mode a
    belief for another blueprint is refused."""
    root = ROOT / "checkpoints"
    cmd = [*TABLE1, "--blueprint", str(root / "blueprint_2c.pt"), "--games", "2", "--threads", "1",
           "--rollouts", "170", "--min-rollouts", "10", "--out", str(tmp_path)]
    other = ["--belief", str(root / "belief_2p.pt")]
    res = subprocess.run([*cmd, "--modes", "blueprint", "sparta"], capture_output=True, text=True,
                         timeout=300, env=ENV)
    assert res.returncode == 0, res.stderr
    assert json.loads(next(tmp_path.glob("table1_*.json")).read_text())["settings"]["belief"] is None
    ignored = subprocess.run([*cmd, *other, "--modes", "blueprint", "sparta"], capture_output=True, text=True,
                             timeout=300, env=ENV)
    assert ignored.returncode != 0 and ignored.stderr.strip().splitlines() == [
        f"table1: --belief {other[1]}: no mode here draws hands from a belief (blueprint sparta); "
        "leave it out"]
    lbs = subprocess.run([*cmd, *other, "--modes", "blueprint", "lbs-1"], capture_output=True, text=True,
                         timeout=300, env=ENV)
    assert lbs.returncode != 0 and "Traceback" not in lbs.stderr and len(lbs.stderr.strip().splitlines()) == 1


def test_the_table_splits_each_gain_by_the_blueprints_score_on_the_deal(tmp_path):
    """Scores <= max - 4 join one bucket; each bucket pairs the mode with the blueprint on its deals."""
    bp = [10.0, 3.0, 8.0, 8.0, 9.0, 10.0]
    a = run_json(tmp_path / "a.json", bp, {"sparta": [9.0, 7.0, 10.0, 9.0, 9.0, 10.0]})
    res = combine(tmp_path, a)
    assert res.returncode == 0, res.stderr
    head, by_score = res.stdout.split("Paired gain by")
    assert "| blueprint <= 6 | blueprint 7 | blueprint 8 | blueprint 9 | blueprint 10 |" in by_score
    cells = table_rows(by_score)["sparta"][1:]
    assert [c.strip(" |") for c in cells] == [
        "1: 7.00, +4.00 ± 0.00", "—", "2: 9.50, +1.50 ± 0.50", "1: 9.00, +0.00 ± 0.00",
        "2: 9.50, -0.50 ± 0.50"]


def test_the_split_weighed_by_the_blueprints_own_scores_is_the_post_stratified_mean():
    """Bucket means weighed by the blueprint's bucket shares over many deals, with the s.e. of that sum."""
    from experiments import table1 as t1

    bp = [10.0, 10.0, 9.0, 9.0, 5.0, 4.0]
    sparta = [9.0, 10.0, 10.0, 9.0, 8.0, 6.0]
    rows = [t1.Row("sparta", summary("sparta", sparta, 1.0), sparta, bp)]
    population = torch.tensor([10.0] * 5 + [9.0] * 3 + [4.0] * 2)  # shares: 10 50%, 9 30%, <= 6 20%
    line = t1.by_blueprint_score(rows, GAME.max_score, population)[-1]
    assert "sparta: — (a bucket has fewer than 2 deals)" in line  # buckets 7 and 8: no deal in the table
    line = t1.by_blueprint_score(rows, GAME.max_score, population, buckets=3)[-1]  # buckets <= 8, 9, 10
    want = 0.2 * 7.0 + 0.3 * 9.5 + 0.5 * 9.5
    err = (0.2 ** 2 * 2.0 / 2 + 0.3 ** 2 * 0.5 / 2 + 0.5 ** 2 * 0.5 / 2) ** 0.5
    assert f"sparta {want:.3f} ± {err:.3f}, {want - 8.5:+.3f} on the blueprint" in line
    assert "<= 8: 20.0%, 9: 30.0%, 10: 50.0%; blueprint 8.500" in line


def test_strata_refuse_a_blueprint_of_another_game(tmp_path):
    a = run_json(tmp_path / "a.json", [5.0, 6.0], {"sparta": [6.0, 6.0]})
    cmd = [*TABLE1, "--combine", str(a), "--blueprint", "smartbot", "--strata", "10",
           "--device", "cpu", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    assert res.returncode != 0 and res.stderr.strip().startswith("table1 --strata: --blueprint plays")
    assert len(res.stderr.strip().splitlines()) == 1


def test_strata_refuse_a_blueprint_that_scores_otherwise_on_the_tables_deals(tmp_path):
    full = GameConfig(players=2).to_dict()
    a = run_json(tmp_path / "a.json", [0.0, 1.0], {"sparta": [6.0, 6.0]}, game=full)
    cmd = [*TABLE1, "--combine", str(a), "--blueprint", "smartbot", "--strata", "4",
           "--device", "cpu", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    assert res.returncode != 0
    want = ("table1 --strata: --blueprint scores other than the table's blueprint on the table's deals: "
            "pass the blueprint it played")
    assert res.stderr.strip() == want


def compare(tmp_path: Path, a: Path, b: Path) -> subprocess.CompletedProcess:
    cmd = [*TABLE1, "--compare", str(a), str(b), "--out", str(tmp_path)]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV)


def test_compare_pairs_a_mode_with_itself_under_two_settings_on_the_deals_both_played(tmp_path):
    bp = [5.0, 6.0, 7.0, 4.0]
    a = run_json(tmp_path / "a.json", bp, {"sparta": [6.0, 6.0, 8.0, 5.0]})
    b = run_json(tmp_path / "b.json", bp[1:], {"sparta": [7.0, 8.0, 6.0]}, first=1, keep_lost_points=True)
    res = compare(tmp_path, a, b)
    assert res.returncode == 0, res.stderr
    assert "keep_lost_points: false (A) -> true (B)" in res.stdout
    rows = table_rows(res.stdout.split("by the blueprint's score")[0])
    # deals 1..3: A 6, 8, 5 and B 7, 8, 6 -> differences 1, 0, 1
    assert rows["sparta"][1] == "3 (1..3)" and rows["sparta"][5] == "+0.667 ± 0.333"
    assert next(tmp_path.glob("compare_tables_*.md")).read_text().count("| sparta |") == 2


def test_compare_refuses_tables_on_other_deals_and_files_that_are_not_tables(tmp_path):
    a = run_json(tmp_path / "a.json", [5.0, 6.0], {"sparta": [6.0, 7.0]})
    b = run_json(tmp_path / "b.json", [5.0, 9.0], {"sparta": [6.0, 9.0]})
    res = compare(tmp_path, a, b)
    assert res.returncode != 0 and "not the same deals" in res.stderr and "Traceback" not in res.stderr
    other_seed = run_json(tmp_path / "seed.json", [5.0, 6.0], {"sparta": [6.0, 7.0]}, seed=1)
    res = compare(tmp_path, a, other_seed)
    assert res.returncode != 0 and "differ in seed" in res.stderr and "Traceback" not in res.stderr
    c = run_json(tmp_path / "c.json", [5.0, 6.0], {"lbs-8": [6.0, 7.0]})
    res = compare(tmp_path, a, c)
    assert res.returncode != 0 and "share no search mode" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "x.json").write_text("[1, 2]")
    res = compare(tmp_path, a, tmp_path / "x.json")
    assert res.returncode != 0 and "not a table1 result" in res.stderr and "Traceback" not in res.stderr
    assert not list(tmp_path.glob("compare_tables_*.md"))


def test_a_table_write_on_a_full_disk_keeps_the_previous_files(tmp_path, monkeypatch):
    import errno

    import pytest

    from experiments import table1 as t1
    from lbs import ckpt

    def full_disk(*args, **kwargs):  # the temporary file cannot be written at all
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    s = {"mode": "blueprint", "games": 2, "score": {"games": 2, "mean": 5.5, "sem": 0.5, "perfect": 0.0,
                                                   "bombed": 0.0, "mean_length": 20.0}}
    rows = [t1.Row("blueprint", s, [5.0, 6.0], [5.0, 6.0])]
    out = tmp_path / "table1_run.md"
    t1.write(rows, ["# head"], {}, GAME, out, done=False)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    monkeypatch.setattr(ckpt.os, "fdopen", full_disk)
    with pytest.raises(SystemExit) as e:
        t1.write(rows, ["# head"], {}, GAME, out)
    assert str(e.value) == f"table1: could not write {out}: No space left on device; the previous " \
                           "table1_run.md is intact"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
