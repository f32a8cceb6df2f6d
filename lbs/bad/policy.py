"""BAD's public agent for Hanabi: the network over public features and the public belief, and the
deterministic partial policy it samples (Foerster et al. 2019, eqs. 15-21 and appendix B).

The network scores every move from the public features, the public belief and a private view (the cards of
the other seats). Fixing the public part and a common random number xi (one per game and step, which every
player knows) makes it a deterministic partial policy: for any private view, the move at xi of the inverse
CDF of its softmax. The acting seat applies it to its real view; the belief update applies the same map to
drawn views. The first layer is split (public part + view part), so the public part is computed once per
game and each drawn view costs one small matrix product.

The baseline (value) is the same network with the acting seat's own hand added to the input (appendix B:
"present but zeroed out for the computation of the policy"), so it never reaches the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..configs import check, is_int
from ..hanabi.config import GameConfig
from ..hanabi.engine import tables


@dataclass(frozen=True)
class BadNetConfig:
    """The public agent's MLP (appendix B: two ReLU layers of 384, a linear softmax readout)."""

    hidden: int = 384
    """units per hidden layer"""
    layers: int = 2
    """hidden layers (the first takes public features, belief, view and, for the baseline, own hand)"""

    def __post_init__(self) -> None:
        for name in ("hidden", "layers"):
            check(self, name, is_int(getattr(self, name)) and getattr(self, name) >= 1, "an int >= 1")


def view_onehot(game: GameConfig, views: torch.Tensor) -> torch.Tensor:
    """[..., K, H] card ids (-1 empty) -> [..., K*H*T] float one-hot (zeros for empty slots), the layout of
    the observation's hands section."""
    t = game.card_types
    x = torch.nn.functional.one_hot(views.clamp(min=0), t) * (views >= 0)[..., None]
    return x.flatten(-3).float()


def view_legal(game: GameConfig, legal: torch.Tensor, can_hint: torch.Tensor, views: torch.Tensor
               ) -> torch.Tensor:
    """Legal moves [G, S, M] had the others held views [G, S, P-1, H]: plays and discards as in legal [G, M];
    a hint needs a token (can_hint [G]) and a matching card in the target's hand."""
    tb, c, h = tables(game, views.device), game.colors, game.hand_size
    feats = tb.card_features.index_select(0, (views + 1).flatten()).view(*views.shape, -1)
    hintable = feats.any(-2) & can_hint[:, None, None, None]  # [G, S, P-1, C+R]
    colour, rank = hintable[..., :c].flatten(2), hintable[..., c:].flatten(2)
    own = legal[:, None, : 2 * h].expand(-1, views.shape[1], -1)
    return torch.cat([own, colour, rank], -1)


def partial_policy(logits: torch.Tensor, legal: torch.Tensor, xi: torch.Tensor, beta: float,
                   greedy: bool = False) -> torch.Tensor:
    """The move the sampled deterministic partial policy names for each row: the inverse CDF at xi [...] (in
    [0, 1)) of softmax(beta * logits) over the legal moves (float64, so the same row gives the same move in
    any batch); greedy: the best legal move."""
    masked = logits.double().masked_fill(~legal, float("-inf"))
    best = masked.argmax(-1)
    if greedy:
        return best
    cum = (beta * masked).softmax(-1).nan_to_num(0.0).cumsum(-1)
    move = (cum <= xi[..., None] * cum[..., -1:]).sum(-1)
    pick = move.clamp(max=logits.shape[-1] - 1)
    ok = legal.gather(-1, pick[..., None]).squeeze(-1)
    return torch.where(ok, pick, best)


class BadNet(nn.Module):
    """Scores of every move (policy logits) and the baseline, from public features, the public belief and
    a private view (module doc)."""

    def __init__(self, game: GameConfig, cfg: BadNetConfig):
        super().__init__()
        self.game, self.cfg = game, cfg
        p, h, t = game.players, game.hand_size, game.card_types
        self.public_in = nn.Linear(game.public_dim + p * h * t, cfg.hidden)
        self.view_in = nn.Linear((p - 1) * h * t, cfg.hidden, bias=False)
        self.own_in = nn.Linear(h * t, cfg.hidden, bias=False)
        self.trunk = nn.Sequential(*[m for _ in range(cfg.layers - 1)
                                     for m in (nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU())])
        self.policy_head = nn.Linear(cfg.hidden, game.num_moves)
        self.value_head = nn.Linear(cfg.hidden, 1)

    def public_part(self, publ: torch.Tensor, belief: torch.Tensor) -> torch.Tensor:
        """[N, hidden] the first layer's public input (once per game, shared by every drawn view)."""
        return self.public_in(torch.cat([publ, belief], -1))

    def logits(self, public: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
        """[..., M] move scores for public parts [..., hidden] and views [..., (P-1)*H*T] (broadcast)."""
        return self.policy_head(self.trunk(torch.relu(public + self.view_in(view))))

    def value(self, public: torch.Tensor, view: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
        """[...] the baseline, which also sees the acting seat's own hand own [..., H*T]."""
        x = torch.relu(public + self.view_in(view) + self.own_in(own))
        return self.value_head(self.trunk(x)).squeeze(-1)
