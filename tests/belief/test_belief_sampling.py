"""Belief filter: the batched validity check equals a plain per-game reference on every possible hand
of states reached by random play; unseen counts from the player's view equal the engine's; the
grounded belief is exactly normalised; sample_valid reports acceptance and never crashes."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch

from lbs.belief.constraints import HandConstraints, plausible_cards
from lbs.belief.constraints import from_state as hand_constraints
from lbs.belief.sampling import allowed_cards_fn, grounded_belief, sample_valid, valid_hands
from lbs.hanabi import GameConfig, HanabiState, random_moves, remaining_counts, reset, step, unseen_counts
from lbs.hanabi.encode import encode
from lbs.hanabi.engine import card_histogram
from lbs.models.belief import BeliefConfig, BeliefModel

torch.set_num_threads(1)
CONFIGS = {
    "p2_c2_r3_h3": GameConfig(players=2, colors=2, ranks=3, hand_size=3),
    "p3_c2_r3_h2": GameConfig(players=3, colors=2, ranks=3, hand_size=2),
}
PARAMS = {"argvalues": list(CONFIGS.values()), "ids": list(CONFIGS.keys())}


def played_states(game: GameConfig, games: int = 12, seed: int = 0) -> HanabiState:
    """Every distinct state of `games` random-play games (finished games are not repeated)."""
    st = reset(game, torch.arange(games) + 1000 * seed)
    seeds = torch.arange(games) + 77 + seed
    keep, states = [torch.arange(games)], [st]
    while not bool(st.done.all()):
        live = (~st.done).nonzero().flatten()
        st, _, _ = step(game, st, random_moves(game, st, seeds))
        keep.append(live)
        states.append(st)
    return HanabiState.cat([s.index(k) for s, k in zip(states, keep, strict=True)])


# ---- plain per-game references --------------------------------------------------------------------
def ref_unseen(game: GameConfig, st: HanabiState, b: int, player: int) -> list[int]:
    """All copies minus what `player` sees: others' hands, discards, fireworks."""
    seen = Counter()
    for p in range(game.players):
        if p != player:
            seen.update(c for c in st.hands[b, p].tolist() if c >= 0)
    for card, n in enumerate(st.discards[b].tolist()):
        seen[card] += n
    for color, top in enumerate(st.fireworks[b].tolist()):
        seen.update(color * game.ranks + r for r in range(top))
    return [game.card_counts[t] - seen[t] for t in range(game.card_types)]


def ref_valid(game: GameConfig, st: HanabiState, b: int, player: int, cand: tuple, unseen: list[int]) -> dict:
    """Why (or whether) a candidate hand is possible, checked one card at a time."""
    n_held = sum(c >= 0 for c in st.hands[b, player].tolist())
    cp, rp = st.color_plausible[b, player].tolist(), st.rank_plausible[b, player].tolist()
    shape_ok = all(c >= 0 for c in cand[:n_held]) and all(c == -1 for c in cand[n_held:])
    hints_ok = shape_ok and all(
        cp[s][c // game.ranks] and rp[s][c % game.ranks] for s, c in enumerate(cand[:n_held])
    )
    counts_ok = shape_ok and all(n <= unseen[c] for c, n in Counter(cand[:n_held]).items())
    return {"valid": hints_ok and counts_ok, "hints": hints_ok, "counts": counts_ok}


def all_candidates(game: GameConfig) -> torch.Tensor:
    """[K, H] every assignment of a card id or -1 to each slot (including unpacked, impossible ones)."""
    return torch.tensor(list(itertools.product(range(-1, game.card_types), repeat=game.hand_size)))


# ---- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", **PARAMS)
def test_unseen_counts_are_undealt_plus_own_hand_and_ignore_both(game):
    st = played_states(game, seed=1)
    for p in range(game.players):
        player = torch.full((st.batch_size,), p)
        view = unseen_counts(game, st, player)
        assert torch.equal(view, remaining_counts(game, st) + card_histogram(st.hands[:, p], game.card_types))
        assert (view >= 0).all()
        for b in range(0, st.batch_size, 7):
            assert view[b].tolist() == ref_unseen(game, st, b, p)
        # the player's own cards and the deck order must not matter
        hidden = st.replace(
            hands=torch.where(torch.arange(game.players)[None, :, None] == p, -1, st.hands),
            deck=st.deck.flip(1),
        )
        assert torch.equal(unseen_counts(game, hidden, player), view)


@pytest.mark.parametrize("game", **PARAMS)
def test_valid_hands_equals_brute_force(game):
    st = played_states(game, seed=2)
    cands = all_candidates(game)
    reasons = Counter()
    for p in range(game.players):
        cons = hand_constraints(game, st, p)
        q, k = st.batch_size, len(cands)
        got = valid_hands(
            game,
            cands.expand(q, -1, -1),
            cons.unseen,
            cons.color_plausible,
            cons.rank_plausible,
            cons.hand_len,
        )
        assert got.shape == (q, k) and got.dtype == torch.bool
        for b in range(q):
            unseen = ref_unseen(game, st, b, p)
            want = []
            for cand in cands.tolist():
                r = ref_valid(game, st, b, p, tuple(cand), unseen)
                want.append(r["valid"])
                reasons[(r["hints"], r["counts"])] += 1
            assert got[b].tolist() == want, f"state {b}, player {p}"
        truth = valid_hands(
            game,
            st.hands[:, p, None, :],
            cons.unseen,
            cons.color_plausible,
            cons.rank_plausible,
            cons.hand_len,
        )
        assert truth.all(), "the real hand must always be valid"
    # the states exercise both reasons for rejection separately
    assert reasons[(True, True)] > 0 and reasons[(True, False)] > 0 and reasons[(False, True)] > 0


def test_valid_hands_rejects_out_of_range_ids_and_bad_shapes():
    game = CONFIGS["p2_c2_r3_h3"]
    st = reset(game, torch.arange(2))
    cons = hand_constraints(game, st, 0)
    cand = torch.tensor([[[0, 1, game.card_types]], [[0, 1, 2]]])
    got = valid_hands(game, cand, cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len)
    assert got[:, 0].tolist() == [False, True]
    with pytest.raises(ValueError, match="candidates must be"):
        valid_hands(
            game, cand[..., :2], cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len
        )
    with pytest.raises(ValueError, match="unseen_counts"):
        valid_hands(game, cand, cons.unseen[:, :2], cons.color_plausible, cons.rank_plausible, cons.hand_len)
    with pytest.raises(ValueError, match="rank_plausible"):
        valid_hands(game, cand, cons.unseen, cons.color_plausible, cons.color_plausible, cons.hand_len)
    with pytest.raises(ValueError, match="hand_len"):
        valid_hands(game, cand, cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len[:1])
    with pytest.raises(ValueError, match="player"):
        hand_constraints(game, st, torch.tensor([0, 1, 0]))


@pytest.mark.parametrize("game", **PARAMS)
def test_grounded_belief_is_normalised_and_exact(game):
    st = played_states(game, seed=3)
    for p in range(game.players):
        bel = grounded_belief(game, st, p, dtype=torch.float64)
        assert bel.shape == (st.batch_size, game.hand_size, game.card_types)
        own = st.hands[:, p]
        held = own >= 0
        torch.testing.assert_close(
            bel.sum(-1)[held], torch.ones(int(held.sum()), dtype=torch.float64), rtol=0, atol=1e-12
        )
        assert (bel[~held] == 0).all()
        cons = hand_constraints(game, st, p)
        plaus = plausible_cards(game, cons.color_plausible, cons.rank_plausible)
        impossible = ~plaus | (cons.unseen[:, None, :] == 0)
        assert (bel[impossible] == 0).all()
        # the true card always has positive probability
        assert (bel.gather(2, own.clamp(min=0)[..., None]).squeeze(2)[held] > 0).all()
        for b in range(0, st.batch_size, 9):  # against the formula computed card by card
            unseen = ref_unseen(game, st, b, p)
            cp, rp = st.color_plausible[b, p].tolist(), st.rank_plausible[b, p].tolist()
            for s in range(int(held[b].sum())):
                w = [
                    unseen[t] * cp[s][t // game.ranks] * rp[s][t % game.ranks] for t in range(game.card_types)
                ]
                want = torch.tensor(w, dtype=torch.float64) / sum(w)
                torch.testing.assert_close(bel[b, s], want, rtol=0, atol=1e-12)
    assert grounded_belief(game, st, 0).dtype == torch.float32


def tiny_model(game: GameConfig, seed: int = 0, count_prior: bool = False) -> BeliefModel:
    """A random model; without the counting prior its proposals often break hints and counts."""
    torch.manual_seed(seed)
    cfg = BeliefConfig(hidden=16, mlp_layers=1, lstm_layers=1, card_embed=8, count_prior=count_prior)
    return BeliefModel(game, cfg)


@pytest.mark.parametrize("game", **PARAMS)
def test_count_prior_samples_are_always_valid(game):
    """The counting prior read from each player's own observation rules out every impossible hand,
    so (even untrained) all samples pass the exact filter."""
    st = played_states(game, seed=7)
    model = tiny_model(game, 3, count_prior=True)
    obs = encode(game, st, st.cur_player[:, None])  # [Q, 1, D]
    with torch.no_grad():
        context, _ = model.encode(obs)
    cons = hand_constraints(game, st, st.cur_player)
    seeds = torch.arange(st.batch_size)
    res = sample_valid(model, context[:, 0], 32, seeds, cons)
    assert res.valid.all()
    plain = sample_valid(tiny_model(game, 3), torch.randn(st.batch_size, 16), 32, seeds, cons)
    assert not plain.valid.all()  # the check has power: a plain proposal does get rejected


def test_sample_valid_reports_validity_and_acceptance():
    game = CONFIGS["p2_c2_r3_h3"]
    st = played_states(game, seed=4)
    cons = hand_constraints(game, st, st.cur_player)
    model = tiny_model(game)
    q, k = st.batch_size, 48
    context = torch.randn(q, model.context_dim)
    res = sample_valid(model, context, k, torch.arange(q), cons, min_valid=12)
    assert res.hands.shape == (q, k, game.hand_size) and res.valid.shape == (q, k)
    want = valid_hands(game, res.hands, cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len)
    assert torch.equal(res.valid, want)
    assert torch.equal(res.num_valid, want.sum(1))
    assert torch.equal(res.enough, want.sum(1) >= 12)
    torch.testing.assert_close(res.acceptance, want.sum(1).float() / k)
    assert 0 < float(res.acceptance.mean()) < 1 and res.enough.any() and not res.enough.all()
    hands, valid = res.valid_first()
    for b in range(q):
        n = int(res.num_valid[b])
        assert valid[b, :n].all() and not valid[b, n:].any()
        assert torch.equal(hands[b, :n], res.hands[b][res.valid[b]])  # sampling order kept


def test_sample_valid_with_no_valid_hand_signals_instead_of_crashing():
    game = CONFIGS["p2_c2_r3_h3"]
    st = played_states(game, seed=5)
    cons = hand_constraints(game, st, 0)
    cons = HandConstraints(
        torch.zeros_like(cons.unseen), cons.color_plausible, cons.rank_plausible, cons.hand_len
    )
    model = tiny_model(game, 1)
    context = torch.randn(st.batch_size, model.context_dim)
    res = sample_valid(model, context, 16, torch.arange(st.batch_size), cons, min_valid=1, guided=True)
    assert not res.valid.any() and (res.num_valid == 0).all() and not res.enough.any()
    assert (res.acceptance == 0).all()
    assert sample_valid(model, context, 4, torch.arange(st.batch_size), cons, min_valid=0).enough.all()
    with pytest.raises(ValueError, match="min_valid"):
        sample_valid(model, context, 4, torch.arange(st.batch_size), cons, min_valid=-1)
    with pytest.raises(ValueError, match="same number of queries"):
        sample_valid(model, context[:3], 4, torch.arange(3), cons)


@pytest.mark.parametrize("game", **PARAMS)
def test_guided_sampling_respects_the_mask(game):
    st = played_states(game, seed=6)
    cons = hand_constraints(game, st, st.cur_player)
    model = tiny_model(game, 2)
    q, k = st.batch_size, 32
    context = torch.randn(q, model.context_dim)
    seeds = torch.arange(q) + 5
    everything = torch.ones_like(cons.color_plausible), torch.ones_like(cons.rank_plausible)
    many = torch.full_like(cons.unseen, game.hand_size)
    hint_only = model.sample(context, k, seeds, cons.hand_len, allowed_cards_fn(game, cons, counts=False))
    assert valid_hands(game, hint_only, many, cons.color_plausible, cons.rank_plausible, cons.hand_len).all()
    count_only = model.sample(context, k, seeds, cons.hand_len, allowed_cards_fn(game, cons, hints=False))
    assert valid_hands(game, count_only, cons.unseen, *everything, cons.hand_len).all()
    plain = sample_valid(model, context, k, seeds, cons)
    guided = sample_valid(model, context, k, seeds, cons, guided=True)
    assert float(guided.acceptance.mean()) > max(0.9, float(plain.acceptance.mean()))
