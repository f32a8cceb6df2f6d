"""Vectorized self-play: N games in lockstep on one device, every seat driven by one Q-function (VDN).

Games run in rounds of `max_len` steps from a fresh deal; finished games idle (the engine leaves them
unchanged) until the round ends, so a round needs no host sync and yields N whole episodes at once.
The stepping is lbs.acting.play; this module only records what a learner needs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch

from ..acting import Exploration, InitHidden, Override, QFunction, Turn, play
from ..configs import check, is_int
from ..graphs import Graphs
from ..hanabi import engine
from ..hanabi.config import GameConfig
from ..hanabi.encode import own_hands
from ..hanabi.shuffle import permute_cards, random_perms
from ..hanabi.state import HanabiState
from ..models.qnet import AUX_EMPTY, AUX_OTHER, AUX_PLAYABLE, AUX_PLAYED


@dataclass
class ActorConfig:
    """Self-play settings."""

    num_games: int = 128
    """games played in lockstep per round (each yields one episode per round)"""
    max_len: int = 80
    """steps per round; longer games are cut (R2D2's sequence length). 0: the game's longest possible
    game, so no game is cut"""
    eps_base: float = 0.1
    """Ape-X exploration: eps_i = eps_base ** (1 + eps_alpha * i / (N - 1)), one i drawn per episode"""
    eps_alpha: float = 7.0
    """Ape-X exploration exponent (see eps_base)"""
    shuffle_colors: bool = False
    """other-play: each seat sees the game under its own random colour permutation, redrawn per episode"""
    cuda_graphs: bool = False
    """capture the lockstep step as a CUDA graph and replay it (lbs.graphs): far fewer kernel launches on
    a GPU; off CUDA it runs eagerly on the same buffers"""

    def __post_init__(self) -> None:
        check(self, "num_games", is_int(self.num_games) and self.num_games >= 1, "an int >= 1")
        check(self, "max_len", is_int(self.max_len) and self.max_len >= 0, "an int >= 0 (0: whole games)")
        check(self, "eps_base", 0 <= self.eps_base <= 1, "in [0, 1]")
        check(self, "eps_alpha", self.eps_alpha >= 0, ">= 0")


def aux_targets(game: GameConfig, state: HanabiState, observers: torch.Tensor | None = None) -> torch.Tensor:
    """Class of each observer's own cards [B, K, H]: 0 playable now, 1 already played (useless),
    2 other, -1 empty slot. observers [B, K] absolute ids (default every player). Colour-blind, so the
    same in every colour view."""
    cards = own_hands(game, state, observers)  # [B, K, H]
    b, k, h = cards.shape
    c = cards.clamp(min=0)
    color, rank = c // game.ranks, c % game.ranks
    height = state.fireworks.gather(1, color.reshape(b, k * h)).reshape(b, k, h)
    cls = torch.where(rank == height, AUX_PLAYABLE, torch.where(rank < height, AUX_PLAYED, AUX_OTHER))
    return torch.where(cards >= 0, cls, AUX_EMPTY)


def seat_perms(game: GameConfig, seeds: torch.Tensor, episode: int) -> torch.Tensor:
    """Other-play colour permutations [N, P, C]: one per (game seed, seat, episode)."""
    n, p = seeds.shape[0], game.players
    seat = torch.arange(p, device=seeds.device).repeat(n)
    perms = random_perms(game, seeds.repeat_interleave(p), seat, torch.full_like(seat, episode))
    return perms.reshape(n, p, -1)


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
    graphs: Graphs | None = None,
    weights: Hashable = None,
    override: Override | None = None,
) -> tuple[dict[str, torch.Tensor] | None, dict[str, torch.Tensor]]:
    """Play one round: N = len(seeds) fresh games for up to cfg.max_len steps.

    eps [N] per-game exploration (None: greedy). graphs (kept by the caller across rounds, built when
    cfg.cuda_graphs) replays a captured step; weights names the copy of the weights q_fn reads now
    (InferenceServer.pinned). override (lbs.acting.play's) makes other moves than the seats chose; the
    recorded `action` stays the seats' choice. Returns (episodes, stats): episodes is a dict of
    [N, T, ...] tensors (priv uint8 [N,T,P,D], legal [N,T,P,A], action [N,T,P], reward [N,T],
    terminal [N,T], mask [N,T], own_hand [N,T,P,H] int8, and with aux aux_target [N,T,P,H] int8 for the
    auxiliary head) or None if record is False; stats has the final score, length, bombed and perfect
    flags [N]. With cfg.shuffle_colors everything recorded is in each seat's own colour view.
    """
    n, p, t_max = seeds.shape[0], game.players, cfg.max_len or game.max_steps
    dev = seeds.device
    state = engine.reset(game, seeds, torch.full_like(seeds, episode))
    perms = seat_perms(game, seeds, episode) if cfg.shuffle_colors else None
    explore = Exploration(eps, seeds, episode) if eps is not None else None
    buf: dict[str, torch.Tensor] = {}
    if record:
        buf = {
            "priv": torch.zeros(n, t_max, p, game.obs_dim, dtype=torch.uint8, device=dev),
            "legal": torch.zeros(n, t_max, p, game.num_actions, dtype=torch.bool, device=dev),
            "action": torch.full((n, t_max, p), game.num_moves, dtype=torch.long, device=dev),
            "reward": torch.zeros(n, t_max, device=dev),
            "terminal": torch.zeros(n, t_max, dtype=torch.bool, device=dev),
            "mask": torch.zeros(n, t_max, dtype=torch.bool, device=dev),
            "own_hand": torch.full((n, t_max, p, game.hand_size), -1, dtype=torch.int8, device=dev),
        }
        if aux:
            buf["aux_target"] = torch.full_like(buf["own_hand"], -1)

    def keep(turn: Turn) -> None:
        t, active = turn.t, ~turn.state.done
        own = own_hands(game, turn.state)  # [N, P, H]
        if perms is not None:
            own = permute_cards(game, own.reshape(n * p, -1), perms.reshape(n * p, -1)).reshape(n, p, -1)
        buf["priv"][:, t] = turn.obs
        buf["legal"][:, t] = turn.legal
        buf["action"][:, t] = turn.action
        buf["mask"][:, t] = active
        buf["own_hand"][:, t] = own.to(torch.int8)
        if aux:
            buf["aux_target"][:, t] = aux_targets(game, turn.state).to(torch.int8)
        buf["reward"][:, t] = turn.reward * active
        buf["terminal"][:, t] = turn.next_state.done & active

    state, _ = play(game, state, q_fn, init_hidden(n * p), t_max, explore, perms, keep if record else None,
                    graphs, weights, override)
    stats = {
        "score": state.score,
        "length": state.num_steps,
        "bombed": state.life_tokens <= 0,
        "perfect": state.fireworks.sum(1) == game.max_score,
        "finished": state.done,
    }
    return (buf if record else None), stats
