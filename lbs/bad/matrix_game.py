"""The Bayesian action decoder's two-step matrix game (Foerster et al., ICML 2019, section 4.1, Figure 3),
exact, batched over independent runs on the CPU.

Two cards c0, c1, each uniform in {0, 1}, are dealt privately to agent 0 and agent 1. Agent 0 sees c0 and
plays u0 in {0, 1, 2}; agent 1 sees c1 and u0 and plays u1 in {0, 1, 2}; both get PAYOFF[c0, c1, u0, u1].
The tensor is the one of the paper's proof-of-principle notebook (https://bit.ly/2P3YOyd, DeepMind's BAD
matrix-game notebook), written out here by hand.

Three learners, all trained by policy gradient with Adam on batches of deals, with a centralised learned
baseline per agent (an MLP on both cards) and no entropy bonus:

- "pg": agent 0 a softmax table card -> action; agent 1 an MLP on one-hot(u0) ++ one-hot(c1).
- "bad": agent 0 samples a deterministic partial policy (an action for every card, from its softmax table)
  and plays the one of its real card; the public belief over c0 is the exact Bayesian update on that
  partial policy (exact_belief); agent 1's MLP reads one-hot(u0) ++ belief ++ one-hot(c1). Agent 0's
  gradient uses the log-probability of its real card's action.
- "bad_cf": as "bad", but agent 0's gradient uses the log-probability of the whole sampled partial policy
  (the sum over all cards: counterfactual gradients).

Every run has its own parameters along a leading run axis (bmm over runs); one Adam over them is one
independent Adam per run, since Adam is elementwise and the loss is a sum of per-run losses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

C = 2
"""Cards per agent (each dealt uniformly)."""
A = 3
"""Actions per agent."""

PAYOFF = torch.tensor([
    [[[10, 0, 0], [4, 8, 4], [10, 0, 0]], [[0, 0, 10], [4, 8, 4], [0, 0, 10]]],
    [[[0, 0, 10], [4, 8, 4], [0, 0, 0]], [[10, 0, 0], [4, 8, 4], [10, 0, 0]]],
], dtype=torch.float32)
"""PAYOFF[c0, c1, u0, u1]: the reward of a deal (cards c0, c1) and the two actions."""

MODES = ("pg", "bad", "bad_cf")


def optimal_value(payoff: torch.Tensor = PAYOFF) -> float:
    """The best expected reward of any joint policy (cards uniform), by brute force over all deterministic
    policies: agent 0 a map card -> action, agent 1 a map (card, u0) -> action. A deterministic optimum
    exists (the expected reward is linear in each agent's mixed policy)."""
    nc, _, na, _ = payoff.shape
    best = float("-inf")
    for pi0 in itertools.product(range(na), repeat=nc):
        # given pi0, agent 1 best-responds independently at each (c1, u0): sum over the c0 that send u0
        total = 0.0
        for c1 in range(nc):
            for u0 in set(pi0):
                senders = [c0 for c0 in range(nc) if pi0[c0] == u0]
                total += max(sum(float(payoff[c0, c1, u0, u1]) for c0 in senders) for u1 in range(na))
        best = max(best, total / (nc * nc))
    return best


def exact_belief(cf_actions: torch.Tensor, u0: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """The public belief over agent 0's card after it played u0 under the sampled partial policy:
    b(c) proportional to prior(c) * 1[cf_actions(c) == u0].

    cf_actions: [..., C] the action the partial policy gives each card; u0: [...] the action played (the
    real card's entry of cf_actions, so the belief is never empty); prior: [C] or [..., C]. Returns [..., C].
    """
    w = prior * (cf_actions == u0.unsqueeze(-1)).to(prior.dtype)
    return w / w.sum(-1, keepdim=True)


@dataclass
class Config:
    """One batch of independent training runs of one learner."""

    runs: int = 1000
    """Independent runs trained at once (each its own parameters, baselines and Adam state)."""
    episodes: int = 15000
    """Updates per run (each one Adam step on `batch` fresh deals); the x-axis of the paper's Figure 3."""
    batch: int = 32
    """Deals per update per run (the paper's batch size)."""
    lr: float = 1e-3
    """Adam's learning rate (the paper: default TensorFlow Adam settings, whose learning rate is 1e-3)."""
    hidden: int = 32
    """Hidden units of agent 1's MLP and of both baselines."""
    seed: int = 0
    """Seed of the torch.Generator that draws initial parameters, deals and actions."""
    mode: str = "bad_cf"
    """The learner: "pg", "bad" or "bad_cf" (module docstring)."""
    every: int = 100
    """Updates per reading: train returns the mean reward over each block of this many updates."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r}: one of {MODES}")
        for name in ("runs", "episodes", "batch", "hidden", "every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: must be >= 1")
        if not self.lr > 0:
            raise ValueError(f"lr {self.lr}: must be > 0")


def _linear(runs: int, fan_in: int, fan_out: int, g: torch.Generator) -> list[torch.Tensor]:
    """Per-run weights [R, in, out] and bias [R, out], uniform in +-1/sqrt(fan_in) (torch.nn.Linear's
    default)."""
    bound = fan_in ** -0.5
    w = (torch.rand(runs, fan_in, fan_out, generator=g) * 2 - 1) * bound
    b = (torch.rand(runs, fan_out, generator=g) * 2 - 1) * bound
    return [w.requires_grad_(), b.requires_grad_()]


def _mlp(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """One hidden ReLU layer, per run, on inputs shared by all runs: x [K, in] -> [R, K, out]."""
    w1, b1, w2, b2 = params
    h = torch.relu(torch.einsum("ki,rih->rkh", x, w1) + b1.unsqueeze(1))
    return torch.einsum("rkh,rho->rko", h, w2) + b2.unsqueeze(1)


def _sample(cdf: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """One action per row of cdf [..., A] (cumulative action probabilities), by inverse CDF on the
    generator's uniforms."""
    u = torch.rand(cdf.shape[:-1] + (1,), generator=g)
    return (cdf < u).sum(-1).clamp_(max=cdf.shape[-1] - 1)


def _one_hot(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, n).float()


def agent1_inputs(mode: str, prior: torch.Tensor) -> torch.Tensor:
    """Every distinct input of agent 1's MLP, [K, in]: row (u0 * M + m) * C + c1 for "pg" (M = 1, in =
    A + C: one-hot(u0) ++ one-hot(c1)); for "bad"/"bad_cf" m is the set of cards the partial policy maps
    to u0 as bits (1 .. 2^C - 1, stored as m - 1), and the row is one-hot(u0) ++ exact_belief ++
    one-hot(c1). Training evaluates the MLP on these rows and indexes them per deal (same gradient as
    feeding every deal, fewer rows)."""
    u0 = torch.arange(A)
    c1 = torch.arange(C)
    if mode == "pg":
        uu, cc = torch.meshgrid(u0, c1, indexing="ij")
        return torch.cat([_one_hot(uu.reshape(-1), A), _one_hot(cc.reshape(-1), C)], -1)
    masks = torch.arange(1, 2 ** C)
    cf = (masks.unsqueeze(-1) >> torch.arange(C)) & 1  # [M, C]: action 1 on the set's cards, else 0
    belief = exact_belief(cf, torch.ones(len(masks), dtype=torch.long), prior)  # [M, C]
    uu, mm, cc = torch.meshgrid(u0, masks - 1, c1, indexing="ij")
    return torch.cat([_one_hot(uu.reshape(-1), A), belief[mm.reshape(-1)], _one_hot(cc.reshape(-1), C)], -1)


def train(cfg: Config) -> torch.Tensor:
    """Train cfg.runs independent runs of cfg.mode for cfg.episodes updates; the mean reward of each run
    over each block of cfg.every updates, [runs, ceil(episodes / every)] (the last block may be short)."""
    g = torch.Generator().manual_seed(cfg.seed)
    R, B, H = cfg.runs, cfg.batch, cfg.hidden
    bad = cfg.mode != "pg"
    prior = torch.full((C,), 1.0 / C)
    x1 = agent1_inputs(cfg.mode, prior)  # [K, in]
    n_sets = 2 ** C - 1 if bad else 1
    theta0 = torch.zeros(R, C, A, requires_grad=True)  # agent 0's logits per card
    pol1 = _linear(R, x1.shape[1], H, g) + _linear(R, H, A, g)
    base0 = _linear(R, 2 * C, H, g) + _linear(R, H, 1, g)
    base1 = _linear(R, 2 * C, H, g) + _linear(R, H, 1, g)
    opt = torch.optim.Adam([theta0, *pol1, *base0, *base1], lr=cfg.lr, foreach=False, fused=True)
    payoff = PAYOFF.reshape(-1)
    cards = torch.arange(C)  # the C * C deals (c0, c1), row c0 * C + c1: the baselines' inputs
    both = torch.cat([_one_hot(cards.repeat_interleave(C), C), _one_hot(cards.repeat(C), C)], -1)
    rows = torch.arange(R).unsqueeze(1)
    bits = 2 ** torch.arange(C)
    readings, block = [], torch.zeros(R)
    for step in range(cfg.episodes):
        c0 = torch.randint(C, (R, B), generator=g)
        c1 = torch.randint(C, (R, B), generator=g)
        logp_table = torch.log_softmax(theta0, -1)  # [R, C, A]
        cdf0 = logp_table.detach().exp().cumsum(-1)
        if bad:
            cf = _sample(cdf0.unsqueeze(1).expand(R, B, C, A), g)  # [R, B, C]: the sampled partial policy
            u0 = cf.gather(2, c0.unsqueeze(-1)).squeeze(-1)
            lp_all = logp_table[rows.unsqueeze(-1), torch.arange(C), cf]  # [R, B, C]
            if cfg.mode == "bad_cf":
                logp0 = lp_all.sum(-1)
            else:
                logp0 = lp_all.gather(2, c0.unsqueeze(-1)).squeeze(-1)
            m = ((cf == u0.unsqueeze(-1)).long() * bits).sum(-1) - 1  # the cards that play u0, as bits
        else:
            u0 = _sample(cdf0[rows, c0], g)
            logp0 = logp_table[rows, c0, u0]
            m = torch.zeros_like(u0)
        k = (u0 * n_sets + m) * C + c1
        lp1 = torch.log_softmax(_mlp(pol1, x1), -1)[rows, k]  # [R, B, A]
        u1 = _sample(lp1.detach().exp().cumsum(-1), g)
        logp1 = lp1.gather(2, u1.unsqueeze(-1)).squeeze(-1)
        r = payoff[((c0 * C + c1) * A + u0) * A + u1]  # [R, B]
        v = torch.cat([_mlp(base0, both), _mlp(base1, both)], -1)[rows, c0 * C + c1]  # [R, B, 2]
        v0, v1 = v.unbind(-1)
        pg = -((r - v0.detach()) * logp0 + (r - v1.detach()) * logp1)
        loss = (pg + (r - v0) ** 2 + (r - v1) ** 2).mean(1).sum()  # per run: mean over its deals
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        block += r.mean(1)
        n = step % cfg.every + 1
        if n == cfg.every or step == cfg.episodes - 1:
            readings.append(block / n)
            block = torch.zeros(R)
    return torch.stack(readings, 1)
