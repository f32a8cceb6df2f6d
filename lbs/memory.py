"""The C allocator's settings for batched CPU work, applied once when lbs is imported.

glibc hands every freed block over its mmap threshold (32 MB at most) back to the system and maps the
next one afresh, so a batched step that allocates and frees tensors of tens of megabytes (the rollouts'
observations, the exact range's hands) pays a page fault per 4 KB page, every step: about 6% of SPARTA's
CPU time on SmartBot (69 -> 65 core-seconds per game), much of it in the kernel. Blocks up to KEEP_BYTES
now stay in the heap for reuse (after the first dozen or so steps: until the heap settles, small objects
can split a freed block and a copy is mapped afresh). A larger bound fragments the heap: at 1 GiB a
4-game SPARTA table on the shipped network peaked at 6.6 GB against 5.4 without the setting; at 64 MB it
peaks at 5.5 and SPARTA on SmartBot keeps the speed
(experiments/results/bench_search/bench_search_2026-11-26_smartbot_sparta_10k_cpu_compiled.md).
A user's own settings (the MALLOC_*_ variables or GLIBC_TUNABLES) are left as they are, as is every C
library but glibc.
"""

from __future__ import annotations

import ctypes
import os
import platform

KEEP_BYTES = 64 << 20
"""Blocks up to this size come from (and return to) the heap; free heap top up to this size is kept
(above the largest tensor of a rollout batch's observations, 43 MB for 8,192 two-player games)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")
"""Environment variables by which a user sets glibc's allocator: any of them set, lbs leaves it alone."""


def keep_freed_memory() -> bool:
    """Let glibc keep freed blocks of up to KEEP_BYTES for reuse; True if the setting was made here."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    mapped = libc.mallopt(_M_MMAP_THRESHOLD, KEEP_BYTES)
    trimmed = libc.mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES)
    return bool(mapped and trimmed)
