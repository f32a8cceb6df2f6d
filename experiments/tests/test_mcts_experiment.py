"""experiments/mcts.py with a learned evaluation function (RIS-MCTS-NR): it plays, and its record names the
function it valued the leaves with; a function for another game is one line. The rows beside the tree
searches (Table III) play the tree searches' deals under their scoring rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments import mcts
from experiments.common import claim
from lbs.hanabi import GameConfig, engine
from lbs.runs import release
from lbs.search import mcts_value as mv
from lbs.search.config import SearchConfig
from lbs.seeding import Stream, game_seeds

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def function_for(game: GameConfig, path: Path) -> Path:
    torch.manual_seed(0)
    fit = {"pairs": 1, "held_out_pairs": 0, "rms_train": 1.0, "rms_held_out": 1.0, "rms_constant": 2.0}
    return mv.save(path, mv.EvalFn(game, 8), mv.EvalFnConfig(hidden=8), fit, ["a.json"])


def test_valued_leaves_play_and_the_record_names_the_function(tmp_path):
    fn = function_for(GameConfig(players=2), tmp_path / "e.pt")
    flags = [sys.executable, "-m", "experiments.mcts", "--players", "2", "--games", "2", "--iterations", "2",
             "--modes", "ris-mcts", "--out", str(tmp_path / "out")]
    r = subprocess.run([*flags, "--evaluation", str(fn), "--beside", "vandenbergh"], capture_output=True,
                       text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"valued by {fn} (no simulation)" in r.stdout and "evaluation function: sha256" in r.stdout
    assert "learnt from a.json" in r.stdout and "| ris-mcts | random | 2 |" in r.stdout
    assert "| vandenbergh | — | — |" in r.stdout and "| mode | vs vandenbergh |" in r.stdout
    other = function_for(GameConfig(players=3), tmp_path / "e3.pt")
    bad = subprocess.run([*flags, "--evaluation", str(other)], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=300)
    assert bad.returncode != 0 and "is an evaluation function for" in bad.stderr
    assert "Traceback" not in bad.stderr
    simulated = subprocess.run([*flags, "--evaluation", str(fn), "--simulation", "smartbot"],
                               capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert simulated.returncode != 0 and "plays no simulation" in simulated.stderr
    assert "Traceback" not in simulated.stderr


def test_cut_simulations_and_a_depth_limit_play_and_are_recorded(tmp_path):
    flags = [sys.executable, "-m", "experiments.mcts", "--players", "2", "--games", "2", "--iterations", "6",
             "--modes", "mo-ismcts", "--out", str(tmp_path / "out")]
    r = subprocess.run([*flags, "--rollout-depth", "4", "--tree-depth", "1"], capture_output=True, text=True,
                       env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "cut after 4 moves (scored by the fireworks then); no tree node deeper than 1" in r.stdout
    assert "| mo-ismcts | random | 6 | " in r.stdout and " | 1.00 | " in r.stdout  # depth: root's children
    bad = subprocess.run([*flags, "--rollout-depth", "-1"], capture_output=True, text=True, env=ENV, cwd=ROOT,
                         timeout=300)
    assert bad.returncode != 0 and "rollout_depth" in bad.stderr and "Traceback" not in bad.stderr


def test_rows_beside_play_the_same_deals_under_the_same_rule():
    """A rule bot alone and SmartBot + SPARTA play the decks `play` deals for the seed (the SPARTA seat
    searching each of its turns at the budget given)."""
    game = GameConfig(players=2, bomb_zero=False)
    decks = engine.reset(game, game_seeds(Stream.EVAL, 3, 4)).deck
    alone = mcts.beside("vandenbergh", game, 4, 3, torch.device("cpu"))
    assert torch.equal(alone["decks"], decks) and alone["searched"] == 0
    assert ((alone["scores"] >= 0) & (alone["scores"] <= game.max_score)).all()
    cfg = SearchConfig(rollouts=40, min_rollouts=2, delta=0.5)
    sparta = mcts.beside("sparta", game, 1, 3, torch.device("cpu"), cfg)
    assert torch.equal(sparta["decks"], decks[:1]) and sparta["searched"] > 10 and sparta["rollouts"] == 40


def share(cards: torch.Tensor, allowed: torch.Tensor, playable: torch.Tensor) -> float:
    """The share of `cards` (ids) the slot allows that are playable; -1 where it allows none."""
    ok = allowed[cards]
    return float((ok & playable[cards]).sum() / ok.sum()) if bool(ok.any()) else -1.0


def test_mo_deck_chances_count_only_the_deck_and_are_undone_after():
    """--mo-deck-chances: within mo_deck_chances() the rules' chance that a mover's slot is playable is the
    share of the deck's cards (the world's own, not what the mover cannot see) that the slot's hints allow
    and that are playable, counted one game at a time here; outside it the chances count the mover's own
    cards too, and the patched functions are restored."""
    game = GameConfig(players=4, bomb_zero=False)
    state = engine.reset(game, game_seeds(Stream.EVAL, 3, 16))
    moves = torch.tensor([game.hand_size + 5] * 16)  # a few turns in: reveal rank to the next player
    for _ in range(6):
        legal = engine.legal_moves(game, state)
        pick = torch.where(legal.gather(1, moves[:, None]).squeeze(1), moves, legal.float().argmax(1))
        state, _, _ = engine.step(game, state, pick)
    seen: list[torch.Tensor] = []
    view = mcts.mcts_rules.state_view

    def spy(*args, **kw):
        v = view(*args, **kw)
        seen.append(v.p_play)
        return v

    mcts.mcts_rules.state_view = spy
    try:
        with mcts.mo_deck_chances():
            mcts.mcts_rules.table_ii_moves(game, state, False)
        mcts.mcts_rules.table_ii_moves(game, state, False)
    finally:
        mcts.mcts_rules.state_view = view
    assert mcts.mcts_rules.table_ii_moves.__module__ == "lbs.search.mcts_rules"
    deck_only, with_own = seen
    tb = engine.tables(game, state.device)
    differs = 0
    for g in range(16):
        mover = int(state.cur_player[g])
        deck = state.deck[g, int(state.deck_pos[g]):]
        own = state.hands[g, mover]
        for slot in range(game.hand_size):
            if own[slot] < 0:
                continue
            allowed = state.color_plausible[g, mover, slot][tb.card_color] & \
                state.rank_plausible[g, mover, slot][tb.card_rank]  # [T]
            playable = tb.card_rank == state.fireworks[g][tb.card_color]
            assert deck_only[g, slot].item() == pytest.approx(share(deck, allowed, playable))
            assert with_own[g, slot].item() == pytest.approx(share(torch.cat([deck, own[own >= 0]]), allowed,
                                                                   playable))
            differs += deck_only[g, slot].item() != pytest.approx(with_own[g, slot].item())
    assert differs > 0  # the two ways disagree somewhere in these games


def test_a_stopped_tree_search_table_writes_its_finished_rows_and_says_what_it_left(tmp_path):
    """The tree-search table plays a mode's games in lockstep, so a stop keeps whole rows: SIGTERM after the
    rule bot's row writes that row with a line naming the rows not played, and exits 128 + SIGTERM."""
    import signal

    cmd = [sys.executable, "-u", "-m", "experiments.mcts", "--players", "2", "--games", "4", "--iterations",
           "2000", "--modes", "ris-mcts", "--beside", "vandenbergh", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the rule bot's row is printed once its games are played
        if line.startswith("vandenbergh:"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    (line,) = [x for x in err.splitlines() if "stopped by SIGTERM" in x]
    assert "Traceback" not in err and "finished rows (vandenbergh)" in line and "not played: ris-mcts" in line
    (record,) = tmp_path.glob("mcts_*.md")
    text = record.read_text()
    assert "- stopped by SIGTERM: not played: ris-mcts" in text and "| vandenbergh |" in text
    assert "| ris-mcts |" not in text


def test_a_stopped_row_resumes_from_its_progress_and_plays_the_same_games(tmp_path):
    """Every move's progress is kept, so a run stopped inside a row goes on from its last move with
    --resume: the finished row is not played again, the rule bot's state rows are restored, and the scores
    are those of the games played without a stop."""
    import signal

    cmd = [sys.executable, "-u", "-m", "experiments.mcts", "--players", "2", "--games", "3", "--iterations",
           "4", "--modes", "ris-mcts", "--simulation", "vandenbergh", "--beside", "vandenbergh", "--out",
           str(tmp_path)]
    proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith("  move 12:"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    (kept,) = (tmp_path / "progress").glob("mcts_*.pt")
    assert f"go on with python -m experiments.mcts --resume {kept}" in err and "Traceback" not in err
    (record,) = tmp_path.glob("mcts_*.md")
    assert "| ris-mcts |" not in record.read_text()
    again = [sys.executable, "-m", "experiments.mcts", "--resume", str(kept)]
    mixed = subprocess.run([*again, "--games", "5"], capture_output=True, text=True, env=ENV, cwd=ROOT,
                           timeout=300)
    assert mixed.returncode != 0 and "give no other flag" in mixed.stderr and "Traceback" not in mixed.stderr
    claim(record, "--record")  # a live run (here this process) holds the table: a resume must wait
    held = subprocess.run(again, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert held.returncode != 0 and "is in use by another process" in held.stderr, held.stderr[-2000:]
    release(record.with_name(f".{record.name}.lock"))
    r = subprocess.run(again, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rows done: vandenbergh; ris-mcts from move" in r.stderr and "  move 1:" not in r.stderr
    assert not kept.exists() and "(stopped and resumed 1 time: the same games move for move)" in r.stdout
    text = record.read_text()
    assert "| ris-mcts | vandenbergh | 4 |" in text and "not played" not in text
    game = GameConfig(players=2, bomb_zero=False)
    cfg = mcts.MctsConfig(mode="ris-mcts", iterations=4, sim_policy="vandenbergh")
    whole = mcts.play(game, cfg, 3, 0, "vandenbergh", torch.device("cpu"))
    line = f"- ris-mcts: {' '.join(str(int(x)) for x in whole['scores'].tolist())}"
    assert line in text.splitlines(), text
    assert f"| {whole['depth']:.2f} | {whole['depth_so_far']:.2f} |" in text  # the resumed row counts on
    bad = tmp_path / "not_progress.pt"
    bad.write_bytes(b"not a checkpoint")
    refused = subprocess.run([sys.executable, "-m", "experiments.mcts", "--resume", str(bad)],
                             capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert refused.returncode != 0 and refused.stderr.startswith("mcts: --resume:")
    assert "Traceback" not in refused.stderr


def test_the_depth_so_far_is_each_seats_deepest_node_in_the_game_averaged_over_moves():
    """The paper's code never resets its agent's deepest node between moves: a seat that once reached depth
    3 reports 3 after a shallower search; another seat, or another game, keeps its own."""
    d = mcts.DepthSoFar(games=2, players=2)
    d.add(torch.tensor([0, 1]), torch.tensor([0, 0]), [3, 1])
    d.add(torch.tensor([0, 1]), torch.tensor([1, 1]), [2, 2])
    d.add(torch.tensor([0, 1]), torch.tensor([0, 0]), [1, 2])
    assert d.total == 3 + 1 + 2 + 2 + 3 + 2
    again = mcts.DepthSoFar(2, 2, d.kept())  # a resumed row goes on from the kept counts
    again.add(torch.tensor([1]), torch.tensor([1]), [0])
    assert again.total == d.total + 2 and d.deepest[1, 1] == 2
    game = GameConfig(players=2, colors=2, ranks=3, hand_size=3, bomb_zero=False)
    r = mcts.play(game, mcts.MctsConfig(mode="ris-mcts", iterations=12), 3, 0, "random", torch.device("cpu"))
    assert r["depth"] < r["depth_so_far"]  # some seat searched less deep than it once had


def test_a_new_run_does_not_replace_a_stopped_runs_progress(tmp_path, monkeypatch):
    out = tmp_path / "mcts_x.md"
    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "mcts_x.pt").write_bytes(b"a stopped run's progress")
    monkeypatch.setattr(mcts, "result_path", lambda *a: out)
    with pytest.raises(SystemExit, match="a stopped run's progress: go on with it"):
        mcts.main(["--players", "2", "--games", "1", "--iterations", "1", "--out", str(tmp_path)])
    assert (tmp_path / "progress" / "mcts_x.pt").read_bytes() == b"a stopped run's progress"


def test_a_recorded_tables_progress_is_kept_beside_its_record_and_resumes_from_there(tmp_path, monkeypatch,
                                                                                     capsys):
    """With --record the progress goes to progress/ beside the record (experiments/results/mcts/progress/),
    a folder git keeps, so a table longer than a sitting can be committed and go on elsewhere: a resume from
    another clone finishes the table there (nothing in the progress names the first clone's folder) and
    removes the file. The stop says how to go on with the path as typed from the working folder."""
    import experiments.common as common

    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    no_signals = type("NoSignals", (), {"install": lambda self: None})
    monkeypatch.setattr(mcts, "StopSignals", lambda **kw: no_signals())
    real = mcts.play

    def stop_after_one_move(*args):
        keep = args[-1]

        def keep_then_stop(games):
            keep(games)
            raise KeyboardInterrupt

        return real(*args[:-1], keep_then_stop)

    monkeypatch.setattr(mcts, "play", stop_after_one_move)
    argv = ["--players", "2", "--games", "2", "--iterations", "2", "--modes", "ris-mcts", "--out",
            str(tmp_path / "scratch"), "--record", "kept_here"]
    with pytest.raises(SystemExit) as stop:
        mcts.main(argv)
    assert stop.value.code == 130
    (kept,) = (tmp_path / "results" / "mcts" / "progress").glob("mcts_*_kept_here.pt")
    assert f"go on with python -m experiments.mcts --resume results/mcts/progress/{kept.name}" in \
        capsys.readouterr().err
    assert not (tmp_path / "scratch" / "progress").exists()
    clone = tmp_path / "clone" / "results"  # the progress committed, then resumed in another clone
    clone.parent.mkdir()
    for lock in (tmp_path / "results" / "mcts").glob(".*.lock"):  # the first run's, which git leaves behind
        release(lock)
    (tmp_path / "results").rename(clone)
    monkeypatch.setattr(common, "RESULTS", clone)
    kept = clone / "mcts" / "progress" / kept.name
    monkeypatch.setattr(mcts, "play", real)
    mcts.main(["--resume", str(kept)])
    assert not kept.exists()
    (record,) = (clone / "mcts").glob("mcts_*_kept_here.md")
    whole = real(GameConfig(players=2, bomb_zero=False), mcts.MctsConfig(mode="ris-mcts", iterations=2), 2, 0,
                 "random", torch.device("cpu"))
    assert f"- ris-mcts: {' '.join(str(int(x)) for x in whole['scores'].tolist())}" in record.read_text()
