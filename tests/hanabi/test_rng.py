"""The counter-based random numbers are the lowbias32 mixer folded over each part's two 32-bit words: the
tensor code equals plain Python integer arithmetic on any input, edge words included, on every device."""

from __future__ import annotations

import pytest
import torch

from lbs.hanabi.rng import hash_keys, uniform

M32 = 0xFFFFFFFF


def mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def reference(*parts: int) -> int:
    h = 0x9E3779B9
    for p in parts:
        p &= (1 << 64) - 1  # the int64's two's-complement bits
        h = mix((p & M32) ^ h)
        h = mix(((p >> 32) & M32) ^ h)
    return h


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                    reason="needs CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
def test_hash_keys_equal_integer_arithmetic(device):
    g = torch.Generator().manual_seed(0)
    edges = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, -1, -(2**63)]
    a = torch.cat([torch.tensor(edges), torch.randint(-(2**63), 2**63 - 1, (400,), generator=g)])
    b = torch.cat([torch.tensor(edges[::-1]), torch.randint(0, 2**40, (400,), generator=g)])
    got = hash_keys(a.to(device), 7, b.to(device)).cpu()
    assert got.tolist() == [reference(x, 7, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert ((got >= 0) & (got <= M32)).all()
    u = uniform(a.to(device), 3).cpu()
    assert torch.equal(u, torch.tensor([reference(x, 3) / 2**32 for x in a.tolist()], dtype=torch.float64))
