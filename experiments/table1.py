"""The LBS paper's Table 1 for our blueprints: every search mode on the same deals.

    python -m experiments.table1 --games 200            # the shipped full-game pair at the table1 budget
    python -m experiments.table1 --blueprint checkpoints/blueprint_2c.pt --belief checkpoints/belief_2c.pt \
        --games 1000 --rollouts 400 --min-rollouts 20 --record small_2c
    python -m experiments.table1 --combine a.json b.json --record joined   # one table from recorded runs
    python -m experiments.table1 --compare a.json b.json   # each mode under two settings, paired per deal

Modes (default: blueprint sparta lbs-inf lbs-32 lbs-16 lbs-8 lbs-1) play games 0..N-1 of the evaluation
deals of --seed; the blueprint row is the same games without search. For each mode: mean ± s.e.m., the
paired difference with the blueprint (± its standard error), perfect %, time per game, rollouts per second,
how often the search move replaced the blueprint move, sampler fallbacks, and (when SPARTA ran) the share
of SPARTA's gain over the blueprint each mode keeps and its speed-up over SPARTA; then each mode's gain by
the blueprint's score on the deal (with --strata N weighed by the blueprint's scores on N deals). Also a
figure: gain over the blueprint against time per game, one point per mode. Writes into --out (a scratch
folder) unless --record NAME, which writes experiments/results/table1/table1_<date>_NAME.{md,png,json}.

--compare pairs a mode with itself under two settings (a rule for lost rollouts, a budget, a belief) on the
deals both tables played, so the deal's luck drops out of the difference between settings as it does out of
the table's own gains; both tables must hold the same blueprint scores on those deals.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from experiments.common import command, machine, result_path, write_result
from lbs.ckpt import CheckpointError, SaveError, file_hash, write_atomic
from lbs.configs import flag_names
from lbs.hanabi import GameConfig
from lbs.infer import InferenceServer
from lbs.models import load_blueprint, resolve_device
from lbs.models.io import blueprint_identity
from lbs.runs import Stopped, StopSignals, signal_name
from lbs.scoring import eval_games
from lbs.search import flags
from lbs.search.agent import Progress
from lbs.search.config import KNOWLEDGE
from lbs.search.journal import Journal, play_kept
from lbs.search.play import play_games
from lbs.search.report import drawn_from, paired_difference, summarize_run
from lbs.search.timing import Timing

ROOT = Path(__file__).resolve().parent.parent
MODES = ["blueprint", "sparta", "lbs-inf", "lbs-32", "lbs-16", "lbs-8", "lbs-1"]
SETTINGS = ("game", "seed", "blueprint", "belief", "belief_sha256", "rollouts", "min_rollouts", "delta",
            "reference_budget", "keep_lost_points", "knowledge", "belief_type")
"""The recorded settings that decide a row's games: runs that differ in one are not joined (--combine)."""
UNRECORDED = {"delta": 0.05, "reference_budget": False, "keep_lost_points": False, "knowledge": "none",
              "belief_type": "learned", "belief_sha256": None}
"""What runs recorded before a setting existed played with."""


def recorded_settings(settings: dict) -> dict:
    """A run's recorded settings as --combine compares them: a setting recorded before it existed takes
    UNRECORDED's value, and the knowledge of runs that recorded it as `blueprint_knowledge` (whether LBS drew
    within a rule bot's card knowledge, SmartBot's in every recorded run) reads as its value today."""
    old = {} if "blueprint_knowledge" not in settings else \
        {"knowledge": "smartbot" if settings["blueprint_knowledge"] else "none"}
    out = {**UNRECORDED, **old, **settings}
    out.pop("blueprint_knowledge", None)
    return out


@dataclass
class Row:
    """One mode's line: its per-game scores beside the blueprint's on the same deals (game order)."""

    mode: str
    summary: dict  # SearchSummary.to_dict()
    scores: list[float]
    base: list[float]
    split: dict | None = None  # seconds in networks / engine / sampler / rest, when recorded
    source: str = ""  # the recorded run it comes from (--combine)
    machine: str = ""  # where it ran: a speed-up over SPARTA compares runs on one machine only

    def paired(self, games: int | None = None) -> tuple[float, float]:
        """Mean of (mode - blueprint) over the first `games` deals (all by default) ± its standard error."""
        return paired_difference(torch.tensor(self.scores[:games]), torch.tensor(self.base[:games]))


def split_of(summary, timing: Timing, graphs: bool) -> dict | None:
    """Where a run's seconds went: blueprint passes, the rest of the rollouts, the sampler, the rest. None
    with CUDA graphs: a replayed step cannot be split into networks and engine."""
    if graphs:
        return None
    return {"networks": timing.networks, "engine": timing.rollouts - timing.networks,
            "sampler": timing.sampler, "rest": summary.seconds - timing.rollouts - timing.sampler}


def parser() -> flags.Parser:
    ap = flags.search_parser(__doc__, ROOT / "checkpoints", budget="table1", modes=MODES, games=50)
    ap.count(*flag_names("batch_games"), dest="batch_games", low=1, default=64,
             help="games searched at once (default %(default)s)")
    ap.add_argument("--combine", nargs="+", metavar="JSON", default=None,
                    help="build one table from recorded runs (their .json) on the same deals; JSON:MODE,MODE "
                    "takes only those rows of that file (e.g. SPARTA's beside LBS rows of another belief); "
                    "plays nothing")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), default=None,
                    help="pair each mode of table B with itself in table A (two settings: a rule for lost "
                    "rollouts, a budget, a belief) on the deals both played, B - A, overall and by the "
                    "blueprint's score on the deal; plays nothing (records go to results/compare_tables/)")
    ap.count("--strata", metavar="N", default=0,
             help="also weigh each mode's split by the blueprint's score by how often the blueprint scores "
             "so on the first N deals (played here): the mode's mean over all deals, post-stratified "
             "(default 0: off)")
    ap.add_argument("--out", default="runs/experiments", help="scratch folder (default)")
    ap.add_argument("--record", default=None, help="write the tracked results/table1/table1_<date>_NAME.*")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    StopSignals(deferred=False).install()  # SIGTERM stops like Ctrl-C: finished games and modes are kept
    state = Kept()
    try:
        run(ap, args, state)
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Stopped) else signal.SIGINT
        if state.bar is not None:
            state.bar.close()
        print(f"table1: stopped by {signal_name(signum)}: {state}", file=sys.stderr)
        sys.exit(128 + signum)


@dataclass
class Kept:
    """What a stopped run keeps, for its one closing line."""

    out: Path | None = None
    modes: list[str] = field(default_factory=list)
    """modes finished and written (partial table) to `out`"""
    journal: Journal | None = None
    """the mode in play's finished games"""
    games: int = 0
    first: int = 0
    bar: Any = None
    """the progress bar, closed before the line"""

    def __str__(self) -> str:
        parts = []
        if self.modes:
            parts.append(f"the finished modes ({', '.join(self.modes)}) are in {self.out}")
        on_disk = self.journal.on_disk(range(self.first, self.first + self.games)) if self.journal else 0
        if on_disk:
            parts.append(f"{on_disk} of {self.games} games of the mode in play are kept in "
                         f"{self.journal.path}")
        if not parts:
            return "nothing finished, nothing kept"
        return "; ".join(parts) + "; run the same command again to continue"


def run(ap: flags.Parser, args, state: Kept) -> None:
    try:
        search = flags.read(ap, args)
    except ValueError as e:
        sys.exit(f"table1: {e}")
    if args.compare:
        return compare(args)
    out = result_path("table1", args.record, args.out)  # refused now, not after hours of play
    state.out = out
    if args.combine:
        return combine(args, out)
    try:
        setup = search.setup()
        modes = [str(m) for m in search.modes]
        runs = {str(m): setup.with_mode(m) for m in search.modes}  # every mode checked before any plays
    except (CheckpointError, ValueError) as e:
        sys.exit(f"table1: {e}")
    device, cfg, belief = search.device, setup.cfg, search.belief
    game = setup.game
    if args.threads:
        torch.set_num_threads(args.threads)
    population = population_scores(args, game, args.seed, setup.blueprint)  # the blueprint this run plays
    knowledge = next((r.knowledge_shown for r in runs.values() if r.knowledge_shown), None)  # LBS rows only
    belief_type = next((r.belief_shown for r in runs.values() if r.belief_shown), None)
    belief_sha256 = file_hash(belief) if belief else None
    lines = [
        f"# Table 1 (LBS paper) for {Path(args.blueprint).name}: {game}",
        "",
        f"- Machine: {machine()}; device {device}.",
        f"- Command: `{command()}`",
        f"- {args.games} games (evaluation deals {args.first_game}..{args.first_game + args.games - 1} of "
        f"seed {args.seed}), {cfg.rollouts} rollouts per searched move, {cfg.min_rollouts} per move before "
        f"pruning, delta {cfg.delta:g}, SPARTA max range {cfg.max_range:,}"
        + ("; the reference SPARTA's budget (each move's share, bound pruning)"
           if cfg.reference_budget else "")
        + ("; rollouts score a lost game as its points minus one" if cfg.keep_lost_points else "")
        + (f"; LBS draws its hands {drawn_from(belief_type, knowledge)} (--belief-type {belief_type} "
           f"--knowledge {knowledge})." if knowledge else "."),
        *([f"- Belief: `{belief}` (sha256 `{belief_sha256}`)."] if belief and knowledge else []),
    ]
    settings = {"game": game.to_dict(), "seed": args.seed, "first_game": args.first_game,
                "rollouts": cfg.rollouts, "min_rollouts": cfg.min_rollouts, "delta": cfg.delta,
                "max_range": cfg.max_range,
                "reference_budget": cfg.reference_budget, "keep_lost_points": cfg.keep_lost_points,
                "knowledge": knowledge, "belief_type": belief_type, "blueprint": Path(args.blueprint).name,
                "belief": Path(belief).name if belief else None,
                "belief_sha256": belief_sha256,  # a shipped file is replaced in place
                "machine": machine(), "command": command()}
    rows: list[Row] = []
    searched = [m for m in modes if runs[m].mode.searches]
    bar = state.bar = tqdm(total=args.games * (1 + len(searched)), unit="game", desc="blueprint")
    identity = {"seed": args.seed, "game": game.to_dict(), "blueprint": blueprint_identity(args.blueprint),
                "belief": belief_sha256,  # and this command's table:
                "games": args.games, "first_game": args.first_game, "modes": [str(m) for m in modes],
                "record": args.record}

    journals: dict[str, Journal] = {}

    def games_done(p: Progress, before: int) -> None:
        bar.update(before + p.games - bar.n)

    with torch.no_grad():
        base = play_games(setup, args.games, args.seed, args.batch_games, first=args.first_game,
                          progress=lambda p: games_done(p, 0))
        base_scores = [float(r.record.score) for r in base]
        for mode in modes:
            bar.set_description(mode)
            if not runs[mode].mode.searches:
                s = summarize_run(mode, base, base, math.nan, game.max_score)
                rows.append(Row(mode, s.to_dict(), base_scores, base_scores))
                continue
            timing, before = Timing(), bar.n
            mine = setup.with_mode(mode, timing)
            key = {k: v for k, v in asdict(mine.cfg).items() if k not in ("max_rows", "cuda_graphs")}
            try:
                state.journal = journals[mode] = Journal(args.out, f"table1-{mode}",
                                                         {**identity, "mode": mode, "search": key})
            except ValueError as e:  # unreadable, or held by another run
                sys.exit(f"table1: {e}")
            state.games, state.first = args.games, args.first_game
            if state.journal.games:
                tqdm.write(f"table1: {mode}: {len(state.journal.games)} of {args.games} games kept from an "
                           f"earlier run of this command ({state.journal.path}): playing the rest",
                           file=sys.stderr)
            try:
                results, seconds = play_kept(mine, state.journal, args.games, args.seed, args.batch_games,
                                             first=args.first_game,
                                             progress=lambda p, b=before: games_done(p, b))
            except SaveError as e:
                sys.exit(f"table1: {e}")
            s = summarize_run(mode, results, base, seconds, game.max_score, mine.knowledge_shown,
                              mine.belief_shown)
            rows.append(Row(mode, s.to_dict(), [float(r.record.score) for r in results], base_scores,
                            split_of(s, timing, cfg.cuda_graphs), machine=machine()))
            tqdm.write(" | ".join(s.lines()))
            write(rows, lines, settings, game, out, done=False)  # a stopped run keeps its finished modes
            state.modes.append(mode)
    bar.close()
    setup.close()
    write(rows, lines, settings, game, out, population=population)
    for journal in journals.values():  # the table holds every game: the journals are no longer needed
        journal.remove()


def write(rows: list[Row], head: list[str], settings: dict, game: GameConfig, out: Path,
          done: bool = True, population: torch.Tensor | None = None, runs: list[dict] | None = None) -> None:
    """The table (.md), its per-game scores, settings and rows' sources and machines (.json: what --combine
    reads) and the figure (.png); before the run is done, the rows so far, marked partial (rewritten after
    every mode). runs: the recorded runs a joined table comes from (played_run)."""
    if not done:
        finished = ", ".join(r.mode for r in rows)
        head = head + [f"- Partial: the modes finished so far ({finished}); the run stopped or goes on."]
    by_score = by_blueprint_score(rows, game.max_score, population)
    text = "\n".join(head + [""] + table(rows) + [""] + versus_sparta(rows, game.max_score) + by_score) + "\n"
    data = json.dumps({
        "settings": settings,
        "scores": {r.mode: r.scores for r in rows},
        "blueprint_scores": {r.mode: r.base for r in rows},
        "summaries": {r.mode: r.summary for r in rows},
        "splits": {r.mode: r.split for r in rows if r.split is not None},
        "sources": {r.mode: r.source for r in rows if r.source},
        "machines": {r.mode: r.machine for r in rows if r.machine},
        **({"runs": runs} if runs else {}),
    }, default=str) + "\n"
    png = figure([r for r in rows if r.mode != "blueprint"], game)
    try:  # each file whole or not at all: a full disk leaves the previous version
        write_atomic(out, text.encode())
        write_atomic(out.with_suffix(".json"), data.encode())
        write_atomic(out.with_suffix(".png"), png)
    except SaveError as e:
        sys.exit(f"table1: {e}")
    if done:
        print(text)
        print(f"written: {out}\nfigure: {out.with_suffix('.png')}")


def same_machine(a: str, b: str) -> bool:
    """Whether two runs' machine lines (common.machine) name one machine, whatever its load and threads
    (runs recorded before they kept the line have none: unknown, not the same)."""
    def key(m: str) -> str:
        return re.sub(r"load average [\d.]+|\d+ torch threads", "", m)

    return bool(a) and bool(b) and key(a) == key(b)


def table(rows: list[Row]) -> list[str]:
    """Markdown lines. Each mode is paired with the blueprint on its own deals; SPARTA's gain kept and the
    speed-up over SPARTA compare a mode with SPARTA on the deals both played."""
    sparta = next((r for r in rows if r.mode == "sparta"), None)
    out = [
        "Gain kept: the mode's paired gain over the blueprint / SPARTA's, on the deals both played;",
        "speed-up: SPARTA's time per game / the mode's (runs on one machine only).",
        "",
        "| mode | games | score ± s.e.m. | vs blueprint (paired) | perfect % | s / game | rollouts/s "
        "| deviate % | fallback % | SPARTA's gain kept | speed-up over SPARTA "
        "| networks / engine / sampler / rest (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s, sc = r.summary, r.summary["score"]
        score = f"{sc['mean']:.3f} ± {sc['sem']:.3f}"
        if r.mode == "blueprint":
            out.append(f"| blueprint | {s['games']} | {score} | — | {100 * sc['perfect']:.1f} "
                       "| — | — | — | — | — | — | — |")
            continue
        diff, sem = r.paired()
        kept = speed = "—"
        if sparta is not None and r is not sparta:
            n = min(len(r.scores), len(sparta.scores))
            gain, _ = sparta.paired(n)
            if gain > 0:
                kept = f"{100 * r.paired(n)[0] / gain:.0f}%"
            if same_machine(r.machine, sparta.machine):  # else "—": times from two machines
                speed = f"{sparta.summary['seconds_per_game'] / s['seconds_per_game']:.1f}x"
        split = " / ".join(f"{r.split[k]:.0f}" for k in ("networks", "engine", "sampler", "rest")) \
            if r.split else "—"
        timed = not math.isnan(s["seconds_per_game"])  # a row joined from two machines has no time
        secs, rate = (f"{s['seconds_per_game']:.2f}", f"{s['rollouts_per_s']:,.0f}") if timed else ("—", "—")
        out.append(
            f"| {r.mode} | {s['games']} | {score} | {diff:+.3f} ± {sem:.3f} | {100 * sc['perfect']:.1f} "
            f"| {secs} | {rate} | {s['deviation_pct']:.1f} "
            f"| {s['fallback_pct']:.1f} | {kept} | {speed} | {split} |"
        )
    return out


def versus_sparta(rows: list[Row], top: int) -> list[str]:
    """Markdown lines (none without a SPARTA row, or when every mode played SPARTA's deals): a mode that
    played fewer deals than SPARTA is compared with it on those deals only, where SPARTA's own gain may
    differ from its gain over all of its deals."""
    sparta = next((r for r in rows if r.mode == "sparta"), None)
    fewer = [r for r in rows if sparta is not None and r.mode not in ("blueprint", "sparta")
             and 0 < len(r.scores) < len(sparta.scores)]
    if not fewer:
        return []
    out = ["On the deals a mode played when SPARTA played more (the first N; paired, ± s.e.; perfect: share "
           f"of games scoring {top}):", "",
           "| mode | deals | SPARTA vs blueprint | mode vs blueprint | mode - SPARTA "
           "| perfect %: blueprint / SPARTA / mode |", "|---|---|---|---|---|---|"]
    for r in fewer:
        n = len(r.scores)
        mine, theirs = torch.tensor(r.scores).double(), torch.tensor(sparta.scores[:n]).double()
        base = torch.tensor(r.base[:n]).double()
        cells = [paired_difference(a, b) for a, b in ((theirs, base), (mine, base), (mine, theirs))]
        perfect = " / ".join(f"{100 * float((x == top).double().mean()):.1f}" for x in (base, theirs, mine))
        out.append(f"| {r.mode} | {n} | " + " | ".join(f"{d:+.3f} ± {e:.3f}" for d, e in cells)
                   + f" | {perfect} |")
    return out + [""]


def score_buckets(top: int, buckets: int = 5) -> tuple[list[tuple[int, int]], list[str]]:
    """The blueprint-score buckets of a split: (lowest, highest) score of each and its name; the top
    `buckets` - 1 scores alone, the lower ones joined."""
    low = top - buckets + 1
    edges = [(0, low)] + [(v, v) for v in range(low + 1, top + 1)]
    names = [f"<= {low}"] + [str(v) for v in range(low + 1, top + 1)]
    return edges, names


def by_blueprint_score(rows: list[Row], top: int, population: torch.Tensor | None = None,
                       buckets: int = 5) -> list[str]:
    """Markdown lines: each search mode's paired gain on the deals where the blueprint scored s (the top
    `buckets` scores, the lower ones joined). It shows where the gain comes from; a mode may well lose on
    the deals the blueprint happens to win, since search decides on what it cannot tell apart, not on the
    deal. With `population` (the blueprint's scores on many deals) each mode's bucket means are also
    weighed by the blueprint's own bucket shares: the mode's mean over all deals, post-stratified, which
    corrects a few deals that are easier or harder than most (s.e. from the spread within the buckets)."""
    modes = [r for r in rows if r.mode != "blueprint" and r.scores]
    if not modes:
        return []
    edges, names = score_buckets(top, buckets)
    out = ["Paired gain by the blueprint's score on the deal (deals: mode's mean score, gain ± s.e.):", "",
           "| mode | " + " | ".join(f"blueprint {n}" for n in names) + " |",
           "|---|" + "---|" * len(names)]
    weighted = []
    share = None if population is None else torch.stack(
        [((population >= lo) & (population <= hi)).double().mean() for lo, hi in edges])
    for r in modes:
        mode, base = torch.tensor(r.scores).double(), torch.tensor(r.base[: len(r.scores)]).double()
        cells, means, variances = [], [], []
        for lo, hi in edges:
            at = (base >= lo) & (base <= hi)
            if not bool(at.any()):
                cells.append("—")
                continue
            diff, sem = paired_difference(mode[at], base[at])
            cells.append(f"{int(at.sum())}: {mode[at].mean():.2f}, {diff:+.2f} ± {sem:.2f}")
            if int(at.sum()) > 1:
                means.append(mode[at].mean())
                variances.append(mode[at].var() / int(at.sum()))
        out.append(f"| {r.mode} | " + " | ".join(cells) + " |")
        if share is not None and len(means) == len(edges):
            est = float((share * torch.stack(means)).sum())
            err = float((share.square() * torch.stack(variances)).sum().sqrt())
            gain = est - float(population.double().mean())
            weighted.append(f"{r.mode} {est:.3f} ± {err:.3f}, {gain:+.3f} on the blueprint")
        elif share is not None:
            weighted.append(f"{r.mode}: — (a bucket has fewer than 2 deals)")
    if share is not None:
        pop = population.double()
        out += ["", f"Weighted by the blueprint's bucket shares over its first {pop.numel():,} deals ("
                + ", ".join(f"{n}: {100 * float(w):.1f}%" for n, w in zip(names, share, strict=True))
                + f"; blueprint {float(pop.mean()):.3f} ± {float(pop.std() / pop.numel() ** 0.5):.3f}): "
                + "; ".join(weighted) + "."]
    return out


def population_scores(args, game: GameConfig, seed: int, blueprint=None) -> torch.Tensor | None:
    """--strata N: the blueprint's greedy scores on evaluation deals 0..N-1 of `seed` (lbs.scoring), the
    blueprint's own score distribution for by_blueprint_score; None without --strata. blueprint: the handle
    a run already serves (SearchSetup.blueprint); --combine loads --blueprint."""
    if args.strata <= 0:
        return None
    device = resolve_device(args.device)
    if blueprint is None:
        try:
            bp_game, net = load_blueprint(args.blueprint, device, players=args.players)
        except (CheckpointError, ValueError) as e:
            sys.exit(f"table1 --strata: {e}")
        if bp_game != game:
            sys.exit(f"table1 --strata: --blueprint plays {bp_game}, the table {game}")
        blueprint = InferenceServer(net, device).qnet()
    scores = eval_games(game, blueprint.step, blueprint.initial_state, args.strata, seed,
                        min(args.strata, 2000), device)
    return scores["score"].double()


def other_deals(population: torch.Tensor, rows: list[Row]) -> str | None:
    """Why the population cannot weigh these joined rows (None if it can): its blueprint scores on the deals
    the table played (from deal 0) must be the table's own, or they are another blueprint's or deals."""
    base = next((r for r in rows if r.mode == "blueprint"), None)
    played = torch.tensor(base.scores if base is not None else rows[0].base).double()
    n = min(played.numel(), population.numel())
    if torch.equal(population[:n], played[:n]):
        return None
    return ("--blueprint scores other than the table's blueprint on the table's deals: pass the blueprint "
            "it played")


def combine(args, out: Path) -> None:
    """One table from recorded runs: each mode's row from the runs that played it on the most deals, the
    blueprint row likewise; runs on adjacent deals (--first-game) join into one row. Runs must agree on
    the blueprint's score of every deal they share (the same deals and blueprint) and on the settings they
    record. FILE:MODE,MODE takes only those rows of a file (with the blueprint row that pairs them)."""
    runs = []
    for given in args.combine:
        name, _, only = given.partition(":")
        try:
            runs.append((Path(name), json.loads(Path(name).read_text())))
        except (OSError, ValueError) as e:
            sys.exit(f"table1 --combine: cannot read {name}: {e}")
        d = runs[-1][1]
        if not (isinstance(d, dict) and isinstance(d.get("scores"), dict) and "summaries" in d):
            sys.exit(f"table1 --combine: {name} is not a table1 result (the .json with scores and summaries)")
        if problem := malformed(d):
            sys.exit(f"table1 --combine: {name}: {problem}")
        if only:  # FILE:MODE,MODE takes those rows of the file (and its blueprint row, which pairs them)
            taken = set(only.split(",")) - {"blueprint"}  # the blueprint row always comes: it pairs them
            if missing := taken - set(d["scores"]):
                sys.exit(f"table1 --combine: {name} has no {', '.join(sorted(missing))} row")
            d["scores"] = {m: x for m, x in d["scores"].items() if m in taken or m == "blueprint"}
            d["runs"] = [r for r in d.get("runs") or [played_run(Path(name), d)] if set(r["games"]) & taken]
    known = [recorded_settings(d["settings"]) | {"lbs": any(m.startswith("lbs") for m in d["scores"])}
             for _, d in runs if "settings" in d]
    lbs_only = ("knowledge", "belief", "belief_sha256", "belief_type")  # how LBS drew its hands: LBS's alone
    for k in SETTINGS:
        if len({json.dumps(s.get(k)) for s in known if s["lbs"] or k not in lbs_only}) > 1:
            sys.exit(f"table1 --combine: the runs differ in {k}; combine runs of one setting")
    pieces: dict[str, list[tuple[int, Row]]] = {}  # mode -> (first deal, its row in one run)
    for path, d in runs:
        first = d.get("settings", {}).get("first_game", 0)
        base = d.get("blueprint_scores", {})
        for mode, scores in d["scores"].items():
            mine = base.get(mode, d["scores"].get("blueprint"))
            if mine is None:
                sys.exit(f"table1 --combine: {path.name} has no blueprint row to pair {mode} with")
            where = d.get("machines", {}).get(mode, d.get("settings", {}).get("machine", ""))
            source = d.get("sources", {}).get(mode) or path.name  # a joined table names its own runs
            pieces.setdefault(mode, []).append((first, Row(mode, d["summaries"][mode], scores,
                                                           mine[: len(scores)], d.get("splits", {}).get(mode),
                                                           source, where)))
    if "blueprint" not in pieces:
        sys.exit("table1 --combine: no run has a blueprint row to pair with")
    chains = {mode: chain(found) for mode, found in pieces.items()}
    best = {mode: join(rows) for mode, rows in chains.items() if rows}
    for mode, found in pieces.items():  # say so, never drop a run silently (blueprint rows only pair)
        for _, row in found:
            if mode != "blueprint" and not any(row is r for r in chains[mode]):
                print(f"table1 --combine: {mode} of {row.source} left out (its deals do not continue the "
                      "joined runs from the first deal, or a longer run covers them)", file=sys.stderr)
    if "blueprint" not in best:
        sys.exit("table1 --combine: no blueprint run starts at the first deal")
    bp = best["blueprint"].scores
    for found in pieces.values():
        for first, row in found:
            shared = bp[first: first + len(row.base)]  # the deals the blueprint row covers
            if row.base[: len(shared)] != shared:
                sys.exit(f"table1 --combine: {row.source} has other blueprint scores than the joined "
                         "blueprint runs: not the same deals or blueprint")
    order = MODES + sorted(m for m in best if m not in MODES)
    rows = [best[m] for m in order if m in best]
    first = known[0] if known else {}
    try:  # runs recorded before settings were: the game of --blueprint
        game = GameConfig.from_dict(first["game"]) if "game" in first else load_blueprint(args.blueprint)[0]
    except (CheckpointError, ValueError) as e:
        sys.exit(f"table1 --combine: {e}")
    head = [
        f"# Table 1 (LBS paper), combined from {len(runs)} recorded runs on the same deals",
        "",
        f"- Command: `{command()}`",
        "- Each row: mode (games) from run; each run's command and machine are in this table's .json (runs).",
        *[f"  - {r.mode} ({len(r.scores)}): `{r.source}`{', ' + r.machine if r.machine else ''}"
          for r in rows],
        "- Every row is paired with the blueprint on its own deals (the first N evaluation deals); rows with",
        "  fewer games have wider errors. Times are each run's own (machine, threads, games at once); a",
        "  speed-up over SPARTA is shown only between runs on the same machine.",
    ]
    drew = next((s for s in known if s["lbs"]), None)  # an LBS run's settings: how its rows drew their hands
    if drew is not None and drew.get("knowledge") in KNOWLEDGE:
        b, k = drew.get("belief_type") or "learned", drew["knowledge"]
        head.append(f"- LBS draws its hands {drawn_from(b, k)} (--belief-type {b} --knowledge {k}).")
        if drew.get("belief_sha256"):
            head.append(f"- Belief: `{drew.get('belief')}` (sha256 `{drew['belief_sha256']}`).")
    source = {k: drew if drew is not None and k in lbs_only else first for k in SETTINGS}
    settings = {k: source[k][k] for k in SETTINGS if k in source[k]}  # not the first run's machine or command
    population = population_scores(args, game, first.get("seed", args.seed))
    if population is not None and (problem := other_deals(population, rows)):
        sys.exit(f"table1 --strata: {problem}")
    played = [x for path, d in runs for x in d.get("runs") or [played_run(path, d)]]
    write(rows, head, {**settings, "combined": [str(p) for p, _ in runs]}, game, out, population=population,
          runs=played)


def played_run(path: Path, d: dict) -> dict:
    """Where and how a recorded run played (a joined table keeps these of every run it joins, so its one
    file reproduces it through --combine once the runs' own files are gone)."""
    settings = d.get("settings", {})
    return {"file": str(path), "command": settings.get("command"), "machine": settings.get("machine"),
            "first_game": settings.get("first_game", 0), "games": {m: len(x) for m, x in d["scores"].items()}}


NUMBER = (int, float)
SUMMARY = ("seconds", "seconds_per_game", "searched_moves", "rollouts", "rollouts_per_s", "deviation_pct",
           "fallback_pct")
"""The summary's numbers a table reads (a joined row sums or weighs them), beside games and score."""
SPLIT = ("networks", "engine", "sampler", "rest")


def malformed(d: dict) -> str | None:
    """What keeps a recorded run (its .json) from joining a table: the field and its fault, or None."""
    def numbers(field: str, xs) -> str | None:
        if not isinstance(xs, list) or not all(isinstance(x, NUMBER) and not isinstance(x, bool) for x in xs):
            return f"{field} is not a list of numbers"
        if not all(math.isfinite(x) for x in xs):
            return f"{field} holds a score that is not a finite number (NaN or inf)"
        return None

    for key in ("summaries", "settings", "blueprint_scores", "splits", "sources", "machines"):
        if key in d and not isinstance(d[key], dict):
            return f"{key} is not an object"
    settings, base = d.get("settings", {}), d.get("blueprint_scores", {})
    if "game" in settings:
        try:
            GameConfig.from_dict(settings["game"])
        except (TypeError, ValueError) as e:
            return f"settings.game is no GameConfig ({e})"
    if not isinstance(settings.get("first_game", 0), int) or settings.get("first_game", 0) < 0:
        return "settings.first_game is not a deal number"
    for mode, scores in d["scores"].items():
        problem = numbers(f"scores.{mode}", scores)
        pair = base.get(mode, d["scores"].get("blueprint"))
        if problem is None and pair is not None:
            field = f"blueprint_scores.{mode}" if mode in base else "scores.blueprint"
            problem = numbers(field, pair)
            if problem is None and len(pair) < len(scores):
                problem = f"{field} has {len(pair)} scores for the {len(scores)} games of scores.{mode}"
        if problem:
            return problem
        s = d["summaries"].get(mode)
        if not isinstance(s, dict):
            return f"summaries.{mode} is missing (scores.{mode} has no summary)"
        if s.get("games") != len(scores):
            return f"summaries.{mode}.games is {s.get('games')!r}, not the {len(scores)} of scores.{mode}"
        score = s.get("score")
        if not isinstance(score, dict) or not all(isinstance(score.get(k), NUMBER) for k in ("mean", "sem")):
            return f"summaries.{mode}.score is not a mean and s.e.m."
        for key in SUMMARY:
            if not isinstance(s.get(key), NUMBER):
                return f"summaries.{mode}.{key} is not a number"
    for mode, split in d.get("splits", {}).items():
        if not isinstance(split, dict) or not all(isinstance(split.get(k), NUMBER) for k in SPLIT):
            return f"splits.{mode} is not seconds in {', '.join(SPLIT)}"
    for key in ("sources", "machines"):
        if not all(isinstance(x, str) for x in d.get(key, {}).values()):
            return f"{key} holds a value that is not a string"
    return None


def compare(args) -> None:
    """--compare A B: each mode of two tables paired with itself on the deals both played, B - A."""
    names = tuple(args.compare)
    a, b = load_table(names[0]), load_table(names[1])
    out = result_path(COMPARED, args.record, args.out)
    head = f"# Two Table 1 results on the same deals: B - A\n\n- Command: `{command()}`\n"
    write_result(head + compare_body(a, b, names) + "\n", COMPARED, args.record, args.out, out)


COMPARED = "compare_tables"
"""Where --compare records go (experiments/results/compare_tables/)."""


def load_table(name: str) -> dict:
    """A table1 result (.json of a run or a --combine) with a blueprint row, or exit naming the file."""
    try:
        d = json.loads(Path(name).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"table1 --compare: cannot read {name}: {e}")
    if not (isinstance(d, dict) and isinstance(d.get("scores"), dict) and "blueprint" in d["scores"]):
        sys.exit(f"table1 --compare: {name} is not a table1 result with a blueprint row (its .json)")
    return d


def deals(d: dict, mode: str) -> dict[int, tuple[float, float]]:
    """Deal index -> (the mode's score, the blueprint's) in one table."""
    first = d.get("settings", {}).get("first_game", 0)
    scores = d["scores"][mode]
    base = d.get("blueprint_scores", {}).get(mode, d["scores"]["blueprint"])
    return {first + i: (s, b) for i, (s, b) in enumerate(zip(scores, base, strict=False))}


def compare_body(a: dict, b: dict, names: tuple[str, str]) -> str:
    """The markdown body: settings that differ, then each shared mode's B - A on the deals both played."""
    sa, sb = (recorded_settings(d.get("settings", {})) for d in (a, b))
    for key in ("game", "seed"):
        if sa.get(key) != sb.get(key):
            sys.exit(f"table1 --compare: the tables differ in {key}: they played other deals")
    differ = [f"{k}: {json.dumps(sa.get(k))} (A) -> {json.dumps(sb.get(k))} (B)" for k in SETTINGS
              if sa.get(k) != sb.get(k)]
    modes = [m for m in a["scores"] if m in b["scores"] and m != "blueprint"]
    if not modes:
        sys.exit("compare_tables: the tables share no search mode")
    game = GameConfig.from_dict(sa["game"]) if "game" in sa else GameConfig()  # before tables kept it
    edges, bucket_names = score_buckets(game.max_score)
    rows, splits = [], []
    for mode in modes:
        da, db = deals(a, mode), deals(b, mode)
        common = sorted(set(da) & set(db))
        if not common:
            sys.exit(f"table1 --compare: no deal played by {mode} in both tables")
        base = [da[i][1] for i in common]
        if base != [db[i][1] for i in common]:
            sys.exit(f"table1 --compare: B's blueprint scores differ from A's on {mode}'s shared deals: not "
                     "the same deals or blueprint")
        xa = torch.tensor([da[i][0] for i in common]).double()
        xb = torch.tensor([db[i][0] for i in common]).double()
        bp = torch.tensor(base).double()
        diff, sem = paired_difference(xb, xa)
        span = f"{common[0]}..{common[-1]}" + ("" if common[-1] - common[0] + 1 == len(common) else " (gaps)")
        rows.append(f"| {mode} | {len(common)} ({span}) | {float(bp.mean()):.3f} | {float(xa.mean()):.3f} | "
                    f"{float(xb.mean()):.3f} | {diff:+.3f} ± {sem:.3f} | {diff / sem if sem else 0:+.1f} |")
        cells = []
        for lo, hi in edges:
            at = (bp >= lo) & (bp <= hi)
            if bool(at.any()):
                d, s = paired_difference(xb[at], xa[at])
                cells.append(f"{int(at.sum())}: {d:+.2f} ± {s:.2f}")
            else:
                cells.append("—")
        splits.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join([
        f"- A: `{names[0]}`", f"- B: `{names[1]}`",
        "- Settings that differ: " + ("; ".join(differ) if differ else "none recorded"),
        "- Each mode paired with itself on the deals both tables played it (deal indices of the evaluation "
        "stream); the runs' machines and commands are in their own files.",
        f"- Date: {datetime.date.today()}; computed (nothing played) on {machine()}.",
        "",
        "| mode | deals | blueprint | A | B | B - A (paired) | t |", "|---|---|---|---|---|---|---|",
        *rows, "",
        "B - A by the blueprint's score on the deal (deals: difference ± s.e.):", "",
        "| mode | " + " | ".join(f"blueprint {n}" for n in bucket_names) + " |",
        "|---|" + "---|" * len(bucket_names), *splits,
    ])


def chain(found: list[tuple[int, Row]]) -> list[Row]:
    """The rows that cover deals 0, 1, ... without a gap: at each step the run starting there with the
    most games (a run that starts later than the chain reaches is left out)."""
    rows, at = [], 0
    while True:
        here = [r for first, r in found if first == at and r.scores]
        if not here:
            return rows
        rows.append(max(here, key=lambda r: len(r.scores)))
        at += len(rows[-1].scores)


def join(rows: list[Row]) -> Row:
    """One row from runs of one mode on adjacent deals: scores concatenated, counts and seconds summed,
    rates re-derived, percentages weighted by the games or searched moves they are shares of."""
    if len(rows) == 1:
        return rows[0]
    scores = [x for r in rows for x in r.scores]
    base = [x for r in rows for x in r.base]
    ss = [r.summary for r in rows]

    def total(key: str) -> float:
        return sum(s[key] for s in ss)

    def weighted(key: str, by: str, parts: list[dict] = ss) -> float:
        return sum(s[key] * w[by] for s, w in zip(parts, ss, strict=True)) / max(total(by), 1)

    def evaluation(key: str, values: list[float]) -> dict:
        parts = [s[key] for s in ss]
        # mean ± s.e.m. of the values: their paired difference with zero
        mean, sem = paired_difference(torch.tensor(values), torch.zeros(len(values)))
        return {"games": len(values), "mean": mean, "sem": sem,
                **{k: weighted(k, "games", parts) for k in ("perfect", "bombed", "mean_length")}}

    seconds, searched = total("seconds"), total("searched_moves")
    diff, sem = paired_difference(torch.tensor(scores), torch.tensor(base))
    summary = {
        **ss[0], "games": len(scores), "score": evaluation("score", scores), "paired_diff": diff,
        "paired_sem": sem, "seconds": seconds, "seconds_per_game": seconds / len(scores),
        "seconds_per_search": seconds / max(searched, 1), "searched_moves": searched,
        "rollouts": total("rollouts"), "rollouts_per_s": total("rollouts") / max(seconds, 1e-9),
        "deviation_pct": weighted("deviation_pct", "searched_moves"),
        "fallback_pct": weighted("fallback_pct", "searched_moves"),
    }
    if ss[0].get("blueprint") is not None:
        summary["blueprint"] = evaluation("blueprint", base)
    split = None
    if all(r.split for r in rows):
        split = {k: sum(r.split[k] for r in rows) for k in rows[0].split}
    one = all(same_machine(r.machine, rows[0].machine) for r in rows)  # else unknown: no speed-up
    if not one:  # seconds from two machines add up to no one machine's time
        summary.update(seconds=math.nan, seconds_per_game=math.nan, seconds_per_search=math.nan,
                       rollouts_per_s=math.nan)
    return Row(rows[0].mode, summary, scores, base, split, " + ".join(r.source for r in rows),
               rows[0].machine if one else "")


def figure(rows: list[Row], game: GameConfig) -> bytes:
    """Gain over the blueprint (± s.e.) against seconds per game, one point per searched mode (rows); where a
    row has no one machine's time (joined from runs on two), every mode's gain side by side instead: the
    PNG's bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = all(not math.isnan(r.summary["seconds_per_game"]) for r in rows)
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, r in enumerate(rows):
        diff, sem = r.paired()
        x = r.summary["seconds_per_game"] if timed else i
        ax.errorbar(x, diff, yerr=sem, fmt="o", capsize=3)
        label = f"{r.mode} ({len(r.scores)})" if timed else f"n={len(r.scores)}"  # else the mode is the tick
        ax.annotate(label, (x, diff), textcoords="offset points", xytext=(5, 5))
    ax.axhline(0, color="grey", lw=0.8)
    if timed:
        ax.set_xscale("log")
        ax.set_xlabel("seconds per game (log)")
    else:
        ax.set_xticks(range(len(rows)), [r.mode for r in rows])
        ax.set_xlabel("mode (rows joined from runs on several machines: no one time per game)")
    ax.set_ylabel("score gain over the blueprint (paired)")
    ax.set_title(f"Search on {game.colors} colours x {game.ranks} ranks, {game.players} players (games)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()


if __name__ == "__main__":
    main()
