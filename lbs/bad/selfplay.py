"""BAD self-play on the batched engine: G games in lockstep, every move chosen by the sampled deterministic
partial policy on the mover's real private view, the public belief updated by Bayes on that policy.

One loop over the moves of a round (not over games): each move encodes the mover's public features, reads
the public belief, scores the real view, draws (or enumerates) the views the belief allows and scores them
with the same public part and the same common random number xi, so the belief update asks exactly the map
the mover applied. A round ends when every game has (one host read per move) or after `seq_len` moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.encode import encode, public_features
from ..hanabi.rng import uniform
from .belief import Chance, PublicBelief, seats_after, view_keys
from .config import BadConfig
from .policy import BadNet, partial_policy, view_legal, view_onehot


@dataclass
class Rollout:
    """What the learner needs of one round, [T, G, ...] per move (rows not `active` are padding)."""

    publ: torch.Tensor
    """[T, G, public_dim] the mover's public features"""
    belief: torch.Tensor
    """[T, G, P*H*T] the public V2 belief, the mover's slots first"""
    view: torch.Tensor
    """[T, G, (P-1)*H*T] the mover's private view (the others' cards)"""
    own: torch.Tensor
    """[T, G, H*T] the mover's own cards (the baseline's input only)"""
    legal: torch.Tensor
    """[T, G, M] bool"""
    move: torch.Tensor
    """[T, G] the move made"""
    reward: torch.Tensor
    """[T, G] the team's reward for it"""
    active: torch.Tensor
    """[T, G] bool: the game was still on"""


@dataclass
class RoundResult:
    """A round's games: final scores and lengths, lost games, and the rollout when recorded."""

    score: torch.Tensor
    length: torch.Tensor
    bombed: torch.Tensor
    rollout: Rollout | None
    entropy_v0: float
    """mean per-card entropy (nats) of the V0 belief of the held slots over the round's moves"""
    entropy_v2: float
    """the same for the V2 (Bayesian) belief: BAD's claim is that it is well below V0's"""
    belief_by_turn: torch.Tensor
    """[moves, 8] float64 sums over the held slots of the games still on at each move: entropy of V0 and of
    V2, cross-entropy of the true card under V0 and under V2 (nats, a zero probability counted as
    ZERO_NATS), true cards given probability 0 by V2, by V1, and by the likelihood alone; held slots"""


ZERO_NATS = 50.0
"""A true card the belief gives probability 0 counts this much cross-entropy (and is counted apart)."""


def belief_stats(belief: PublicBelief, hands: torch.Tensor, held: torch.Tensor) -> torch.Tensor:
    """[8] float64 (RoundResult.belief_by_turn's columns) for the belief's V0, V1, V2 and likelihood over the
    true hands [G, P, H] at the held slots [G, P, H]."""
    v0, v1, v2 = belief.marginals("v0"), belief.marginals("v1"), belief.marginals("v2")
    w = held.double()

    def at_zero(p: torch.Tensor) -> torch.Tensor:
        return ((p.gather(-1, hands.clamp(min=0)[..., None]).squeeze(-1) <= 0) & held).sum().double()

    def entropy(p: torch.Tensor) -> torch.Tensor:
        return (-(p * p.clamp(min=1e-300).log()).sum(-1) * w).sum()

    def xent(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        true = p.gather(-1, hands.clamp(min=0)[..., None]).squeeze(-1)
        zero = (true <= 0) & held
        nats = torch.where(zero, ZERO_NATS, -true.clamp(min=1e-300).log())
        return (nats * w).sum(), zero.sum().double()

    (x0, _), (x2, z2) = xent(v0), xent(v2)
    unlikely = at_zero((belief.loglike > float("-inf")).double())  # the drawn views ruled the card out
    return torch.stack([entropy(v0), entropy(v2), x0, x2, z2, at_zero(v1), unlikely, w.sum()])


def partial_policy_chance(game: GameConfig, net: BadNet, public: torch.Tensor, legal: torch.Tensor,
                          can_hint: torch.Tensor, xi: torch.Tensor, beta: float, greedy: bool,
                          move: torch.Tensor) -> Chance:
    """The belief update's question at one move: whether the partial policy (public parts [G, hidden], the
    real legal moves, tokens, xi [G]) names `move` [G] on each drawn view [G, S, P-1, H]."""

    def chance(views: torch.Tensor, games: torch.Tensor) -> torch.Tensor:
        s = views.shape[1]
        named = partial_policy(net.logits(public[:, None], view_onehot(game, views)),
                               view_legal(game, legal, can_hint, views), xi[:, None].expand(-1, s), beta,
                               greedy)
        return (named == move[:, None]).double()

    return chance


@torch.no_grad()
def play_round(game: GameConfig, net: BadNet, cfg: BadConfig, seeds: torch.Tensor, episode: int = 0,
               greedy: bool = False, record: bool = True) -> RoundResult:
    """Play one round of len(seeds) games (dealt from seeds [G] and `episode`) to the end (module doc)."""
    h = game.hand_size
    state = engine.reset(game, seeds, torch.full_like(seeds, episode))
    belief = PublicBelief(game, cfg.samples, cfg.iterations, cfg.mix, cfg.exact_limit)
    belief.reset(state)
    beta = cfg.inverse_temperature
    rows: list[dict[str, torch.Tensor]] = []
    stats: list[torch.Tensor] = []
    for t in range(cfg.seq_len):
        actor = state.cur_player
        obs = encode(game, state, observers=actor[:, None])[:, 0]
        publ, bel = public_features(game, obs), belief.features(actor)
        seen = state.hands.gather(1, seats_after(game, actor)[..., None].expand(-1, -1, h))  # [G, P-1, H]
        view = view_onehot(game, seen)
        legal = engine.legal_moves(game, state)
        public = net.public_part(publ, bel)
        xi = uniform(seeds.long(), 0x5EED, episode, t)  # common knowledge: every player can draw it
        move = torch.where(state.done, 0, partial_policy(net.logits(public, view), legal, xi, beta, greedy))
        can_hint = (state.info_tokens > 0) & ~state.done

        chance = partial_policy_chance(game, net, public, legal, can_hint, xi, beta, greedy, move)
        stats.append(belief_stats(belief, state.hands, (state.hands >= 0) & ~state.done[:, None, None]))
        after, reward, _ = engine.step(game, state, move)
        belief.update(state, move, after, chance, view_keys(seeds, episode, t))
        if record:
            own = view_onehot(game, state.hands.gather(1, actor[:, None, None].expand(-1, 1, h)))
            rows.append(dict(publ=publ, belief=bel, view=view, own=own, legal=legal, move=move,
                             reward=reward, active=~state.done))
        state = after
        if bool(state.done.all()):
            break
    rollout = Rollout(**{k: torch.stack([r[k] for r in rows]) for k in rows[0]}) if record else None
    by_turn = torch.stack(stats)
    total = by_turn.sum(0)
    mean = (total[:2] / total[7].clamp(min=1)).tolist()
    return RoundResult(score=state.score, length=state.num_steps, bombed=state.life_tokens <= 0,
                       rollout=rollout, entropy_v0=mean[0], entropy_v2=mean[1], belief_by_turn=by_turn)
