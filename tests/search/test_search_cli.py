"""search/run.py end to end with a tiny budget: the JSON result replays, bad input is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lbs.hanabi import GameConfig
from lbs.hanabi.interop.hanablive import to_hanablive
from lbs.hanabi.interop.record import GameRecord, replay

ROOT = Path(__file__).resolve().parents[2]
PAIR = ["--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt"),
        "--belief", str(ROOT / "checkpoints" / "belief_2c.pt")]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "search" / "run.py"), *args, "--no-progress"],
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


def test_a_search_run_writes_records_that_replay(tmp_path):
    out = tmp_path / "lbs1.json"
    r = run("--mode", "lbs-1", *PAIR, "--games", "3", "--rollouts", "170", "--min-rollouts", "10",
            "--batch-games", "2", "--out", str(out), "--show", "1", "--profile", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.startswith("search: lbs-1 on cpu, 3 games of GameConfig(")  # the settings come first
    assert "rollouts=170, min_rollouts=10, prune_z=2.0, delta=0.5" in r.stderr  # the quick default's margin
    for want in ("lbs-1: score", "blueprint on the same deals", "paired difference", "s per searched move",
                 "rollouts/s", "deviate from the blueprint", "fallbacks", "where the time goes",
                 "# playthrough"):
        assert want in r.stdout, want
    blob = json.loads(out.read_text())
    assert blob["summary"]["games"] == 3 and len(blob["games"]) == 3
    records = [GameRecord.from_dict(g["record"]) for g in blob["games"]]
    final = replay(records)  # checks every move is legal and the recorded scores
    assert torch.equal(final.score, torch.tensor([r.score for r in records]))
    with pytest.raises(ValueError, match="2 colours"):  # hanab.live has no 2-suit variant; 3-5 export
        to_hanablive(records[0])
    dec = blob["games"][0]["decisions"][0]
    assert {"move", "blueprint", "deviated", "fallback", "candidates"} <= set(dec)
    again = run("--mode", "lbs-1", *PAIR, "--games", "1", "--rollouts", "170", "--min-rollouts", "10",
                "--out", str(out), cwd=tmp_path)
    assert again.returncode != 0 and "exists" in again.stderr and "Traceback" not in again.stderr


def test_first_game_plays_that_deal_as_a_run_from_deal_0_does(tmp_path):
    """A table's deal F can be played again alone, its searches recorded: the same game."""
    common = ["--mode", "lbs-1", *PAIR, "--rollouts", "170", "--min-rollouts", "10",
              "--no-blueprint-baseline"]
    r = run(*common, "--games", "3", "--out", str(tmp_path / "all.json"), cwd=tmp_path)
    one = run(*common, "--games", "1", "--first-game", "2", "--out", str(tmp_path / "one.json"),
              "--show", "1", cwd=tmp_path)
    assert r.returncode == 0 and one.returncode == 0, (r.stderr[-2000:], one.stderr[-2000:])
    games = [json.loads((tmp_path / f).read_text())["games"] for f in ("all.json", "one.json")]
    assert games[1][0]["record"] == games[0][2]["record"]
    assert games[1][0]["decisions"] == games[0][2]["decisions"]
    assert "game 2" in one.stdout


def test_a_rule_bot_plays_the_player_count_asked(tmp_path):
    out = tmp_path / "sb3.json"
    r = run("--mode", "blueprint", "--blueprint", "smartbot", "--players", "3", "--games", "2",
            "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 games of GameConfig(players=3," in r.stderr
    records = [GameRecord.from_dict(g["record"]) for g in json.loads(out.read_text())["games"]]
    assert records[0].cfg == GameConfig(players=3)
    assert [len(r.deck) for r in records] == [records[0].cfg.num_cards] * 2
    final = replay(records)
    assert torch.equal(final.score, torch.tensor([r.score for r in records]))
    assert min(r.score for r in records) > 15  # SmartBot's 3-player mean is 22.9


def test_a_tree_search_plays_every_seat_and_writes_records_that_replay(tmp_path):
    """ris-mcts on the 2-colour game with the network as the simulation policy, and mo-ismcts with 4 players
    (SmartBot the baseline, random simulations): a result line like the other modes', records that replay."""
    out = tmp_path / "ris.json"
    r = run("--mode", "ris-mcts", "--blueprint", PAIR[1], "--games", "1", "--iterations", "4",
            "--sim-policy", "blueprint", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "4 iterations per move at every seat" in r.stderr and "sim_policy=blueprint" in r.stderr
    for want in ("ris-mcts: score", "blueprint on the same deals", "paired difference", "iterations/s",
                 "4 iterations per move, mean decision depth"):
        assert want in r.stdout, want
    blob = json.loads(out.read_text())
    assert blob["config"]["mcts"]["iterations"] == 4 and blob["config"]["mcts"]["sim_policy"] == "blueprint"
    records = [GameRecord.from_dict(g["record"]) for g in blob["games"]]
    final = replay(records)
    assert torch.equal(final.score, torch.tensor([r.score for r in records]))
    game = blob["games"][0]
    assert game["searched"] == len(records[0].moves) and game["rollouts"] == 4 * game["searched"]
    dec = game["decisions"][0]
    assert dec["move"] in [c["id"] for c in dec["candidates"].values()]
    assert sum(c["visits"] for c in dec["candidates"].values()) == 4
    four = run("--mode", "mo-ismcts", "--blueprint", "smartbot", "--players", "4", "--games", "1",
               "--iterations", "3", "--no-blueprint-baseline", "--out", str(tmp_path / "mo4.json"),
               cwd=tmp_path)
    assert four.returncode == 0, four.stderr[-2000:]
    assert "mo-ismcts: score" in four.stdout and "GameConfig(players=4," in four.stderr
    games = json.loads((tmp_path / "mo4.json").read_text())["games"]
    records = [GameRecord.from_dict(g["record"]) for g in games]
    assert records[0].cfg.players == 4
    replay(records)


@pytest.mark.parametrize("args, message", [
    (["--mode", "lbs-0"], "at least one"),
    (["--mode", "mcts"], "unknown mode"),
    (["--mode", "lbs-2", "--rollouts", "50"], "too small"),
    (["--mode", "lbs-2", "--budget", "paper", "--min-rollouts", "600"],
     "SearchConfig.rollouts=10000 is too small"),
    (["--mode", "lbs-2", "--budget", "huge"], "invalid choice: 'huge'"),
    (["--mode", "lbs-2", "--max-range", "0"], "SearchConfig.max_range=0"),
    (["--mode", "lbs-2", "--seat", "2"], "seat"),
    (["--mode", "lbs-2", "--belief", str(ROOT / "checkpoints" / "belief_2p.pt")], "game config"),
    (["--mode", "lbs-2", "--blueprint", "missing.pt"], "not found"),
    (["--mode", "lbs-2", "--devices", "0"], "--devices 0"),
    (["--mode", "lbs-2", "--devices", "2", "--profile"], "--devices 1"),
    (["--mode", "lbs-16", "--blueprint", "smartbot"], "no value"),
    (["--mode", "lbs-2", "--first-game", "-1"], "--first-game -1"),
    (["--mode", "lbs-2", "--knowledge", "bogus"],
     "--knowledge: invalid choice: 'bogus' (choose from 'smartbot', 'none')"),
    (["--mode", "sparta", "--knowledge", "none"], "--knowledge: matters to no mode here (sparta)"),
    (["--mode", "ris-mcts", "--blueprint", PAIR[1], "--iterations", "0"],
     "--iterations 0: MctsConfig.iterations=0: must be an int in 1.."),
    (["--mode", "mo-ismcts", "--blueprint", PAIR[1], "--exploration", "-1"], "MctsConfig.exploration=-1.0"),
    (["--mode", "ris-mcts", "--blueprint", PAIR[1], "--sim-policy", "bogus"], "invalid choice: 'bogus'"),
    (["--mode", "ris-mcts", "--blueprint", PAIR[1], "--rollouts", "100"],
     "--rollouts: matters to no mode here (ris-mcts)"),
    (["--mode", "lbs-2", "--iterations", "5"], "--iterations: matters to no mode here (lbs-2)"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    base = [] if "--blueprint" in args else PAIR[:2]
    base += [] if "--belief" in args or "--blueprint" in args else PAIR[2:]
    r = run(*base, *args, "--games", "1", cwd=tmp_path)
    assert r.returncode != 0
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_belief_for_another_blueprint_is_refused(tmp_path):
    from lbs import ckpt
    from lbs.models import BLUEPRINT_KIND

    blob = ckpt.load(ROOT / "checkpoints" / "blueprint_2c.pt", BLUEPRINT_KIND)
    blob["model"] = {k: v * 1.01 if v.is_floating_point() else v for k, v in blob["model"].items()}
    other = ckpt.save(tmp_path / "other_2c.pt", BLUEPRINT_KIND, {k: v for k, v in blob.items()
                                                                 if k not in ("kind", "format")})
    r = run("--mode", "lbs-2", "--blueprint", str(other), "--belief", PAIR[3], "--games", "1", cwd=tmp_path)
    assert r.returncode != 0 and "different blueprint" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_two_devices_play_and_record_the_games_one_device_does(tmp_path):
    """`--devices 2`: two processes share the games (rank 1 plays games 1-2 in one batch, one process plays
    0-1 then 2); the first process writes the same games and scores as a one-process run."""
    args = ["--mode", "lbs-1", *PAIR, "--games", "3", "--rollouts", "170", "--min-rollouts", "10",
            "--batch-games", "2"]
    one = run(*args, "--out", str(tmp_path / "one.json"), cwd=tmp_path)
    two = run(*args, "--devices", "2", "--out", str(tmp_path / "two.json"), cwd=tmp_path)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-3000:]
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert b["games"] == a["games"] and len(a["games"]) == 3
    for k in ("score", "blueprint", "paired_diff", "searched_moves", "rollouts", "deviation_pct"):
        assert b["summary"][k] == a["summary"][k], k
    assert two.stdout.count("lbs-1: score") == 1 and "x 2 processes" in two.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "two.json"]


def test_a_stopped_search_keeps_its_finished_games_and_a_rerun_resumes(tmp_path):
    """SIGTERM after some games: one line says what was kept; the same command again plays only the rest,
    and its games are the games an uninterrupted run plays."""
    import signal
    import time

    flags = ["--mode", "lbs-1", *PAIR, "--games", "6", "--rollouts", "170", "--min-rollouts", "10",
             "--batch-games", "1", "--no-blueprint-baseline", "--no-progress"]
    out = tmp_path / "stopped" / "r.json"
    cmd = [sys.executable, str(ROOT / "search" / "run.py"), *flags, "--out", str(out)]
    proc = subprocess.Popen(cmd, env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    end = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < end:  # wait for two finished games
        found = list(out.parent.glob(".lbs-1-*.journal"))
        if found and len(found[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    (line,) = [x for x in err.splitlines() if "stopped by SIGTERM" in x]
    assert "Traceback" not in err and "games finished and kept in" in line and not out.exists()
    kept = int(line.split(": ")[2].split(" of ")[0])
    assert 2 <= kept < 6
    again = run(*flags, "--out", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{kept} of 6 games kept from an earlier run" in again.stderr
    assert not list(out.parent.glob(".lbs-1-*.journal"))  # the result is written: the journal is gone
    whole = run(*flags, "--out", str(tmp_path / "whole" / "r.json"), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    resumed, fresh = (json.loads(p.read_text())["games"] for p in (out, tmp_path / "whole" / "r.json"))
    assert [g["record"] for g in resumed] == [g["record"] for g in fresh]


def test_two_searches_on_one_result_file_are_refused(tmp_path):
    out = tmp_path / "r.json"
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from lbs.runs import hold; hold(Path(sys.argv[1]), 'x'); print('held', "
                               "flush=True); sys.stdin.read()", str(tmp_path / ".r.json.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
    assert holder.stdout.readline().strip() == "held"
    try:
        r = run("--mode", "blueprint", *PAIR[:2], "--out", str(out), cwd=tmp_path)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"the result file {out} is in use by another process (pid {holder.pid})" in r.stderr


@pytest.mark.parametrize("out", ["/etc/hostname/x.json", "{tmp}", "/proc/x.json"])
def test_an_unwritable_out_is_refused_before_any_game(tmp_path, out):
    r = run("--mode", "blueprint", *PAIR[:2], "--games", "1", "--out", out.format(tmp=tmp_path), cwd=tmp_path)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("search: --out ") and "search: blueprint on" not in r.stderr
