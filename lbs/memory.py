"""The C allocator's settings for batched CPU work, applied once when lbs is imported.

glibc hands every freed block over its mmap threshold (32 MB at most) back to the system and maps the
next one afresh, so a batched step that allocates and frees tensors of tens of megabytes (the rollouts'
observations, the exact range's hands) pays a page fault per 4 KB page, every step: on this project's
search that was a tenth of the CPU time, most of it in the kernel. Keeping such blocks in the heap for
reuse costs the peak's memory staying with the process. A user's own settings (the MALLOC_*_ variables
or GLIBC_TUNABLES) are left as they are, as is every C library but glibc.
"""

from __future__ import annotations

import ctypes
import os
import platform

KEEP_BYTES = 1 << 30
"""Blocks up to this size come from (and return to) the heap; free heap top up to this size is kept."""

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
