"""The evaluation commands behind ``alphazero arena | ratings | puzzles | play``.

Owns what each command computes and prints: a match between two player specs with its statistics
(trinomial, pentanomial, SPRT) and PGN; Bradley-Terry ratings of a run's generations and of anchor
players, with the extra games kept in ``RUN/ratings/games.jsonl``; only-move puzzle scores with a
Wilson interval; and a terminal game between a person and a network. Players come from
``alphazero.judge.players`` spec strings, games from ``alphazero.judge.arena.play_match``, numbers from
``alphazero.judge.elo``. It parses no command line (``alphazero.cli`` does) and never touches Ray: the
parallel arena hands chunks of game pairs to a ``ChunkRunner`` (``workers.arena`` runs them as Ray
tasks). Errors a user can fix raise ``ValueError`` with one clear line.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TextIO

import chess
import numpy as np

from alphazero.board.game import terminal_status
from alphazero.checkpoint import RunDirectory, append_jsonl, read_jsonl
from alphazero.fileio import DirectoryLock
from alphazero.judge.arena import (
    GameResult,
    MatchOutcome,
    Opening,
    book_openings,
    play_match,
    random_openings,
)
from alphazero.judge.elo import (
    SPRT,
    Z_95,
    Rating,
    fit_ratings,
    format_ratings_table,
    match_result,
    pentanomial,
    pentanomial_result,
)
from alphazero.judge.players import Player, make_player

RATINGS_GAMES_FORMAT_VERSION = 2
"""``format_version`` of each line of ``RUN/ratings/games.jsonl``: one finished game per line
(``score`` is A's), appended as the game ends, so a stopped ``ratings`` keeps every game it
finished. Version 1 lines (one whole match: wins, draws, losses) are still read."""

GENERATION_FILE = re.compile(r"gen-(\d+)\.pt")

# (spec_a, spec_b, chunks of (first_pair, openings), max_plies, seed, on_games, event) -> stopped early.
# Plays every chunk with ``play_chunk`` somewhere (``workers.arena.play_chunks_on_ray``), handing each
# chunk's games to ``on_games`` as it finishes; stops the rest once ``on_games`` returns True.
ChunkRunner = Callable[[str, str, Sequence[tuple[int, Sequence[Opening]]], int, int,
                        Callable[[list[GameResult]], bool], str], bool]


def _player_seeds(seed: int, chunk: int) -> tuple[int, int]:
    """Independent random seeds for players A and B of one chunk of a match."""
    first, second = np.random.SeedSequence([seed, chunk]).generate_state(2)
    return int(first), int(second)


# --------------------------------------------------------------------------------------------
# Arena: one match between two player specs


def parse_sprt(text: str) -> SPRT:
    """``"ELO0,ELO1"`` -> ``SPRT(elo0, elo1)`` with alpha = beta = 0.05 (logistic Elo)."""
    parts = text.split(",")
    try:
        elo0, elo1 = (float(part) for part in parts)
    except ValueError:
        raise ValueError(f"--sprt needs two Elo bounds ELO0,ELO1 (e.g. 0,50), got {text!r}") from None
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
               seed: int, chunk: int, event: str = "arena") -> list[GameResult]:
    """Build both players from their specs and play ``openings`` (two games each) in this process.

    The unit of work of the parallel arena: game indices (and PGN ``Round`` headers) are shifted so
    that pair ``first_pair + i`` keeps its place in the whole match. Sets torch to one thread.
    """
    import torch

    torch.set_num_threads(1)
    seed_a, seed_b = _player_seeds(seed, chunk)
    player_a = make_player(spec_a, seed=seed_a)
    try:
        player_b = make_player(spec_b, seed=seed_b)
        try:
            outcome = play_match(player_a, player_b, openings, max_plies=max_plies,
                                 concurrency=2 * len(openings), event=event)
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


class _MatchTally:
    """Games accepted so far, the PGN file they go to, and the SPRT checked after each complete pair."""

    def __init__(self, sprt: SPRT | None, pgn: TextIO | None, total_games: int, quiet: bool) -> None:
        self.sprt = sprt
        self.pgn = pgn
        self.total_games = total_games
        self.quiet = quiet
        self.games: list[GameResult] = []
        self.pairs: dict[int, list[float]] = {}
        self.decided = False

    def add(self, game: GameResult) -> bool:
        """Record one finished game; True once the SPRT has decided (the match should stop)."""
        self.games.append(game)
        if self.pgn is not None:
            self.pgn.write(game.pgn.rstrip("\n") + "\n\n")
            self.pgn.flush()
        scores = self.pairs.setdefault(game.index // 2, [])
        scores.append(game.score_a)
        if not self.quiet:
            wins = sum(1 for g in self.games if g.score_a == 1.0)
            losses = sum(1 for g in self.games if g.score_a == 0.0)
            print(f"\r[arena] {len(self.games)}/{self.total_games} games, W/D/L {wins}/"
                  f"{len(self.games) - wins - losses}/{losses}", end="", file=sys.stderr, flush=True)
        if self.sprt is not None and len(scores) == 2 and not self.decided:
            counts = pentanomial(sum(pair) for pair in self.pairs.values() if len(pair) == 2)
            self.decided = self.sprt.status_pentanomial(counts).decision is not None
        return self.decided


def run_arena(spec_a: str, spec_b: str, games: int, openings_path: str | Path | None = None,
              opening_plies: int | None = None, max_plies: int = 400, seed: int = 0,
              sprt: SPRT | None = None, pgn_path: str | Path | None = None,
              progress: bool = False, chunk_runner: ChunkRunner | None = None,
              parallelism: int = 1) -> dict[str, Any]:
    """Play ``spec_a`` against ``spec_b`` and return the report (see ``arena_report``).

    ``games`` (even) = 2 x openings, each opening played with both colours. With ``chunk_runner``
    chunks of game pairs are played by it (``parallelism`` of them at a time, e.g. Ray tasks);
    otherwise one in-process ``play_match`` advances all games together. With ``sprt`` the match
    stops as soon as the test decides (checked after each complete game pair; games still running
    are abandoned).
    """
    if games < 2 or games % 2:
        raise ValueError(f"--games must be a positive even number (each opening is played with both colours), got {games}")
    if max_plies < 1:
        raise ValueError(f"--max-plies must be positive, got {max_plies}")
    if parallelism < 1:
        raise ValueError(f"--workers must be positive, got {parallelism}")
    pairs = games // 2
    openings = match_openings(pairs, openings_path, opening_plies, seed)
    with contextlib.ExitStack() as stack:
        # Both players are built here first: a bad spec fails now, with its message, before any game.
        player_a = make_player(spec_a, seed=_player_seeds(seed, 0)[0])
        stack.callback(player_a.close)
        player_b = make_player(spec_b, seed=_player_seeds(seed, 0)[1])
        stack.callback(player_b.close)
        names = (player_a.name, player_b.name)
        handle = None
        if pgn_path is not None:
            Path(pgn_path).parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(open(pgn_path, "w"))
        if progress:
            stack.callback(lambda: print(file=sys.stderr))
        tally = _MatchTally(sprt, handle, games, quiet=not progress)
        event = f"{names[0]} vs {names[1]}"
        if chunk_runner is not None:
            player_a.close()  # the chunks build their own; these only checked the specs
            player_b.close()
            size = max(1, min(16, math.ceil(pairs / (4 * parallelism))))
            chunks = [(first, openings[first:first + size]) for first in range(0, pairs, size)]

            def accept(results: list[GameResult]) -> bool:
                return any(tally.add(game) for game in sorted(results, key=lambda g: g.index))

            chunk_runner(spec_a, spec_b, chunks, max_plies, seed, accept, event)
            # Games a chunk finished after the decision are not counted (as if the match had stopped there).
            outcome = MatchOutcome(names[0], names[1], sorted(tally.games, key=lambda g: g.index),
                                   stopped_early=len(tally.games) < games)
        else:
            outcome = play_match(player_a, player_b, openings, max_plies=max_plies, concurrency=min(64, games),
                                 on_game=lambda game, _: tally.add(game), event=event)
            outcome.games.sort(key=lambda g: g.index)
    report = arena_report(outcome, sprt)
    report["max_plies"] = max_plies
    report["openings"] = str(openings_path) if openings_path is not None else "random"
    if pgn_path is not None:
        report["pgn"] = str(pgn_path)
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


# --------------------------------------------------------------------------------------------
# Ratings: many players, maximum likelihood


def play_games(player_a: Player, player_b: Player, num_games: int, max_plies: int = 400,
               seed: int = 0, opening_plies: int = 4,
               on_game: Callable[[GameResult, MatchOutcome], bool] | None = None) -> MatchOutcome:
    """``num_games`` (rounded up to even) between two built players from random openings."""
    pairs = max(1, math.ceil(num_games / 2))
    return play_match(player_a, player_b, random_openings(pairs, opening_plies, seed=seed), max_plies=max_plies,
                      concurrency=2 * pairs, event=f"ratings: {player_a.name} vs {player_b.name}", on_game=on_game)


def outcome_games(a: str, b: str, wins: int, draws: int, losses: int) -> list[tuple[str, str, float]]:
    """W/D/L of ``a`` against ``b`` as ``fit_ratings`` games ``(a, b, score of a)``."""
    return [(a, b, 1.0)] * wins + [(a, b, 0.5)] * draws + [(a, b, 0.0)] * losses


def rate_players(specs: Sequence[str], games_per_pair: int, max_plies: int = 400, seed: int = 0,
                 anchor: str | None = None) -> tuple[dict[str, Rating], list[tuple[str, str, float]]]:
    """Round robin of the player ``specs`` (``games_per_pair`` each) and their fitted ratings.

    Ratings are anchored at ``anchor`` (default the first spec) = 0 Elo. Returns the ratings keyed
    by spec and the games played. Each player is built once and closed at the end.
    """
    if len(set(specs)) < 2:
        raise ValueError("rating needs at least two different players")
    players: list[Player] = []
    try:
        for number, spec in enumerate(specs):
            players.append(make_player(spec, seed=_player_seeds(seed, number)[0]))
        games: list[tuple[str, str, float]] = []
        for i in range(len(players)):
            for j in range(i + 1, len(players)):
                outcome = play_games(players[i], players[j], games_per_pair, max_plies, seed=seed + 31 * i + j)
                games += outcome_games(players[i].name, players[j].name, outcome.wins, outcome.draws, outcome.losses)
    finally:
        for player in players:
            player.close()
    return fit_ratings(games, anchor=anchor or players[0].name), games


def _generation_player(path: Path, name: str, sims: int) -> Player:
    from alphazero.judge.players import MCTSPlayer
    from alphazero.nets.network import load_network
    from alphazero.search.mcts import SearchConfig

    return MCTSPlayer(load_network(path), SearchConfig(num_simulations=sims), name=name)


class _Links:
    """Union-find over player names: which players are connected by games."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        self.parent.setdefault(name, name)
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def join(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def run_ratings(run_dir: str | Path, anchors: Sequence[str] = (), games: int = 20, sims: int | None = None,
                max_plies: int = 400, seed: int = 0, plot_path: str | Path | None = None,
                log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Elo of every generation of a run (and of ``anchors``) by maximum likelihood over all games.

    Games: the arena records of ``state.json`` (candidate vs the best of the time), plus extra games
    kept in ``RUN/ratings/games.jsonl``: a generation not linked to generation 0 plays ``games``
    games against the previous generation, and each anchor plays ``games`` against the first, the
    best and the last generation (``mcts`` with ``sims`` simulations, by default the run's arena
    setting). Stored games are reused, so a second call plays only what is missing. Anchored at the
    first anchor (0 Elo), else at the first generation. Writes the Elo-by-generation plot.
    """
    log = log or (lambda message: None)
    if games < 1:
        raise ValueError(f"--games must be positive, got {games}")
    run = RunDirectory(run_dir)
    state = run.read_state()
    networks: dict[str, Path] = {}
    numbers: dict[str, int] = {}
    for path in sorted(run.networks_dir.glob("gen-*.pt")):
        match = GENERATION_FILE.fullmatch(path.name)
        if match:
            networks[path.stem] = path
            numbers[path.stem] = int(match.group(1))
    if not networks:
        raise ValueError(f"{run.networks_dir}: no networks (gen-NNNN.pt) to rate")
    generations = sorted(networks, key=numbers.__getitem__)
    if sims is None:
        try:
            sims = run.read_config().arena.num_simulations
        except (ValueError, AttributeError):
            sims = 32
    if sims < 1:
        raise ValueError(f"--sims must be positive, got {sims}")

    all_games: list[tuple[str, str, float]] = []
    links = _Links()
    for record in state.arenas:
        a, b = Path(record.candidate).stem, Path(record.best).stem
        if a != b and record.wins + record.draws + record.losses > 0:
            all_games += outcome_games(a, b, record.wins, record.draws, record.losses)
            links.join(a, b)
    games_path = run.path / "ratings" / "games.jsonl"
    # One writer of RUN/ratings at a time (a training run may go on beside it: it writes elsewhere).
    lock = DirectoryLock(games_path.parent, "ratings").acquire()
    anchor_players: list[Player] = []
    played = 0
    try:
        stored: dict[frozenset[str], int] = {}
        for record in read_jsonl(games_path):
            version = record.get("format_version")
            if version not in (1, RATINGS_GAMES_FORMAT_VERSION):
                raise ValueError(f"{games_path}: record with format_version {version!r}, "
                                 f"expected {RATINGS_GAMES_FORMAT_VERSION}")
            a, b = record["a"], record["b"]
            if version == 1:
                wins, draws, losses = record["wins"], record["draws"], record["losses"]
            else:
                wins, draws, losses = (record["score"] == 1.0), (record["score"] == 0.5), (record["score"] == 0.0)
            all_games += outcome_games(a, b, wins, draws, losses)
            links.join(a, b)
            key = frozenset((a, b))
            stored[key] = stored.get(key, 0) + wins + draws + losses

        # Anchors are built before any game: a bad spec fails first.
        for number, spec in enumerate(anchors):
            anchor_players.append(make_player(spec, seed=_player_seeds(seed, 1000 + number)[0]))

        def play(player_a: Player, player_b: Player, num_games: int, spec_a: str, spec_b: str) -> None:
            nonlocal played
            log(f"[ratings] {player_a.name} vs {player_b.name}: {num_games} games")
            key = frozenset((player_a.name, player_b.name))

            def save(game: GameResult, outcome: MatchOutcome) -> bool:  # each game reaches the disk as it ends
                nonlocal played
                append_jsonl(games_path, {
                    "format_version": RATINGS_GAMES_FORMAT_VERSION, "time": time.time(), "a": player_a.name,
                    "b": player_b.name, "a_spec": spec_a, "b_spec": spec_b, "max_plies": max_plies,
                    "score": game.score_a, "result": game.result, "termination": game.termination})
                all_games.extend(outcome_games(player_a.name, player_b.name, game.score_a == 1.0,
                                               game.score_a == 0.5, game.score_a == 0.0))
                stored[key] = stored.get(key, 0) + 1
                played += 1
                return len(outcome.games) >= num_games  # an odd remainder stops after its last game

            play_games(player_a, player_b, num_games, max_plies, seed=seed + 7919 * (len(stored) + played + 1),
                       on_game=save)
            links.join(player_a.name, player_b.name)

        def spec_of(name: str) -> str:
            return f"mcts:{networks[name]}?sims={sims}"

        for previous, current in zip(generations, generations[1:]):
            # Unlinked to generation 0, or a match between them that a stop cut short: play what is missing.
            so_far = stored.get(frozenset((current, previous)), 0)
            if links.find(current) != links.find(generations[0]) or 0 < so_far < games:
                a = _generation_player(networks[current], current, sims)
                b = _generation_player(networks[previous], previous, sims)
                play(a, b, games - so_far, spec_of(current), spec_of(previous))
        best = f"gen-{state.best_generation:04d}"
        targets = list(dict.fromkeys([generations[0]] + ([best] if best in networks else []) + [generations[-1]]))
        for anchor in anchor_players:
            for target in targets:
                missing = games - stored.get(frozenset((anchor.name, target)), 0)
                if missing > 0:
                    play(anchor, _generation_player(networks[target], target, sims), missing, anchor.name, spec_of(target))
    finally:
        for player in anchor_players:
            player.close()
        lock.release()

    if not all_games:
        raise ValueError(f"{run.path}: nothing to rate: one generation, no arena games and no anchor")
    reference = anchor_players[0].name if anchor_players else generations[0]
    ratings = fit_ratings(all_games, anchor=reference)
    plot = Path(plot_path) if plot_path is not None else run.path / "ratings" / "elo.png"
    for name in ratings:  # generations known only from arena records are plotted too
        match = re.fullmatch(r"gen-(\d+)", name)
        if match:
            numbers.setdefault(name, int(match.group(1)))
    plot_ratings(ratings, numbers, [player.name for player in anchor_players], plot, reference)
    return {
        "run_dir": str(run.path), "anchor": reference, "sims": sims, "new_games": played,
        "games": len(all_games), "plot": str(plot),
        "ratings": {name: {"elo": r.elo, "elo_low": r.elo_low, "elo_high": r.elo_high, "games": r.games,
                           "score": r.score, "generation": numbers.get(name)} for name, r in ratings.items()},
        "table": format_ratings_table(ratings),
    }


def plot_ratings(ratings: dict[str, Rating], generation_numbers: dict[str, int], anchors: Sequence[str],
                 path: str | Path, reference: str) -> Path:
    """PNG of Elo by generation with 95% error bars; anchors as labelled horizontal dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    path = Path(path)
    rated = sorted((generation_numbers[name], ratings[name]) for name in ratings if name in generation_numbers)
    fig, axes = plt.subplots(figsize=(8, 4.5))
    if rated:
        xs = [number for number, _ in rated]
        ys = [rating.elo for _, rating in rated]
        errors = [[rating.elo - rating.elo_low for _, rating in rated], [rating.elo_high - rating.elo for _, rating in rated]]
        axes.errorbar(xs, ys, yerr=errors, fmt="o-", color="tab:blue", capsize=3, label="generation (95% CI)")
    colours = ["tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    for number, name in enumerate(anchors):
        if name in ratings:
            axes.axhline(ratings[name].elo, linestyle="--", color=colours[number % len(colours)], label=name)
    axes.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes.set_xlabel("generation")
    axes.set_ylabel(f"Elo ({reference} = 0)")
    axes.set_title("Elo by generation (maximum likelihood over all games)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# Puzzles


@dataclass(frozen=True)
class Puzzle:
    row: int  # 1-based data row of the CSV (the header is line 1, so this is line row + 1)
    board: chess.Board
    best: chess.Move


def load_puzzles(path: str | Path, limit: int | None = None) -> list[Puzzle]:
    """Read only-move puzzles from a CSV with a header and at least columns ``fen`` and ``best_uci``.

    A bad FEN, an illegal position or a ``best_uci`` that is not a legal move raises ``ValueError``
    naming the file and the row.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"puzzle file {path} does not exist")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if "fen" not in columns or "best_uci" not in columns:
            raise ValueError(f"{path}: needs a header with columns fen,best_uci (found: {','.join(columns) or 'nothing'})")
        puzzles = []
        for row, record in enumerate(reader, start=1):
            if limit is not None and len(puzzles) >= limit:
                break
            where = f"{path}: row {row} (line {reader.line_num})"
            fen, best = (record.get("fen") or "").strip(), (record.get("best_uci") or "").strip()
            try:
                board = chess.Board(fen)
            except ValueError as error:
                raise ValueError(f"{where}: bad FEN {fen!r}: {error}") from None
            if not board.is_valid():
                raise ValueError(f"{where}: illegal position {fen!r} ({board.status()!r})")
            try:
                move = chess.Move.from_uci(best)
            except ValueError:
                raise ValueError(f"{where}: best_uci {best!r} is not a UCI move") from None
            if move not in board.legal_moves:
                raise ValueError(f"{where}: best_uci {best} is not legal in {fen}")
            puzzles.append(Puzzle(row, board, move))
    if not puzzles:
        raise ValueError(f"{path}: no puzzles")
    return puzzles


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial share: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if trials <= 0:
        raise ValueError("the Wilson interval needs at least one trial")
    share = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1.0 - share) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than trust the rounding.
    low = 0.0 if successes == 0 else max(0.0, min(share, centre - half))
    high = 1.0 if successes == trials else min(1.0, max(share, centre + half))
    return low, high


def score_puzzles(player: Player, puzzles: Sequence[Puzzle], batch_size: int = 256) -> dict[str, Any]:
    """Share of puzzles where ``player`` picks ``best``, with its 95% Wilson interval; batched moves."""
    solved_rows, missed_rows = [], []
    for start in range(0, len(puzzles), batch_size):
        batch = puzzles[start:start + batch_size]
        moves = player.choose_moves([puzzle.board for puzzle in batch])
        for puzzle, move in zip(batch, moves):
            (solved_rows if move == puzzle.best else missed_rows).append(puzzle.row)
    total = len(puzzles)
    low, high = wilson_interval(len(solved_rows), total)
    return {"player": player.name, "solved": len(solved_rows), "total": total,
            "share": len(solved_rows) / total, "low": low, "high": high, "missed_rows": missed_rows}


def run_puzzles(path: str | Path, spec: str, limit: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Load the puzzles (``limit`` first rows), build the player and score it."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be positive, got {limit}")
    puzzles = load_puzzles(path, limit)
    player = make_player(spec, seed=seed)
    try:
        report = score_puzzles(player, puzzles)
    finally:
        player.close()
    report["file"] = str(path)
    return report


def format_puzzle_report(report: dict[str, Any]) -> str:
    return (f"{report['player']}: solved {report['solved']}/{report['total']} = {100 * report['share']:.1f}% "
            f"[{100 * report['low']:.1f}%, {100 * report['high']:.1f}%] (95% Wilson interval)")


# --------------------------------------------------------------------------------------------
# Play: a person against a network in the terminal


PIECE_NAMES = {chess.PAWN: "pawn", chess.KNIGHT: "knight", chess.BISHOP: "bishop", chess.ROOK: "rook",
               chess.QUEEN: "queen", chess.KING: "king"}
UCI_MOVE = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")


def draw_board(board: chess.Board, perspective: chess.Color = chess.WHITE, unicode: bool = False) -> str:
    """The board with rank and file labels, seen from ``perspective``'s side.

    ASCII: White's pieces upper case (``K Q R B N P``), Black's lower case, empty squares ``.``.
    """
    ranks = range(7, -1, -1) if perspective == chess.WHITE else range(8)
    files = range(8) if perspective == chess.WHITE else range(7, -1, -1)
    letters = "    " + " ".join(chess.FILE_NAMES[f] for f in files)
    border = "  +" + "-" * 17 + "+"
    lines = [letters, border]
    for rank in ranks:
        cells = []
        for file in files:
            piece = board.piece_at(chess.square(file, rank))
            cells.append("." if piece is None else (piece.unicode_symbol() if unicode else piece.symbol()))
        lines.append(f"{rank + 1} | {' '.join(cells)} | {rank + 1}")
    lines += [border, letters]
    return "\n".join(lines)


def _join_or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _san_matches(board: chess.Board, text: str, moves: Iterable[chess.Move]) -> list[chess.Move]:
    """The moves among ``moves`` that the SAN pattern ``text`` could mean (piece, target, hints)."""
    match = chess.SAN_REGEX.match(text)
    if not match:
        return []
    piece = chess.PIECE_SYMBOLS.index(match.group(1).lower()) if match.group(1) else chess.PAWN
    target = chess.parse_square(match.group(4))
    promotion = match.group(5)
    found = []
    for move in moves:
        if move.to_square != target or board.piece_type_at(move.from_square) != piece:
            continue
        if match.group(2) and chess.square_file(move.from_square) != chess.FILE_NAMES.index(match.group(2)):
            continue
        if match.group(3) and chess.square_rank(move.from_square) != int(match.group(3)) - 1:
            continue
        if promotion and move.promotion != chess.PIECE_SYMBOLS.index(promotion[-1].lower()):
            continue
        found.append(move)
    return found


def _illegal_reason(board: chess.Board, move: chess.Move) -> str:
    """Why the well-formed ``move`` cannot be played here."""
    piece = board.piece_at(move.from_square)
    origin, target = chess.square_name(move.from_square), chess.square_name(move.to_square)
    if piece is None:
        return f"there is no piece on {origin}"
    if piece.color != board.turn:
        return f"the {PIECE_NAMES[piece.piece_type]} on {origin} is not yours"
    if piece.piece_type == chess.PAWN and chess.square_rank(move.to_square) in (0, 7) and move.promotion is None:
        if chess.Move(move.from_square, move.to_square, chess.QUEEN) in board.legal_moves:
            return f"say which piece the pawn becomes, e.g. {move.uci()}q"
    occupant = board.piece_at(move.to_square)
    if occupant is not None and occupant.color == board.turn and not board.is_castling(move):
        return f"{target} holds your own {PIECE_NAMES[occupant.piece_type]}"
    if board.is_pseudo_legal(move):
        return "you are in check and it does not get you out" if board.is_check() else "it would leave your king in check"
    return f"the {PIECE_NAMES[piece.piece_type]} on {origin} cannot move to {target}"


def parse_human_move(board: chess.Board, text: str) -> chess.Move:
    """A move typed in SAN (``Nf3``, ``exd5``, ``O-O``, ``e8=Q``) or UCI (``g1f3``, ``e7e8q``).

    Raises ``ValueError`` with the reason when the move is not legal here, and lists the candidates
    of an ambiguous SAN ("ambiguous move Nd2: could be Nbd2 or Nfd2").
    """
    text = text.strip()
    if UCI_MOVE.fullmatch(text):
        move = chess.Move.from_uci(text)
        if move in board.legal_moves:
            return move
        raise ValueError(f"illegal move {text}: {_illegal_reason(board, move)}")
    try:
        return board.parse_san(text)
    except chess.AmbiguousMoveError:
        candidates = sorted(board.san(move) for move in _san_matches(board, text, board.legal_moves))
        raise ValueError(f"ambiguous move {text}: could be {_join_or(candidates)}") from None
    except chess.IllegalMoveError:
        if text.replace("0", "O").rstrip("+#") in ("O-O", "O-O-O"):
            raise ValueError(f"illegal move {text}: castling that way is not possible now") from None
        pseudo = _san_matches(board, text, board.pseudo_legal_moves)
        if pseudo:
            raise ValueError(f"illegal move {text}: {_illegal_reason(board, pseudo[0])}") from None
        match = chess.SAN_REGEX.match(text)
        piece = PIECE_NAMES[chess.PIECE_SYMBOLS.index(match.group(1).lower()) if match and match.group(1) else chess.PAWN]
        target = match.group(4) if match else "there"
        raise ValueError(f"illegal move {text}: no {piece} of yours can move to {target}") from None
    except chess.InvalidMoveError:
        raise ValueError(f"not a move: {text!r} (type SAN like Nf3 or UCI like g1f3; 'quit' or 'resign' to stop)") from None


HELP = "Type a move in SAN (Nf3, exd5, O-O, e8=Q) or UCI (g1f3, e7e8q); 'board' redraws, 'quit' or 'resign' ends."


def play_human(checkpoint: str, human_color: chess.Color = chess.WHITE, sims: int = 100,
               pgn_path: str | Path | None = None, unicode: bool = False, stdin: TextIO | None = None,
               stdout: TextIO | None = None) -> dict[str, Any]:
    """A person plays the network (``mcts`` with ``sims`` simulations) through text streams.

    Reads one line per move from ``stdin`` (no terminal needed); an illegal or ambiguous move is
    asked again with the reason; ``quit``, ``resign`` or end of input stops. The game is saved as
    PGN at the end (``pgn_path``, default ``game-YYYYmmdd-HHMMSS.pgn`` in the current directory).
    """
    from alphazero.judge.players import MCTSPlayer, resolve_network_path
    from alphazero.nets.network import load_network
    from alphazero.search.mcts import SearchConfig
    from alphazero.search.selfplay import game_pgn

    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if sims < 1:
        raise ValueError(f"--sims must be positive, got {sims}")
    network_path = resolve_network_path(checkpoint)
    engine = MCTSPlayer(load_network(network_path), SearchConfig(num_simulations=sims),
                        name=f"alphazero ({network_path.name}, {sims} sims)")
    pgn_path = Path(pgn_path) if pgn_path is not None else Path(f"game-{time.strftime('%Y%m%d-%H%M%S')}.pgn")
    board = chess.Board()
    human_name = "human"

    def say(text: str = "") -> None:
        print(text, file=stdout, flush=True)

    say(f"You play {'White' if human_color == chess.WHITE else 'Black'} against {engine.name}. {HELP}")
    result, termination = "*", "abandoned"
    shown = -1  # ply count of the position last drawn: the board is redrawn only when it changed
    while True:
        status = terminal_status(board)
        if status is not None:
            value, termination = status
            white_value = value if board.turn == chess.WHITE else -value
            result = "1-0" if white_value > 0 else "0-1" if white_value < 0 else "1/2-1/2"
            say(draw_board(board, human_color, unicode))
            say(f"Game over: {result} ({termination})")
            break
        if board.turn != human_color:
            move = engine.choose_moves([board])[0]
            say(f"{engine.name} plays {board.san(move)} ({move.uci()})")
            board.push(move)
            continue
        if shown != len(board.move_stack):
            say(draw_board(board, human_color, unicode))
            shown = len(board.move_stack)
        say(f"Move {board.fullmove_number}, you ({'White' if board.turn == chess.WHITE else 'Black'}) to move:")
        try:
            line = stdin.readline()
        except KeyboardInterrupt:
            line = ""
        if not line:
            say("End of input: game abandoned.")
            break
        text = line.strip()
        if not text:
            continue
        if text.lower() in ("quit", "exit"):
            say("Game abandoned.")
            break
        if text.lower() == "resign":
            result, termination = ("0-1", "resignation") if human_color == chess.WHITE else ("1-0", "resignation")
            say(f"You resign: {result}")
            break
        if text.lower() in ("help", "?"):
            say(HELP)
            continue
        if text.lower() == "board":
            shown = -1
            continue
        try:
            move = parse_human_move(board, text)
        except ValueError as error:
            say(f"{error}; try again.")
            continue
        say(f"You play {board.san(move)} ({move.uci()})")
        board.push(move)
    white, black = (human_name, engine.name) if human_color == chess.WHITE else (engine.name, human_name)
    headers = {"Event": "alphazero play", "Site": "local", "Date": time.strftime("%Y.%m.%d"), "Round": "1",
               "White": white, "Black": black, "Result": result, "Termination": termination}
    pgn_path.parent.mkdir(parents=True, exist_ok=True)
    pgn_path.write_text(game_pgn(board, headers) + "\n")
    engine.close()
    say(f"Game saved to {pgn_path}")
    return {"result": result, "termination": termination, "plies": len(board.move_stack), "pgn": str(pgn_path)}
