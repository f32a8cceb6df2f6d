"""SPARTA's exact range against a brute-force posterior, on tiny variants.

The reference conditions on everything by enumerating every distinct deck order of the game (each is
equally likely), replaying the real moves on all of them and keeping the decks under which the
searcher sees exactly what it saw and every partner's blueprint (run whole, with its own recurrent
state per deck) makes the moves it made. The posterior of an own hand is then its share of the kept
decks: no hand enumeration, no counting formula, no public-state shortcut in common with the range.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch
from conftest import DEVICES

from lbs.acting import Turn, greedy, legal_with_noop, play
from lbs.hanabi import GameConfig, encode, engine, public_features
from lbs.hanabi.state import HanabiState
from lbs.infer import InferenceServer, QNetHandle
from lbs.models import FixedQNet, NetConfig, card_facts, make_qnet
from lbs.search.exact_range import ExactRange
from lbs.search.range_filter import Q_TOL, CandidatePolicy

TINY = {
    "p2_c2_r2_h2": GameConfig(players=2, colors=2, ranks=2, hand_size=2),
    "p3_c1_r3_h2": GameConfig(players=3, colors=1, ranks=3, hand_size=2),
    "p3_c2_r2_h2": GameConfig(players=3, colors=2, ranks=2, hand_size=2),
    "p4_c1_r3_h1": GameConfig(players=4, colors=1, ranks=3, hand_size=1),
}
pytestmark = pytest.mark.usefixtures("one_thread")


def blueprint(game: GameConfig, device: str = "cpu", **facts: bool) -> torch.nn.Module:
    """A small random public-LSTM net: its moves depend on the cards it sees (facts: NetConfig.counting,
    NetConfig.hint_facts, so also on what those compute from them). A policy network's logits are spread as
    a trained one's are (gaps of units, not of the random layer's hundredths, which the filter's tolerance
    would count as ties)."""
    torch.manual_seed(1)
    cfg = NetConfig(hidden=16, lstm_layers=1, mlp_layers=2, **facts)
    net = make_qnet(game, cfg)
    if net.policy is not None:
        with torch.no_grad():
            net.policy.head.adv.weight.mul_(30)
    return net.to(device).eval()


def served(net: torch.nn.Module, device: str = "cpu") -> QNetHandle:
    """The blueprint as the range calls it: through an inference server on the games' device."""
    return InferenceServer(net, device).qnet()


def play_games(game: GameConfig, net, n: int, seed: int, device: str = "cpu") -> list[Turn]:
    """n greedy blueprint games, every turn recorded."""
    turns: list[Turn] = []
    state = engine.reset(game, torch.arange(n, device=device) + 1000 * seed)

    def q_fn(priv, publ, legal, hid):
        return net.step(priv, publ, legal, hid)

    with torch.no_grad():
        hid = net.initial_state(n * game.players, device)
        play(game, state, q_fn, hid, game.max_steps, hook=turns.append)
    return turns


def game_of(state: HanabiState, g: int) -> HanabiState:
    """Game g alone, on the CPU (the references are plain CPU code)."""
    return state.index(torch.tensor([g], device=state.device)).to("cpu")


def range_dict(rng: ExactRange, g: int) -> dict[tuple[int, ...], float]:
    hands, game, prob = rng.probabilities()
    rows = (game == g).nonzero().flatten().tolist()
    return {tuple(hands[i].tolist()): float(prob[i]) for i in rows}


# ---- the brute-force reference ---------------------------------------------------------------------
def all_decks(game: GameConfig) -> torch.Tensor:
    """[D, N] every distinct deck order."""
    cards = [c for c, n in enumerate(game.card_counts) for _ in range(n)]
    return torch.tensor(sorted(set(itertools.permutations(cards))))


class DeckReference:
    """One game's posterior over the searcher's hand by brute force over every deck order."""

    def __init__(self, game: GameConfig, net, seat: int, real: HanabiState, decks: torch.Tensor):
        self.game, self.net, self.seat = game, net, seat
        self.state = engine.initial_state(game, decks)
        self.hid = net.initial_state(decks.shape[0] * game.players)
        self.alive = torch.ones(decks.shape[0], dtype=torch.bool)
        self._see(real)

    def _see(self, real: HanabiState) -> None:
        me = torch.full((self.state.batch_size, 1), self.seat)
        mine = encode(self.game, self.state, observers=me)[:, 0]
        seen = encode(self.game, real, observers=me[:1])[:, 0]
        self.alive &= (mine == seen).all(1)

    def step(self, real_before: HanabiState, move: int, real_after: HanabiState) -> None:
        game, d, p = self.game, self.state.batch_size, self.game.players
        obs = encode(game, self.state).reshape(d * p, -1)
        legal = legal_with_noop(game, self.state)
        q, self.hid = self.net.step(obs, public_features(game, obs), legal.reshape(d * p, -1), self.hid)
        mover = int(real_before.cur_player[0])
        if mover != self.seat:
            qm = q.view(d, p, -1)[:, mover].masked_fill(~legal[:, mover], float("-inf"))
            best = qm.max(1).values
            self.alive &= legal[:, mover, move] & (qm[:, move] >= best - Q_TOL * (1 + best.abs()))
        self.state = engine.step(game, self.state, torch.full((d,), move))[0]
        self._see(real_after)

    def posterior(self) -> dict[tuple[int, ...], float]:
        hands = self.state.hands[self.alive, self.seat]
        counts = Counter(tuple(h) for h in hands.tolist())
        total = sum(counts.values())
        return {h: c / total for h, c in counts.items()}


def assert_same(got: dict, want: dict, where: str) -> None:
    assert set(got) == set(want), f"{where}: range {sorted(got)} != reference {sorted(want)}"
    for h, p in want.items():
        assert got[h] == pytest.approx(p, rel=1e-9, abs=1e-12), f"{where}: hand {h}"


# ---- tests -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("every,chunk", [(1, None), (3, None), (1, 2)])
@pytest.mark.parametrize("name", sorted(TINY))
def test_range_equals_brute_force_posterior(name: str, every: int, chunk: int | None, device: str) -> None:
    """every=3 compares only every third move, so partner filters stay pending across own plays; chunk=2
    works the range two rows at a time (a memory cap: the same range)."""
    check_range(name, every, chunk, {}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["p2_c2_r2_h2", "p3_c2_r2_h2", "p4_c1_r3_h1"])
def test_range_of_a_counting_blueprint_equals_brute_force_posterior(name: str, device: str) -> None:
    """A blueprint that reads the card-count facts: the filter's per-card terms and own-slot ratios keep the
    range the posterior. (On p3_c1_r3_h2 this random net's moves never depend on the searcher's cards, so
    that game would check nothing.)"""
    check_range(name, 1, None, {"counting": True}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["p2_c2_r2_h2", "p3_c2_r2_h2"])
def test_range_of_a_hint_facts_blueprint_equals_brute_force_posterior(name: str, device: str) -> None:
    """A blueprint that also reads the hint facts (what each hint it could give would show): the filter's
    per-candidate hint terms keep the range the posterior."""
    check_range(name, 1, None, {"counting": True, "hint_facts": True}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["p2_c2_r2_h2", "p3_c2_r2_h2"])
def test_range_of_a_discard_facts_blueprint_equals_brute_force_posterior(name: str, device: str) -> None:
    """A blueprint that also reads every player's next discard and the facts of the cards there: the
    filter's term for the searcher's next-discard card keeps the range the posterior."""
    check_range(name, 1, None, {"counting": True, "hint_facts": True, "discard_facts": True}, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["p2_c2_r2_h2", "p3_c2_r2_h2"])
def test_range_of_a_policy_network_blueprint_equals_brute_force_posterior(name: str, device: str) -> None:
    """A blueprint whose moves are its policy network's (NetConfig.policy_net, HeldQNet): the filter's
    first-layer path reads the policy, and the range stays the posterior of the moves its step makes."""
    check_range(name, 1, None, {"counting": True, "policy_net": True}, device)


def check_range(name: str, every: int, chunk: int | None, facts: dict[str, bool], device: str) -> None:
    """The range of each seat against the brute-force posterior of 6 greedy games, every `every` moves."""
    game = TINY[name]
    net = blueprint(game, device, **facts)
    ref_net = blueprint(game, **facts)
    n = 6
    turns = play_games(game, net, n, seed=3, device=device)
    decks = all_decks(game)
    filtered = 0
    for seat in range(game.players):
        rng = ExactRange(game, served(net, device), seat, checked=True, chunk=chunk)
        rng.reset(turns[0].state)
        refs = [DeckReference(game, ref_net, seat, game_of(turns[0].state, g), decks) for g in range(n)]
        for t, turn in enumerate(turns):
            rng.update(turn.state, turn.move, turn.next_state)
            for g in range(n):
                if bool(turn.state.done[g]):
                    continue
                before, after = (game_of(s, g) for s in (turn.state, turn.next_state))
                refs[g].step(before, int(turn.move[g]), after)
                want = refs[g].posterior()
                filtered += len(want) < len(counting_posterior(game, after, seat))
                if t % every == every - 1 or t == len(turns) - 1 or bool(turn.next_state.done[g]):
                    assert_same(range_dict(rng, g), want, f"{name} seat {seat} game {g} after move {t}")
    assert filtered > 0, "the partner filter never removed a hand: the test would not see it"


def counting_posterior(game: GameConfig, state: HanabiState, seat: int) -> dict[tuple[int, ...], float]:
    """Counting alone, plainly: every own hand that fits the hints, weighted by the ways to draw it."""
    hands = state.hands[0]
    seen = Counter(c for p in range(game.players) if p != seat for c in hands[p].tolist() if c >= 0)
    left = [game.card_counts[c] - int(state.discards[0, c]) - seen[c]
            - int(c % game.ranks < int(state.fireworks[0, c // game.ranks])) for c in range(game.card_types)]
    n = int((hands[seat] >= 0).sum())
    out = {}
    for hand in itertools.product(range(game.card_types), repeat=n):
        ok = all(bool(state.color_plausible[0, seat, s, c // game.ranks])
                 and bool(state.rank_plausible[0, seat, s, c % game.ranks]) for s, c in enumerate(hand))
        ways = math.prod(left[c] - hand[:s].count(c) for s, c in enumerate(hand))
        if ok and ways > 0:
            out[hand + (-1,) * (game.hand_size - n)] = ways
    total = sum(out.values())
    return {h: w / total for h, w in out.items()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["p2_c2_r2_h2", "p3_c1_r3_h2"])
def test_hand_blind_blueprint_leaves_counting(name: str, device: str) -> None:
    game = TINY[name]
    net = FixedQNet(game, order=[game.hand_size]).to(device)  # always plays slot 0: ignores every hand
    turns = play_games(game, net, 8, seed=5, device=device)
    rng = ExactRange(game, served(net, device), 1, checked=True)
    rng.reset(turns[0].state)
    for turn in turns:
        rng.update(turn.state, turn.move, turn.next_state)
        for g in range(8):
            want = counting_posterior(game, game_of(turn.next_state, g), 1)
            assert_same(range_dict(rng, g), want, f"game {g}")


@pytest.mark.parametrize("device", DEVICES)
def test_samples_follow_probabilities(device: str) -> None:
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=2)
    net = blueprint(game, device)
    turns = play_games(game, net, 3, seed=7, device=device)
    rng = ExactRange(game, served(net, device), 0, checked=True)
    rng.reset(turns[0].state)
    for turn in turns[:2]:
        rng.update(turn.state, turn.move, turn.next_state)
    k = 20000
    keys = torch.tensor([11, 12, 13], device=device)
    s = rng.sample(k, keys)
    assert s.hands.shape == (3, k, game.hand_size) and bool(s.valid.all())
    assert torch.equal(s.hands, rng.sample(k, keys).hands)  # hashed counters: reproducible
    for g in range(3):
        probs = range_dict(rng, g)
        assert len(probs) > 3
        counts = Counter(tuple(h) for h in s.hands[g].tolist())
        assert set(counts) <= set(probs)
        chi2 = sum((counts.get(h, 0) - k * p) ** 2 / (k * p) for h, p in probs.items())
        df = len(probs) - 1
        assert chi2 < df + 8 * math.sqrt(2 * df), f"game {g}: chi2 {chi2:.1f} with {df} dof"


def test_samples_same_on_every_device() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    game = TINY["p2_c2_r2_h2"]
    out = []
    for device in ("cpu", "cuda"):
        net = blueprint(game, device)
        turns = play_games(game, net, 4, seed=9, device=device)
        rng = ExactRange(game, served(net, device), 1)
        rng.reset(turns[0].state)
        for turn in turns[:3]:
            rng.update(turn.state, turn.move, turn.next_state)
        out.append(rng.sample(64, torch.arange(4, device=device)).hands.cpu())
    assert torch.equal(out[0], out[1])


def test_max_range_and_untracked_games() -> None:
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
    net = blueprint(game)
    turns = play_games(game, net, 2, seed=1)
    full = ExactRange(game, served(net), 0)
    full.reset(turns[0].state)
    size = full.size()
    assert bool((size > 1).all())
    capped = ExactRange(game, served(net), 0, max_range=int(size.min()) - 1)
    capped.reset(turns[0].state)
    assert torch.equal(capped.size(), size)  # still tracked, and drawn from by rejection
    assert bool(capped.sample(4, torch.arange(2)).valid.all())
    untracked = ExactRange(game, served(net), 0, max_enum=2)
    untracked.reset(turns[0].state)
    for turn in turns:
        untracked.update(turn.state, turn.move, turn.next_state)
    s = untracked.sample(4, torch.arange(2))
    assert torch.equal(untracked.size(), torch.full((2,), -1)) and not bool(s.valid.any())
    assert bool((s.hands == -1).all())


def test_draws_above_max_range_are_posterior_draws() -> None:
    """A range above max_range keeps its partner filters pending and draws by rejection: every valid draw is
    a hand of the filtered range, and the draws' frequencies match its probabilities."""
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3)
    net = blueprint(game)
    turns = play_games(game, net, 2, seed=3)
    exact, capped = ExactRange(game, served(net), 1), ExactRange(game, served(net), 1, max_range=1)
    for rng in (exact, capped):
        rng.reset(turns[0].state)
        for turn in turns[:5]:
            rng.update(turn.state, turn.move, turn.next_state)
    hands, game_of, prob = exact.probabilities()
    assert capped.pending and bool((capped.rows() > exact.rows()).any())  # filters wait: rejection
    k = 4000
    drawn = capped.sample(k, torch.arange(2))
    assert capped.pending  # drawing ran the filters on the draws only
    for g in range(2):
        want = {tuple(h.tolist()): float(p) for h, p, gg in zip(hands, prob, game_of, strict=True) if gg == g}
        got = [tuple(h.tolist()) for h, ok in zip(drawn.hands[g], drawn.valid[g], strict=True) if ok]
        assert len(got) > k // 2 and set(got) <= set(want)
        freq = {h: got.count(h) / len(got) for h in set(got)}
        tv = 0.5 * sum(abs(freq.get(h, 0.0) - p) for h, p in want.items())
        assert tv < 0.06, (g, tv, len(want))


@pytest.mark.parametrize("counting,hint_facts,discard_facts", [(False, False, False), (True, False, False),
                                                               (True, True, False), (True, True, True),
                                                               (False, False, True)])
def test_fast_first_layer_equals_full_network(counting: bool, hint_facts: bool, discard_facts: bool) -> None:
    """The per-(slot, card) first-layer sum gives the network's own Q for the true hand (full game), also
    for a network reading the card-count facts (their terms per candidate card, the own slots' ratios), the
    hint facts (the searcher's slot knowledge shared, the candidate's touched slots read) and the discard
    facts (the candidate's card in the searcher's public next-discard slot)."""
    game = GameConfig(players=3)
    torch.manual_seed(0)
    cfg = NetConfig(hidden=32, lstm_layers=1, mlp_layers=2, counting=counting, hint_facts=hint_facts,
                    discard_facts=discard_facts)
    net = make_qnet(game, cfg).eval()
    policy, got, want = true_hand_q(game, net)
    assert policy.fast
    assert (policy.counting, policy.hints, policy.discards) == (counting, hint_facts, discard_facts)
    torch.testing.assert_close(got - got[:, :1], want - want[:, :1], rtol=1e-5, atol=1e-5)


def true_hand_q(game: GameConfig, net, seat: int = 0) -> tuple[CandidatePolicy, torch.Tensor, torch.Tensor]:
    """(the filter, its Q for the searcher's true hand, the network's own Q) at the partners' moves of a few
    games after four random moves: the fast path gives the dueling head's advantages, Q up to a per-row
    constant."""
    state = engine.reset(game, torch.arange(6))
    for t in range(4):
        state = engine.step(game, state, engine.random_moves(game, state, torch.arange(6) + t))[0]
    policy = CandidatePolicy(game, served(net), seat)
    g, p = state.batch_size, game.players
    obs = encode(game, state).reshape(g * p, -1)
    legal = legal_with_noop(game, state).reshape(g * p, -1)
    with torch.no_grad():
        publ_out, _ = net.public_out(public_features(game, obs), net.initial_state(g * p))
        q_full = net.q_from_public(obs, publ_out, legal).view(g, p, -1)
        pick = torch.arange(g) * p + state.cur_player
        view = policy.view(obs[pick], publ_out[pick], legal[pick], state.cur_player, state.info_tokens,
                           greedy(q_full[torch.arange(g), state.cur_player], legal[pick]))
        q, leg = policy.q(view, state.hands[:, seat], torch.arange(g))
    partner = (state.cur_player != seat) & ~state.done
    assert int(partner.sum()) >= 4
    assert torch.equal(leg[partner], legal[pick][partner])
    return policy, q[partner], q_full[torch.arange(g), state.cur_player][partner]


def test_a_new_family_of_facts_enters_by_name_and_the_filter_still_holds(monkeypatch) -> None:
    """A family of facts added to card_facts.FAMILIES alone (here: how many playable cards each partner holds,
    read from the cards the mover sees) takes its named place in the network's input, and SPARTA's filter,
    which adds no terms for it, runs the network's whole private pass per candidate: still the network's own
    Q for the true hand."""
    game = GameConfig(players=3)

    def playable_held(game: GameConfig, obs: torch.Tensor, bd: card_facts.Board) -> torch.Tensor:
        cards = game.layout.view(obs, "hands.cards").float()
        cards = cards.reshape(*obs.shape[:-1], game.players - 1, game.hand_size, game.card_types)
        return (cards * bd.status[..., None, None, :, 0]).sum((-2, -1))  # [..., P-1]

    family = card_facts.Family("counting", lambda g: (("held.playable", g.players - 1),), playable_held)
    monkeypatch.setattr(card_facts, "FAMILIES", (*card_facts.FAMILIES, family))
    torch.manual_seed(0)
    net = make_qnet(game, NetConfig(hidden=32, lstm_layers=1, mlp_layers=2, counting=True)).eval()
    assert net.input_layout.slices["held.playable"] == slice(net.private_in - 2, net.private_in)
    assert net.input_layout.slices["counts.own"].start == game.obs_dim + card_facts.public_dim(game)
    policy, got, want = true_hand_q(game, net)
    assert not policy.fast
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
