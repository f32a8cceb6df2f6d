"""The imitation phase of a blueprint recipe: a demonstrator's moves learnt by cross-entropy on its fresh
games.

Every chunk of games is new (nothing is memorised) and is used once, in batches: the demonstrator (a rule bot
with the networks' step interface, lbs.rl.demos.record_demos) plays them, or, for a DAgger share, the
network plays while the demonstrator says what it would have played there (Ross et al. 2011). The network's
move logits (its policy network's, or its Q-values) are read over the legal moves; with a bomb weight the
costliest copying error, a play that loses a life, is weighed beyond the cross-entropy. Q is no value after
this phase: the values phase that follows learns them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..hanabi import GameConfig, public_features
from ..hanabi.engine import tables
from ..seeding import Stream, pack
from .config import Phase, TrainConfig
from .demos import Episodes, record_demos
from .r2d2 import players_as_rows


def bombing_plays(game: GameConfig, priv: torch.Tensor, own_hand: torch.Tensor) -> torch.Tensor:
    """[..., A] bool: the play moves that would lose a life, from observations priv [..., D] (the fireworks)
    and the true own cards own_hand [..., H] (card id, -1 for an empty slot): a training target, as the
    auxiliary head's, never an input."""
    tb, c, r, h = tables(game, priv.device), game.colors, game.ranks, game.hand_size
    top = game.layout.view(priv, "board.fireworks").reshape(*priv.shape[:-1], c, r)
    height = (top * torch.arange(1, r + 1, device=priv.device, dtype=top.dtype)).sum(-1).long()  # [..., C]
    card = own_hand.long().clamp(min=0)
    playable = tb.card_rank[card] == height.gather(-1, tb.card_color[card])
    bomb = torch.zeros(*priv.shape[:-1], game.num_actions, dtype=torch.bool, device=priv.device)
    bomb[..., game.play_move(0): game.play_move(h)] = (own_hand >= 0) & ~playable
    return bomb


def imitation_loss(net, batch: Episodes, game: GameConfig, bomb_weight: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy of the demonstrator's move under softmax(move logits: the policy network's, or Q
    without one) over the legal moves, on the steps where a seat moves (the waiting seats' no-op is their
    only legal action and carries nothing). With bomb_weight > 0, plus bomb_weight times -log P(no losing
    play) at the same steps (bombing_plays)."""
    legal = batch["legal"]
    b, t, p, a = legal.shape
    priv = players_as_rows(batch["priv"].float())
    legal_rows, act = players_as_rows(legal), players_as_rows(batch["action"]).long()
    steps = players_as_rows(batch["mask"][..., None].expand(b, t, p))
    moving = players_as_rows(legal[..., : a - 1].any(-1)) & steps
    logits = net.forward_moves(priv, public_features(game, priv), legal_rows,
                               net.initial_state(priv.shape[0], priv.device))
    logits = logits.float().masked_fill(~legal_rows, -1e9)
    ce = F.cross_entropy(logits.reshape(-1, a), act.reshape(-1), reduction="none")
    m = moving.reshape(-1).float()
    loss = (ce * m).sum() / m.sum().clamp_min(1)
    if bomb_weight:  # -log P(no losing play): the one error a rule bot almost never makes, and the costliest
        bomb = players_as_rows(bombing_plays(game, batch["priv"].float(), batch["own_hand"]))
        safe = torch.logsumexp(logits.masked_fill(bomb, -1e9), -1) - torch.logsumexp(logits, -1)
        safe = safe.clamp(min=-30)  # log P(no losing play); -30: no legal move is safe (never in Hanabi)
        loss = loss - bomb_weight * (safe.reshape(-1) * m).sum() / m.sum().clamp_min(1)
    return loss


def fresh_games(cfg: TrainConfig, phase: Phase, start: int, device: torch.device,
                net: torch.nn.Module) -> Episodes:
    """Games start .. start + phase.chunk - 1 of the demonstration stream, labelled with the demonstrator's
    moves: a phase.dagger share of them played by the network `net` (greedy), the rest the demonstrator's."""
    games = phase.chunk
    ours = round(phase.dagger * games)
    parts = []
    if ours < games:
        parts.append(record_demos(cfg, games - ours, device, start=start + ours, bot=phase.demonstrator))
    if ours:
        was = net.training
        net.eval()
        parts.append(record_demos(cfg, ours, device, start=start, learner=net.mover, bot=phase.demonstrator))
        net.train(was)
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def batch_order(cfg: TrainConfig, chunk_index: int, games: int, device: torch.device) -> list[torch.Tensor]:
    """The batches a chunk's games are used in: a permutation that depends on the run seed and the chunk's
    index only (a resume at a chunk boundary goes on exactly)."""
    gen = torch.Generator().manual_seed(int(pack(Stream.DEMO, cfg.seed, chunk_index)))
    return list(torch.randperm(games, generator=gen).to(device).split(cfg.batch_size))
