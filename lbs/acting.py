"""How seats act, and the one lockstep loop every player of games uses.

Actions: A = game.num_actions = num_moves + 1. The last one (id num_moves) is the no-op, the only legal
action of a seat that is not to move, so under VDN every seat acts every step and every mask row has
at least one legal action. `play` runs N games in lockstep for a number of steps, each seat choosing
from a Q-function (greedy or epsilon-greedy on hashed counters); actors, evaluation, belief data,
belief evaluation and search rollouts all call it and read what they need through a per-step hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from . import seeding
from .hanabi import engine
from .hanabi.config import GameConfig
from .hanabi.encode import encode, public_features
from .hanabi.rng import hash_keys, uniform
from .hanabi.shuffle import permute_state, unpermute_moves
from .hanabi.state import HanabiState

# q_fn(priv [R, D] float, publ [R, Dp] float, legal [R, A] bool, hid) -> (q [R, A], hid); R = N * P rows,
# row n * P + p is seat p of game n.
QFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, tuple], tuple[torch.Tensor, tuple]]
InitHidden = Callable[[int], tuple]


# ---- seats and the no-op ---------------------------------------------------------------------------
def noop_action(game: GameConfig) -> int:
    return game.num_moves


def acting_mask(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, P] bool: the seat is to move in a game that is still running."""
    seats = torch.arange(game.players, device=state.device)
    return (seats[None, :] == state.cur_player[:, None]) & ~state.done[:, None]


def legal_with_noop(game: GameConfig, state: HanabiState) -> torch.Tensor:
    """[B, P, A] bool: the mover's legal moves, the no-op alone for every other seat (and finished games)."""
    acting = acting_mask(game, state)  # [B, P]
    moves = engine.legal_moves(game, state)[:, None, :] & acting[:, :, None]  # [B, P, M]
    return torch.cat([moves, ~acting[:, :, None]], dim=2)


def env_moves(game: GameConfig, state: HanabiState, actions: torch.Tensor) -> torch.Tensor:
    """Per-seat actions [B, P] -> the engine move [B] of the seat to move (0 for finished games,
    which the engine ignores), so the no-op never reaches engine.step."""
    mover = actions.gather(1, state.cur_player[:, None]).squeeze(1)
    return torch.where(state.done | (mover >= game.num_moves), 0, mover)


# ---- action selection ------------------------------------------------------------------------------
def greedy(q: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """argmax over legal actions [..., A] -> [...], ties to the lowest id; rows with nothing legal give 0."""
    legal = legal.bool()
    a = q.shape[-1]
    masked = q.masked_fill(~legal, float("-inf"))
    best = masked.max(-1, keepdim=True).values
    ids = torch.arange(a, device=q.device)
    idx = torch.where(legal & (masked == best), ids, a).min(-1).values
    return idx.masked_fill(idx == a, 0)


def epsilon_greedy(
    q: torch.Tensor,
    legal: torch.Tensor,
    eps: torch.Tensor | float,
    keys: Sequence[torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Greedy legal action [B], or with probability eps [B] a uniformly random legal one.

    With keys (int64 tensors broadcastable to [B], e.g. seeding.explore_keys) the draws are hashed
    counters, identical on every device and independent of how rows were batched; otherwise torch's
    RNG (`generator`, on q's device) is used.
    """
    legal = legal.bool()
    b, a = q.shape[0], q.shape[-1]
    eps = torch.as_tensor(eps, device=q.device, dtype=torch.float64).expand(b)
    if keys is not None:
        scores = hash_keys(*[k.unsqueeze(-1) for k in keys], torch.arange(a, device=q.device)).expand(b, a)
        coin = uniform(*keys, -1).expand(b)
    else:
        scores = torch.rand(b, a, generator=generator, device=q.device)
        coin = torch.rand(b, generator=generator, device=q.device, dtype=torch.float64)
    rand = torch.where(legal, scores, -1).argmax(-1)
    return torch.where(coin < eps, rand, greedy(q, legal))


# ---- the lockstep loop -------------------------------------------------------------------------------
@dataclass
class Exploration:
    """Epsilon-greedy acting: per-game rates and the keys its draws hash (seeding.explore_keys)."""

    eps: torch.Tensor  # [N] exploration rate per game
    game_seeds: torch.Tensor  # [N] the games' seeds
    episode: int


@dataclass
class Turn:
    """One lockstep step, as a hook sees it. Views are each seat's own (colour-shuffled with perms)."""

    t: int
    state: HanabiState  # before the move
    obs: torch.Tensor  # [N, P, D] uint8 canonical observation of every seat
    legal: torch.Tensor  # [N, P, A] bool
    q: torch.Tensor  # [N, P, A] Q-values the seats acted on
    action: torch.Tensor  # [N, P] each seat's action (the no-op for seats not to move)
    move: torch.Tensor  # [N] the engine move made (in the true colours)
    reward: torch.Tensor  # [N] score change (0 for games already over)
    next_state: HanabiState


Hook = Callable[[Turn], None]


def observe(game: GameConfig, state: HanabiState, perms: torch.Tensor | None = None):
    """Each seat's view: observation uint8 [N, P, D] and legal actions [N, P, A].

    With perms [N, P, C] every seat sees the game under its own colour renaming (other-play)."""
    if perms is None:
        return encode(game, state, dtype=torch.uint8), legal_with_noop(game, state)
    n, p = state.batch_size, game.players
    seat = torch.arange(p, device=state.device).repeat(n)[:, None]  # [N*P, 1]
    view = permute_state(game, state.replicate(p), perms.reshape(n * p, -1))  # row (g, s): seat s's view
    obs = encode(game, view, observers=seat, dtype=torch.uint8).reshape(n, p, -1)
    legal = legal_with_noop(game, view).gather(1, seat[:, :, None].expand(-1, 1, game.num_actions))
    return obs, legal.reshape(n, p, -1)


def play(
    game: GameConfig,
    state: HanabiState,
    q_fn: QFunction,
    hid: tuple,
    steps: int,
    explore: Exploration | None = None,
    perms: torch.Tensor | None = None,
    hook: Hook | None = None,
) -> tuple[HanabiState, tuple]:
    """Play `steps` lockstep steps of N games; every seat acts through q_fn (VDN: the waiting seats'
    no-op included). Greedy unless `explore`; finished games idle (the engine leaves them unchanged).
    Returns the final state and recurrent state. No host sync: the loop runs a fixed number of steps.
    """
    n, p, dev = state.batch_size, game.players, state.device
    seat = torch.arange(p, device=dev).repeat(n)
    if explore is not None:
        eps_rows = explore.eps.to(dev).repeat_interleave(p)
        seed_rows = explore.game_seeds.to(dev).repeat_interleave(p)
    for t in range(steps):
        obs, legal = observe(game, state, perms)
        priv = obs.reshape(n * p, -1).float()
        legal_rows = legal.reshape(n * p, -1)
        q, hid = q_fn(priv, public_features(game, priv), legal_rows, hid)
        if explore is None:
            act = greedy(q, legal_rows)
        else:
            act = epsilon_greedy(q, legal_rows, eps_rows,
                                 seeding.explore_keys(seed_rows, seat, explore.episode, t))
        act = act.reshape(n, p)
        move = env_moves(game, state, act)
        if perms is not None:  # the mover chose in its own colour view
            mover = state.cur_player[:, None, None].expand(-1, 1, game.colors)
            move = unpermute_moves(game, move, perms.gather(1, mover).squeeze(1))
        new, reward, _ = engine.step(game, state, move)
        if hook is not None:
            hook(Turn(t, state, obs, legal, q.reshape(n, p, -1), act, move, reward, new))
        state = new
    return state, hid
