"""LBS paper Fig. 3 for our models: per-card cross-entropy of the true hand against the turn number,
learned belief vs grounded belief (and the counting prior alone), over blueprint games; plus belief
sampling throughput.

    python -m experiments.belief_fig3 --belief runs/belief/latest.pt --games 1000
    python -m experiments.belief_fig3 --belief runs/belief/latest.pt --blueprint bp.pt --device cuda

Games are greedy blueprint self-play on held-out deals (evaluate_belief: seeds 0..games-1, episode
-1-seed, never a training deal). Every player's own hand at every turn counts; the learned belief reads
the player's observations turn by turn; the grounded belief is lbs.belief.sampling.grounded_belief
(public card counts x hint plausibility, slots independent, the paper's eq. 7); "counting" is the same
counts taken slot by slot (copies used by earlier slots removed), the prior a count_prior belief
starts from, so learned < counting is what the network learned from the blueprint's play.
Throughput: K hands per query sampled from the learned belief at real positions, then filtered
exactly (sample_valid); we report valid hands per second, one query per call as search issues them,
plus the paper-size network (random weights, full 2-player game) for the cost of the reference model.
Writes runs/experiments/belief_fig3_<date>_<tag>.{png,csv,md}; --record writes into the tracked
experiments/results/belief_fig3/.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import sys
import time
from pathlib import Path

import torch

from experiments.common import command, machine, sync
from lbs import ckpt
from lbs.belief.constraints import HandConstraints
from lbs.belief.constraints import from_obs as constraints_from_obs
from lbs.belief.data import episodes_to_streams
from lbs.belief.evaluate import evaluate_belief
from lbs.belief.sampling import sample_valid
from lbs.hanabi import GameConfig, engine
from lbs.hanabi.encode import encode, own_hands
from lbs.models import (
    BeliefConfig,
    BeliefModel,
    is_rule_bot,
    load_belief,
    load_blueprint,
    resolve_device,
    stored_blueprint_path,
    training_record,
)
from lbs.rl.actors import ActorConfig, run_round
from lbs.seeding import Stream, game_seeds

RESULTS = Path(__file__).resolve().parent / "results" / "belief_fig3"


def _query(cons: HandConstraints, i: int) -> HandConstraints:
    return HandConstraints(cons.unseen[i : i + 1], cons.color_plausible[i : i + 1],
                           cons.rank_plausible[i : i + 1], cons.hand_len[i : i + 1])


def sampling_throughput(model: BeliefModel, context: torch.Tensor, cons: HandConstraints, k: int,
                        device: torch.device, reps: int = 1) -> dict[str, float]:
    """Sample k hands for each query (one query per call, after one warm-up call) and filter them."""
    q = context.shape[0]
    sample_valid(model, context[:1], k, torch.zeros(1, dtype=torch.long, device=device), _query(cons, 0))
    sync(device)
    valid = 0
    t0 = time.perf_counter()
    for r in range(reps):
        for i in range(q):
            seeds = torch.full((1,), r * q + i + 1, dtype=torch.long, device=device)
            out = sample_valid(model, context[i : i + 1], k, seeds, _query(cons, i))
            valid += int(out.num_valid.sum())
    sync(device)
    dt = time.perf_counter() - t0
    calls = reps * q
    return {"queries": calls, "k": k, "seconds": dt, "ms_per_query": 1e3 * dt / calls,
            "hands_per_s": calls * k / dt, "valid_per_s": valid / dt, "acceptance": valid / (calls * k)}


def real_queries(game: GameConfig, model: BeliefModel, net, n: int, device: torch.device, seed: int):
    """Contexts [n, E] and constraints at positions of greedy blueprint games where the player holds cards."""
    seeds = torch.arange(n, device=device)
    episodes, _ = run_round(game, net.step, lambda b: net.initial_state(b, device), seeds, -1000 - seed,
                            ActorConfig(num_games=n, max_len=game.max_steps))
    s = episodes_to_streams(game, episodes)
    held = (s["hand"] >= 0).any(-1)  # [S, T]
    lengths = held.sum(1)
    rows = torch.arange(n, device=device) * game.players  # player 0 of each game
    turns = (torch.arange(n, device=device) * 7) % lengths[rows].clamp(min=1)  # spread over the game
    with torch.no_grad():
        context, _ = model.encode(s["priv"][rows].float())
    ctx = context[torch.arange(n, device=device), turns]
    cons = constraints_from_obs(game, s["priv"][rows, turns])
    return ctx, cons


def paper_size_throughput(k: int, device: torch.device, queries: int) -> dict[str, float]:
    """Random-weight reference-size belief on the full 2-player game (cost only; acceptance means little)."""
    game = GameConfig(players=2)
    torch.manual_seed(0)
    model = BeliefModel(game, BeliefConfig()).to(device).eval()
    state = engine.reset(game, torch.arange(queries, device=device))
    obs = encode(game, state)[:, 0]  # [Q, D] player 0 at the deal
    with torch.no_grad():
        context, _ = model.encode(obs[:, None])
    return sampling_throughput(model, context[:, 0], constraints_from_obs(game, obs), k, device)


def turn_ranges(turns: list[int]) -> str:
    if not turns:
        return "none"
    out, start, prev = [], turns[0], turns[0]
    for t in turns[1:] + [None]:
        if t is None or t != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            if t is not None:
                start = t
        if t is not None:
            prev = t
    return ", ".join(out)


@torch.no_grad()
def exact_by_turn(game: GameConfig, net, games: int, seed: int, device: torch.device,
                  max_len: int) -> tuple[list[float], list[int]]:
    """Per turn: cross-entropy per card of every player's true hand under the exact posterior (SPARTA's
    range for that seat, every pending filter applied) and the cards scored, over the greedy blueprint games
    evaluate_belief plays (games 0..games-1 of the evaluation stream); NaN where no game runs. Needs a
    blueprint whose recurrent state is public (the range's counterfactual filter)."""
    from lbs.acting import play
    from lbs.infer import InferenceServer
    from lbs.search.exact_range import ExactRange

    seeds = game_seeds(Stream.EVAL, seed, games, 0, device)
    state = engine.reset(game, seeds)
    nll = torch.zeros(max_len, dtype=torch.float64)
    cards = torch.zeros(max_len, dtype=torch.long)
    with InferenceServer(net, device) as server:
        handle = server.qnet()
        ranges = [ExactRange(game, handle, s) for s in range(game.players)]
        for r in ranges:
            r.reset(state)

        def score(turn) -> None:
            own = own_hands(game, turn.state)  # [G, P, H]
            for s, r in enumerate(ranges):
                hands, game_of, prob = r.probabilities()
                true = own[:, s]
                hit = (hands == true.index_select(0, game_of)).all(1)
                p_true = torch.zeros(games, dtype=torch.float64, device=device)
                p_true.index_add_(0, game_of[hit], prob[hit])
                live = ~turn.state.done & r.tracked
                if bool((p_true[live] <= 0).any()):
                    raise AssertionError(f"turn {turn.t}: a true hand outside seat {s}'s exact range")
                nll[turn.t] -= float(p_true[live].log().sum())
                cards[turn.t] += int((true >= 0)[live].sum())
                r.update(turn.state, turn.move, turn.next_state)
            print(f"exact posterior: turn {turn.t}", file=sys.stderr, flush=True)

        play(game, state, handle.step, handle.initial_state(games * game.players), max_len, hook=score)
    per_card = torch.where(cards > 0, nll / cards.clamp(min=1), math.nan)
    return per_card.tolist(), cards.tolist()


def plot(path: Path, ev, title: str, exact: list[float] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = [t for t, c in enumerate(ev.cards_by_turn) if c > 0]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, ys, mean, style in (("learned belief", ev.learned_by_turn, ev.nll_learned, "-"),
                                  ("grounded belief (eq. 7)", ev.grounded_by_turn, ev.nll_grounded, "-"),
                                  ("counting prior alone", ev.counting_by_turn, ev.nll_counting, ":")):
        ax.plot(turns, [ys[t] for t in turns], style, label=f"{name} (mean {mean:.3f})")
    if exact is not None:
        ax.plot(turns, [exact[t] for t in turns], "--",
                label=f"exact posterior (mean {_mean(exact, ev):.3f})")
    ax.set_xlabel("turn")
    ax.set_ylabel("cross-entropy per card (nats)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.fill_between(turns, [ev.cards_by_turn[t] for t in turns], color="grey", alpha=0.12, step="mid")
    ax2.set_ylabel("cards scored at this turn", color="grey")
    ax.set_zorder(ax2.get_zorder() + 1)  # curves in front of the card-count area
    ax.patch.set_visible(False)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _mean(by_turn: list[float], ev) -> float:
    """A per-turn curve's mean per card, weighted as the evaluation's cards."""
    live = [(t, c) for t, c in enumerate(ev.cards_by_turn) if c > 0]
    return sum(by_turn[t] * c for t, c in live) / max(1, sum(c for _, c in live))


def _closed(ev, exact: list[float]) -> float:
    """Share of the gap between the counting prior and the exact posterior that the learned belief closes."""
    gap = ev.nll_counting - _mean(exact, ev)
    return (ev.nll_counting - ev.nll_learned) / gap if gap > 0 else math.nan


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--belief", required=True, help="belief checkpoint (train/belief.py)")
    ap.add_argument("--blueprint", default=None, help="default: the one --belief names")
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=250, help="games played in lockstep")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--acceptance-k", type=int, default=32,
                    help="hands sampled per player and turn for the acceptance column (0: skip)")
    ap.add_argument("--k", type=int, default=10_000, help="hands per query for the throughput measurement")
    ap.add_argument("--queries", type=int, default=16, help="queries timed per model")
    ap.add_argument("--paper-queries", type=int, default=2, help="queries timed, paper-size model (0: skip)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--tag", default="", help="suffix of the result files (default: the device type)")
    ap.add_argument("--out", default="runs/experiments", help="folder for the results (default: scratch)")
    ap.add_argument("--record", action="store_true", help="write into the tracked results/belief_fig3/")
    ap.add_argument("--exact-games", type=int, default=0,
                    help="also the exact posterior (SPARTA's range) on the first N games, beside the beliefs "
                    "on the same positions (blueprints with a public state, e.g. smartbot; 0: skip)")
    args = ap.parse_args(argv)
    if args.record:
        args.out = str(RESULTS)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    try:
        blob = ckpt.load(args.belief, "belief")
        bp_path = args.blueprint or str(stored_blueprint_path(blob, args.belief))
    except ckpt.CheckpointError as e:
        sys.exit(f"belief_fig3: {e}")
    step = blob.get("step", blob.get("global_step", "?"))  # shipped files carry global_step only
    game, model = load_belief(args.belief, blueprint_path=bp_path, device=device)  # checks the blueprint hash
    _, net = load_blueprint(bp_path, device=device, game=game)

    t0 = time.time()
    ev = evaluate_belief(game, model, net.step, lambda b: net.initial_state(b, device), games=args.games,
                         seed=args.seed, batch=min(args.batch, args.games), acceptance_k=args.acceptance_k,
                         device=device)
    eval_s = time.time() - t0
    print(ev, f"({eval_s:.0f} s)")
    exact = None
    if args.exact_games < 0:
        sys.exit(f"belief_fig3: --exact-games {args.exact_games}: must be >= 0")
    if args.exact_games:
        if not getattr(net, "hidden_is_public", False):
            sys.exit(f"belief_fig3: --exact-games needs a blueprint with a public state ({bp_path} has none)")
        t0 = time.time()
        ev_exact = evaluate_belief(game, model, net.step, lambda b: net.initial_state(b, device),
                                   games=args.exact_games, seed=args.seed, batch=args.exact_games,
                                   device=device)
        exact, cards = exact_by_turn(game, net, args.exact_games, args.seed, device, game.max_steps)
        if cards != ev_exact.cards_by_turn:
            raise AssertionError("the exact posterior scored other positions than the beliefs")
        exact_s = time.time() - t0
        print(f"exact posterior over {args.exact_games} games: {_mean(exact, ev_exact):.4f} nats per card "
              f"({exact_s:.0f} s)")
    live = [t for t, c in enumerate(ev.cards_by_turn) if c > 0]
    better = [t for t in live if ev.learned_by_turn[t] < ev.grounded_by_turn[t]]
    beyond = [t for t in live if ev.learned_by_turn[t] < ev.counting_by_turn[t]]

    ctx, cons = real_queries(game, model, net, args.queries, device, args.seed)
    thr = {f"learned ({device.type})": sampling_throughput(model, ctx, cons, args.k, device)}
    if device.type == "cuda":
        cpu = torch.device("cpu")
        thr["learned (cpu)"] = sampling_throughput(model.to(cpu), ctx.to(cpu), HandConstraints(
            *(x.to(cpu) for x in (cons.unseen, cons.color_plausible, cons.rank_plausible, cons.hand_len))),
            args.k, cpu)
        model.to(device)
    if args.paper_queries:
        devs = [device] + ([torch.device("cpu")] if device.type == "cuda" else [])
        for d in devs:
            name = f"paper-size, random weights ({d.type})"
            thr[name] = paper_size_throughput(args.k, d, args.paper_queries)
    for name, r in thr.items():
        print(f"{name}: {r['valid_per_s']:.0f} valid hands/s ({r['hands_per_s']:.0f} sampled/s, "
              f"{r['ms_per_query']:.1f} ms per query of K={r['k']}, acceptance {r['acceptance']:.3f})")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"belief_fig3_{datetime.date.today().isoformat()}_{args.tag or device.type}"
    title = (f"{game.players}p {game.colors}c{game.ranks}r, belief step {step}, "
             f"{args.games} greedy blueprint games")
    plot(out / f"{stem}.png", ev, title)
    if exact is not None:
        plot(out / f"{stem}_exact.png", ev_exact, f"{game.players}p {game.colors}c{game.ranks}r, belief step "
             f"{step}, {args.exact_games} greedy blueprint games, beside the exact posterior", exact)
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["turn", "cards", "learned_nll_per_card", "grounded_nll_per_card", "counting_nll_per_card",
                    "acceptance"])
        for t in live:
            acc = ev.acceptance_by_turn[t] if ev.acceptance_by_turn else ""
            w.writerow([t, ev.cards_by_turn[t], f"{ev.learned_by_turn[t]:.5f}",
                        f"{ev.grounded_by_turn[t]:.5f}", f"{ev.counting_by_turn[t]:.5f}",
                        f"{acc:.4f}" if acc != "" else ""])
    if is_rule_bot(bp_path):
        about_bp = "a rule bot, no weights"
    else:
        rec = training_record(ckpt.load(bp_path, "blueprint"))
        curve = rec.get("history") or rec.get("points") or []
        best_score = max((h.get("mean", h.get("score")) for h in curve), default=float("nan"))
        updates = rec.get("counters", rec.get("progress", {})).get("updates", "?")
        about_bp = (f"sha256 {ckpt.file_hash(bp_path)[:16]}..., {updates} updates, "
                    f"best greedy score {best_score:.3f}")
    lines = [
        "# Belief cross-entropy by turn (LBS Fig. 3) and sampling throughput, "
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}",
        "",
        f"- machine: {machine()}",
        f"- command: `{command()}`",
        f"- game: {game.to_dict()}",
        f"- blueprint: `{bp_path}` ({about_bp})",
        f"- belief: `{args.belief}` (step {step}, model {blob['config']['model']}, "
        f"explore {blob['config']['explore']})",
        f"- evaluation: {args.games} greedy games, seeds 0..{args.games - 1}, episode {-1 - args.seed} "
        f"(held out), {eval_s:.0f} s",
        "",
        "## Cross-entropy per card (nats), all players, all turns",
        "",
        "| belief | mean NLL per card |",
        "|---|---|",
        f"| learned | {ev.nll_learned:.4f} |",
        f"| grounded (eq. 7, slots independent) | {ev.nll_grounded:.4f} |",
        f"| counting prior alone (slot by slot, no network) | {ev.nll_counting:.4f} |",
        "",
        f"Learned beats grounded on average: **{'yes' if ev.nll_learned < ev.nll_grounded else 'no'}** "
        f"({ev.nll_grounded - ev.nll_learned:+.4f} nats per card in favour of learned). Per turn, learned is "
        f"lower at {len(better)} of {len(live)} turns: {turn_ranges(better)}; grounded is lower or equal at "
        f"{turn_ranges([t for t in live if t not in better])}.",
        "",
        f"Learned beats the counting prior alone (what the network learned from the blueprint's play): "
        f"{ev.nll_counting - ev.nll_learned:+.4f} nats per card; lower at {len(beyond)} of {len(live)} "
        f"turns: {turn_ranges(beyond)}.",
        "",
        f"![fig3]({stem}.png)",
        "",
        "| turn | cards | learned | grounded | counting | learned − grounded | acceptance |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in live:
        acc = f"{ev.acceptance_by_turn[t]:.3f}" if ev.acceptance_by_turn else "-"
        lt, gt, ct = ev.learned_by_turn[t], ev.grounded_by_turn[t], ev.counting_by_turn[t]
        lines.append(f"| {t} | {ev.cards_by_turn[t]} | {lt:.4f} | {gt:.4f} | {ct:.4f} | {lt - gt:+.4f} "
                     f"| {acc} |")
    if exact is not None:
        e = ev_exact
        lines += [
            "",
            f"## Against the exact posterior (first {args.exact_games} games, {exact_s:.0f} s)",
            "",
            "The exact posterior is SPARTA's range for each seat (every hand its history allows, weighted by "
            "the deals that give it, every counterfactual filter of the partners' moves applied): in "
            "expectation no belief built from what the player saw scores lower. Same positions in every "
            "row.",
            "",
            "| belief | mean NLL per card |",
            "|---|---|",
            f"| learned | {e.nll_learned:.4f} |",
            f"| grounded | {e.nll_grounded:.4f} |",
            f"| counting prior alone | {e.nll_counting:.4f} |",
            f"| exact posterior | {_mean(exact, e):.4f} |",
            "",
            f"The learned belief closes {_closed(e, exact):.1%} of the counting prior's gap to the exact "
            "posterior.",
            "",
            f"![exact]({stem}_exact.png)",
            "",
            "| turn | cards | learned | grounded | counting | exact |",
            "|---|---|---|---|---|---|",
        ]
        for t in [t for t, c in enumerate(e.cards_by_turn) if c > 0]:
            lines.append(f"| {t} | {e.cards_by_turn[t]} | {e.learned_by_turn[t]:.4f} | "
                         f"{e.grounded_by_turn[t]:.4f} | {e.counting_by_turn[t]:.4f} | {exact[t]:.4f} |")
    lines += [
        "",
        f"acceptance = fraction of {args.acceptance_k} plain (unguided) samples per player and turn that "
        "pass "
        "the exact filter (hints and card counts).",
        "",
        f"## Belief sampling throughput (K = {args.k} hands per query, one query per call)",
        "",
        "| model | queries | ms per query | sampled hands/s | valid hands/s | acceptance |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in thr.items():
        lines.append(f"| {name} | {r['queries']} | {r['ms_per_query']:.1f} | {r['hands_per_s']:.0f} | "
                     f"{r['valid_per_s']:.0f} | {r['acceptance']:.3f} |")
    lines += ["", "No GPU on this machine." if not torch.cuda.is_available() else "", ""]
    (out / f"{stem}.md").write_text("\n".join(lines))
    print(f"wrote {out / stem}.{{png,csv,md}}")


if __name__ == "__main__":
    main()
