"""An ablation at equal wall time: training runs of the same length, one variant after another on this
machine, then a tournament of their best networks, as one resumable command.

    python tools/ablate.py --out checkpoints/ablate-gumbel --config configs/default.yaml --minutes 20 \
        --variant puct32 \
        --variant "gumbel8: search.algorithm=gumbel, search.num_simulations=8, search.gumbel_considered=8" \
        --player "mcts:{run}?sims=64" --games 40 --openings /usr/share/games/gnuchess/book.bin --workers 2

Each ``--variant NAME[: SECTION.KEY=VALUE, ...]`` is ``alphazero train --config C --set max_minutes=M``
with its overrides (none: the config as it is; ``seed=N`` too, the one top-level key that keeps the wall time
equal: the same variant under another seed measures the spread between runs), in ``OUT/NAME``; the runs go one at a time, each with
the whole machine, so their self-play rates are comparable (printed beside each result: these machines
differ 2-4x from day to day, so compare variants of one ablation only). Then ``alphazero tournament`` of
``--player`` with ``{run}`` replaced by each run directory (its best network), and any fixed
``--opponent`` players (a variant that only beats its siblings is told apart from one that beats someone
else too), the first variant at 0 Elo, into ``OUT/tournament.jsonl``. Run the same command again after a stop: finished runs are kept, an
unfinished one resumes (``train --resume``), the tournament keeps its played matches. Prints a Markdown
table (``--json``: one JSON object) and writes it to ``OUT/table.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from commands.main import main; sys.exit(main())"


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``"NAME: a.b=1, c.d=x"`` -> ``("NAME", ["a.b=1", "c.d=x"])``; ``ValueError`` naming what is wrong."""
    name, _, rest = text.partition(":")
    name = name.strip()
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"--variant {text!r}: the name must be letters, digits, '-', '_' or '.'")
    overrides = [part.strip() for part in rest.split(",") if part.strip()]
    bad = [part for part in overrides
           if "=" not in part or ("." not in part.split("=", 1)[0] and part.split("=", 1)[0].strip() != "seed")]
    if bad:
        raise ValueError(f"--variant {text!r}: {bad[0]!r} is not SECTION.KEY=VALUE (or seed=N)")
    return name, overrides


def game_endings(run_dir: Path) -> dict[str, float | None]:
    """How the run's self-play games ended, from its ``selfplay_stats`` events (one per generation): the
    shares stopped at the length limit (no value target) and resigned, and the false resignation rate of
    the games played out to check it, over those that ended before the length limit (None where nothing was
    counted)."""
    games = capped = resigned = would = false = 0.0
    events = run_dir / "events.jsonl"
    for line in events.read_text().splitlines() if events.exists() else []:
        try:
            event = json.loads(line)
        except ValueError:  # a line torn by a kill
            continue
        if event.get("event") != "selfplay_stats" or not event.get("games"):
            continue
        games += event["games"]
        capped += event["games"] * (event.get("max_length") or 0.0)
        resigned += event["games"] * (event.get("resigned") or 0.0)
        judged = (event.get("would_resign") or 0) - (event.get("resign_unfinished") or 0)  # the rest hit the cap
        would += judged
        false += judged * (event.get("false_resign_rate") or 0.0)
    return {"capped": round(capped / games, 3) if games else None, "resigned": round(resigned / games, 3) if games else None,
            "false_resign_rate": round(false / would, 3) if would else None}


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What a finished run did, from its ``state.json`` (games, positions, learner steps, best generation,
    seconds and self-play positions per second over the run) and its events (``game_endings``)."""
    state = json.loads((run_dir / "state.json").read_text())
    seconds = float(state.get("elapsed_s") or 0.0)
    return {"games": state["games"], "positions": state["positions"], "learner_steps": state["learner_step"],
            "best_generation": state["best_generation"], "generations": state["generation"],
            "seconds": round(seconds), "positions_per_s": round(state["positions"] / seconds, 1) if seconds else None,
            **game_endings(run_dir)}


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of an ablation: one row per variant."""
    lines = ["| variant | overrides | Elo [95%] | games | positions | self-play positions/s | learner steps | best gen "
             "| games capped / resigned |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    for row in rows:
        rating = row.get("rating")
        elo = "anchor (0)" if row.get("anchor") else (
            f"{rating['elo']:+.0f} [{rating['elo_low']:+.0f}, {rating['elo_high']:+.0f}]" if rating else "-")
        lines.append(f"| {row['name']} | {', '.join(row['overrides']) or '(the config)'} | {elo} | {row['games']:,} | "
                     f"{row['positions']:,} | {row['positions_per_s']} | {row['learner_steps']:,} | {row['best_generation']} | "
                     f"{share(row.get('capped'))} / {share(row.get('resigned'))} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory of the runs, the tournament and the table")
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--minutes", type=float, required=True, help="each run's length (train's max_minutes)")
    parser.add_argument("--variant", action="append", required=True, metavar="NAME[: SECTION.KEY=VALUE|seed=N, ...]")
    parser.add_argument("--player", default="mcts:{run}?sims=64", help="how each run's best network plays ({run})")
    parser.add_argument("--opponent", action="append", default=[], metavar="SPEC",
                        help="a fixed player outside the ablation (e.g. ab:material?depth=1, the ladder's link) that "
                             "joins the tournament, so the variants are also measured against someone else; repeatable")
    parser.add_argument("--games", type=int, default=40, help="tournament games per pair (even)")
    parser.add_argument("--openings", default=None, help="polyglot book or EPD file for the tournament")
    parser.add_argument("--workers", type=int, default=2, help="tournament games on a local Ray of K workers")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        variants = [parse_variant(text) for text in args.variant]
    except ValueError as error:
        parser.error(str(error))
    if len({name for name, _ in variants}) != len(variants):
        parser.error("--variant names must differ")
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, overrides in variants:
        run_dir = out / name
        done = out / f"{name}.json"
        if not done.exists():
            command = [sys.executable, "-c", CLI, "train", "--config", args.config, "--run-dir", str(run_dir),
                       "--set", f"max_minutes={args.minutes:g}"]
            for override in overrides:
                command += ["--set", override]
            if (run_dir / "state.json").exists():
                command.append("--resume")
            print(f"[ablate] {name}: {' '.join(command[3:])}", file=sys.stderr, flush=True)
            with open(out / f"{name}.log", "a") as log:
                code = subprocess.call(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            if code != 0:
                print(f"[ablate] {name}: train exited {code}; see {out / (name + '.log')}", file=sys.stderr)
                return code
            done.write_text(json.dumps({"name": name, "overrides": overrides, **run_summary(run_dir)}))
        rows.append(json.loads(done.read_text()))
    players = [args.player.replace("{run}", str(out / name)) for name, _ in variants]
    command = [sys.executable, "-c", CLI, "tournament", *players, *args.opponent, "--games", str(args.games), "--workers",
               str(args.workers), "--out", str(out / "tournament.jsonl"), "--json"]
    if args.openings:
        command += ["--openings", args.openings]
    print(f"[ablate] tournament: {len(players)} players, {args.games} games a pair", file=sys.stderr, flush=True)
    result = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        return result.returncode
    ratings = json.loads(result.stdout)["ratings"]
    for row, player in zip(rows, players):
        row["player"] = player
        row["rating"] = ratings.get(player)
    rows[0]["anchor"] = True
    text = table(rows)
    for opponent in args.opponent:  # where the fixed players stand on the same scale
        rating = ratings.get(opponent)
        if rating:
            text += (f"\n\n`{opponent}` (a fixed opponent): {rating['elo']:+.0f} [{rating['elo_low']:+.0f}, "
                     f"{rating['elo_high']:+.0f}] on this scale")
    (out / "table.md").write_text(text + "\n")
    print(json.dumps({"variants": rows}) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
