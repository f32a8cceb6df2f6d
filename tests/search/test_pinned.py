"""Search decisions and scores on fixed seeds, pinned: every searched move (candidates' means and rollout
counts, through a digest), every move played, the scores, deviations and fallbacks of a few games per mode
with the shipped pairs. The pinned values were recorded from these runs before the search set-up was
redesigned; a change that alters any of them changes behaviour. 2c/sparta-r40 was recorded again when a range
above its max range began to be drawn from by rejection (it played the blueprint there before), and 2p/lbs-16
when the shipped full-game pair was replaced (the blueprint learnt from SmartBot's games and its belief), and
again when that belief was replaced by the same run trained longer, and when the pair was replaced by the
blueprint that also reads the card-count, hint and discard facts and its belief, and when that belief was
trained longer and began to name SmartBot's conventions (its samples drawn within SmartBot's card
knowledge), and when the pair became the one `train/blueprint.py --preset recipe` and its belief make, and
again when that recipe's blueprint became a policy network beside Q, and when its belief was replaced by the
same belief after a weighted stage; then too 2p/lbs-16 began to pin the new default, drawing from the belief
alone (--knowledge none), and 2p/lbs-16-knowledge the draws within SmartBot's card knowledge
(--knowledge smartbot) that 2p/lbs-16 pinned before. The 2c runs draw from the belief alone, as recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from lbs.search.config import SearchConfig
from lbs.search.play import play_games
from lbs.search.setup import build_search

ROOT = Path(__file__).resolve().parents[2]
PINNED = json.loads((Path(__file__).parent / "fixtures" / "pinned_search.json").read_text())
pytestmark = pytest.mark.usefixtures("one_thread")

# pin name -> (pair, mode, seat, SPARTA's max range, games, rollouts, min_rollouts, knowledge)
RUNS = {
    "2c/blueprint": ("2c", "blueprint", 0, 1_000_000, 3, 170, 10, "none"),
    "2c/lbs-1": ("2c", "lbs-1", 0, 1_000_000, 3, 170, 10, "none"),
    "2c/lbs-inf": ("2c", "lbs-inf", 0, 1_000_000, 3, 170, 10, "none"),
    "2c/sparta": ("2c", "sparta", 0, 1_000_000, 3, 170, 10, "none"),
    "2c/sparta-r40": ("2c", "sparta", 0, 40, 3, 170, 10, "none"),
    "2c/lbs-2-seat1": ("2c", "lbs-2", 1, 1_000_000, 3, 170, 10, "none"),
    "2p/lbs-16": ("2p", "lbs-16", 0, 1_000_000, 1, 400, 20, "none"),
    "2p/lbs-16-knowledge": ("2p", "lbs-16", 0, 1_000_000, 1, 400, 20, "smartbot"),
}


def digest(results) -> str:
    """A short hash of every searched move's record (choice, candidates' means and rollout counts)."""
    blob = json.dumps([r.decisions for r in results], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def run_pinned(name: str) -> list:
    pair, mode, seat, max_range, games, rollouts, min_rollouts, knowledge = RUNS[name]
    bp, bl = ROOT / "checkpoints" / f"blueprint_{pair}.pt", ROOT / "checkpoints" / f"belief_{pair}.pt"
    cfg = SearchConfig(rollouts=rollouts, min_rollouts=min_rollouts, seat=seat, max_range=max_range,
                       knowledge=knowledge)
    with build_search(mode, bp, bl, cfg=cfg) as setup, torch.no_grad():
        return play_games(setup, games, seed=7, batch_games=2)


@pytest.mark.parametrize("name", list(RUNS))
def test_search_decisions_and_scores_are_pinned(name):
    res = run_pinned(name)
    want = PINNED[name]
    assert [r.record.moves for r in res] == want["moves"]
    assert [r.record.score for r in res] == want["scores"]
    assert [r.deviated for r in res] == want["deviated"]
    assert [r.fallbacks for r in res] == want["fallbacks"]
    assert [r.rollouts for r in res] == want["rollouts"]
    assert digest(res) == want["digest"]
