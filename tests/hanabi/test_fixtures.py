"""Our engine against golden HLE fixtures (no HLE needed), golden playthroughs, and game records.

The fixtures and playthroughs come from make_fixtures.py (beside this file), which stores what HLE itself
computed; every config in VARIANTS must have both.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lbs.hanabi import GameConfig, IllegalMoveError, encode, engine, legal_moves
from lbs.hanabi.interop.hanablive import from_hanablive, to_hanablive
from lbs.hanabi.interop.record import GameRecord, load_records, replay, replay_steps, save_records
from lbs.hanabi.interop.text import playthrough
from lbs.hanabi.variants import VARIANTS

FIXTURES = Path(__file__).parent / "fixtures"
REGENERATE = "regenerate with `python tests/hanabi/make_fixtures.py`"


pytestmark = pytest.mark.usefixtures("one_thread")


def load_fixture(name: str) -> dict:
    path = FIXTURES / f"{name}.npz"
    if not path.exists():
        pytest.fail(f"no golden fixture for config {name!r} at {path}; {REGENERATE}")
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def fixture_records(name: str) -> list[GameRecord]:
    fx = load_fixture(name)
    cfg = json.loads(str(fx["config"]))
    return [
        GameRecord(cfg, fx["decks"][i].tolist(), fx["moves"][i, : fx["lengths"][i]].tolist(), None)
        for i in range(len(fx["lengths"]))
    ]


def test_every_named_config_has_golden_files():
    names = {p.stem for p in FIXTURES.glob("*.npz")}
    traces = {p.stem for p in (FIXTURES / "playthroughs").glob("*.txt")}
    missing = [n for n in VARIANTS if n not in names or n not in traces]
    assert not missing, f"configs without fixture or playthrough: {missing}; {REGENERATE}"
    stale = sorted((names | traces) - set(VARIANTS))
    assert not stale, f"golden files for configs no longer registered: {stale}; delete them"
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < 2 * 2**20, f"fixtures take {total} bytes; keep them under 2 MiB"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_engine_matches_hle_fixture(name):
    fx = load_fixture(name)
    cfg = VARIANTS[name]
    assert GameConfig.from_dict(json.loads(str(fx["config"]))) == cfg, f"{name}: config changed; {REGENERATE}"
    lengths = torch.as_tensor(fx["lengths"]).long()
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), (lengths + 1).cumsum(0)[:-1]])
    obs = np.unpackbits(fx["obs"], axis=1, count=int(fx["obs_bits"])).reshape(-1, cfg.players, cfg.obs_dim)
    legal = np.unpackbits(fx["legal"], axis=1, count=cfg.num_moves).astype(bool)
    col = {str(n): i for i, n in enumerate(fx["scalar_names"])}
    sc = fx["scalars"].astype(np.int64)
    prev_score = None
    steps = 0
    for t, state, _ in replay_steps(fixture_records(name)):
        games = np.nonzero((t <= lengths).numpy())[0]
        rows = (offsets[games] + t).numpy()
        s = state.index(torch.as_tensor(games))
        want = sc[rows]
        lives, score = s.life_tokens.numpy(), s.score.numpy()
        hle_score = score if cfg.bomb_zero else np.where(lives > 0, score, 0)  # HLE always bombs to 0
        ours = {
            "info_tokens": s.info_tokens.numpy(),
            "life_tokens": lives,
            "cur_player": s.cur_player.numpy(),
            "deck_size": cfg.num_cards - s.deck_pos.numpy(),
            "score": hle_score,
            "terminal": s.done.numpy().astype(np.int64),
        }
        ours |= {f"fireworks{c}": s.fireworks[:, c].numpy() for c in range(cfg.colors)}
        if t > 0:
            ours["reward"] = hle_score - prev_score[games]
        for key, value in ours.items():
            bad = np.nonzero(value != want[:, col[key]])[0]
            if len(bad):
                g = bad[0]
                pytest.fail(
                    f"{name}: step {t}, game {games[g]}: {key} ours {value[g]} vs HLE {want[g, col[key]]}"
                )
        if not cfg.bomb_zero:
            assert (score == s.fireworks.sum(1).numpy()).all(), (
                f"{name}: step {t}: bomb_zero=False keeps the score"
            )
        live = ~s.done.numpy()
        mine = legal_moves(cfg, s).numpy()
        diff = np.nonzero((mine != legal[rows]).any(1) & live)[0]
        assert len(diff) == 0, f"{name}: step {t}, game {games[diff[0]]}: legal moves differ from HLE"
        o = encode(cfg, s, dtype=torch.uint8).numpy()
        bad = np.argwhere(o != obs[rows])
        if len(bad):
            g, p, k = bad[0]
            pytest.fail(
                f"{name}: step {t}, game {games[g]}, observer {p}: observation section "
                f"{cfg.layout.section_of(int(k))} (feature {k}) ours {o[g, p, k]} vs HLE {obs[rows][g, p, k]}"
            )
        full = np.zeros(len(lengths), dtype=np.int64)
        full[games] = hle_score
        prev_score = full
        steps += len(games)
    assert steps == int((lengths + 1).sum()), f"{name}: compared {steps} states"
    assert sc[(offsets + lengths).numpy(), col["terminal"]].all(), f"{name}: fixture games must be complete"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_golden_playthrough(name):
    path = FIXTURES / "playthroughs" / f"{name}.txt"
    if not path.exists():
        pytest.fail(f"no golden playthrough for config {name!r}; {REGENERATE}")
    golden = path.read_text()
    header = dict(line[2:].split(": ", 1) for line in golden.splitlines()[1:4])
    cfg = GameConfig.from_dict(json.loads(header["config"]))
    assert cfg == VARIANTS[name], f"{name}: config changed; {REGENERATE}"
    ids = {f"{'RYGWB'[c // cfg.ranks]}{c % cfg.ranks + 1}": c for c in range(cfg.card_types)}
    record = GameRecord(
        cfg.to_dict(), [ids[x] for x in header["deck"].split()], [int(m) for m in header["moves"].split()]
    )
    ours = playthrough(record, name)
    if ours != golden:
        diff = "\n".join(
            list(difflib.unified_diff(golden.splitlines(), ours.splitlines(), "HLE", "ours", lineterm=""))[
                :30
            ]
        )
        pytest.fail(f"{name}: playthrough differs from HLE's golden trace:\n{diff}")


# ---- records ----------------------------------------------------------------------------------------
def test_records_save_load_and_batched_replay(tmp_path):
    records = fixture_records("p3")
    final = replay(records)
    for i, r in enumerate(records):
        r.score = int(final.score[i])
    path = save_records(records, tmp_path / "games.json")
    back = load_records(path)
    assert [b.to_dict() for b in back] == [r.to_dict() for r in records]
    one = records[3].save(tmp_path / "one.json")
    assert GameRecord.load(one) == records[3]
    # batched replay equals one-at-a-time replay, row for row
    alone = [replay([r]) for r in records]
    for i, single in enumerate(alone):
        assert single.equal(final.index(torch.tensor([i])))
    assert bool(final.done.all())


def test_replay_rejects_bad_records():
    rec = fixture_records("p2")[0]
    cfg = rec.cfg
    wrong_score = GameRecord(rec.config, rec.deck, rec.moves, 99)
    with pytest.raises(ValueError, match="recorded score 99"):
        replay([wrong_score])
    with pytest.raises(ValueError, match="after its game ended"):
        replay([GameRecord(rec.config, rec.deck, rec.moves + [0])])
    # the first player discards at full hint tokens: illegal
    with pytest.raises(IllegalMoveError, match="Discard"):
        replay([GameRecord(rec.config, rec.deck, [0])])
    with pytest.raises(ValueError, match="not permutations"):
        replay([GameRecord(rec.config, [0] * cfg.num_cards, [])])
    other = fixture_records("p3")[0]
    with pytest.raises(ValueError, match="one config at a time"):
        replay([rec, other])
    with pytest.raises(ValueError, match="lacks"):
        GameRecord.from_dict({"deck": [], "moves": []})


def test_unfinished_records_replay_to_their_last_move():
    rec = fixture_records("p2")[1]
    cut = GameRecord(rec.config, rec.deck, rec.moves[:5])
    states = [s for _, s, _ in replay_steps([cut])]
    assert len(states) == 6 and int(states[-1].num_steps[0]) == 5 and not bool(states[-1].done[0])


def _hanablive_orders(cfg: GameConfig, rec: GameRecord) -> list[int]:
    """Deal-order index of each played/discarded card, tracked independently of record.py."""
    state = engine.initial_state(cfg, torch.tensor([rec.deck]))
    order = torch.arange(cfg.players * cfg.hand_size).reshape(1, cfg.players, cfg.hand_size)
    nxt, out = cfg.players * cfg.hand_size, []
    for m in rec.moves:
        kind, slot = cfg.move_table[m][:2]
        p = int(state.cur_player[0])
        if kind in (0, 1):
            out.append(int(order[0, p, slot]))
            row = torch.cat([order[0, p, :slot], order[0, p, slot + 1 :], torch.tensor([nxt])])
            order[0, p] = row
            nxt += 1
        state, _, _ = engine.step(cfg, state, torch.tensor([m]))
    return out


@pytest.mark.parametrize("name", ["p2", "p4", "p2_h6"])
def test_hanablive_export(name):
    cfg = VARIANTS[name]
    for rec in fixture_records(name)[:6]:
        data = to_hanablive(rec)
        assert set(data) == {"players", "deck", "actions", "options"} and len(data["players"]) == cfg.players
        assert data["options"]["variant"] == "No Variant"
        assert data["options"].get("oneExtraCard", False) == (cfg.hand_size == 6)
        assert [d["suitIndex"] * cfg.ranks + d["rank"] - 1 for d in data["deck"]] == rec.deck
        assert all(1 <= d["rank"] <= 5 for d in data["deck"])
        assert len(data["actions"]) == len(rec.moves)
        orders = iter(_hanablive_orders(cfg, rec))
        for t, (a, m) in enumerate(zip(data["actions"], rec.moves, strict=True)):
            kind, _, off, color, rank = cfg.move_table[m]
            assert a["type"] == {0: 1, 1: 0, 2: 2, 3: 3}[kind]
            if kind in (0, 1):
                assert a["target"] == next(orders) and "value" not in a
            else:
                assert a["target"] == (t + off) % cfg.players
                assert a["value"] == (color if kind == 2 else rank + 1)
        back = from_hanablive(json.loads(json.dumps(data)))
        assert (back.deck, back.moves, back.cfg) == (rec.deck, rec.moves, cfg)


@pytest.mark.parametrize("name", ["p2_c2_r3", "p3_c1_h3", "p4_l1_i2"])
def test_hanablive_refuses_rules_it_lacks(name):
    with pytest.raises(ValueError, match="hanab.live cannot replay"):
        to_hanablive(fixture_records(name)[0])
