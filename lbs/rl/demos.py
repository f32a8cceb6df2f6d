"""A demonstrator's games, recorded in the self-play replay's format, and how close a network's moves are
to its.

The demonstrator is a rule bot with the networks' step interface (SmartBot): its games are played by the
same lockstep rollout the actors use (lbs.acting.play through run_round), so a demonstration episode is
field for field what a self-play episode is, its `action` being the bot's moves. The imitation phase of a
blueprint recipe learns from them (lbs.rl.imitation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from ..acting import env_moves, greedy
from ..hanabi import GameConfig
from ..models import load_blueprint
from ..seeding import Stream, game_seeds
from .actors import run_round
from .config import TrainConfig
from .r2d2 import players_as_rows

Episodes = dict[str, torch.Tensor]
CHUNK = 1024
"""demonstration games recorded per lockstep batch (bounds the recording buffers' memory)"""


def record_demos(cfg: TrainConfig, games: int, device: torch.device, start: int = 0,
                 stream: Stream = Stream.DEMO, learner: torch.nn.Module | None = None,
                 bot: str = "smartbot") -> Episodes:
    """`games` greedy games of the rule bot `bot` (games start.. of `stream` under the run seed, episode 0),
    recorded as replay episodes [games, T, ...] in the replay's storage dtypes.

    With a `learner` network, the learner makes every move (greedy) and the demonstrator only says what it
    would have played (DAgger, Ross et al. 2011): the episodes are the states the learner's own games
    reach, each `action` the demonstrator's move there, `reward` and `terminal` the learner's game's."""
    _, demonstrator = load_blueprint(bot, device, cfg.game)
    actor = replace(cfg.actor, cuda_graphs=False)  # a rule bot's step has data-dependent indexing
    q_fn, init, override = demonstrator.step, demonstrator.initial_state, None
    if learner is not None:
        q_fn, init, override = _labelled(cfg.game, demonstrator, learner)
    parts: list[Episodes] = []
    for first in range(start, start + games, CHUNK):  # chunks of games, each one lockstep batch
        n = min(CHUNK, start + games - first)
        seeds = game_seeds(stream, cfg.seed, n, start=first, device=device)
        with torch.no_grad():
            eps, _ = run_round(cfg.game, q_fn, init, seeds, 0, actor, aux=cfg.net.aux_head, override=override)
        parts.append(eps)
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def _labelled(game: GameConfig, bot, net: torch.nn.Module):
    """(step, initial state, move override) of the learner's games labelled by the bot: the seats choose
    the bot's moves (what run_round records as `action`), the engine makes the network's greedy ones."""

    def step(priv, publ, legal, hid):
        bot_hid, net_hid, _ = hid
        scores, bot_hid = bot.step(priv, publ, legal, bot_hid)
        q, net_hid = net.step(priv, publ, legal, net_hid)
        return scores, (bot_hid, net_hid, greedy(q, legal))

    def initial_state(rows: int):
        dev = next(net.parameters()).device
        return bot.initial_state(rows, dev), net.initial_state(rows, dev), torch.zeros(rows, dtype=torch.long,
                                                                                        device=dev)

    def network_moves(t, state, hid, move):
        return env_moves(game, state, hid[2].reshape(state.batch_size, game.players))

    return step, initial_state, network_moves


@torch.no_grad()
def agreement(net, episodes: Episodes, public_fn: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """Fraction of the demonstrator's moves (acting seats on valid steps of recorded episodes) that the
    network's greedy move equals: how close the policy is to the demonstrator's (one host sync)."""
    choice, acts, moving = _greedy_and_demo(net, episodes, public_fn)
    return float(((choice == acts) & moving).sum() / moving.sum().clamp_min(1))


MOVE_KINDS = ("discard", "play", "colour hint", "rank hint")
"""The kinds of move, in the order of GameConfig's move numbering."""


def agreement_by_kind(game: GameConfig, net, episodes: Episodes,
                      public_fn: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, list[int]]:
    """Per kind of the demonstrator's move (MOVE_KINDS), counts: the network's greedy move the same, then
    different and of each kind (MOVE_KINDS' order): where a copy still differs, beyond agreement's one
    number (whose numerator is the sum of the first counts and denominator the sum of all)."""
    choice, acts, moving = _greedy_and_demo(net, episodes, public_fn)
    edges = torch.tensor([game.play_move(0), game.color_hint_move(1, 0), game.rank_hint_move(1, 0)],
                         device=acts.device)  # where plays, colour hints and rank hints start
    demo, mine = (torch.bucketize(m[moving], edges, right=True) for m in (acts, choice))
    same = choice[moving] == acts[moving]
    table = torch.zeros(len(MOVE_KINDS), len(MOVE_KINDS) + 1, dtype=torch.long, device=acts.device)
    table[:, 0] = torch.bincount(demo[same], minlength=len(MOVE_KINDS))
    table.view(-1).index_add_(0, demo[~same] * (len(MOVE_KINDS) + 1) + 1 + mine[~same],
                              torch.ones_like(demo[~same]))
    return dict(zip(MOVE_KINDS, table.tolist(), strict=True))


def _greedy_and_demo(net, episodes: Episodes, public_fn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the network's greedy moves, the demonstrator's, where a seat acts), each [B * P, T]."""
    priv = episodes["priv"].float()
    legal, action, mask = episodes["legal"], episodes["action"], episodes["mask"]
    b, t, p, a = legal.shape
    rows = players_as_rows(priv)
    q = net(rows, public_fn(rows), players_as_rows(legal), net.initial_state(rows.shape[0], rows.device))[0]
    choice = greedy(q, players_as_rows(legal))  # [B * P, T]
    acts = players_as_rows(action)
    moving = players_as_rows(legal[..., : a - 1].any(-1)) & players_as_rows(mask[..., None].expand(b, t, p))
    return choice, acts, moving
