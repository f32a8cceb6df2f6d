"""RIS-MCTS-NR's evaluation function: training pairs are the recorded root statistics at the states the games
were in, it learns them, it saves and loads checked, and the commands run end to end."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lbs.ckpt import CheckpointError
from lbs.hanabi import GameConfig, encode, engine
from lbs.hanabi.interop.record import GameRecord
from lbs.hanabi.rng import uniform
from lbs.search import mcts
from lbs.search import mcts_value as mv
from lbs.seeding import Stream, game_seeds

GAME = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


def random_games(game: GameConfig, n: int, seed: int = 0) -> tuple[list[dict], list[list]]:
    """n random games as search/run.py writes them, every move 'searched': the legal moves as candidates
    with made-up visits and means, the move played among them; and per game, per move, the state's mover
    observation (what each decision's pairs must carry)."""
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, n))
    deck = state.deck.tolist()
    moves: list[list[int]] = [[] for _ in range(n)]
    decisions: list[list[dict]] = [[] for _ in range(n)]
    seen: list[list] = [[] for _ in range(n)]
    t = 0
    while not bool(state.done.all()):
        legal = engine.legal_moves(game, state)
        move = mcts.random_legal(legal, uniform(torch.arange(n), seed, t))
        obs = encode(game, state, state.cur_player[:, None])[:, 0]
        for i in (~state.done).nonzero().flatten().tolist():
            ids = legal[i].nonzero().flatten().tolist()
            cands = {game.move_name(a): {"id": a, "visits": (a * 7 + t) % 6 + 1,
                                         "mean": round((a + t) % 5 / 5, 4)} for a in ids}
            cands[game.move_name(int(move[i]))]["visits"] = 9
            decisions[i].append({"step": t, "move": int(move[i]), "candidates": cands})
            moves[i].append(int(move[i]))
            seen[i].append(obs[i])
        state, _, _ = engine.step(game, state, move)
        t += 1
    games = [{"record": GameRecord(game.to_dict(), deck[i], moves[i], int(state.score[i])).to_dict(),
              "decisions": decisions[i]} for i in range(n)]
    return games, seen


def test_pairs_are_the_recorded_root_children_at_the_movers_observation():
    games, seen = random_games(GAME, 5)
    game, pairs = mv.pairs_from_games(games, min_visits=3)
    assert game == GAME
    want = [(i, d, c) for i, g in enumerate(games) for d in g["decisions"] for c in d["candidates"].values()
            if c["visits"] >= 3]
    assert pairs.move.numel() == len(want) > 100
    for i, d, c in want[::17]:  # each wanted pair is there, at its state's observation
        k = ((pairs.game == i) & (pairs.move == c["id"]) & (pairs.target == torch.tensor(c["mean"]))
             & (pairs.visits == c["visits"])).nonzero().flatten()
        assert k.numel() >= 1
        assert any(torch.equal(pairs.obs[j], seen[i][d["step"]].float()) for j in k.tolist())
    bad = json.loads(json.dumps(games))
    bad[1]["decisions"][3]["move"] = (bad[1]["decisions"][3]["move"] + 1) % GAME.num_moves
    with pytest.raises(ValueError, match="game 1: its decision at move 3"):
        mv.pairs_from_games(bad, min_visits=3)


def test_it_learns_a_function_of_the_observation_and_saves_checked(tmp_path):
    """Targets that depend on the observation and the move: the held-out error falls well below a constant
    guess; the file loads to the same function, for this game only."""
    games, _ = random_games(GAME, 60, seed=1)
    game, pairs = mv.pairs_from_games(games, min_visits=1)
    lives = pairs.obs[:, GAME.layout.slices["board.lives"]].sum(1)
    pairs.target = (0.25 * lives + 0.1 * (pairs.move % 3).float()).clamp(max=0.95)
    cfg = mv.EvalFnConfig(steps=600, held_out=0.2)
    net, stats = mv.fit(game, pairs, cfg, progress=False)
    assert stats["held_out_pairs"] > 0 and stats["rms_held_out"] < 0.5 * stats["rms_constant"]
    path = mv.save(tmp_path / "e.pt", net, cfg, stats, ["x.json"])
    back = mv.load(path, dataclasses.replace(GAME, bomb_zero=False))  # the rule for a lost life may differ
    state = engine.reset(GAME, game_seeds(Stream.EVAL, 9, 4))
    assert torch.equal(back.leaf_values(state), net.leaf_values(state))
    with pytest.raises(CheckpointError, match="evaluation function for"):
        mv.load(path, GameConfig(players=3, colors=2, ranks=3, hand_size=3))


def test_train_then_search_with_it_end_to_end(tmp_path):
    """search/run.py's tree-search games train a function (train/mcts_value.py) that search/run.py then
    values its leaves with; bad input is one line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    bp = str(ROOT / "checkpoints" / "blueprint_2c.pt")

    def run(script: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)

    r = run("search/run.py", "--mode", "ris-mcts", "--blueprint", bp, "--games", "2", "--iterations", "6",
            "--no-blueprint-baseline", "--no-progress", "--out", "ris.json")
    assert r.returncode == 0, r.stderr[-2000:]
    t = run("train/mcts_value.py", "ris.json", "--out", "e.pt", "--steps", "50", "--min-visits", "1",
            "--no-progress")
    assert t.returncode == 0, t.stderr[-2000:]
    assert "mcts_value: saved e.pt: RMS error" in t.stdout
    again = run("train/mcts_value.py", "ris.json", "--out", "e.pt", "--steps", "50")
    assert again.returncode != 0 and "exists" in again.stderr and "Traceback" not in again.stderr
    nr = run("search/run.py", "--mode", "ris-mcts", "--blueprint", bp, "--games", "1", "--iterations", "6",
             "--no-blueprint-baseline", "--no-progress", "--evaluation", "e.pt", "--out", "nr.json")
    assert nr.returncode == 0, nr.stderr[-2000:]
    assert json.loads((tmp_path / "nr.json").read_text())["config"]["mcts"]["evaluation"] == "e.pt"
    for args, says in [(["--evaluation", "e.pt", "--sim-policy", "blueprint"], "plays no simulation"),
                       (["--evaluation", "missing.pt"], "missing.pt")]:
        bad = run("search/run.py", "--mode", "ris-mcts", "--blueprint", bp, "--games", "1", *args)
        assert bad.returncode != 0 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr[-800:]
    junk = run("train/mcts_value.py", bp, "--out", "j.pt")
    assert junk.returncode != 0 and "not a search/run.py result file" in junk.stderr
