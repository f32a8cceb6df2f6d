"""The search's bookkeeping as pure functions of per-move statistics: UCB-style pruning and the
delta rule that decides whether the search move replaces the blueprint move.

Two pruning rules: `prune` (a move's mean against the best mean, in the move's own standard errors) and
`prune_bounds`, the reference SPARTA's (SearchBot's UCB pruning: a move's upper bound against the best lower
bound, the blueprint move's bounds raised by delta).

Shapes: G games, M moves. Statistics are sums over rollouts: `total` and `total_sq` of the returns,
`count` of rollouts; `live` marks moves still receiving rollouts (a subset of the legal ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class MoveStats:
    """Per (game, move) rollout statistics; float64 sums so 10,000 returns lose nothing."""

    total: torch.Tensor  # [G, M] sum of returns
    total_sq: torch.Tensor  # [G, M] sum of squared returns
    count: torch.Tensor  # [G, M] rollouts

    @staticmethod
    def zeros(g: int, m: int, device: torch.device | str) -> MoveStats:
        z = torch.zeros(g, m, dtype=torch.float64, device=device)
        return MoveStats(z, z.clone(), z.clone())

    def add(self, game: torch.Tensor, move: torch.Tensor, value: torch.Tensor) -> None:
        """Add rollout returns value [R] of (game [R], move [R]) pairs."""
        flat = game * self.total.shape[1] + move
        v = value.to(torch.float64)
        self.total.view(-1).index_add_(0, flat, v)
        self.total_sq.view(-1).index_add_(0, flat, v * v)
        self.count.view(-1).index_add_(0, flat, torch.ones_like(v))

    @property
    def mean(self) -> torch.Tensor:
        """[G, M] mean return (0 where no rollout)."""
        return self.total / self.count.clamp(min=1)

    @property
    def sem(self) -> torch.Tensor:
        """[G, M] standard error of the mean (inf below two rollouts)."""
        n = self.count
        var = (self.total_sq - self.total * self.total / n.clamp(min=1)) / (n - 1).clamp(min=1)
        return torch.where(n >= 2, (var.clamp(min=0) / n.clamp(min=1)).sqrt(), torch.inf)


def best_live(mean: torch.Tensor, live: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(best move [G], its mean [G]) among live moves; ties to the lowest id; -inf mean if none live."""
    masked = mean.masked_fill(~live, float("-inf"))
    best = masked.max(1, keepdim=True).values
    ids = torch.arange(mean.shape[1], device=mean.device)
    move = torch.where(live & (masked == best), ids, mean.shape[1]).min(1).values
    return move.clamp(max=mean.shape[1] - 1), best.squeeze(1)


def prune(stats: MoveStats, live: torch.Tensor, min_rollouts: int, z: float) -> torch.Tensor:
    """New live mask [G, M]: once a live move has min_rollouts rollouts, it stops receiving more when
    its mean is more than z of its standard errors below the best live mean."""
    mean = stats.mean
    _, best = best_live(mean, live & (stats.count > 0))
    behind = mean < best[:, None] - z * stats.sem
    return live & ~((stats.count >= min_rollouts) & behind)


def prune_bounds(stats: MoveStats, live: torch.Tensor, min_rollouts: int, z: float, blueprint: torch.Tensor,
                 delta: float) -> torch.Tensor:
    """New live mask [G, M], the reference SPARTA's rule: once a live move has min_rollouts rollouts, it stops
    receiving more when its upper bound (mean + z standard errors) is below the best lower bound (mean - z
    standard errors) of the live moves that have min_rollouts; the blueprint move's mean counts delta higher,
    as in the delta rule. With delta 0 it never drops a move `prune` keeps (both moves' errors count)."""
    ready = stats.count >= min_rollouts
    bonus = torch.zeros_like(stats.mean).scatter_(1, blueprint[:, None], delta)
    mean, err = stats.mean + bonus, z * stats.sem
    best = (mean - err).masked_fill(~(live & ready), float("-inf")).max(1, keepdim=True).values
    return live & ~(ready & (mean + err < best))


def choose(stats: MoveStats, live: torch.Tensor, blueprint: torch.Tensor, delta: float
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The delta rule: (move [G], deviates [G] bool). The best live move is played only if its mean
    beats the blueprint move's mean by more than delta; otherwise the blueprint move."""
    mean = stats.mean
    best, best_mean = best_live(mean, live & (stats.count > 0))
    bp_mean = mean.gather(1, blueprint[:, None]).squeeze(1)
    has_bp = stats.count.gather(1, blueprint[:, None]).squeeze(1) > 0
    deviate = has_bp & (best != blueprint) & (best_mean - bp_mean > delta)
    return torch.where(deviate, best, blueprint), deviate
