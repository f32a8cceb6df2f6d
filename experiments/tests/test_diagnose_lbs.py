"""diagnose_lbs --plays: every belief a searcher can draw from rates the same plays, and the table adds up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "LBS_EAGER": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def test_plays_are_rated_by_the_learned_and_the_bayesian_belief():
    """On the 2-colour pair (a public-LSTM blueprint, so BAD's belief can ask it about drawn hands): both
    beliefs and the counting prior rate every play, the bins hold every play, and each rating is a share;
    --knowledge none drops the column drawn within SmartBot's card knowledge."""
    r = subprocess.run([sys.executable, "-m", "experiments.diagnose_lbs", "--plays", "--games", "4",
                        "--samples", "16", "--threads", "1", "--knowledge", "none",
                        "--blueprint", str(ROOT / "checkpoints" / "blueprint_2c.pt")],
                       capture_output=True, text=True, env=ENV, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    head = re.search(r"(\d+) blueprint plays by seat 0 in 4 games: scored ([\d.]+)%; mean P\(playable\) "
                     r"\(16 samples\): learned belief ([\d.]+)%, Bayesian belief ([\d.]+)%, counting prior "
                     r"([\d.]+)%", r.stdout)
    assert head, r.stdout
    plays, shares = int(head.group(1)), [float(x) for x in head.groups()[1:]]
    assert plays > 0 and all(0 <= x <= 100 for x in shares)
    rows = re.findall(r"^\| (\d\.\d)-\d\.\d \| (\d+) \|", r.stdout, flags=re.M)
    assert sum(int(n) for _, n in rows) == plays
    assert "| Bayesian belief: mean P % |" in r.stdout and "within the knowledge" not in r.stdout
    for name in ("learned belief", "Bayesian belief"):
        assert re.search(rf"^{name}: mean P", r.stdout, flags=re.M), r.stdout
