"""MO-ISMCTS and RIS-MCTS: the batched trees equal a plain per-game reference move for move, determinizations
draw exactly the information set's posterior and never read the hidden cards, and EXITNODE keeps every card's
copies."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from lbs.acting import StatePolicy, play
from lbs.belief import constraints
from lbs.belief.sampling import valid_hands
from lbs.bots import SmartBot
from lbs.hanabi import GameConfig, encode, engine
from lbs.hanabi.config import DISCARD, PLAY
from lbs.hanabi.rng import hash_keys, uniform
from lbs.hanabi.state import HanabiState
from lbs.search import mcts
from lbs.search.mcts import ACCEPT, DECK, DRAW, EXPAND, FALLBACK, REDRAW, ROLLOUT, BlueprintPolicy, MctsConfig
from lbs.search.mcts_value import EvalFn
from lbs.seeding import Stream, game_seeds

GAME2 = GameConfig(players=2, colors=2, ranks=3, hand_size=3, bomb_zero=False)
GAME3 = GameConfig(players=3, colors=2, ranks=3, hand_size=2, bomb_zero=False)
pytestmark = pytest.mark.usefixtures("one_thread")


def roots(game: GameConfig, games: int, steps: int, seed: int = 0) -> HanabiState:
    """Games after `steps` random moves (some may be over)."""
    state = engine.reset(game, game_seeds(Stream.EVAL, seed, games))
    for t in range(steps):
        moves = mcts.random_legal(engine.legal_moves(game, state), uniform(torch.arange(games), seed, t))
        state, _, _ = engine.step(game, state, moves)
    return state


# ---- a plain per-game reference: Python lists and dicts, one game at a time -------------------------------
def _h(*parts) -> int:
    return int(hash_keys(*[torch.tensor(p) for p in parts]))


def _u(*parts) -> float:
    return float(uniform(*[torch.tensor(p) for p in parts]))


def ref_draw(game: GameConfig, s: HanabiState, player: int, key: int, k: int) -> list[int] | None:
    """The rejection draw of mcts.draw_hands, written out for one game."""
    t, r = game.card_types, game.ranks
    unseen = engine.unseen_counts(game, s, torch.tensor([player]))[0].tolist()
    cp, rp = s.color_plausible[0, player].tolist(), s.rank_plausible[0, player].tolist()
    held = [c >= 0 for c in s.hands[0, player].tolist()]
    first_fit = None
    for cand in range(k):
        left, hand, pz, pm, fits = list(unseen), [-1] * game.hand_size, 1, 1, True
        for slot in range(game.hand_size):
            if not held[slot]:
                continue
            allowed = [cp[slot][c // r] and rp[slot][c % r] for c in range(t)]
            w = [left[c] if allowed[c] else 0 for c in range(t)]
            z, zmax = sum(w), sum(unseen[c] for c in range(t) if allowed[c])
            pz, pm = pz * z, pm * zmax
            if z == 0:
                fits = False
                continue
            thr, acc = math.floor(_u(key, DRAW, cand, slot) * z), 0
            for c in range(t):
                acc += w[c]
                if acc > thr:
                    hand[slot] = c
                    left[c] -= 1
                    break
        if fits and math.floor(_u(key, ACCEPT, cand) * pm) < pz:
            return hand
        if fits and first_fit is None:
            first_fit = hand
    return first_fit if first_fit is not None else ref_fallback(game, s, player, key)


def _can_fill(allowed: list[list[bool]], slots: list[int], left: list[int]) -> bool:
    """Whether the slots can take distinct copies of `left`, each a card it allows (plain backtracking)."""
    if not slots:
        return True
    for c, n in enumerate(left):
        if n and allowed[slots[0]][c]:
            left[c] -= 1
            ok = _can_fill(allowed, slots[1:], left)
            left[c] += 1
            if ok:
                return True
    return False


def ref_fallback(game: GameConfig, s: HanabiState, player: int, key: int) -> list[int] | None:
    """mcts._fallback_hand for one game: slot by slot, weight allowed x copies left among the cards after
    which the later slots can still be filled; None where no hand fits at all."""
    t, r = game.card_types, game.ranks
    left = engine.unseen_counts(game, s, torch.tensor([player]))[0].tolist()
    cp, rp = s.color_plausible[0, player].tolist(), s.rank_plausible[0, player].tolist()
    allowed = [[bool(cp[j][c // r] and rp[j][c % r]) for c in range(t)] for j in range(game.hand_size)]
    slots = [j for j, c in enumerate(s.hands[0, player].tolist()) if c >= 0]
    if not _can_fill(allowed, slots, list(left)):
        return None
    hand = [-1] * game.hand_size
    for i, slot in enumerate(slots):
        w = []
        for c in range(t):
            left[c] -= 1
            ok = left[c] >= 0 and allowed[slot][c] and _can_fill(allowed, slots[i + 1:], left)
            left[c] += 1
            w.append(left[c] if ok else 0)
        thr, acc = math.floor(_u(key, FALLBACK, slot) * sum(w)), 0
        for c in range(t):
            acc += w[c]
            if acc > thr:
                hand[slot] = c
                left[c] -= 1
                break
    return hand


def ref_determinize(game: GameConfig, s: HanabiState, player: int, key: int, k: int) -> HanabiState:
    hand = ref_draw(game, s, player, key, k)
    if hand is None:
        return s
    seed = torch.tensor([_h(key, DECK)])
    return engine.set_hand(game, s, torch.tensor([player]), torch.tensor([hand]), seed)


def ref_restore(game: GameConfig, saved: HanabiState, after: HanabiState) -> HanabiState:
    """EXITNODE for one game, with lists."""
    n, h = game.num_cards, game.hand_size
    mover = int(saved.cur_player[0])
    hand, deck = saved.hands[0, mover].tolist(), saved.deck[0].tolist()
    kind, slot = game.move_table[int(after.last_move[0])][:2]
    if kind in (DISCARD, PLAY):
        x, y = int(after.last_card[0]), hand[slot]
        kept = [c for c in hand if c >= 0]
        del kept[slot]
        if int(saved.deck_pos[0]) < n:
            kept.append(deck[int(saved.deck_pos[0])])
        hand = kept + [-1] * (h - len(kept))
        if x != y:
            at = [j for j in range(int(after.deck_pos[0]), n) if deck[j] == x]
            if at:
                deck[at[0]] = y
            else:
                hand[hand.index(x)] = y
    hands = after.hands.clone()
    hands[0, mover] = torch.tensor(hand)
    return after.replace(hands=hands, deck=torch.tensor([deck]))


def ref_search(game: GameConfig, root: HanabiState, cfg: MctsConfig, key: int,
               evaluate=None) -> tuple[list[int], list[float]]:
    """(visits, value sums) of the root's children, by the paper's loop over one game's dict tree; with
    `evaluate` (one game's state -> [1, M] values) the paper's NR leaf: every untried move a child with one
    visit and its value, the best legal value backed up, no simulation."""
    searcher, m = int(root.cur_player[0]), game.num_moves
    children: list[dict[int, int]] = [{}]
    visits, value = [0], [0.0]
    for it in range(cfg.iterations):
        s = ref_determinize(game, root, searcher, _h(key, it, REDRAW, 0), cfg.candidates)
        node, path, depth, leaf = 0, [0], 0, None
        while not bool(s.done[0]) and (not cfg.tree_depth or depth < cfg.tree_depth):
            depth += 1
            saved, mover = s, int(s.cur_player[0])
            enter = cfg.mode == "ris-mcts" and mover != searcher
            if enter:
                s = ref_determinize(game, s, mover, _h(key, it, REDRAW, depth), cfg.candidates)
            legal = engine.legal_moves(game, s)[0].nonzero().flatten().tolist()
            untried = [a for a in legal if a not in children[node]]
            if untried and evaluate is not None:
                q = evaluate(s)[0].tolist()
                for a in untried:
                    children.append({})
                    visits.append(1)
                    value.append(q[a])
                    children[node][a] = len(children) - 1
                leaf = max(q[a] for a in legal)
                break
            if untried:
                move = max(untried, key=lambda a, d=depth, i=it: _h(key, i, EXPAND, d, a))
            else:
                big_n, best, move = visits[node], -math.inf, -1
                for a in legal:
                    c = children[node][a]
                    score = value[c] / visits[c] + cfg.exploration * math.sqrt(math.log(big_n) / visits[c])
                    if score > best:
                        best, move = score, a
            s, _, _ = engine.step(game, s, torch.tensor([move]))
            if enter and not untried:
                s = ref_restore(game, saved, s)
            if untried:
                children.append({})
                visits.append(0)
                value.append(0.0)
                children[node][move] = len(children) - 1
                path.append(len(children) - 1)
                break
            node = children[node][move]
            path.append(node)
        seed, t = _h(key, it, ROLLOUT), 0
        while evaluate is None and not bool(s.done[0]) and (not cfg.rollout_depth or t < cfg.rollout_depth):
            legal = engine.legal_moves(game, s)[0].nonzero().flatten().tolist()
            move = legal[math.floor(_u(seed, t) * len(legal))]
            s, _, _ = engine.step(game, s, torch.tensor([move]))
            t += 1
        score = int(s.fireworks.sum()) / game.max_score if leaf is None else leaf
        for nd in path:
            visits[nd] += 1
            value[nd] += score
    kids = children[0]
    return [visits[kids[a]] if a in kids else 0 for a in range(m)], [value[kids[a]] if a in kids else 0.0
                                                                       for a in range(m)]


# ---- the tests --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
@pytest.mark.parametrize("mode", ["mo-ismcts", "ris-mcts"])
@pytest.mark.parametrize("cut", [(0, 0), (3, 2)], ids=["whole", "cut"])
def test_batched_trees_equal_the_per_game_reference(game, mode, cut):
    """Also with the paper's code's cuts (cut: simulations of 3 moves, no node below depth 2)."""
    cfg = MctsConfig(mode=mode, iterations=30, candidates=8, rollout_depth=cut[0], tree_depth=cut[1])
    state = roots(game, 7, 5, seed=1)
    live = (~state.done).nonzero().squeeze(1)
    state = state.index(live)
    keys = torch.arange(state.batch_size) * 7 + 3
    res = mcts.search(game, state, cfg, keys)
    assert res.stats.kept == 0 and res.stats.draws > cfg.iterations * state.batch_size * (mode == "ris-mcts")
    assert (res.stats.exits > 0) == (mode == "ris-mcts")  # walks left re-determinized nodes (EXITNODE ran)
    for g in range(state.batch_size):
        v, w = ref_search(game, state.index(torch.tensor([g])), cfg, int(keys[g]))
        assert res.visits[g].tolist() == v
        assert torch.allclose(res.value[g], torch.tensor(w, dtype=torch.float64), rtol=0, atol=1e-12)
        tried = [a for a in range(game.num_moves) if v[a]]
        best = max(tried, key=lambda a: (w[a] / v[a], v[a], -a))
        assert int(res.move[g]) == best
    assert res.visits.sum(1).eq(cfg.iterations).all()
    if cfg.tree_depth:  # the trees grew to the limit and no further
        assert max(res.stats.depth) == cfg.tree_depth
        whole = mcts.search(game, state, MctsConfig(mode=mode, iterations=30, candidates=8), keys)
        assert not torch.equal(whole.value, res.value)  # and the cuts changed what the simulations scored
    else:
        assert max(res.stats.depth) >= 2  # the trees grew below the root's children


def leaf_values(game: GameConfig, seed: int = 0):
    """An evaluation function with random weights: any function of the mover's observation will do (in
    float64, so a batch and one row give the same values)."""
    torch.manual_seed(seed)
    return EvalFn(game, 16).double().leaf_values


@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
@pytest.mark.parametrize("mode", ["mo-ismcts", "ris-mcts"])
def test_valued_leaves_equal_the_per_game_reference(game, mode):
    """RIS-MCTS-NR's trees (every untried move of a leaf valued at once, the best backed up, no simulation)
    equal the per-game reference visit for visit, and grow deeper than one level."""
    cfg = MctsConfig(mode=mode, iterations=25, candidates=8)
    state = roots(game, 7, 5, seed=2)
    state = state.index((~state.done).nonzero().squeeze(1))
    keys = torch.arange(state.batch_size) * 5 + 1
    evaluate = leaf_values(game)
    res = mcts.search(game, state, cfg, keys, evaluate=evaluate)
    for g in range(state.batch_size):
        v, w = ref_search(game, state.index(torch.tensor([g])), cfg, int(keys[g]), evaluate)
        assert res.visits[g].tolist() == v
        assert torch.allclose(res.value[g], torch.tensor(w, dtype=torch.float64), rtol=0, atol=1e-9)
    legal = engine.legal_moves(game, state)
    assert torch.equal(res.visits > 0, legal)  # the first iteration valued every root move
    assert res.visits.sum(1).eq(cfg.iterations - 1 + legal.sum(1)).all()
    assert max(res.stats.depth) >= 3


def test_one_valued_iteration_plays_the_function_greedily():
    game = GAME3
    state = roots(game, 12, 4, seed=5)
    state = state.index((~state.done).nonzero().squeeze(1))
    evaluate = leaf_values(game, 3)
    keys = torch.arange(state.batch_size)
    res = mcts.search(game, state, MctsConfig(iterations=1), keys, evaluate=evaluate)
    q = evaluate(state)
    assert torch.equal(res.move, torch.where(engine.legal_moves(game, state), q, -math.inf).argmax(1))
    with pytest.raises(ValueError, match="no simulation"):
        mcts.search(game, state, MctsConfig(iterations=1), keys, BlueprintPolicy(SmartBot(game).step, None),
                    evaluate)


def test_the_same_keys_give_the_same_search_at_any_batch_size_with_a_blueprint_simulation():
    game = GAME3
    bot = SmartBot(game)
    state = engine.reset(game, game_seeds(Stream.EVAL, 4, 5))
    state, hid = play(game, state, bot.step, bot.initial_state(5 * game.players), 3)
    cfg = MctsConfig(mode="ris-mcts", iterations=12)
    keys = torch.arange(5) + 11
    live = (~state.done).nonzero().squeeze(1)
    whole = mcts.search(game, state, cfg, keys, BlueprintPolicy(bot.step, hid))
    for g in live.tolist():
        rows = torch.arange(g * game.players, (g + 1) * game.players)
        one = mcts.search(game, state.index(torch.tensor([g])), cfg, keys[g:g + 1],
                          BlueprintPolicy(bot.step, type(hid)(*(x.index_select(0, rows) for x in hid))))
        assert torch.equal(one.visits[0], whole.visits[g]) and torch.equal(one.value[0], whole.value[g])
    # reading the engine state (SmartBot.act) instead of every seat's view: the same trees
    state_read = mcts.search(game, state, cfg, keys, BlueprintPolicy(StatePolicy(bot.act), hid))
    assert torch.equal(state_read.visits, whole.visits) and torch.equal(state_read.value, whole.value)


def _valid(game: GameConfig, state: HanabiState, player: torch.Tensor, hands: torch.Tensor) -> torch.Tensor:
    cons = constraints.from_state(game, state, player)
    return valid_hands(game, hands[:, None], cons.unseen, cons.color_plausible, cons.rank_plausible,
                       cons.hand_len)[:, 0]


def _posterior(game: GameConfig, one: HanabiState, player: int) -> dict[tuple, int]:
    """Every hand the player's hints and counts allow in one game, with its counting weight."""
    cons = constraints.from_state(game, one, player)
    length = int(cons.hand_len[0])
    exact = {}
    for combo in itertools.product(range(game.card_types), repeat=length):
        hand = torch.tensor(list(combo) + [-1] * (game.hand_size - length))
        if _valid(game, one, torch.tensor([player]), hand[None])[0]:
            left, w = cons.unseen[0].tolist(), 1
            for c in combo:
                w, left[c] = w * left[c], left[c] - 1
            exact[tuple(hand.tolist())] = w
    return exact


@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
def test_drawn_hands_fit_the_information_set_and_follow_its_exact_posterior(game):
    state = roots(game, 40, 6, seed=2)
    for player in range(game.players):
        who = torch.full((40,), player)
        keys = torch.arange(40) + 100 * player
        hands, accepted, fits, possible = mcts.draw_hands(game, state, who, keys, 8)
        assert fits.all() and possible.all() and accepted.float().mean() > 0.5
        assert _valid(game, state, who, hands).all()
    # one game, many draws: frequencies match the counting weights of every hand the hints allow
    early, player, n = roots(game, 20, 3, seed=2), 1, 20_000
    known = early.color_plausible[:, player].all((1, 2)) & early.rank_plausible[:, player].all((1, 2))
    hinted = (~early.done & ~known).nonzero().squeeze(1).tolist()
    games = [early.index(torch.tensor([g])) for g in hinted]
    one, exact = max(((s, _posterior(game, s, player)) for s in games), key=lambda x: len(x[1]))
    who = torch.full((n,), player)
    hands, accepted, _, _ = mcts.draw_hands(game, one.replicate(n), who, torch.arange(n), 16)
    assert accepted.all()
    total = sum(exact.values())
    seen: dict[tuple, int] = {}
    for row in hands.tolist():
        seen[tuple(row)] = seen.get(tuple(row), 0) + 1
    assert set(seen) <= set(exact) and len(exact) > 3
    for hand, w in exact.items():
        p = w / total
        assert abs(seen.get(hand, 0) / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-9


@pytest.mark.parametrize("game", [GAME2, GAME3, GameConfig(players=4)], ids=["p2", "p3", "full_p4"])
def test_later_proposals_made_only_where_the_first_were_refused_draw_the_same_hands(game, monkeypatch):
    """On the CPU draw_hands proposes FIRST_PROPOSALS hands per row, then the rest only for the rows none of
    those was accepted in: the same hands and flags as every proposal for every row at once."""
    state = roots(game, 64, 8, seed=5)
    who = state.cur_player.clone()
    keys = torch.arange(64) + 7
    out = {}
    for first in (1, 2, 16):
        monkeypatch.setattr(mcts, "FIRST_PROPOSALS", first)
        out[first] = mcts.draw_hands(game, state, who, keys, 16)
    for first in (1, 2):
        for x, y in zip(out[first], out[16], strict=True):
            assert torch.equal(x, y)
    only_first, *_ = mcts.draw_hands(game, state, who, keys, 1)
    assert (only_first != out[16][0]).any(1).any()  # some rows took a later proposal


def _swap_hidden(game: GameConfig, state: HanabiState, player: torch.Tensor, key: int) -> HanabiState:
    """The same games with `player` holding another hand that fits everything it observed (and a reshuffled
    deck): what it sees is unchanged, its hidden cards are not."""
    hands, _, _, possible = mcts.draw_hands(game, state, player, torch.arange(state.batch_size) + key, 16)
    assert possible.all() and _valid(game, state, player, hands).all()
    return engine.set_hand(game, state, player, hands, torch.arange(state.batch_size) + key)


@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
def test_a_redeterminization_never_reads_the_hidden_cards_it_replaces(game):
    state = roots(game, 30, 7, seed=3)
    changed = 0
    for player in range(game.players):
        who = torch.full((30,), player)
        other = _swap_hidden(game, state, who, 500 + player)
        seat = who[:, None]
        assert torch.equal(encode(game, state, seat), encode(game, other, seat))
        changed += int((other.hands[:, player] != state.hands[:, player]).any(1).sum())
        a = mcts.determinize(game, state, who, torch.arange(30), 8, torch.ones(30, dtype=torch.bool))
        b = mcts.determinize(game, other, who, torch.arange(30), 8, torch.ones(30, dtype=torch.bool))
        assert torch.equal(a.hands, b.hands) and torch.equal(a.deck, b.deck)
        assert _valid(game, a, who, a.hands[:, player]).all()
    assert changed > 20


@pytest.mark.parametrize("valued", [False, True], ids=["simulated", "valued"])
@pytest.mark.parametrize("mode", ["mo-ismcts", "ris-mcts"])
def test_no_peeking_the_search_ignores_the_searchers_true_hand_and_the_deck(mode, valued):
    game = GAME3
    state = roots(game, 16, 6, seed=4)
    state = state.index((~state.done).nonzero().squeeze(1))
    other = _swap_hidden(game, state, state.cur_player, 900)
    assert int((other.hands != state.hands).any(2).any(1).sum()) > 5
    cfg = MctsConfig(mode=mode, iterations=30)
    keys = torch.arange(state.batch_size)
    evaluate = leaf_values(game) if valued else None
    a, b = mcts.search(game, state, cfg, keys, evaluate=evaluate), mcts.search(game, other, cfg, keys,
                                                                              evaluate=evaluate)
    assert torch.equal(a.visits, b.visits) and torch.equal(a.value, b.value) and torch.equal(a.move, b.move)


def _cards_in_play(game: GameConfig, s: HanabiState) -> torch.Tensor:
    """[B, T] copies in hands, in the undealt deck, discarded or on the fireworks."""
    t = game.card_types
    undealt = torch.where(torch.arange(game.num_cards) >= s.deck_pos[:, None], s.deck, -1)
    played = (torch.arange(game.ranks) < s.fireworks[:, :, None]).reshape(s.batch_size, -1).long()
    return (engine.card_histogram(s.hands.reshape(s.batch_size, -1), t) + engine.card_histogram(undealt, t)
            + s.discards + played)


@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
def test_exitnode_restores_the_hand_and_keeps_every_cards_copies(game):
    state = roots(game, 60, 4, seed=5)
    state = state.index((~state.done).nonzero().squeeze(1))
    b = state.batch_size
    mover, everyone = state.cur_player, torch.ones(b, dtype=torch.bool)
    counts = torch.tensor(game.card_counts).expand(b, -1)
    redrawn = mcts.determinize(game, state, mover, torch.arange(b) + 7, 8, everyone)
    moves = mcts.random_legal(engine.legal_moves(game, redrawn), uniform(torch.arange(b), 77))
    after, _, _ = engine.step(game, redrawn, moves)
    back = mcts.restore(game, state, after, everyone)
    assert torch.equal(_cards_in_play(game, back), counts)
    kind = engine.tables(game, state.device).move_info[moves, 0]
    hint = (kind != DISCARD) & (kind != PLAY)
    assert hint.any() and (~hint).any()
    assert torch.equal(back.hands[hint], state.hands[hint])
    assert torch.equal(back.deck[hint], state.deck[hint])
    for g in range(b):
        one = ref_restore(game, state.index(torch.tensor([g])), after.index(torch.tensor([g])))
        assert torch.equal(one.hands[0], back.hands[g]) and torch.equal(one.deck[0], back.deck[g])
    # a batch where only some rows exit leaves the others as they were
    half = torch.arange(b) % 2 == 0
    mixed = mcts.restore(game, state, after, half)
    assert torch.equal(mixed.hands[~half], after.hands[~half])
    assert torch.equal(mixed.hands[half], back.hands[half])


def test_bad_settings_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="mode"):
        MctsConfig(mode="ismcts")
    with pytest.raises(ValueError, match="iterations"):
        MctsConfig(iterations=0)
    with pytest.raises(ValueError, match="exploration"):
        MctsConfig(exploration=-1.0)
    with pytest.raises(ValueError, match="root_choice"):
        MctsConfig(root_choice="robust")
    with pytest.raises(ValueError, match="rollout_depth"):
        MctsConfig(rollout_depth=-1)
    with pytest.raises(ValueError, match="tree_depth"):
        MctsConfig(tree_depth=2, evaluation="values.pt")


def test_the_move_made_is_the_best_mean_or_the_most_visited_child():
    """root_choice: "mean" takes the highest mean (ties: more visits, then the lower id), "visits" the most
    visited (ties: the higher mean, then the lower id); an untried child is never taken."""
    visits = torch.tensor([[1, 5, 5, 0, 2], [3, 3, 0, 1, 3], [0, 0, 4, 4, 1]])
    value = torch.tensor([[0.9, 3.0, 3.5, 0.0, 1.0], [1.5, 1.5, 0.0, 0.6, 1.8], [0.0, 0.0, 2.0, 2.0, 1.0]],
                         dtype=torch.float64)
    assert mcts.best_root_move(value, visits, "mean").tolist() == [0, 4, 4]
    assert mcts.best_root_move(value, visits, "visits").tolist() == [2, 4, 2]


@pytest.mark.parametrize("game", [GAME3], ids=["p3"])
def test_the_most_visited_move_is_made_on_the_same_tree(game):
    """Only the last step changes: the same keys grow the same tree under either choice, and "visits" makes
    the per-game reference tree's most visited move."""
    state = roots(game, 7, 5, seed=1)
    state = state.index((~state.done).nonzero().squeeze(1))
    keys = torch.arange(state.batch_size) * 7 + 3
    cfg = MctsConfig(mode="ris-mcts", iterations=30, candidates=8, root_choice="visits")
    res = mcts.search(game, state, cfg, keys)
    by_mean = mcts.search(game, state, dataclasses.replace(cfg, root_choice="mean"), keys)
    assert torch.equal(res.visits, by_mean.visits) and torch.equal(res.value, by_mean.value)
    for g in range(state.batch_size):
        v, w = ref_search(game, state.index(torch.tensor([g])), cfg, int(keys[g]))
        tried = [a for a in range(game.num_moves) if v[a]]
        assert int(res.move[g]) == max(tried, key=lambda a: (v[a], w[a] / v[a], -a))


def _narrowed(game: GameConfig, state: HanabiState) -> HanabiState:
    """The running games with the mover's card knowledge narrowed as hints could narrow it: slot 1 known
    exactly, slot 0 either its own card or slot 1's colour and rank; so a slot-by-slot proposal that gives
    slot 0 slot 1's card (its last unseen copy) leaves slot 1 nothing."""
    state = state.index((~state.done).nonzero().squeeze(1))
    rows, who = torch.arange(state.batch_size), state.cur_player
    hand = state.hands[rows, who]  # [B, H]
    col, rank = hand // game.ranks, hand % game.ranks
    cp, rp = state.color_plausible.clone(), state.rank_plausible.clone()
    one_c = torch.nn.functional.one_hot(col[:, :2], game.colors).bool()  # [B, 2, C]
    one_r = torch.nn.functional.one_hot(rank[:, :2], game.ranks).bool()
    cp[rows, who, 0], rp[rows, who, 0] = one_c.any(1), one_r.any(1)
    cp[rows, who, 1], rp[rows, who, 1] = one_c[:, 1], one_r[:, 1]
    return state.replace(color_plausible=cp, rank_plausible=rp)


@pytest.mark.parametrize("game", [GAME2, GAME3], ids=["p2", "p3"])
def test_the_fallback_draw_fits_equals_the_reference_and_never_reads_the_true_hand(game):
    """One proposal per draw: where it fits no hand (it used up a card a later slot needed) the fallback
    draws one that fits from what the player observes only, so swapping the searcher's true hand for another
    it cannot tell apart changes no draw, no random number and no decision."""
    state = _narrowed(game, roots(game, 200, 4, seed=6))
    n, who = state.batch_size, state.cur_player
    keys, everyone = torch.arange(n) + 40, torch.ones(n, dtype=torch.bool)
    hands, _, fits, possible = mcts.draw_hands(game, state, who, keys, 1)
    assert possible.all() and int((~fits).sum()) >= 3
    assert _valid(game, state, who, hands).all()
    for g in (~fits).nonzero().flatten().tolist():
        one = state.index(torch.tensor([g]))
        assert ref_draw(game, one, int(who[g]), int(keys[g]), 1) == hands[g].tolist()
    other = _swap_hidden(game, state, who, 700)
    assert int((other.hands != state.hands).any(2).any(1).sum()) > 3
    a = mcts.determinize(game, state, who, keys, 1, everyone)
    b = mcts.determinize(game, other, who, keys, 1, everyone)
    assert torch.equal(a.hands, b.hands) and torch.equal(a.deck, b.deck)
    cfg = MctsConfig(mode="ris-mcts", iterations=12, candidates=1)
    ra, rb = mcts.search(game, state, cfg, keys), mcts.search(game, other, cfg, keys)
    assert ra.stats.fallback > 0 and ra.stats.kept == rb.stats.kept
    assert torch.equal(ra.visits, rb.visits) and torch.equal(ra.value, rb.value)
    assert torch.equal(ra.move, rb.move)
