"""R2D2 + VDN maths as pure functions of tensors (targets, losses, priorities, exploration).

Conventions: batch-first sequences [B, T, ...]; P players; A = num_moves + 1 actions (the last is
the no-op of players not to move). VDN: every seat acts each step and the team value is the sum
over players of each player's Q of its own action. Episodes are whole (no burn-in), padded to T
with a valid-step mask; the step after the last valid one is terminal, so nothing bootstraps past it.

`r2d2_loss` is the one "hot update" function: it runs both networks and returns the loss, new
sequence priorities and detached statistics without any host sync, so torch.compile can wrap it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.nn.functional as F

__all__ = [
    "QNet", "apex_epsilons", "double_q_bootstrap", "gather_actions", "huber", "large_margin_loss",
    "masked_huber_loss", "n_step_targets", "players_as_rows", "r2d2_loss", "rows_as_players",
    "sequence_priorities", "td_errors", "vdn_sum",
]


class QNet(Protocol):
    """What r2d2_loss needs from a network (duck-typed; lbs.models.qnet.QNet fits).

    forward_heads(priv [N, T, Dpriv], publ [N, T, Dpubl], legal [N, T, A] bool, hid) -> (q [N, T, A],
    move logits [N, T, A] (q itself without a policy network), aux logits [N, T, H, K] or None, hid).
    """

    def forward_heads(self, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor, hid: Any
                      ) -> tuple: ...

    def initial_state(self, batch: int, device: torch.device) -> Any: ...


def gather_actions(q: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Q of the taken action: q [..., A], action [...] long -> [...]."""
    return q.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)


def vdn_sum(q_player: torch.Tensor) -> torch.Tensor:
    """Team value as the sum over players: [B, T, P] -> [B, T]."""
    return q_player.sum(-1)


def double_q_bootstrap(online_q: torch.Tensor, target_q: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Double-Q state value: each player's target Q at the online argmax over its legal actions, VDN-summed.

    online_q, target_q [B, T, P, A], legal [B, T, P, A] bool -> [B, T]. Rows with no legal action
    (padding) pick action 0; callers mask them out. Illegal entries are never evaluated, so -inf or
    garbage Q of illegal moves in the target net cannot leak in.
    """
    low = torch.finfo(online_q.dtype).min
    best = online_q.detach().masked_fill(~legal, low).argmax(-1)  # [B, T, P]
    return vdn_sum(gather_actions(target_q, best))


def n_step_targets(rewards: torch.Tensor, mask: torch.Tensor, bootstrap: torch.Tensor, gamma: float,
                   n: int, cut: torch.Tensor | None = None) -> torch.Tensor:
    """target_t = sum_{k<m} gamma^k r_{t+k} + gamma^m bootstrap_{t+m}, m = n, truncated at the episode end.

    rewards, bootstrap [B, T] float, mask [B, T] bool (valid steps, a prefix of each row) -> [B, T].
    Rewards past the last valid step count as 0 and bootstrap_{t+m} is used only when step t+m is
    valid: the episode ended before it otherwise (R2D2 on full episodes). Invalid t give 0.
    cut [B, T] bool: steps where the behaviour left the policy being evaluated; a return stops before the
    first such step after t (m is then that step's distance) and bootstraps there, so the target is the
    evaluated policy's value of (s_t, a_t) whatever the behaviour did later (Watkins' cut, off-policy
    evaluation without importance weights).
    """
    if n < 1:
        raise ValueError(f"n_step_targets: n must be >= 1, got {n}")
    T = rewards.shape[1]
    m = mask.to(rewards.dtype)
    r = F.pad(rewards * m, (0, n))  # [B, T + n], zeros past the end
    valid = F.pad(m, (0, n))  # [B, T + n]: is step t+k inside the episode?
    boot = F.pad(bootstrap, (0, n))
    go = F.pad(cut.to(rewards.dtype), (0, n)) if cut is not None else torch.zeros_like(valid)
    target = torch.zeros_like(rewards)
    alive = torch.ones_like(rewards)  # no cut yet among steps t+1 .. t+k
    for k in range(n):
        target = target + gamma**k * alive * r[:, k : k + T]
        nxt = k + 1
        stop = go[:, nxt : nxt + T] if nxt < n else torch.ones_like(rewards)  # bootstrap at t+k+1?
        here = alive * stop * valid[:, nxt : nxt + T]
        target = target + gamma**nxt * here * boot[:, nxt : nxt + T]
        alive = alive * (1 - stop)
    return target * m


def td_errors(q_taken: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """targets - Q(s_t, a_t) on valid steps, 0 elsewhere: [B, T] (targets are not differentiated)."""
    return (targets.detach() - q_taken) * mask.to(q_taken.dtype)


def huber(x: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Elementwise Huber: x^2/2 for |x| <= delta, delta (|x| - delta/2) beyond."""
    a = x.abs()
    return torch.where(a <= delta, 0.5 * x * x, delta * (a - 0.5 * delta))


def masked_huber_loss(td: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor,
                      delta: float = 1.0) -> torch.Tensor:
    """Scalar loss: Huber summed over valid steps per sequence, times IS weight, mean over the batch.

    td, mask [B, T], weights [B]. Summing over time (not averaging) follows the public R2D2 Hanabi
    learner that the reference learning rate was tuned with.
    """
    per_seq = (huber(td, delta) * mask.to(td.dtype)).sum(1)  # [B]
    return (per_seq * weights.to(td.dtype)).mean()


def large_margin_loss(q: torch.Tensor, action: torch.Tensor, legal: torch.Tensor, mask: torch.Tensor,
                      margin: float) -> torch.Tensor:
    """DQfD's supervised loss: max_a [Q(s, a) + l(a_E, a)] - Q(s, a_E), with l(a_E, a) = margin for a != a_E
    and 0 for a = a_E, the max over legal actions. It is 0 exactly when the held move a_E (a demonstrator's,
    or an anchor policy's) beats every other legal move by at least `margin`, so it keeps that move best
    while leaving the scale of Q to the TD loss.

    q [B, T, P, A], action [B, T, P] (the held moves, the no-op for seats not to move: their only legal
    action, so their term is 0), legal [B, T, P, A] bool, mask [B, T] bool. Scalar: summed over seats and
    valid steps per sequence (as the TD loss is), mean over the batch.
    """
    low = torch.finfo(q.dtype).min
    a_e = action.long().unsqueeze(-1)  # [B, T, P, 1]
    ell = torch.full_like(q, margin).scatter(-1, a_e, 0.0)  # [B, T, P, A]
    best = (q + ell).masked_fill(~legal, low).amax(-1)  # [B, T, P]
    per_step = (best - q.gather(-1, a_e).squeeze(-1)).sum(-1)  # [B, T]
    return torch.where(mask.bool(), per_step, torch.zeros_like(per_step)).sum(1).mean()


def sequence_priorities(td: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """R2D2 priority eta max|td| + (1 - eta) mean|td| over each sequence's valid steps: [B, T] -> [B]."""
    m = mask.to(td.dtype)
    a = td.detach().abs() * m
    mean = a.sum(1) / m.sum(1).clamp_min(1.0)
    return eta * a.amax(1) + (1.0 - eta) * mean


def apex_epsilons(n: int, base: float = 0.1, alpha: float = 7.0, device: torch.device | str = "cpu"
                  ) -> torch.Tensor:
    """Ape-X per-actor exploration eps_i = base^(1 + alpha i / (n - 1)), i < n; n = 1 gives [base]. [n]."""
    if n < 1:
        raise ValueError(f"apex_epsilons: n must be >= 1, got {n}")
    i = torch.arange(n, dtype=torch.float64, device=device)
    expo = 1.0 + alpha * i / max(n - 1, 1)
    return torch.pow(torch.tensor(base, dtype=torch.float64, device=device), expo).float()


def players_as_rows(x: torch.Tensor) -> torch.Tensor:
    """[B, T, P, ...] -> [B * P, T, ...]: each seat's sequence becomes one network row."""
    B, T, P = x.shape[:3]
    return x.transpose(1, 2).reshape(B * P, T, *x.shape[3:])


def rows_as_players(x: torch.Tensor, B: int) -> torch.Tensor:
    """[B * P, T, ...] -> [B, T, P, ...] (inverse of players_as_rows)."""
    P = x.shape[0] // B
    return x.reshape(B, P, *x.shape[1:]).transpose(1, 2)


def _run(net: QNet, priv: torch.Tensor, publ: torch.Tensor, legal: torch.Tensor) -> tuple:
    """Whole sequences from the initial state: the net's forward_heads (q, logits, aux, hid)."""
    return net.forward_heads(priv, publ, legal, net.initial_state(priv.shape[0], priv.device))


def r2d2_loss(online_net: QNet, target_net: QNet, batch: dict[str, torch.Tensor], weights: torch.Tensor,
              gamma: float = 0.999, n: int = 3, eta: float = 0.9, huber_delta: float = 1.0,
              aux_weight: float = 0.25, public_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
              evaluate: torch.Tensor | None = None, anchor: torch.Tensor | None = None,
              margin: float = 0.1, anchor_weight: float = 0.0,
              ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """One R2D2 + VDN learner step's maths: (loss scalar, priorities [B], stats of 0-d tensors).

    batch: priv [B, T, P, Dpriv] float, publ [B, T, P, Dpubl] (or public_fn(priv) when absent),
    legal [B, T, P, A] bool, action [B, T, P] long, reward [B, T], mask [B, T] bool; optional
    aux_target [B, T, P, H] long (class per own card, -1 = no card). weights [B]: IS weights.
    Both nets run over every seat's sequence from their initial state (forward_heads: Q as the value head
    gives it, never held to a policy network's move); the target net only under no_grad. When the online net
    has an aux head and aux_weight > 0, the aux loss (cross-entropy over valid steps and real cards, classes
    as lbs.rl.actors.aux_targets, -1 = no card) is added with aux_weight; it then requires
    batch["aux_target"]. Under DDP, register forward_heads with fabric.mark_forward_method so it goes
    through the wrapper.
    evaluate [B, T, P] long: the moves of a fixed policy whose action values are learnt (policy evaluation):
    the bootstrap is the target network's Q of its moves, not of the online argmax, and each return stops
    where the behaviour's move differs from it (n_step_targets' cut). anchor [B, T, P] long: moves held
    best by anchor_weight times large_margin_loss (margin `margin`), beside the TD loss.
    """
    priv, legal, action = batch["priv"], batch["legal"], batch["action"]
    reward, mask = batch["reward"], batch["mask"]
    if "publ" in batch:
        publ = batch["publ"]
    elif public_fn is not None:
        publ = public_fn(priv)
    else:
        raise KeyError("r2d2_loss: batch has no 'publ' and no public_fn was given to derive it from 'priv'")
    B, T, P, A = legal.shape
    if action.shape != (B, T, P) or reward.shape != (B, T) or mask.shape != (B, T):
        raise ValueError(f"r2d2_loss: shapes legal {tuple(legal.shape)}, action {tuple(action.shape)}, "
                         f"reward {tuple(reward.shape)}, mask {tuple(mask.shape)} disagree on [B, T, P]")
    rows = (players_as_rows(priv), players_as_rows(publ), players_as_rows(legal))

    heads = _run(online_net, *rows)
    aux_logits = heads.aux if aux_weight > 0 else None
    if aux_logits is not None and "aux_target" not in batch:
        raise KeyError("r2d2_loss: the online net has an aux head but the batch has no 'aux_target' "
                       "(set aux_weight=0 to train without the auxiliary loss)")
    # targets and TD errors in float32 even under bf16/fp16 nets: n-step sums with gamma near 1 need it
    online_q = rows_as_players(heads.q, B).float()  # [B, T, P, A]
    with torch.no_grad():
        target_q = rows_as_players(_run(target_net, *rows).q, B).float()  # [B, T, P, A]

    q_taken = vdn_sum(gather_actions(online_q, action))  # [B, T]
    if evaluate is None:
        bootstrap, cut = double_q_bootstrap(online_q.detach(), target_q, legal), None  # [B, T]
    else:
        bootstrap = vdn_sum(gather_actions(target_q, evaluate))
        cut = (action != evaluate).any(-1)  # the mover left the evaluated policy
    targets = n_step_targets(reward.to(q_taken.dtype), mask, bootstrap, gamma, n, cut)  # [B, T]
    td = td_errors(q_taken, targets, mask)  # [B, T]
    loss = masked_huber_loss(td, mask, weights, huber_delta)
    priorities = sequence_priorities(td, mask, eta)  # [B]

    m = mask.to(q_taken.dtype)
    steps = m.sum().clamp_min(1.0)
    stats = {
        "rl_loss": loss.detach(),
        "q_taken": (q_taken.detach() * m).sum() / steps,
        "target": (targets * m).sum() / steps,
        "abs_td": td.detach().abs().sum() / steps,
        "priority": priorities.mean(),
    }
    if aux_logits is not None:
        tgt = players_as_rows(batch["aux_target"]).long()  # [N, T, H]
        step_ok = players_as_rows(mask.bool().unsqueeze(-1).expand(B, T, P))[..., None]  # [N, T, 1]
        tgt = torch.where(step_ok & (tgt >= 0), tgt, torch.full_like(tgt, -1))
        ce = F.cross_entropy(aux_logits.flatten(0, -2), tgt.flatten(), ignore_index=-1, reduction="sum")
        aux_loss = ce / (tgt >= 0).sum().clamp_min(1)
        loss = loss + aux_weight * aux_loss
        stats["aux_loss"] = aux_loss.detach()
    if anchor is not None and anchor_weight > 0:
        margin_loss = large_margin_loss(online_q, anchor, legal, mask, margin)
        loss = loss + anchor_weight * margin_loss
        stats["margin_loss"] = margin_loss.detach()
        stats["explored"] = ((cut & mask).sum() / steps if cut is not None
                             else torch.zeros((), device=mask.device))
    stats["loss"] = loss.detach()
    return loss, priorities, stats
