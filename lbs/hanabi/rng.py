"""Counter-based random numbers from integer hashing.

torch's generators differ between CPU and CUDA; a hash of (seed, counters) computed with exact
integer ops gives the same numbers on every device, needs no generator state, and vectorises.
"""

from __future__ import annotations

import torch

_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, m: int) -> torch.Tensor:
    """(x * m) mod 2**32 for 0 <= x < 2**32, 0 <= m < 2**32, without int64 overflow: m - 2**32 has the same
    residue and, like m below 2**31, a product with x under 2**63 in size; & keeps the low 32 bits of the
    two's-complement result."""
    return (x * (m if m < 2**31 else m - 2**32)) & _M32


def hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer mixer (lowbias32); input and output in [0, 2**32) as int64."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def hash_keys(*parts: torch.Tensor | int) -> torch.Tensor:
    """Hash broadcastable int64 tensors (seed, counters, ...) into uniform 32-bit keys."""
    h: torch.Tensor | int = 0x9E3779B9
    for p in parts:
        p = torch.as_tensor(p, dtype=torch.int64)
        h = hash32((p & _M32) ^ h)
        h = hash32(((p >> 32) & _M32) ^ h)
    return h  # type: ignore[return-value]


def uniform(*parts: torch.Tensor | int) -> torch.Tensor:
    """Floats in [0, 1) from hashed counters (float64 keeps all 32 bits)."""
    return hash_keys(*parts).to(torch.float64) / 2.0**32


def permutation_keys(n: int, *parts: torch.Tensor) -> torch.Tensor:
    """Unique sort keys [..., n]; argsort gives a uniform random permutation, the same on any device."""
    idx = torch.arange(n, device=parts[0].device)
    return hash_keys(*[p.unsqueeze(-1) for p in parts], idx) * n + idx
