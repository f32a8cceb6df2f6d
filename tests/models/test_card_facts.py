"""The card-count facts a counting network reads, and the hint facts, against a plain reference computed
from the game state (not from the observation), on random games long enough for colours to die."""

from __future__ import annotations

import pytest
import torch
from conftest import CONFIGS, random_rollout

from lbs.hanabi import GameConfig
from lbs.hanabi.state import HanabiState
from lbs.models import card_facts


def status_ref(game: GameConfig, state: HanabiState, b: int) -> list[tuple[float, float, float]]:
    """(playable, useless, last copy) per card id of game b, plainly."""
    fw, disc, r = state.fireworks[b].tolist(), state.discards[b].tolist(), game.ranks
    out = []
    for t in range(game.card_types):
        c, k = divmod(t, r)
        dead = any(disc[c * r + j] == game.card_counts[c * r + j] and j >= fw[c] for j in range(k + 1))
        useless = k < fw[c] or dead
        out.append((float(k == fw[c] and not dead), float(useless),
                    float(not useless and game.card_counts[t] - disc[t] == 1)))
    return out


def expect_ref(game: GameConfig, state: HanabiState, b: int, p: int, s: int, left: list[int],
               status: list) -> list[float]:
    """The facts' chances for player p's slot s under hints x unseen copies (zeros for an empty slot)."""
    if int(state.hands[b, p, s]) < 0:
        return [0.0] * card_facts.FACTS
    r, types = game.ranks, range(game.card_types)
    plausible = state.color_plausible[b, p, s][:, None] & state.rank_plausible[b, p, s][None, :]  # [C, R]
    w = [float(plausible[t // r, t % r]) * max(left[t], 0) for t in types]
    return [sum(w[t] * status[t][f] for t in types) / sum(w) for f in range(card_facts.FACTS)]


def facts_ref(game: GameConfig, state: HanabiState, b: int, k: int) -> tuple[list[float], list[float]]:
    """(public, private) facts of observer k in game b."""
    status = status_ref(game, state, b)
    fw, disc, pl = state.fireworks[b].tolist(), state.discards[b].tolist(), game.players
    left = [game.card_counts[t] - disc[t] - int(t % game.ranks < fw[t // game.ranks])
            for t in range(game.card_types)]
    order = [(k + i) % pl for i in range(pl)]  # observer first
    public = [x for st in status for x in st]
    for p in order:
        for s in range(game.hand_size):
            public += expect_ref(game, state, b, p, s, left, status)
    mine = list(left)
    for p in order[1:]:
        for c in state.hands[b, p].tolist():
            if c >= 0:
                mine[c] -= 1
    private = [x for s in range(game.hand_size) for x in expect_ref(game, state, b, k, s, mine, status)]
    for p in order[1:]:
        for c in state.hands[b, p].tolist():
            private += list(status[c]) if c >= 0 else [0.0] * card_facts.FACTS
    return public, private


@pytest.mark.parametrize("name", ["p2", "p3", "p2_c2_r3", "p2_c1_r3", "p4_l1_i2"])
def test_facts_equal_the_plain_reference(name: str) -> None:
    game = CONFIGS[name]
    seen_dead = seen_last = seen_partial = 0
    for step, (state, priv, publ, _legal) in enumerate(random_rollout(game, 24, 40, seed=5)):
        if step % 3:
            continue
        got_pub = card_facts.public_facts(game, publ)  # [B, P, F]
        got_priv = card_facts.private_facts(game, priv)
        assert got_pub.shape[-1] == card_facts.public_dim(game)
        assert got_priv.shape[-1] == card_facts.private_dim(game)
        for b in range(0, state.batch_size, 3):
            for k in range(game.players):
                want_pub, want_priv = facts_ref(game, state, b, k)
                torch.testing.assert_close(got_pub[b, k], torch.tensor(want_pub), rtol=1e-5, atol=1e-6)
                torch.testing.assert_close(got_priv[b, k], torch.tensor(want_priv), rtol=1e-5, atol=1e-6)
                fw = state.fireworks[b].tolist()
                seen_dead += sum(st[1] == 1 and t % game.ranks >= fw[t // game.ranks]
                                 for t, st in enumerate(status_ref(game, state, b)))
                seen_last += sum(want_pub[2 : game.card_types * 3 : 3])
                slots = torch.tensor(want_priv[: game.hand_size * 3])
                seen_partial += int(((slots > 0) & (slots < 1)).any())
    assert seen_dead and seen_last and seen_partial, "the games never exercised dead, last or uncertain cards"


def test_facts_of_fp16_observations() -> None:
    """Search may serve a half-precision network: its bits give the same facts."""
    game = CONFIGS["p2"]
    _, priv, publ, _ = random_rollout(game, 8, 20, seed=2)[-1]
    assert torch.equal(card_facts.private_facts(game, priv.half()), card_facts.private_facts(game, priv))
    assert torch.equal(card_facts.public_facts(game, publ.half()), card_facts.public_facts(game, publ))
    assert torch.equal(card_facts.hint_facts(game, priv.half()), card_facts.hint_facts(game, priv))


def hint_ref(game: GameConfig, state: HanabiState, b: int, k: int) -> list[float]:
    """hint_facts of observer k in game b, plainly: per other player (seat order from k), per hint (colours,
    then ranks), what it would touch, show and rule out."""
    status, r = status_ref(game, state, b), game.ranks
    fw, disc = state.fireworks[b].tolist(), state.discards[b].tolist()
    left = [game.card_counts[t] - disc[t] - int(t % r < fw[t // r]) for t in range(game.card_types)]
    h, types, out = game.hand_size, range(game.card_types), []
    hints = [lambda t, c=c: t // r == c for c in range(game.colors)] + [lambda t, q=q: t % r == q
                                                                        for q in range(r)]
    for i in range(1, game.players):
        p = (k + i) % game.players
        hand = state.hands[b, p].tolist()
        colour, rank = state.color_plausible[b, p].tolist(), state.rank_plausible[b, p].tolist()
        plausible = [[t for t in types if hand[s] >= 0 and left[t] > 0 and colour[s][t // r]
                      and rank[s][t % r]] for s in range(h)]
        for match in hints:
            touched = [hand[s] >= 0 and match(hand[s]) for s in range(h)]
            kept = [[t for t in plausible[s] if match(t) == touched[s]] for s in range(h)]
            may = [any(status[t][0] for t in plausible[s]) for s in range(h)]
            sure = [may[s] and all(status[t][0] for t in plausible[s]) for s in range(h)]
            may_after = [any(status[t][0] for t in kept[s]) for s in range(h)]
            sure_after = [may_after[s] and all(status[t][0] for t in kept[s]) for s in range(h)]
            open_ = [s for s in range(h) if touched[s] and may[s] and may_after[s]]
            newest_playable = bool(open_) and bool(status[hand[open_[-1]]][0])
            facts = [sum(status[hand[s]][f] for s in range(h) if touched[s]) / h for f in range(3)]
            out += [sum(touched) / h, *facts,
                    sum(may[s] and not sure[s] and sure_after[s] for s in range(h)) / h,
                    sum(len(plausible[s]) - len(kept[s]) for s in range(h)) / (h * game.card_types),
                    float(newest_playable), float(bool(open_) and not newest_playable)]
    return out


@pytest.mark.parametrize("name", ["p2", "p3", "p2_c2_r3", "p4_l1_i2"])
def test_hint_facts_equal_the_plain_reference(name: str) -> None:
    game = CONFIGS[name]
    seen = torch.zeros(card_facts.HINT_FACTS)
    for step, (state, priv, _publ, _legal) in enumerate(random_rollout(game, 24, 40, seed=3)):
        if step % 3:
            continue
        got = card_facts.hint_facts(game, priv)  # [B, P, hint_dim]
        assert got.shape[-1] == card_facts.hint_dim(game)
        for b in range(0, state.batch_size, 3):
            for k in range(game.players):
                want = torch.tensor(hint_ref(game, state, b, k))
                torch.testing.assert_close(got[b, k], want, rtol=1e-5, atol=1e-6)
                seen += (want.view(-1, card_facts.HINT_FACTS) > 0).sum(0)
    assert (seen > 0).all(), f"the games never exercised every hint fact: {seen.tolist()}"


def discard_ref(game: GameConfig, state: HanabiState, b: int, k: int) -> list[float]:
    """discard_facts of observer k in game b, plainly: per player from k, SmartBot's next discard on the
    hint-plausible identities with a copy left; then the facts of the other players' cards there."""
    status, r, h = status_ref(game, state, b), game.ranks, game.hand_size
    fw, disc = state.fireworks[b].tolist(), state.discards[b].tolist()
    left = [game.card_counts[t] - disc[t] - int(t % r < fw[t // r]) for t in range(game.card_types)]
    chops, there = [], []
    for i in range(game.players):
        p = (k + i) % game.players
        hand = state.hands[b, p].tolist()
        colour, rank = state.color_plausible[b, p].tolist(), state.rank_plausible[b, p].tolist()
        held = [s for s in range(h) if hand[s] >= 0]
        plausible = {s: [t for t in range(game.card_types) if left[t] > 0 and colour[s][t // r]
                         and rank[s][t % r]] for s in held}
        share = {s: [sum(status[t][f] for t in plausible[s]) / len(plausible[s]) for f in range(3)]
                 for s in held}
        cand = [s for s in held if share[s][2] < 1]
        chop = -1
        if cand and not any(share[s][0] == 1 or share[s][1] == 1 for s in held):
            chop = max(cand, key=lambda s: (share[s][1], -s))  # the largest share, the oldest on ties
        chops += [float(s == chop) for s in range(h)]
        if i:
            there += list(status[hand[chop]]) if chop >= 0 else [0.0] * card_facts.FACTS
    return chops + there


@pytest.mark.parametrize("name", ["p2", "p3", "p2_c2_r3", "p4_l1_i2"])
def test_discard_facts_equal_the_plain_reference(name: str) -> None:
    game = CONFIGS[name]
    seen, none = torch.zeros(card_facts.FACTS), 0
    for step, (state, priv, _publ, _legal) in enumerate(random_rollout(game, 24, 40, seed=4)):
        if step % 3:
            continue
        got = card_facts.discard_facts(game, priv)  # [B, P, discard_dim]
        assert got.shape[-1] == card_facts.discard_dim(game)
        assert torch.equal(card_facts.discard_facts(game, priv.half()), got)
        for b in range(0, state.batch_size, 3):
            for k in range(game.players):
                want = torch.tensor(discard_ref(game, state, b, k))
                torch.testing.assert_close(got[b, k], want, rtol=0, atol=0)
                chops = want[: game.players * game.hand_size].view(game.players, -1)
                none += int((chops.sum(-1) == 0).sum())
                seen += want[game.players * game.hand_size:].view(-1, card_facts.FACTS).sum(0)
    # short random games rarely put a useless card at a partner's next discard; the other facts must occur
    assert seen[0] > 0 and seen[2] > 0 and none > 0, f"the games barely exercised the facts: {seen.tolist()}"
