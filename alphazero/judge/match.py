"""The ``alphazero arena`` command's work: a match between two player specs, and its report.

Owns the statistics of one match (trinomial W/D/L, pentanomial over game pairs, an SPRT checked
after every complete pair), its PGN and its games file (``--out``: one JSON line per finished game,
appended as it ends; the same command with the same file plays only the game pairs not yet complete,
so a match stopped by a kill or a session's end goes on, and a finished one can be extended with more
``--games``). Players come from ``alphazero.judge.players`` spec strings,
games from ``alphazero.judge.arena.play_match``, numbers from ``alphazero.judge.elo``. It parses no
command line (``commands.arena`` does) and never touches Ray: the parallel arena hands chunks of game
pairs to a ``ChunkRunner`` (``workers.arena`` runs them as Ray tasks). Errors a user can fix raise
``InputError`` with one clear line.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from alphazero.errors import InputError
from alphazero.fileio import append_jsonl, output_file, read_jsonl
from alphazero.judge.arena import (
    Adjudication,
    GameResult,
    Match,
    MatchOutcome,
    Opening,
    book_openings,
    match_schedule,
    play_match,
    random_openings,
)
from alphazero.judge.elo import SPRT, match_result, pentanomial, pentanomial_result
from alphazero.judge.players import make_player

PROGRESS_LINE_SECONDS = 30.0  # how often ``progress="lines"`` writes a line
ARENA_FORMAT_VERSION = 1  # of a games file's lines (``--out``)

# (spec_a, spec_b, chunks of (first_pair, openings), max_plies, seed, on_games, event, adjudication) ->
# stopped early. Plays every chunk with ``play_chunk`` somewhere (``workers.arena.play_chunks_on_ray``),
# handing each chunk's games to ``on_games`` as it finishes; stops the rest once ``on_games`` returns True.
ChunkRunner = Callable[[str, str, Sequence[tuple[int, Sequence[Opening]]], int, int,
                        Callable[[list[GameResult]], bool], str, Adjudication | None], bool]


def player_seeds(seed: int, chunk: int) -> tuple[int, int]:
    """Independent random seeds for players A and B of one chunk of a match."""
    first, second = np.random.SeedSequence([seed, chunk]).generate_state(2)
    return int(first), int(second)


def parse_sprt(text: str) -> SPRT:
    """``"ELO0,ELO1"`` -> ``SPRT(elo0, elo1)`` with alpha = beta = 0.05 (logistic Elo)."""
    parts = text.split(",")
    try:
        elo0, elo1 = (float(part) for part in parts)
    except ValueError:
        raise InputError(f"--sprt needs two Elo bounds ELO0,ELO1 (e.g. 0,50), got {text!r}") from None
    return SPRT(elo0, elo1)


def match_openings(pairs: int, path: str | Path | None = None, plies: int | None = None,
                   seed: int = 0) -> list[Opening]:
    """``pairs`` openings: from a polyglot book (.bin, a weighted walk of ``plies`` book moves, 8 by
    default) or an EPD/FEN file (its positions in random order, cycled), else ``plies`` (4 by
    default) uniformly random first moves. A book that runs out of distinct lines is cycled."""
    if path is not None:
        openings = book_openings(path, pairs, plies=8 if plies is None else plies, seed=seed)
    else:
        openings = random_openings(pairs, 4 if plies is None else plies, seed=seed)
    return [openings[i % len(openings)] for i in range(pairs)]


def play_chunk(spec_a: str, spec_b: str, openings: Sequence[Opening], first_pair: int, max_plies: int,
               seed: int, chunk: int, event: str = "arena", adjudication: Adjudication | None = None) -> list[GameResult]:
    """Build both players from their specs and play ``openings`` (two games each) in this process.

    The unit of work of the parallel arena: game indices (and PGN ``Round`` headers) are shifted so
    that pair ``first_pair + i`` keeps its place in the whole match. Sets torch to one thread.
    """
    import torch

    torch.set_num_threads(1)
    seed_a, seed_b = player_seeds(seed, chunk)
    player_a = make_player(spec_a, seed=seed_a)
    try:
        player_b = make_player(spec_b, seed=seed_b)
        try:
            outcome = play_match(player_a, player_b, openings, max_plies=max_plies,
                                 concurrency=2 * len(openings), event=event, adjudication=adjudication)
        finally:
            player_b.close()
    finally:
        player_a.close()
    return [_shift_game(game, 2 * first_pair) for game in outcome.games]


def _shift_game(game: GameResult, offset: int) -> GameResult:
    if offset == 0:
        return game
    pgn = game.pgn.replace(f'[Round "{game.index + 1}"]', f'[Round "{game.index + offset + 1}"]', 1)
    return replace(game, index=game.index + offset, pgn=pgn)


def game_record(game: GameResult, match: dict[str, Any]) -> dict[str, Any]:
    """One line of a games file: the game, and the match it belongs to (``match_key``)."""
    return {"format_version": ARENA_FORMAT_VERSION, "match": match, "index": game.index,
            "opening": {"name": game.opening.name, "fen": game.opening.fen, "moves": list(game.opening.moves)},
            "white": game.white, "black": game.black, "result": game.result, "termination": game.termination,
            "plies": game.plies, "a_is_white": game.a_is_white, "time": time.time(), "pgn": game.pgn}


def match_key(spec_a: str, spec_b: str, openings_path: str | Path | None, opening_plies: int | None,
              max_plies: int, seed: int, adjudication: Adjudication | None) -> dict[str, Any]:
    """What makes two matches the same match (every setting but the number of games, which may grow), as
    it reads back from a games file's JSON."""
    key = {"a": spec_a, "b": spec_b, "openings": str(openings_path) if openings_path is not None else None,
           "opening_plies": opening_plies, "max_plies": max_plies, "seed": seed,
           "adjudication": None if adjudication is None else asdict(adjudication)}
    return json.loads(json.dumps(key))


def read_games(path: str | Path, match: dict[str, Any], openings: Sequence[Opening]) -> list[GameResult]:
    """The games of ``match`` stored in a games file (none when it does not exist), checked: each line a
    game of this format, of this match, from the opening this match schedules at its index. A torn last
    line (a kill while writing) is skipped; a game stored twice counts once; games past ``openings``
    (an earlier run asked for more games) are left out."""
    path = Path(path)
    games: dict[int, GameResult] = {}
    for number, record in enumerate(read_jsonl(path, "arena games file (--out)"), start=1):
        version = record.get("format_version") if isinstance(record, dict) else None
        if isinstance(version, int) and version > ARENA_FORMAT_VERSION:
            raise InputError(f"{path}: line {number} was written by a newer version (format_version {version})")
        try:
            if version != ARENA_FORMAT_VERSION or not isinstance(record["match"], dict):
                raise ValueError("not a game record")
            opening = Opening(str(record["opening"]["name"]), str(record["opening"]["fen"]),
                              tuple(str(move) for move in record["opening"]["moves"]))
            game = GameResult(int(record["index"]), opening, str(record["white"]), str(record["black"]),
                              str(record["result"]), str(record["termination"]), int(record["plies"]),
                              str(record["pgn"]), bool(record["a_is_white"]))
            if game.index < 0 or game.result not in ("1-0", "0-1", "1/2-1/2") or game.a_is_white != (game.index % 2 == 0):
                raise ValueError("not a game record")
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: line {number} is not an arena game record") from None
        if record["match"] != match:
            differ = ", ".join(f"{key} {record['match'].get(key)!r} there, {value!r} here" for key, value in match.items()
                               if record["match"].get(key) != value)
            raise InputError(f"{path}: holds another match ({differ}); give another --out")
        pair = game.index // 2
        if pair >= len(openings):
            continue
        if openings[pair] != opening:
            raise InputError(f"{path}: game {game.index + 1} was played from opening {opening.name!r}, where this match "
                             f"plays {openings[pair].name!r} (an opening file whose order depends on --games?); "
                             "give another --out")
        games.setdefault(game.index, game)
    return [games[index] for index in sorted(games)]


def _runs(pairs: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted pair numbers as runs of consecutive ones: ``(first, count)``."""
    runs: list[tuple[int, int]] = []
    for pair in pairs:
        if runs and runs[-1][0] + runs[-1][1] == pair:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((pair, 1))
    return runs


class _MatchTally:
    """Games accepted so far, the PGN file they go to, and the SPRT checked after each complete pair.

    Games end in any order (many run at once, chunks on several workers); the PGN gets them in round
    order: each game is written once every game scheduled before it has been (``finish`` writes the
    rest, in order, after a stop)."""

    def __init__(self, sprt: SPRT | None, pgn: TextIO | None, total_games: int, progress: str = "off",
                 out: Path | None = None, match: dict[str, Any] | None = None) -> None:
        self.sprt = sprt
        self.pgn = pgn
        self.out, self.match = out, match  # the games file and the match its lines name
        self.total_games = total_games
        self.progress = progress  # "off", "tty" (one line rewritten) or "lines" (a line now and then)
        self.last_line = time.monotonic()
        self.llr = ""
        self.games: list[GameResult] = []
        self.indices: set[int] = set()
        self.pairs: dict[int, list[float]] = {}
        self.decided = False
        self.unwritten: dict[int, GameResult] = {}  # game index -> a game waiting for earlier rounds
        self.next_round = 0  # index of the next game the PGN takes

    def _write(self, games: Sequence[GameResult]) -> None:
        if self.pgn is not None and games:
            self.pgn.write("".join(game.pgn.rstrip("\n") + "\n\n" for game in games))
            self.pgn.flush()

    def finish(self) -> None:
        """Write the games still waiting for an earlier round that never came (the match stopped)."""
        self._write([self.unwritten.pop(index) for index in sorted(self.unwritten)])

    def add(self, game: GameResult, stored: bool = False) -> bool:
        """Record one finished game (appended to the games file unless it came from there: ``stored``);
        True once the SPRT has decided (the match should stop). A game already counted is ignored."""
        if game.index in self.indices:
            return self.decided
        self.indices.add(game.index)
        if self.out is not None and not stored:
            append_jsonl(self.out, game_record(game, self.match or {}))
        self.games.append(game)
        self.unwritten[game.index] = game
        ready = []
        while self.next_round in self.unwritten:
            ready.append(self.unwritten.pop(self.next_round))
            self.next_round += 1
        self._write(ready)
        scores = self.pairs.setdefault(game.index // 2, [])
        scores.append(game.score_a)
        if self.sprt is not None and len(scores) == 2 and not self.decided:
            counts = pentanomial(sum(pair) for pair in self.pairs.values() if len(pair) == 2)
            status = self.sprt.status_pentanomial(counts)
            self.decided = status.decision is not None
            self.llr = f", LLR {status.llr:+.2f} ({status.lower_bound:+.2f}, {status.upper_bound:+.2f})"
        if not stored:
            self._report()
        return self.decided

    def _report(self) -> None:
        """The progress line: rewritten in place on a terminal; else a whole line now and then (a log
        file or a pipe gets no carriage returns), and one when the SPRT decides or the last game ends."""
        if self.progress == "off":
            return
        now = time.monotonic()
        last = self.decided or len(self.games) == self.total_games
        if self.progress == "lines" and now - self.last_line < PROGRESS_LINE_SECONDS and not last:
            return
        self.last_line = now
        wins = sum(1 for g in self.games if g.score_a == 1.0)
        losses = sum(1 for g in self.games if g.score_a == 0.0)
        text = (f"[arena] {len(self.games)}/{self.total_games} games, W/D/L {wins}/{len(self.games) - wins - losses}/"
                f"{losses}{self.llr}")
        if self.progress == "tty":
            print(f"\r{text}", end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)


def run_arena(spec_a: str, spec_b: str, games: int, openings_path: str | Path | None = None,
              opening_plies: int | None = None, max_plies: int = 400, seed: int = 0,
              sprt: SPRT | None = None, pgn_path: str | Path | None = None,
              progress: str = "off", chunk_runner: ChunkRunner | None = None,
              parallelism: int = 1, adjudication: Adjudication | None = None,
              out: str | Path | None = None) -> dict[str, Any]:
    """Play ``spec_a`` against ``spec_b`` and return the report (see ``arena_report``).

    ``adjudication``: end games the players' own scores agree on (``Adjudication``; None: play them out).
    ``progress`` on stderr: "off", "tty" (one line rewritten as games end) or "lines" (a line as games
    come back, at most every ``PROGRESS_LINE_SECONDS``, and at the end: for logs; a ``chunk_runner``'s games
    come back a chunk at a time). Both show the SPRT's LLR when there is one.

    ``games`` (even) = 2 x openings, each opening played with both colours. With ``chunk_runner``
    chunks of game pairs are played by it (``parallelism`` of them at a time, e.g. Ray tasks);
    otherwise one in-process ``Match`` advances all games together. With ``sprt`` the match
    stops as soon as the test decides (checked after each complete game pair; games still running
    are abandoned). ``out``: the games file; the games of this match already there count, only the
    pairs not complete in it are played, and each game that ends is appended.
    """
    if games < 2 or games % 2:
        raise InputError(f"--games must be a positive even number (each opening is played with both colours), got {games}")
    if max_plies < 1:
        raise InputError(f"--max-plies must be positive, got {max_plies}")
    if parallelism < 1:
        raise InputError(f"--workers must be positive, got {parallelism}")
    if pgn_path is not None:
        output_file(pgn_path, "--pgn")  # before any game: a long match must not end with nowhere to go
    games_file = output_file(out, "--out") if out is not None else None
    pairs = games // 2
    openings = match_openings(pairs, openings_path, opening_plies, seed)
    key = match_key(spec_a, spec_b, openings_path, opening_plies, max_plies, seed, adjudication)
    stored = read_games(games_file, key, openings) if games_file is not None else []
    with contextlib.ExitStack() as stack:
        # Both players are built here first: a bad spec fails now, with its message, before any game.
        player_a = make_player(spec_a, seed=player_seeds(seed, 0)[0])
        stack.callback(player_a.close)
        player_b = make_player(spec_b, seed=player_seeds(seed, 0)[1])
        stack.callback(player_b.close)
        names = (player_a.name, player_b.name)
        handle = None
        if pgn_path is not None:
            Path(pgn_path).parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(open(pgn_path, "w"))
        if progress not in ("off", "tty", "lines"):
            raise ValueError(f"progress must be off, tty or lines, got {progress!r}")
        if progress == "tty":
            stack.callback(lambda: print(file=sys.stderr))
        tally = _MatchTally(sprt, handle, games, progress, games_file, key)
        stack.callback(tally.finish)  # before the file closes, even when the match ends by an exception
        for game in stored:
            tally.add(game, stored=True)
        done = {pair for pair, scores in tally.pairs.items() if len(scores) == 2}
        todo = [] if tally.decided else [pair for pair in range(pairs) if pair not in done]
        if stored and progress != "off":
            print(f"[arena] {len(stored)} games from {games_file}; {2 * len(todo)} to play", file=sys.stderr, flush=True)
        event = f"{names[0]} vs {names[1]}"
        if chunk_runner is not None:
            player_a.close()  # the chunks build their own; these only checked the specs
            player_b.close()
            size = max(1, min(16, math.ceil(len(todo) / (4 * parallelism))))
            chunks = [(first, openings[first:min(first + size, start + count)])
                      for start, count in _runs(todo) for first in range(start, start + count, size)]

            def accept(results: list[GameResult]) -> bool:
                return any(tally.add(game) for game in sorted(results, key=lambda g: g.index))

            if chunks:
                chunk_runner(spec_a, spec_b, chunks, max_plies, seed, accept, event, adjudication)
        elif todo:
            wanted = set(todo)
            schedule = [entry for entry in match_schedule(openings) if entry[0] // 2 in wanted]
            match = Match(player_a, player_b, schedule, max_plies, concurrency=min(64, len(schedule)), event=event,
                          adjudication=adjudication)
            while not match.done and not any([tally.add(game) for game in match.step()]):
                pass
        # Games finished after the decision are not counted (as if the match had stopped there).
        outcome = MatchOutcome(names[0], names[1], sorted(tally.games, key=lambda g: g.index),
                               stopped_early=len(tally.games) < games)
    report = arena_report(outcome, sprt)
    report["max_plies"] = max_plies
    report["adjudication"] = None if adjudication is None else asdict(adjudication)
    report["openings"] = str(openings_path) if openings_path is not None else "random"
    if pgn_path is not None:
        report["pgn"] = str(pgn_path)
    if games_file is not None:
        report["out"] = str(games_file)
        report["games_stored"] = len(stored)
    return report


def arena_report(outcome: MatchOutcome, sprt: SPRT | None = None) -> dict[str, Any]:
    """The statistics of a match as plain data (what ``--json`` prints), from A's point of view.

    Trinomial W/D/L numbers; ``pentanomial`` over complete game pairs (None without one); ``sprt``
    (only when asked) on the pentanomial counts when pairs exist, else on W/D/L.
    """
    if not outcome.games:
        raise ValueError("the match finished no game")
    stats = match_result(outcome.wins, outcome.draws, outcome.losses)
    report: dict[str, Any] = {
        "players": {"a": outcome.player_a, "b": outcome.player_b},
        "games": stats.games, "wins": stats.wins, "draws": stats.draws, "losses": stats.losses,
        "score": stats.score, "elo": stats.elo, "elo_low": stats.elo_low, "elo_high": stats.elo_high,
        "los": stats.los, "pentanomial": None, "terminations": outcome.terminations(),
        "stopped_early": outcome.stopped_early,
    }
    pair_scores = outcome.pair_scores()
    counts = pentanomial(pair_scores) if pair_scores else None
    if counts is not None:
        penta = pentanomial_result(counts)
        report["pentanomial"] = {"counts": list(penta.counts), "pairs": penta.pairs, "score": penta.score,
                                 "elo": penta.elo, "elo_low": penta.elo_low, "elo_high": penta.elo_high,
                                 "los": penta.los}
    if sprt is not None:
        status = sprt.status_pentanomial(counts) if counts is not None else sprt.status(stats.wins, stats.draws, stats.losses)
        report["sprt"] = {"elo0": sprt.elo0, "elo1": sprt.elo1, "alpha": sprt.alpha, "beta": sprt.beta,
                          "llr": status.llr, "lower": status.lower_bound, "upper": status.upper_bound,
                          "decision": status.decision}
    return report


def format_arena_report(report: dict[str, Any]) -> str:
    """The human-readable form of ``arena_report`` (a few lines)."""
    players = report["players"]
    stats = match_result(report["wins"], report["draws"], report["losses"])
    lines = [f"{players['a']} vs {players['b']}: {report['games']} games (W/D/L from {players['a']}'s side)"
             + (", stopped early" if report["stopped_early"] else ""),
             f"Games         {stats}"]
    if report["pentanomial"] is not None:
        lines.append(f"Pentanomial   {pentanomial_result(report['pentanomial']['counts'])}")
    if "sprt" in report:
        sprt = report["sprt"]
        verdict = {"H1": f"H1 accepted: {players['a']} is stronger by about {sprt['elo1']:g} Elo or more",
                   "H0": f"H0 accepted: {players['a']} is not stronger by {sprt['elo1']:g} Elo",
                   None: "no decision yet"}[sprt["decision"]]
        lines.append(f"SPRT          elo0={sprt['elo0']:g} elo1={sprt['elo1']:g} alpha=beta={sprt['alpha']:g}: "
                     f"LLR {sprt['llr']:+.2f} (bounds {sprt['lower']:+.2f}, {sprt['upper']:+.2f}), {verdict}")
    ends = ", ".join(f"{reason} {count}" for reason, count in sorted(report["terminations"].items(), key=lambda kv: -kv[1]))
    lines.append(f"Terminations  {ends}")
    if "pgn" in report:
        lines.append(f"PGN           {report['pgn']}")
    return "\n".join(lines)
