"""Games sharded over processes (lbs.shards): two gloo processes score and search exactly the games one
process plays, rank 0 gets them in game order, a failed rank ends the run instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import run_ranks

from lbs.models import load_belief, load_blueprint
from lbs.scoring import eval_games
from lbs.search.config import SearchConfig
from lbs.search.play import play_games
from lbs.search.setup import SearchSetup
from lbs.shards import ONE, Shard, plan

ROOT = Path(__file__).resolve().parents[1]
BLUEPRINT, BELIEF = ROOT / "checkpoints" / "blueprint_2c.pt", ROOT / "checkpoints" / "belief_2c.pt"
SEARCH = SearchConfig(rollouts=170, min_rollouts=10)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}


def test_slices_cover_every_game_once_in_order():
    for n in (0, 1, 2, 7, 100):
        for world in (1, 2, 3, 8):
            games = [g for r in range(world) for g in Shard(r, world).games(n)]
            assert games == list(range(n)), (n, world)
    assert ONE.gather([3, 1]) == [3, 1] and plan(1) is ONE
    assert plan(3) == Shard(0, 3)  # the first process of a run it will start
    with pytest.raises(ValueError, match="--devices 0"):
        plan(0)


def _search(game, net, belief, games, batch_games, shard=ONE):
    with SearchSetup.of(game, net, "lbs-1", SEARCH, belief) as setup, torch.no_grad():
        out = play_games(setup, games, seed=0, batch_games=batch_games, shard=shard)
    return [(r.record.to_dict(), r.bombed, r.searched, r.deviated, r.fallbacks, r.rollouts, r.decisions)
            for r in out]


# Each rank scores its slice of 25 games (batch 4) and searches its slice of 3 games (2 at a time).
WORKER = """
import torch
from test_shards import BELIEF, BLUEPRINT, _search
from lbs.models import load_belief, load_blueprint
from lbs.scoring import eval_games
from lbs.shards import launch, plan

shard = plan(2)
game, net = load_blueprint(BLUEPRINT)
_, belief = load_belief(BELIEF, blueprint_path=BLUEPRINT, game=game)
with launch(shard, torch.device("cpu")):
    rows = eval_games(game, net.step, net.initial_state, games=25, seed=3, batch=4, shard=shard)
    search = _search(game, net, belief, 3, 2, shard)
torch.save({{"rows": rows, "search": search}}, {tmp!r} + f"/rank{{shard.rank}}.pt")
"""


def test_two_processes_score_and_search_the_games_one_process_plays(tmp_path, one_thread):
    ranks = run_ranks(WORKER.format(tmp=str(tmp_path)), 2, tmp_path, imports=ROOT / "tests")
    for r, p in enumerate(ranks):
        assert p.returncode == 0, f"rank {r}: {p.stderr[-3000:]}"
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert b["rows"] is None and b["search"] == []  # rank 0 alone receives the games
    game, net = load_blueprint(BLUEPRINT)
    _, belief = load_belief(BELIEF, blueprint_path=BLUEPRINT, game=game)
    one = eval_games(game, net.step, net.initial_state, games=25, seed=3, batch=25)  # other batches too
    assert a["rows"].keys() == one.keys()
    for k, v in one.items():
        assert torch.equal(a["rows"][k], v), k
    assert len(set(one["score"].tolist())) > 1  # the per-game check can tell games apart
    search = _search(game, net, belief, 3, 3)
    assert a["search"] == search
    assert sum(s[2] for s in search) > 0 and sum(s[3] for s in search) > 0  # searched, and deviated


def test_score_cli_with_two_devices_prints_what_one_prints(tmp_path):
    cmd = [sys.executable, str(ROOT / "train" / "score.py"), str(BLUEPRINT), "--belief", str(BELIEF),
           "--games", "21", "--batch", "8", "--device", "cpu"]
    one, two = (subprocess.run([*cmd, "--devices", d], capture_output=True, text=True, env=ENV, cwd=tmp_path,
                               timeout=300) for d in ("1", "2"))
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-3000:]
    assert "over 21 games" in one.stdout and "belief: NLL per card over 21 games" in one.stdout
    assert two.stdout == one.stdout


def test_a_failed_rank_ends_the_run(tmp_path):
    """A rank that dies before joining leaves rank 0 waiting for it nowhere: rank 0 says so and exits."""
    script = tmp_path / "fail.py"
    script.write_text("import sys, torch\nfrom lbs.shards import launch, plan\nshard = plan(2)\n"
                      "if shard.rank == 1:\n    sys.exit(3)\n"
                      "with launch(shard, torch.device('cpu')):\n    shard.gather([shard.rank])\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), ENV.get("PYTHONPATH", "")])}
    t0 = time.time()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "rank 1 exited with 3" in r.stderr, r.stderr
    assert time.time() - t0 < 60
