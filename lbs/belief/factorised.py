"""The factorised Bayesian belief of the Bayesian action decoder (Foerster et al. 2019), as pure tensor maths.

One distribution per card slot over the card identities, from three factors: the counts C(c) of copies that
could be in the slots (a global factor), a mask of what the hints allow in each slot, and a likelihood
L(i, c) of the moves seen so far given slot i holds c. Two users share it: search's hand sampler
(lbs.search.bayes_belief: the searcher's own hand, likelihoods from the blueprint's greedy moves) and BAD's
public agent (lbs.bad.belief: every seat's hand, likelihoods from the sampled partial policy). They differ
in which slots, which counts and which policy; the maths below is the same, so it is written once.

Slots are a [G, K, T] axis: K slots per game (one hand, or every seat's hands flattened), T card types.
"""

from __future__ import annotations

import torch

from ..hanabi.rng import uniform

KINDS = ("v0", "v1", "v2")
"""the beliefs `marginals` gives: grounded (C x HM), self-consistent (V1), and Bayesian with a mix-in (V2)"""


def normalise(x: torch.Tensor) -> torch.Tensor:
    """x over its last axis summing to 1 (rows of zeros stay zero)."""
    return x / x.sum(-1, keepdim=True).clamp(min=1e-300)


def consistent(counts: torch.Tensor, weight: torch.Tensor, iterations: int) -> torch.Tensor:
    """BAD's eqs. 12/14: B(i, c) ~ max(C(c) - sum_{j != i} B(j, c), 0) weight(i, c), iterated from C x weight
    (counts [G, 1, T], weight [G, K, T]); a slot the iteration empties keeps its last distribution."""
    b = normalise(counts * weight)
    for _ in range(iterations):
        others = b.sum(1, keepdim=True) - b
        new = normalise((counts - others).clamp(min=0) * weight)
        b = torch.where(new.sum(-1, keepdim=True) > 0, new, b)
    return b


def marginals(kind: str, counts: torch.Tensor, allowed: torch.Tensor, loglike: torch.Tensor, iterations: int,
              mix: float, mix_with: str = "v0") -> torch.Tensor:
    """[G, K, T] float64 per-slot card probabilities (0 in empty slots) from counts [G, T], allowed [G, K, T]
    bool and loglike [G, K, T] (log L, -inf where ruled out): 'v0' grounded, 'v1' self-consistent, 'v2' the
    Bayesian belief (eq. 14) mixed with `mix` of the `mix_with` belief ('v0' or 'v1': BAD's paper uses v1)."""
    if kind not in KINDS:
        raise ValueError(f"belief kind {kind!r}: choose from {', '.join(KINDS)}")
    c = counts.double()[:, None, :]  # [G, 1, T]
    if kind == "v0":
        return normalise(allowed * c)
    if kind == "v1":
        return consistent(c, allowed.double(), iterations)
    like = (loglike - loglike.amax(-1, keepdim=True).clamp(min=-1e300)).exp()
    bayes = consistent(c, allowed * like, iterations)
    anchor = marginals(mix_with, counts, allowed, loglike, iterations, 0.0)
    return normalise((1 - mix) * bayes + mix * anchor)


def draw(p: torch.Tensor, held: torch.Tensor, m: int, keys: torch.Tensor) -> torch.Tensor:
    """m hands [G', m, K] long drawn slot by slot, independently, from the marginals p [G', K, T] by inverse
    CDF of hashed counters keyed by keys [G'] (the same keys, the same draws on any device); -1 in the slots
    not `held` [G', K]."""
    g, k, t = p.shape
    cum = p.cumsum(-1)
    dev = p.device
    u = uniform(keys.long()[:, None, None], torch.arange(m, device=dev)[None, :, None],
                torch.arange(k, device=dev)[None, None, :])  # [G', m, K]
    card = (u[..., None] * cum[:, None, :, -1:] >= cum[:, None]).sum(-1).clamp(max=t - 1)
    return torch.where(held[:, None, :], card, -1)


def enumerate_hands(p: torch.Tensor, held: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every assignment of the K slots (T^K of them) with its probability under the factorised marginals p
    [G', K, T]: (hands [G', T^K, K] long, -1 where not `held` [G', K]; weight [G', T^K] float64). Where T^K
    is small this replaces `draw`: the likelihood ratio is then the exact expectation, with no sampling noise
    (an empty slot's T copies of each assignment scale its numerator and denominator alike)."""
    g, k, t = p.shape
    dev = p.device
    grid = torch.cartesian_prod(*[torch.arange(t, device=dev)] * k).view(-1, k) if k > 1 else \
        torch.arange(t, device=dev)[:, None]  # [T^K, K]
    probs = p.gather(2, grid.T[None].expand(g, -1, -1)).transpose(1, 2)  # [G', T^K, K]
    probs = torch.where(held[:, None, :], probs, 1.0)
    hands = torch.where(held[:, None, :], grid[None], -1)
    return hands, probs.prod(-1)


def likelihood_ratio(hands: torch.Tensor, weight: torch.Tensor, like: torch.Tensor, t: int,
                     shrink: float = 0.0) -> torch.Tensor:
    """BAD's eq. 8 from S weighted draws per game: for every slot i and card c, the share of the draws (by
    weight [G', S]: 0/1 validity, or a probability) holding c in slot i under which the move is made (like
    [G', S], a chance in [0, 1]); hands [G', S, K], -1 in empty slots. Returns ratio [G', K, T] float64:
    shrunk towards the slot's average share by `shrink` pseudo-draws (a card drawn a few times gets no noisy
    0 or 1); a card no draw holds gets the average; where no draw makes the move, 1 (it says nothing)."""
    held = torch.nn.functional.one_hot(hands.clamp(min=0), t).double()
    held = held * (weight.double()[..., None] * (hands >= 0))[..., None]  # [G', S, K, T]
    den, num = held.sum(1), (held * like.double()[..., None, None]).sum(1)
    mean = num.sum(-1, keepdim=True) / den.sum(-1, keepdim=True).clamp(min=1e-300)
    pseudo = den + shrink
    ratio = torch.where(pseudo > 0, (num + shrink * mean) / pseudo.clamp(min=1e-300), mean)
    return torch.where(mean > 0, ratio, 1.0)


def drop_slot(x: torch.Tensor, gone: torch.Tensor, slot: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """x [R, H, T] after the card in `slot` [R] left the rows `gone` [R] bool (played or discarded): the later
    slots shift left, as the engine's hands do, and the new last slot holds `fill` (log L = 0: a new card)."""
    h = x.shape[1]
    j = torch.arange(h, device=x.device)
    src = torch.where(gone[:, None] & (j >= slot[:, None]), j + 1, j)  # [R, H]
    shifted = x.gather(1, src.clamp(max=h - 1)[..., None].expand_as(x))
    return torch.where((src < h)[..., None], shifted, fill)
