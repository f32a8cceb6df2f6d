"""search/run.py end to end with a tiny budget: the JSON result replays, bad input is one line."""

from __future__ import annotations

import dataclasses
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


def test_the_oracle_check_needs_no_belief(tmp_path):
    """diagnose_lbs --sampler true searches with the true hand: a blueprint no belief was trained for still
    gets it, where the belief's sampler is refused in one line."""
    bp = tmp_path / "bp.pt"
    bp.write_bytes((ROOT / "checkpoints" / "blueprint_2c.pt").read_bytes())  # not shipped: no belief found
    flags = [sys.executable, str(ROOT / "experiments" / "diagnose_lbs.py"), "--mode", "lbs-1", "--blueprint",
             str(bp), "--games", "2", "--rollouts", "100", "--min-rollouts", "5", "--threads", "1"]
    r = subprocess.run([*flags, "--sampler", "true"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "lbs-1, sampler true" in r.stdout and "paired difference" in r.stdout
    r = subprocess.run([*flags, "--sampler", "belief"], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode != 0 and "needs a belief" in r.stderr and "Traceback" not in r.stderr


# ---- every search entry point: the shared flags, declared once ------------------------------------------
SCRIPTS = {"search/run.py": "quick", "experiments/table1.py": "table1",
           "experiments/diagnose_lbs.py": "table1", "experiments/bench_search.py": "table1"}
"""Each search entry point and the named budget it starts from."""

HARNESS = r"""
import contextlib, io, json, os, runpy, sys
script, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, os.path.dirname(script))  # as `python script` runs it
out = []
for argv, env in cases:
    err, code = io.StringIO(), 0
    sys.argv = [script, *argv]
    before = dict(os.environ)
    os.environ.update(env)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = 1 if isinstance(e.code, str) else (e.code or 0)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    os.environ.clear()
    os.environ.update(before)
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def refusals(script: str, cases: list[tuple[list[str], dict]]) -> list[tuple[int, str]]:
    """(exit code, stderr) of each (argv, environment) case, all in one process (imports paid once)."""
    env = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", HARNESS, str(ROOT / script), json.dumps(cases)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [tuple(x) for x in json.loads(r.stdout.splitlines()[-1])]


BLUEPRINT_2C = ["--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt")]
BELIEF_2C = ["--belief", str(ROOT / "checkpoints" / "belief_2c.pt")]
FLAG_CASES = {
    "search/run.py": [
        (["--mode", "blueprint", *BELIEF_2C], "no mode here draws hands from a belief (blueprint)"),
        (["--mode", "sparta", "--belief", "missing.pt"], "no mode here draws hands from a belief (sparta)"),
        (["--mode", "lbs-2", "--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
        (["--mode", "lbs-2", "--max-range", "10"], "--max-range: matters to no mode here (lbs-2)"),
        (["--mode", "sparta", "--blueprint-knowledge", "false"], "--blueprint-knowledge: matters to no mode"),
        (["--mode", "blueprint", "--delta", "0.1"], "--delta: matters to no mode here (blueprint)"),
    ],
    "experiments/table1.py": [
        (["--modes", "blueprint", "sparta", *BELIEF_2C], "no mode here draws hands from a belief"),
        (["--modes", "lbs-1", "lbs-2", "lbs-1"], "--modes names lbs-1 more than once"),
        (["--strata", "-1"], "--strata -1: must be >= 0"),
        (["--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
        (["--modes", "blueprint", "lbs-1", "--max-range", "10"], "--max-range: matters to no mode here"),
    ],
    "experiments/diagnose_lbs.py": [
        (["--mode", "sparta", *BELIEF_2C], "no mode here draws hands from a belief (sparta)"),
        (["--sampler", "true", *BELIEF_2C], "no mode here draws hands from a belief (lbs-1)"),
        (["--cuda-graphs", "--device", "cpu"], "--cuda-graphs needs a CUDA device"),
    ],
    "experiments/bench_search.py": [
        (["--modes", "sparta", *BELIEF_2C], "no mode here draws hands from a belief (sparta)"),
        (["--modes", "lbs-1", "lbs-1"], "--modes names lbs-1 more than once"),
        (["--cuda-graphs", "on", "--device", "cpu"], "--cuda-graphs on needs a CUDA device"),
        (["--batch-games", "1", "-2"], "--batch-games -2: must be >= 1"),
    ],
}


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_flags_that_matter_to_no_chosen_mode_are_refused_in_one_line(script):
    """Every search entry point refuses, in one line before any work, what its modes would ignore or cannot
    do: a belief where no mode draws hands from one (even a missing file), a SearchConfig flag no chosen mode
    reads, a mode named twice, CUDA graphs off CUDA, a negative count, and LBS_EAGER other than 1."""
    cases = [(argv if "--blueprint" in argv else [*BLUEPRINT_2C, *argv], {})
             for argv, _ in FLAG_CASES[script]]
    cases += [([*BLUEPRINT_2C, *BELIEF_2C], {"LBS_EAGER": value}) for value in ("0", "yes")]
    wants = [w for _, w in FLAG_CASES[script]] + ["LBS_EAGER='0'", "LBS_EAGER='yes'"]
    for (argv, env), want, (code, err) in zip(cases, wants, refusals(script, cases), strict=True):
        assert code != 0 and want in err and len(err.strip().splitlines()) == 1, (argv, env, err)


def load_parser(script: str):
    """The script's parser() (each entry point builds its flags there)."""
    import importlib
    import importlib.util

    if script.startswith("experiments/"):
        return importlib.import_module(f"experiments.{Path(script).stem}").parser()
    spec = importlib.util.spec_from_file_location(f"_entry_{Path(script).stem}", ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parser()


def help_defaults(ap) -> dict[str, str]:
    """Each option's default as its --help shows it: the [value] closing a SearchConfig field's text, else
    the value after 'default' (the first spelling of the option names it)."""
    import re

    blocks: list[str] = []
    for line in ap.format_help().split("options:", 1)[1].splitlines():
        if line.startswith("  -"):  # an option's first line
            blocks.append(line)
        elif line.startswith("   ") and blocks:  # its help, wrapped
            blocks[-1] += " " + line
        else:  # a blank line or a group's title ends it
            blocks.append("")
    out = {}
    for block in filter(None, blocks):
        flat = " ".join(block.split())
        name = flat.split()[0].rstrip(",")
        shown = re.findall(r"\[([^\]]*)\]$", flat) or re.findall(r"\(default:? ([^):;,]+)", flat)
        if shown:
            out[name.lstrip("-").replace("-", "_")] = shown[0].strip()
    return out


def test_every_search_script_shows_the_one_declaration_of_each_default():
    """The defaults each entry point's --help shows are the declaration's: every SearchConfig field the named
    budget's value (no script re-declares a search setting), the same delta everywhere, and the shared flags
    (device, threads, seed, first game) alike; a plain parse builds that budget's config."""
    from lbs.search import flags
    from lbs.search.config import BUDGETS, SearchConfig

    shown = {}
    for script, budget in SCRIPTS.items():
        ap = load_parser(script)
        defaults = help_defaults(ap)
        shown[script] = defaults
        want = BUDGETS[budget].search
        for f in dataclasses.fields(SearchConfig):
            if f.name in ap.sweep:
                continue
            assert defaults[f.name] == repr(getattr(want, f.name)), (script, f.name, defaults.get(f.name))
        assert defaults["budget"] == budget, script
        search = flags.read(ap, ap.parse_args([]))
        assert search.cfg == want and search.budget is BUDGETS[budget], script
    for flag in ("device", "threads", "seed", "first_game", "delta"):
        assert len({d[flag] for d in shown.values()}) == 1, (flag, {s: d[flag] for s, d in shown.items()})
    assert {d["delta"] for d in shown.values()} == {"0.5"}
