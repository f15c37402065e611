"""The ``alphazero tournament`` command's work: a round robin of player specs and their Elo.

Every pair of specs plays one match (``alphazero.judge.match.run_arena``: the same openings with both
colours, from a book or random plies, optionally as Ray tasks through a ``ChunkRunner``); the
results of all matches are fitted together by maximum likelihood (``alphazero.judge.elo.fit_ratings``,
Bradley-Terry as Ordo and BayesElo do) into one Elo scale with 95% intervals, anchored at a chosen
player (the first spec by default) at 0, or with players pinned at given ratings (``--anchor SPEC@ELO``,
``parse_anchors``: a calibrated scale, such as the ``UCI_Elo`` levels ``alphazero ladder`` plays).

With ``out`` each finished match is appended to a JSON-lines file (one object a line,
``format_version`` below) and a rerun with the same file plays only the pairs still missing, so an
interrupted tournament loses at most the match in progress. Never touches Ray and parses no command
line (``commands.tournament`` does).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any, Callable, Sequence

from alphazero.errors import InputError
from alphazero.fileio import append_jsonl, output_file, read_jsonl
from alphazero.judge.elo import fit_ratings, format_ratings_table
from alphazero.judge.match import ChunkRunner, run_arena

TOURNAMENT_FORMAT_VERSION = 1


def parse_anchors(texts: Sequence[str]) -> list[tuple[str, float | None]]:
    """``--anchor`` values in order, each ``SPEC@ELO`` (pinned at ELO) -> (spec, elo) or a bare ``SPEC`` -> (spec, None).

    The Elo follows the last ``@``; a text whose last ``@`` is not followed by a number is a bare spec (a
    path may hold an ``@``). A spec given twice at different ratings raises ``InputError``."""
    anchors: dict[str, float | None] = {}
    for text in texts:
        spec, at, tail = text.strip().rpartition("@")
        try:
            elo: float | None = float(tail) if at else None
        except ValueError:
            elo = None
        if elo is None:
            spec = text.strip()
        elif not spec.strip() or not math.isfinite(elo):
            raise InputError(f"--anchor {text!r}: expected SPEC@ELO with a finite ELO, e.g. 'random@0'")
        spec = spec.strip()
        if spec in anchors and anchors[spec] != elo:
            raise InputError(f"--anchor {spec!r} is given twice, at {anchors[spec]} and {elo}")
        anchors[spec] = elo
    return list(anchors.items())


def _pair_key(a: str, b: str, games: int) -> tuple[str, str, int]:
    return (a, b, games)


def read_results(path: str | Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The matches already recorded in a tournament file, keyed by (spec A, spec B, games)."""
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    if not Path(path).exists():
        return done
    for record in read_jsonl(path, "tournament file (--out)"):
        if record.get("format_version", 0) > TOURNAMENT_FORMAT_VERSION:
            raise InputError(f"{path}: written by a newer version (format_version {record['format_version']})")
        try:
            done[_pair_key(record["a"], record["b"], int(record["games"]))] = record
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: a line is not a tournament match record: {record!r}") from None
    return done


def run_tournament(specs: Sequence[str], games: int, out: str | Path | None = None,
                   openings_path: str | Path | None = None, opening_plies: int | None = None,
                   max_plies: int = 400, seed: int = 0, anchors: Sequence[str] = (),
                   chunk_runner: ChunkRunner | None = None, parallelism: int = 1,
                   on_match: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Round robin of ``specs`` with ``games`` games per pair; returns the matches and the ratings.

    The result: ``players`` (the specs), ``matches`` (one record per pair: a, b, games, wins, draws,
    losses, score, elo with interval, from A's side), ``ratings`` (spec -> elo, elo_low, elo_high,
    games, score) and ``table`` (plain text). ``anchors`` (``parse_anchors``): one bare spec, the player at 0
    (default the first spec), or any number of ``SPEC@ELO``, each player pinned at its rating; ``pinned``
    in the result says which.
    """
    specs = [spec.strip() for spec in specs]
    if len(specs) < 2 or len(set(specs)) != len(specs):
        raise InputError("a tournament needs at least two different player specs")
    anchored = parse_anchors(anchors)
    pinned = {spec: elo for spec, elo in anchored if elo is not None}
    bare = [spec for spec, elo in anchored if elo is None]
    if len(bare) > 1 or (bare and pinned):
        raise InputError("--anchor: give one SPEC (the player at 0 Elo) or any number of SPEC@ELO (players pinned there)")
    for spec, _ in anchored:
        if spec not in specs:
            raise InputError(f"--anchor {spec!r} is not one of the players")
    if out is not None:
        output_file(out, "--out")
    done = read_results(out) if out is not None else {}
    matches = []
    for number, (a, b) in enumerate(itertools.combinations(specs, 2)):
        record = done.get(_pair_key(a, b, games))
        if record is None:
            report = run_arena(a, b, games, openings_path=openings_path, opening_plies=opening_plies,
                               max_plies=max_plies, seed=seed + number, chunk_runner=chunk_runner,
                               parallelism=parallelism)
            record = {"format_version": TOURNAMENT_FORMAT_VERSION, "a": a, "b": b, "games": games,
                      "wins": report["wins"], "draws": report["draws"], "losses": report["losses"],
                      "score": report["score"], "elo": report["elo"], "elo_low": report["elo_low"],
                      "elo_high": report["elo_high"], "terminations": report["terminations"]}
            if out is not None:
                append_jsonl(out, record)
        matches.append(record)
        if on_match is not None:
            on_match(record)
    results = [(m["a"], m["b"], score) for m in matches
               for score, count in ((1.0, m["wins"]), (0.5, m["draws"]), (0.0, m["losses"]))
               for _ in range(count)]
    if pinned:
        ratings = fit_ratings(results, pinned=pinned)
    else:
        pinned = {bare[0] if bare else specs[0]: 0.0}
        ratings = fit_ratings(results, anchor=next(iter(pinned)))
    return {"players": specs, "games_per_pair": games, "matches": matches, "pinned": pinned,
            "ratings": {name: {"elo": r.elo, "elo_low": r.elo_low, "elo_high": r.elo_high, "games": r.games,
                               "score": r.score} for name, r in ratings.items()},
            "table": format_ratings_table(ratings)}
