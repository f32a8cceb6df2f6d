"""Advantage actor-critic for BAD's public agent, as pure functions of a rollout's tensors.

The policy gradient of the sampled partial policy is that of the move it named on the real view (the
paper's estimator, not the counterfactual one): -A log pi(u | public, belief, view), with the advantage
A = R - V from the discounted return R and the baseline V (which also sees the mover's own hand). The
baseline's squared error is weighed by `value_weight`; an entropy bonus keeps the policy exploring.
"""

from __future__ import annotations

import torch

from .policy import BadNet
from .selfplay import Rollout

ILLEGAL = -1e9
"""logit of an illegal move in the loss (finite, so padded rows with no legal move stay finite)"""


def discounted_returns(reward: torch.Tensor, active: torch.Tensor, gamma: float) -> torch.Tensor:
    """[T, G] the discounted sum of the rewards from each move to the game's end (0 on padding rows)."""
    out = torch.zeros_like(reward)
    acc = torch.zeros_like(reward[0])
    for t in range(reward.shape[0] - 1, -1, -1):  # over the moves of a round, never over games
        acc = (reward[t] + gamma * acc) * active[t]
        out[t] = acc
    return out


def a2c_loss(net: BadNet, r: Rollout, gamma: float, entropy: float, value_weight: float
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss, metrics) of one rollout: policy gradient with the baseline, baseline error, entropy bonus;
    every term a mean over the moves actually made."""
    public = net.public_part(r.publ, r.belief)
    logp = net.logits(public, r.view).masked_fill(~r.legal, ILLEGAL).log_softmax(-1)
    chosen = logp.gather(-1, r.move[..., None]).squeeze(-1)
    value = net.value(public, r.view, r.own)
    ret = discounted_returns(r.reward, r.active.float(), gamma)
    adv = ret - value.detach()
    w = r.active.float()
    n = w.sum().clamp(min=1)
    pg = -(adv * chosen * w).sum() / n
    ent = (-(logp.exp() * logp).sum(-1) * w).sum() / n
    v_err = ((ret - value) ** 2 * w).sum() / n
    loss = pg + value_weight * v_err - entropy * ent
    return loss, {"loss": loss.detach(), "policy_loss": pg.detach(), "value_error": v_err.detach(),
                  "entropy": ent.detach(), "advantage": (adv.abs() * w).sum() / n}
