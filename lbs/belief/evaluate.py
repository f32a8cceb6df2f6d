"""How good a belief is: cross-entropy of every player's true hand at every turn of blueprint games,
against the grounded belief (counts and hints, the LBS paper's eq. 7) and the counting prior alone;
and how many plain samples pass the exact filter."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from ..acting import Exploration, InitHidden, QFunction, Turn, play
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.encode import own_hand_facts, own_hands
from ..hanabi.rng import hash_keys
from ..models.belief import BeliefModel, counting_log_prob
from ..seeding import Stream, game_seeds
from ..shards import ONE, Shard
from . import constraints
from .sampling import grounded_belief, sample_valid

SUMS = ("learned", "grounded", "counting", "cards", "valid", "samples")
"""What one evaluation round adds up per turn: NLL sums of the three beliefs, cards held, samples."""


@dataclass
class BeliefEval:
    """Per-card cross-entropy (nats) of the true hand under the learned and the grounded belief.

    Every player's own hand at every turn of every game counts (weighted by cards held). by_turn lists
    are indexed by turn; turns where no game is running have 0 cards and NaN entropies.
    """

    games: int
    nll_learned: float
    nll_grounded: float
    cards_by_turn: list[int]
    learned_by_turn: list[float]
    grounded_by_turn: list[float]
    acceptance_by_turn: list[float] | None = None  # plain samples passing the filter (if measured)
    nll_counting: float = math.nan  # the counting prior alone (slot by slot, no network)
    counting_by_turn: list[float] | None = None

    def __str__(self) -> str:
        return (f"NLL per card over {self.games} games: learned {self.nll_learned:.4f}, "
                f"grounded {self.nll_grounded:.4f}, counting {self.nll_counting:.4f}")

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def sample_acceptance(model: BeliefModel, priv: torch.Tensor, hands: torch.Tensor, k: int,
                      seed: int | torch.Tensor) -> torch.Tensor:
    """Fraction [] of k plain belief samples per position (streams [S, T]) that could be the true hand,
    over positions where the player holds cards. No host sync."""
    s, t, _ = priv.shape
    context, _ = model.encode(priv)
    cons = constraints.from_obs(model.game, priv.reshape(s * t, -1))
    keys = hash_keys(torch.as_tensor(seed, device=priv.device), torch.arange(s * t, device=priv.device))
    out = sample_valid(model, context.reshape(s * t, -1), k, keys, cons)
    has = (hands.reshape(s * t, -1) >= 0).any(-1)
    return (out.num_valid * has).sum() / (k * has.sum()).clamp(min=1)


@torch.no_grad()
def _round_sums(game: GameConfig, model: BeliefModel, q_fn: QFunction, init_hidden: InitHidden,
                seeds: torch.Tensor, max_len: int, eps: torch.Tensor | None,
                acceptance_k: int) -> dict[str, torch.Tensor]:
    """Per-turn sums [T] of SUMS over N blueprint games dealt from seeds [N] (episode 0)."""
    n, p, dev = seeds.shape[0], game.players, seeds.device
    state = engine.reset(game, seeds)
    sums = {k: torch.zeros(max_len, dtype=torch.float64, device=dev) for k in SUMS}
    bhid = model.initial_state(n * p, dev)
    seat = torch.arange(p, device=dev).repeat(n)

    def score(turn: Turn) -> None:
        nonlocal bhid
        t, st = turn.t, turn.state
        priv = turn.obs.reshape(n * p, -1).float()  # [N*P, D]
        own = own_hands(game, st)  # [N, P, H]
        held = (own >= 0) & ~st.done[:, None, None]
        context, bhid = model.encode(priv[:, None], bhid)
        context = context[:, 0]  # [N*P, E]
        learned = model.hand_log_prob(context, own.reshape(n * p, -1)).reshape(n, p, -1).double()
        ground = grounded_belief(game, st.replicate(p), seat, dtype=torch.float64)  # [N*P, H, T]
        ground = ground.reshape(n, p, *ground.shape[1:])
        g = ground.gather(-1, own.clamp(min=0)[..., None]).squeeze(-1)  # [N, P, H]
        unseen, plaus = own_hand_facts(game, priv)
        counting = counting_log_prob(unseen, plaus, own.reshape(n * p, -1)).reshape(n, p, -1)
        sums["learned"][t] = -torch.where(held, learned, 0.0).sum()
        sums["grounded"][t] = -torch.where(held, g.clamp(min=1e-300).log(), 0.0).sum()
        sums["counting"][t] = -torch.where(held, counting, 0.0).sum()
        sums["cards"][t] = held.sum()
        if acceptance_k:
            has = held.any(-1).reshape(-1)  # [N*P]
            keys = hash_keys(seeds.repeat_interleave(p), seat, torch.full_like(seat, t))
            out = sample_valid(model, context, acceptance_k, keys, constraints.from_obs(game, priv))
            sums["valid"][t] = (out.num_valid * has).sum()
            sums["samples"][t] = acceptance_k * has.sum()

    explore = Exploration(eps.to(dev), seeds, 0) if eps is not None else None
    play(game, state, q_fn, init_hidden(n * p), max_len, explore, hook=score)
    return sums


def evaluate_belief(game: GameConfig, model: BeliefModel, q_fn: QFunction, init_hidden: InitHidden,
                    games: int = 1000, seed: int = 0, batch: int = 500, max_len: int | None = None,
                    eps: float = 0.0, acceptance_k: int = 0, device: torch.device | str = "cpu",
                    stream: Stream = Stream.EVAL, shard: Shard = ONE) -> BeliefEval | None:
    """Play `games` blueprint games (greedy unless eps > 0; games 0.. of (stream, seed), never a training
    deal) and score the learned belief (fed turn by turn) and the grounded belief on every player's true
    hand. acceptance_k > 0 also samples that many hands per player and turn and reports the fraction
    valid. With a Shard each rank plays its slice of the games and rank 0 adds up every rank's sums (equal
    to one process up to float64 rounding); the other ranks return None."""
    if games < 1 or batch < 1:
        raise ValueError(f"games={games} and batch={batch} must be >= 1")
    max_len = max_len or game.max_steps
    was_training = model.training
    model.eval()
    total = {k: torch.zeros(max_len, dtype=torch.float64, device=device) for k in SUMS}
    mine = shard.games(games)
    for start in range(mine.start, mine.stop, batch):
        seeds = game_seeds(stream, seed, min(mine.stop, start + batch) - start, start, device)
        e = torch.full(seeds.shape, eps, device=device) if eps > 0 else None
        for k, v in _round_sums(game, model, q_fn, init_hidden, seeds, max_len, e, acceptance_k).items():
            total[k] += v
    model.train(was_training)
    parts = shard.gather([{k: v.cpu() for k, v in total.items()}])
    if not shard.main:
        return None
    total = {k: sum(part[k] for part in parts) for k in SUMS}
    cards = total["cards"]
    nan = torch.tensor(math.nan, dtype=torch.float64)

    def per_card(x: torch.Tensor, n: torch.Tensor) -> list[float]:
        return torch.where(n > 0, x / n.clamp(min=1), nan).tolist()

    return BeliefEval(
        games=games,
        nll_learned=float(total["learned"].sum() / cards.sum()),
        nll_grounded=float(total["grounded"].sum() / cards.sum()),
        cards_by_turn=[int(c) for c in cards.tolist()],
        learned_by_turn=per_card(total["learned"], cards),
        grounded_by_turn=per_card(total["grounded"], cards),
        acceptance_by_turn=per_card(total["valid"], total["samples"]) if acceptance_k else None,
        nll_counting=float(total["counting"].sum() / cards.sum().clamp(min=1)),
        counting_by_turn=per_card(total["counting"], cards),
    )
