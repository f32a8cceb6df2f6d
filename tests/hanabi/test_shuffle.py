"""Colour shuffle: permuting a game commutes with encoding, legal moves and stepping."""

from __future__ import annotations

import pytest
import torch
from conftest import CONFIGS

from lbs.hanabi import encode, legal_moves, random_moves, reset, step
from lbs.hanabi.shuffle import (
    check_perms,
    identity_perms,
    inverse_perms,
    permute_move_values,
    permute_moves,
    permute_observation,
    permute_state,
    random_perms,
    unpermute_moves,
)

PARAMS = {"argvalues": list(CONFIGS.values()), "ids": list(CONFIGS.keys())}


@pytest.mark.parametrize("cfg", **PARAMS)
def test_permuting_commutes_with_encode_legal_and_step(cfg):
    b = 24
    seeds = torch.arange(b) + 500
    perm = random_perms(cfg, seeds, torch.zeros_like(seeds))
    check_perms(cfg, perm)
    if cfg.colors > 1:
        assert not bool((perm == identity_perms(cfg, b)).all(1).all()), "need non-trivial permutations"
    st = reset(cfg, seeds)
    steps = 0
    while not bool(st.done.all()):
        ps = permute_state(cfg, st, perm)
        assert torch.equal(encode(cfg, ps), permute_observation(cfg, encode(cfg, st), perm))
        v0 = encode(cfg, st, v0_belief=True)
        assert torch.allclose(encode(cfg, ps, v0_belief=True), permute_observation(cfg, v0, perm))
        assert torch.equal(legal_moves(cfg, ps), permute_move_values(cfg, legal_moves(cfg, st), perm))
        m = random_moves(cfg, st, seeds)
        pm = permute_moves(cfg, m, perm)
        assert torch.equal(unpermute_moves(cfg, pm, perm), m)
        nxt, r, d = step(cfg, st, m)
        pnxt, pr, pd = step(cfg, ps, pm, checked=True)
        assert permute_state(cfg, nxt, perm).equal(pnxt)
        assert torch.equal(r, pr) and torch.equal(d, pd)
        st = nxt
        steps += 1
    assert steps > 0


@pytest.mark.parametrize("cfg", [CONFIGS["p3"], CONFIGS["p2_c2"]], ids=["p3", "p2_c2"])
def test_permutation_algebra(cfg):
    b = 64
    seeds = torch.arange(b)
    perm = random_perms(cfg, seeds, torch.full_like(seeds, 3))
    inv = inverse_perms(perm)
    assert torch.equal(perm.gather(1, inv), identity_perms(cfg, b))
    st = reset(cfg, seeds)
    for _ in range(12):
        st, _, _ = step(cfg, st, random_moves(cfg, st, seeds))
    assert permute_state(cfg, permute_state(cfg, st, perm), inv).equal(st)
    assert permute_state(cfg, st, identity_perms(cfg, b)).equal(st)
    obs = encode(cfg, st)
    assert torch.equal(permute_observation(cfg, permute_observation(cfg, obs, perm), inv), obs)
    moves = torch.arange(cfg.num_moves).expand(b, -1)
    assert torch.equal(permute_moves(cfg, moves, perm).sort(1).values, moves), "a bijection on move ids"
    assert torch.equal(permute_moves(cfg, torch.full((b,), -1), perm), torch.full((b,), -1))
    q = torch.randn(b, cfg.num_moves)
    assert torch.equal(permute_move_values(cfg, q, perm).gather(1, permute_moves(cfg, moves, perm)), q)


def test_random_perms_are_seeded_and_uniform():
    cfg = CONFIGS["p2"]
    n = 6000
    seeds = torch.arange(n)
    a = random_perms(cfg, seeds, torch.zeros_like(seeds))
    assert torch.equal(a, random_perms(cfg, seeds, torch.zeros_like(seeds)))
    assert not torch.equal(a, random_perms(cfg, seeds, torch.ones_like(seeds)))
    check_perms(cfg, a)
    # each colour lands on each position about equally often (1/C each)
    freq = torch.nn.functional.one_hot(a, cfg.colors).float().mean(0)  # [C, C]
    assert bool(((freq - 1 / cfg.colors).abs() < 0.03).all())
    with pytest.raises(ValueError, match="not colour permutations"):
        check_perms(cfg, torch.zeros(2, cfg.colors, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[B, 5\]"):
        check_perms(cfg, torch.zeros(2, 3, dtype=torch.long))
