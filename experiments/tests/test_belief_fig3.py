"""The exact posterior curve of experiments/belief_fig3.py (the LBS paper's "exact" line of Fig. 3): it scores
the positions the beliefs are scored on, and it is the posterior: at the deal, where a player knows only
the counts, it equals the counting prior, and over a game it is below it."""

from __future__ import annotations

import math
from pathlib import Path

from experiments.belief_fig3 import exact_by_turn
from lbs.belief.evaluate import evaluate_belief
from lbs.models import load_belief, load_blueprint

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


def test_the_exact_posterior_is_scored_on_the_beliefs_positions_and_starts_at_the_counting_prior():
    game, model = load_belief(CHECKPOINTS / "belief_2c.pt", blueprint_path=CHECKPOINTS / "blueprint_2c.pt")
    _, net = load_blueprint(CHECKPOINTS / "blueprint_2c.pt", game=game)
    ev = evaluate_belief(game, model, net.step, net.initial_state, games=6, seed=3, batch=6)
    exact, cards = exact_by_turn(game, net, 6, 3, "cpu", game.max_steps)
    assert cards == ev.cards_by_turn
    assert math.isclose(exact[0], ev.counting_by_turn[0], rel_tol=1e-9)  # the deal: counts alone
    live = [t for t, c in enumerate(cards) if c > 0]
    mean = sum(exact[t] * cards[t] for t in live) / sum(cards[t] for t in live)
    assert mean < ev.nll_counting - 0.05, (mean, ev)  # the partners' moves and hints tell more than counts
    assert all(math.isnan(exact[t]) for t in range(len(cards)) if cards[t] == 0)
