"""The allocator setting made on import: freed tensors of tens of megabytes are reused, not mapped again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lbs.hanabi import GameConfig
from lbs.memory import USER_SETTINGS

PROBE = """
import resource, torch
{imports}
x = torch.zeros({rows}, {dim}, dtype=torch.uint8)  # as a rollout batch's observations: 43 MB as floats
for _ in range(30):  # the heap settles: while small objects split a freed block, a dozen copies may grow it
    x.float()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    x.float()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
ROWS, DIM = 8192 * 2, GameConfig().private_dim  # every seat of 8,192 two-player games
PAGES = ROWS * DIM * 4 // 4096  # pages of one float copy


def _faults(imports: str, **env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    probe = PROBE.format(imports=imports, rows=ROWS, dim=DIM)
    out = subprocess.run([sys.executable, "-c", probe], env={**clean, **env}, capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setting is glibc's")
def test_importing_lbs_makes_freed_tensors_reused():
    assert _faults("") > 4 * PAGES  # glibc's default: every copy is mapped afresh
    assert _faults("import lbs") < PAGES  # with lbs imported: a freed block is reused


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setting is glibc's")
def test_a_users_own_malloc_setting_is_left_alone():
    assert _faults("import lbs", MALLOC_TOP_PAD_="0") > 4 * PAGES
