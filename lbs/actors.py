"""Vectorized self-play: N games in lockstep on one device, every seat driven by one Q-function (VDN).

Games run in rounds of `max_len` steps from a fresh deal; finished games idle (the engine leaves them
unchanged) until the round ends, so a round needs no host sync and yields N whole episodes at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .hanabi import engine
from .hanabi.config import GameConfig
from .hanabi.encode import encode, own_hands, public_features
from .hanabi.shuffle import permute_state, random_perms, unpermute_moves
from .hanabi.state import HanabiState
from .nets import aux_targets, env_moves, epsilon_greedy, legal_with_noop, num_actions

# policy(priv [R, D] float, publ [R, Dp] float, legal [R, A] bool, hid) -> (q [R, A], hid)
QFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, tuple], tuple[torch.Tensor, tuple]]
InitHidden = Callable[[int], tuple]


@dataclass
class ActorConfig:
    """Self-play settings."""

    num_games: int = 128
    """games played in lockstep per round (each yields one episode per round)"""
    max_len: int = 80
    """steps per round; longer games are cut (R2D2's sequence length)"""
    eps_base: float = 0.1
    """Ape-X exploration: eps_i = eps_base ** (1 + eps_alpha * i / (N - 1)), one i drawn per episode"""
    eps_alpha: float = 7.0
    shuffle_colors: bool = False
    """other-play: each seat sees the game under its own random colour permutation, redrawn per episode"""


def _observe(game: GameConfig, state: HanabiState, perms: torch.Tensor | None):
    """Each seat's view: observation uint8 [N, P, D], legal [N, P, A], own hand [N, P, H].

    With perms [N, P, C] every seat sees the game with its own colour renaming (other-play)."""
    n, p = state.batch_size, game.players
    if perms is None:
        return encode(game, state, dtype=torch.uint8), legal_with_noop(game, state), own_hands(game, state)
    seat = torch.arange(p, device=state.device).repeat(n)[:, None]  # [N*P, 1]
    view = permute_state(game, state.replicate(p), perms.reshape(n * p, -1))  # row (g, s): seat s's view
    obs = encode(game, view, observers=seat, dtype=torch.uint8).reshape(n, p, -1)
    legal = legal_with_noop(game, view).gather(1, seat[:, :, None].expand(-1, 1, num_actions(game)))
    own = own_hands(game, view, observers=seat)
    return obs, legal.reshape(n, p, -1), own.reshape(n, p, -1)


def run_round(
    game: GameConfig,
    q_fn: QFunction,
    init_hidden: InitHidden,
    seeds: torch.Tensor,
    episode: int,
    cfg: ActorConfig,
    eps: torch.Tensor | None = None,
    record: bool = True,
    aux: bool = False,
) -> tuple[dict[str, torch.Tensor] | None, dict[str, torch.Tensor]]:
    """Play one round: N = len(seeds) fresh games for up to cfg.max_len steps.

    eps [N] per-game exploration (None: greedy). Returns (episodes, stats): episodes is a dict of
    [N, T, ...] tensors (priv uint8 [N,T,P,D], legal [N,T,P,A], action [N,T,P], reward [N,T],
    terminal [N,T], mask [N,T], own_hand [N,T,P,H] int8, and with aux aux_target [N,T,P,H] int8 for the
    auxiliary head) or None if record is False; stats has the final score, length, bombed and perfect
    flags [N]. With cfg.shuffle_colors everything recorded is in each seat's own colour view.
    """
    n, p, t_max = seeds.shape[0], game.players, cfg.max_len
    dev = seeds.device
    state = engine.reset(game, seeds, torch.full_like(seeds, episode))
    hid = init_hidden(n * p)
    noop = game.num_moves
    eps = torch.zeros(n, device=dev) if eps is None else eps.to(dev)
    eps_rows = eps.repeat_interleave(p)
    seat = torch.arange(p, device=dev).repeat(n)
    row_keys = (seeds.repeat_interleave(p) * 8 + seat, torch.full((n * p,), episode, device=dev))
    perms = random_perms(game, row_keys[0], row_keys[1]).reshape(n, p, -1) if cfg.shuffle_colors else None
    buf: dict[str, torch.Tensor] = {}
    if record:
        a = num_actions(game)
        buf = {
            "priv": torch.zeros(n, t_max, p, game.obs_dim, dtype=torch.uint8, device=dev),
            "legal": torch.zeros(n, t_max, p, a, dtype=torch.bool, device=dev),
            "action": torch.full((n, t_max, p), noop, dtype=torch.long, device=dev),
            "reward": torch.zeros(n, t_max, device=dev),
            "terminal": torch.zeros(n, t_max, dtype=torch.bool, device=dev),
            "mask": torch.zeros(n, t_max, dtype=torch.bool, device=dev),
            "own_hand": torch.full((n, t_max, p, game.hand_size), -1, dtype=torch.int8, device=dev),
        }
        if aux:
            buf["aux_target"] = torch.full_like(buf["own_hand"], -1)
    for t in range(t_max):
        active = ~state.done
        obs, legal, own = _observe(game, state, perms)
        priv = obs.reshape(n * p, -1).float()
        q, hid = q_fn(priv, public_features(game, priv), legal.reshape(n * p, -1), hid)
        step_keys = (*row_keys, torch.full((n * p,), t, device=dev))
        act = epsilon_greedy(q, legal.reshape(n * p, -1), eps_rows, step_keys).reshape(n, p)
        move = env_moves(game, state, act)
        if perms is not None:  # the mover chose in its own colour view
            mover = state.cur_player[:, None, None].expand(-1, 1, game.colors)
            move = unpermute_moves(game, move, perms.gather(1, mover).squeeze(1))
        if record:
            buf["priv"][:, t] = obs
            buf["legal"][:, t] = legal
            buf["action"][:, t] = act
            buf["mask"][:, t] = active
            buf["own_hand"][:, t] = own.to(torch.int8)
            if aux:
                buf["aux_target"][:, t] = aux_targets(game, state).to(torch.int8)
        state, reward, done = engine.step(game, state, move)
        if record:
            buf["reward"][:, t] = reward * active
            buf["terminal"][:, t] = done & active
    stats = {
        "score": state.score,
        "length": state.num_steps,
        "bombed": state.life_tokens <= 0,
        "perfect": state.fireworks.sum(1) == game.max_score,
        "finished": state.done,
    }
    return (buf if record else None), stats
