"""How seats act, and the one lockstep loop every player of games uses.

Actions: A = game.num_actions = num_moves + 1. The last one (id num_moves) is the no-op, the only legal
action of a seat that is not to move, so under VDN every seat acts every step and every mask row has
at least one legal action. `play` runs N games in lockstep for a number of steps, each seat choosing
from a Q-function (greedy or epsilon-greedy on hashed counters); actors, evaluation, belief data,
belief evaluation, search rollouts and search's real games all call it and read what they need
through a per-step hook (search replaces the searcher's move through `override`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from . import seeding
from .graphs import Graphs, clone, copy_into
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


class StatePolicy(NamedTuple):
    """A blueprint that reads the engine state itself (lbs.blueprint.ActsOnState), where `play` takes a
    QFunction: act(state, hid) -> (moves [N], hid), the moves its step would make on the encoded
    observations, without encoding them. Greedy, in the true colours; its Turns carry no obs, legal, q or
    action (None), so a hook may read the states, moves and rewards only."""

    act: Callable[[HanabiState, tuple], tuple[torch.Tensor, tuple]]


Policy = QFunction | StatePolicy
"""What `play` calls for the seats' moves."""


def playout_policy(net, step: QFunction) -> Policy:
    """What `play` should call for blueprint `net` where nothing reads the observations (rollouts, scoring):
    its state reader where it declares one (Capabilities.acts_on_state: a rule bot, with no weights to
    serve), else `step` (its step, or its served step)."""
    return StatePolicy(net.act) if net.capabilities.acts_on_state else step


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
    obs: torch.Tensor | None  # [N, P, D] uint8 canonical observation of every seat (None: a StatePolicy's)
    legal: torch.Tensor | None  # [N, P, A] bool
    q: torch.Tensor | None  # [N, P, A] Q-values the seats acted on
    action: torch.Tensor | None  # [N, P] each seat's action (no-op if not to move), before any override
    move: torch.Tensor  # [N] the engine move made (in the true colours; an override's where one ran)
    reward: torch.Tensor  # [N] score change (0 for games already over)
    next_state: HanabiState


Hook = Callable[[Turn], bool | None]
"""Called after every step; returning True ends the loop there (for hooks that read the host anyway)."""
Override = Callable[[int, HanabiState, tuple, torch.Tensor], torch.Tensor]
"""override(t, state, hid, move) -> the moves [N] to make instead of `move` [N] (the seats' choices, in
the true colours); hid: every seat's recurrent state after reading this state's observation."""


def until_all_over(device: torch.device) -> Hook | None:
    """A hook that ends `play` once every game is over: on the CPU, where reading that costs nothing (finished
    games only idle, so the result is the same); elsewhere None, so the loop never waits on the host."""
    if device.type != "cpu":
        return None
    return lambda turn: bool(turn.next_state.done.all())


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


def seat_q(game: GameConfig, state: HanabiState, q_fn: QFunction, hid: tuple,
           perms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple]:
    """Every seat's view and Q-values: (obs [N, P, D] uint8, legal [N, P, A], q [N*P, A], hid after
    reading the observation); row n * P + p of q is seat p of game n."""
    n, p = state.batch_size, game.players
    obs, legal = observe(game, state, perms)
    priv = obs.reshape(n * p, -1).float()
    q, hid = q_fn(priv, public_features(game, priv), legal.reshape(n * p, -1), hid)
    return obs, legal, q, hid


def greedy_moves(game: GameConfig, state: HanabiState, policy: Policy,
                 hid: tuple) -> tuple[torch.Tensor, tuple]:
    """(the engine move [N] of each game's seat to move, greedy, 0 in finished games; every seat's state after
    reading `state`): a StatePolicy reads the state itself, a QFunction every seat's encoded view."""
    if isinstance(policy, StatePolicy):
        return policy.act(state, hid)
    _, legal, q, hid = seat_q(game, state, policy, hid)
    act = greedy(q, legal.reshape(q.shape[0], -1)).reshape(state.batch_size, game.players)
    return env_moves(game, state, act), hid


def play(
    game: GameConfig,
    state: HanabiState,
    q_fn: Policy,
    hid: tuple,
    steps: int,
    explore: Exploration | None = None,
    perms: torch.Tensor | None = None,
    hook: Hook | None = None,
    graphs: Graphs | None = None,
    weights: Hashable = None,
    override: Override | None = None,
) -> tuple[HanabiState, tuple]:
    """Play `steps` lockstep steps of N games; every seat acts through q_fn (VDN: the waiting seats'
    no-op included). Greedy unless `explore`; finished games idle (the engine leaves them unchanged).
    Returns the final state and recurrent state. No host sync: the loop runs a fixed number of steps
    (unless the hook ends it). `override` replaces the moves made (search); it runs eagerly, so it
    cannot be combined with `graphs`.

    With `graphs` the step is captured once per batch shape as a CUDA graph and replayed (eagerly on the
    same static buffers off CUDA); `weights` names the copy of the weights q_fn reads now (e.g.
    InferenceServer.pinned), since a captured step keeps reading the copy it was captured with. The
    hook's tensors are then the step's buffers, overwritten by the next step: copy what you keep.

    A StatePolicy plays from the engine state (no observation encoded): no `explore`, no `perms`.
    """
    if isinstance(q_fn, StatePolicy) and (explore is not None or perms is not None):
        raise ValueError("play: a StatePolicy plays greedily in the true colours (no explore, no perms)")
    if graphs is not None:
        if override is not None:
            raise ValueError("play: a move override runs eagerly; it cannot replay a captured step (graphs)")
        return _play_captured(game, state, q_fn, hid, steps, explore, perms, hook, graphs, weights)
    p = game.players
    seat = torch.arange(p, device=state.device).repeat(state.batch_size)
    rows = None
    if explore is not None:
        rows = (explore.eps.to(state.device).repeat_interleave(p),
                explore.game_seeds.to(state.device).repeat_interleave(p), explore.episode)
    for t in range(steps):
        turn, hid = _step(game, state, q_fn, hid, t, seat, rows, perms, override)
        state = turn.next_state
        if hook is not None and hook(turn):
            break
    return state, hid


def _step(game: GameConfig, state: HanabiState, q_fn: Policy, hid: tuple, t: int | torch.Tensor,
          seat: torch.Tensor, rows: tuple | None, perms: torch.Tensor | None,
          override: Override | None = None) -> tuple[Turn, tuple]:
    """One lockstep step. rows: exploration (eps, game seed, episode) per row, or None for greedy."""
    if isinstance(q_fn, StatePolicy):
        move, hid = q_fn.act(state, hid)
        if override is not None:
            move = override(t, state, hid, move)
        new, reward, _ = engine.step(game, state, move)
        return Turn(t, state, None, None, None, None, move, reward, new), hid
    n, p = state.batch_size, game.players
    obs, legal, q, hid = seat_q(game, state, q_fn, hid, perms)
    legal_rows = legal.reshape(n * p, -1)
    if rows is None:
        act = greedy(q, legal_rows)
    else:
        eps_rows, seed_rows, episode = rows
        act = epsilon_greedy(q, legal_rows, eps_rows, seeding.explore_keys(seed_rows, seat, episode, t))
    act = act.reshape(n, p)
    move = env_moves(game, state, act)
    if perms is not None:  # the mover chose in its own colour view
        mover = state.cur_player[:, None, None].expand(-1, 1, game.colors)
        move = unpermute_moves(game, move, perms.gather(1, mover).squeeze(1))
    if override is not None:
        move = override(t, state, hid, move)
    new, reward, _ = engine.step(game, state, move)
    return Turn(t, state, obs, legal, q.reshape(n, p, -1), act, move, reward, new), hid


@dataclass
class _Loop:
    """The static buffers of a captured step: it moves `after` into `before`, then steps `before`."""

    before: HanabiState
    after: HanabiState
    hid_in: tuple
    hid_out: tuple
    t: torch.Tensor  # 0-d int64: the step number (it keys the exploration draws)
    rows: tuple | None
    perms: torch.Tensor | None
    turn: Turn | None = None  # the last step's outputs


def _play_captured(game: GameConfig, state: HanabiState, q_fn: Policy, hid: tuple, steps: int,
                   explore: Exploration | None, perms: torch.Tensor | None, hook: Hook | None,
                   graphs: Graphs, weights: Hashable) -> tuple[HanabiState, tuple]:
    n, p, dev = state.batch_size, game.players, state.device
    rows = None
    if explore is not None:
        rows = (explore.eps.to(dev).repeat_interleave(p), explore.game_seeds.to(dev).repeat_interleave(p),
                torch.as_tensor(explore.episode, device=dev))
    key = (n, tuple(h.shape for h in hid), rows is None, perms is None, weights)

    def build():
        loop = _Loop(state.clone(), state.clone(), clone(hid), clone(hid), torch.zeros((), dtype=torch.long,
                     device=dev), clone(rows) if rows is not None else None, clone(perms) if perms is not None
                     else None)
        seat = torch.arange(p, device=dev).repeat(n)

        def step() -> None:
            copy_into(loop.before, loop.after)
            copy_into(loop.hid_in, loop.hid_out)
            loop.t.add_(1)
            loop.turn, out = _step(game, loop.before, q_fn, loop.hid_in, loop.t, seat, loop.rows, loop.perms)
            copy_into(loop.after, loop.turn.next_state)
            copy_into(loop.hid_out, out)

        return loop, step

    loop, replay = graphs.get(key, build)
    copy_into(loop.after, state)  # the first replay moves these into `before`
    copy_into(loop.hid_out, hid)
    loop.t.fill_(-1)
    if rows is not None:
        copy_into(loop.rows, rows)
    if perms is not None:
        loop.perms.copy_(perms)
    for t in range(steps):
        replay()
        if hook is not None:
            turn = loop.turn
            if hook(Turn(t, loop.before, turn.obs, turn.legal, turn.q, turn.action, turn.move, turn.reward,
                         loop.after)):
                break
    return clone(loop.after), clone(loop.hid_out)
