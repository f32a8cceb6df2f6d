"""bench_search --reference: the reference SPARTA is run with the project's workload, and its clock and
scores are read back (a stand-in binary plays the reference here)."""

from __future__ import annotations

import os

import pytest

from experiments.bench_search import Setting, _reference_rows, reference_sparta
from lbs.search.config import SearchConfig

STAND_IN = """#!/bin/sh
echo "--seed $4"
n=0
while [ $n -lt 100000 ]; do n=$((n + 1)); done
echo "env $FIBER_THREADS $BPBOT $SEARCH_N $SEARCH_THRESH $SEARCH_PLAYER $BOMB0 args $1 $2 $3" >&2
i=0
while [ $i -lt $3 ]; do echo "Final score $i : $((20 + i)) bomb: 0"; i=$((i + 1)); done
"""


def stand_in(tmp_path, text: str = STAND_IN) -> str:
    path = tmp_path / "sparta_eval"
    path.write_text(text)
    os.chmod(path, 0o755)
    return str(path)


def test_the_reference_runs_the_projects_workload_and_its_scores_are_read(tmp_path):
    cfg = SearchConfig(rollouts=10_000, delta=0.5, seat=1, keep_lost_points=True)
    ref = reference_sparta(stand_in(tmp_path), 2, 3, 0, cfg)
    assert ref["scores"] == [20, 21, 22]
    # the child's CPU time (it spins for about 0.07 s here), not this process's (it waits: about 1 ms)
    assert 0.03 <= ref["cpu"] <= ref["wall"] + 0.05
    assert ref["command"] == ("FIBER_THREADS=0 BPBOT=SmartBot SEARCH_N=10000 SEARCH_THRESH=0.5 "
                              "SEARCH_PLAYER=1 BOMB0=0 sparta_eval SearchBot 2 3 1")
    ref = reference_sparta(stand_in(tmp_path), 2, 1, 4, SearchConfig(rollouts=500, delta=0.05))
    assert "SEARCH_N=500 SEARCH_THRESH=0.05 SEARCH_PLAYER=0 BOMB0=1" in ref["command"]
    assert ref["command"].endswith("SearchBot 2 1 5")  # its seed 0 would mean "from the clock"
    rows = _reference_rows({**ref, "cpu": 60.0}, [Setting("sparta", 2, 1, False, 8192, 30.0, 1.0, 1.0, None,
                                                          60.0, 23.5)], 1)
    assert rows[-2].startswith("| reference SearchBot (C++) | 60.0 |")
    assert rows[-1] == "| sparta, 2 games at once | 30.0 | — | 23.50 | 2.00 |"


@pytest.mark.parametrize("text, message", [
    ("#!/bin/sh\necho 'Final score 0 : 20 bomb: 0'\n", "printed 1 final scores for 3 games"),
    ("#!/bin/sh\nexit 3\n", "returned non-zero exit status 3"),
])
def test_a_reference_that_fails_or_prints_too_few_scores_is_one_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        reference_sparta(stand_in(tmp_path, text), 2, 3, 0, SearchConfig())
