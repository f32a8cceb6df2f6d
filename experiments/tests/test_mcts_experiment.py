"""experiments/mcts.py with a learned evaluation function (RIS-MCTS-NR): it plays, and its record names the
function it valued the leaves with; a function for another game is one line. The rows beside the tree
searches (Table III) play the tree searches' deals under their scoring rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from experiments import mcts
from lbs.hanabi import GameConfig, engine
from lbs.search import mcts_value as mv
from lbs.search.config import SearchConfig
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def function_for(game: GameConfig, path: Path) -> Path:
    torch.manual_seed(0)
    fit = {"pairs": 1, "held_out_pairs": 0, "rms_train": 1.0, "rms_held_out": 1.0, "rms_constant": 2.0}
    return mv.save(path, mv.EvalFn(game, 8), mv.EvalFnConfig(hidden=8), fit, ["a.json"])


def test_valued_leaves_play_and_the_record_names_the_function(tmp_path):
    fn = function_for(GameConfig(players=2), tmp_path / "e.pt")
    flags = [sys.executable, "-m", "experiments.mcts", "--players", "2", "--games", "2", "--iterations", "2",
             "--modes", "ris-mcts", "--out", str(tmp_path / "out")]
    r = subprocess.run([*flags, "--evaluation", str(fn), "--beside", "vandenbergh"], capture_output=True,
                       text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"valued by {fn} (no simulation)" in r.stdout and "evaluation function: sha256" in r.stdout
    assert "learnt from a.json" in r.stdout and "| ris-mcts | random | 2 |" in r.stdout
    assert "| vandenbergh | — | — |" in r.stdout and "| mode | vs vandenbergh |" in r.stdout
    other = function_for(GameConfig(players=3), tmp_path / "e3.pt")
    bad = subprocess.run([*flags, "--evaluation", str(other)], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=300)
    assert bad.returncode != 0 and "is an evaluation function for" in bad.stderr
    assert "Traceback" not in bad.stderr
    simulated = subprocess.run([*flags, "--evaluation", str(fn), "--simulation", "smartbot"],
                               capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert simulated.returncode != 0 and "plays no simulation" in simulated.stderr
    assert "Traceback" not in simulated.stderr


def test_rows_beside_play_the_same_deals_under_the_same_rule():
    """A rule bot alone and SmartBot + SPARTA play the decks `play` deals for the seed (the SPARTA seat
    searching each of its turns at the budget given)."""
    game = GameConfig(players=2, bomb_zero=False)
    decks = engine.reset(game, game_seeds(Stream.EVAL, 3, 4)).deck
    alone = mcts.beside("vandenbergh", game, 4, 3, torch.device("cpu"))
    assert torch.equal(alone["decks"], decks) and alone["searched"] == 0
    assert ((alone["scores"] >= 0) & (alone["scores"] <= game.max_score)).all()
    cfg = SearchConfig(rollouts=40, min_rollouts=2, delta=0.5)
    sparta = mcts.beside("sparta", game, 1, 3, torch.device("cpu"), cfg)
    assert torch.equal(sparta["decks"], decks[:1]) and sparta["searched"] > 10 and sparta["rollouts"] == 40
