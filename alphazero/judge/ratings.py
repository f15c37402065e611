"""The ``alphazero ratings`` command's work: Elo of every generation of a run, and of anchor players.

Bradley-Terry ratings (``alphazero.judge.elo.fit_ratings``) over the arena records of
``state.json`` plus extra games kept in ``RUN/ratings/games.jsonl`` (one finished game a line,
appended as it ends, so a stopped ``ratings`` keeps what it played); a round robin of player specs
(``rate_players``). Never touches Ray; parses no command line (``commands.ratings`` does).
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from alphazero.checkpoint import RunDirectory, append_jsonl, read_jsonl
from alphazero.errors import InputError, RunStateError, UserError
from alphazero.fileio import DirectoryLock, output_file
from alphazero.judge.arena import GameResult, MatchOutcome, play_match, random_openings
from alphazero.judge.elo import Rating, fit_ratings, format_ratings_table, player_groups
from alphazero.judge.match import player_seeds
from alphazero.judge.players import Player, make_player
from alphazero.judge.plots import plot_ratings
from alphazero.judge.tournament import parse_anchors

RATINGS_GAMES_FORMAT_VERSION = 2
"""``format_version`` of each line of ``RUN/ratings/games.jsonl``: one finished game per line
(``score`` is A's), appended as the game ends, so a stopped ``ratings`` keeps every game it
finished. Version 1 lines (one whole match: wins, draws, losses) are still read."""

GENERATION_FILE = re.compile(r"gen-(\d+)\.pt")


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
        raise InputError("rating needs at least two different players")
    players: list[Player] = []
    try:
        for number, spec in enumerate(specs):
            players.append(make_player(spec, seed=player_seeds(seed, number)[0]))
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
    from dataclasses import replace

    from alphazero.judge.players import PLAYER_SEARCH, MCTSPlayer
    from alphazero.nets.network import load_network

    return MCTSPlayer(load_network(path), replace(PLAYER_SEARCH, num_simulations=sims), name=name)


def run_ratings(run_dir: str | Path, anchors: Sequence[str] = (), games: int = 20, sims: int | None = None,
                max_plies: int = 400, seed: int = 0, plot_path: str | Path | None = None,
                log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Elo of every generation of a run (and of ``anchors``) by maximum likelihood over all games.

    Games: the arena records of ``state.json`` (candidate vs the best of the time), plus extra games
    kept in ``RUN/ratings/games.jsonl``: a generation not linked to generation 0 plays ``games``
    games against the previous generation, and each anchor plays ``games`` against the first, the
    best and the last generation (``mcts`` with ``sims`` simulations, by default the run's arena
    setting). Stored games are reused, so a second call plays only what is missing. An anchor given as
    ``SPEC@ELO`` (``parse_anchors``) is pinned at that rating (several may be, e.g. Stockfish ``UCI_Elo``
    levels at their ``UCI_Elo``); with none pinned the scale is anchored at the first anchor (0 Elo), else
    at the first generation. Writes the Elo-by-generation plot.
    """
    log = log or (lambda message: None)
    if games < 1:
        raise InputError(f"--games must be positive, got {games}")
    anchored = parse_anchors(anchors)
    pinned = {spec: elo for spec, elo in anchored if elo is not None}
    if plot_path is not None:
        output_file(plot_path, "--plot")
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
        raise RunStateError(f"{run.networks_dir}: no networks (gen-NNNN.pt) to rate")
    generations = sorted(networks, key=numbers.__getitem__)
    if sims is None:
        try:
            sims = run.read_config().arena.num_simulations
        except (UserError, AttributeError):  # no readable config.yaml: the arena default
            sims = 32
    if sims < 1:
        raise InputError(f"--sims must be positive, got {sims}")

    all_games: list[tuple[str, str, float]] = []
    for record in state.arenas:
        a, b = Path(record.candidate).stem, Path(record.best).stem
        if a != b and record.wins + record.draws + record.losses > 0:
            all_games += outcome_games(a, b, record.wins, record.draws, record.losses)
    games_path = run.path / "ratings" / "games.jsonl"
    # One writer of RUN/ratings at a time (a training run may go on beside it: it writes elsewhere).
    lock = DirectoryLock(games_path.parent, "ratings").acquire()
    anchor_players: list[Player] = []
    played = 0
    try:
        stored: dict[frozenset[str], int] = {}
        for entry in read_jsonl(games_path):
            version = entry.get("format_version")
            if version not in (1, RATINGS_GAMES_FORMAT_VERSION):
                raise InputError(f"{games_path}: record with format_version {version!r}, "
                                 f"expected {RATINGS_GAMES_FORMAT_VERSION}")
            name_a, name_b = entry["a"], entry["b"]
            if version == 1:
                wins, draws, losses = entry["wins"], entry["draws"], entry["losses"]
            else:
                wins, draws, losses = (entry["score"] == 1.0), (entry["score"] == 0.5), (entry["score"] == 0.0)
            all_games += outcome_games(name_a, name_b, wins, draws, losses)
            key = frozenset((name_a, name_b))
            stored[key] = stored.get(key, 0) + wins + draws + losses

        # Anchors are built before any game: a bad spec fails first.
        for number, (spec, _) in enumerate(anchored):
            anchor_players.append(make_player(spec, seed=player_seeds(seed, 1000 + number)[0]))

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

        def linked(a: str, b: str) -> bool:  # in one group of players connected by the games so far
            return any(a in group and b in group for group in player_groups(all_games))

        def spec_of(name: str) -> str:
            return f"mcts:{networks[name]}?sims={sims}"

        for previous, current in zip(generations, generations[1:]):
            # Unlinked to generation 0, or a match between them that a stop cut short: play what is missing.
            so_far = stored.get(frozenset((current, previous)), 0)
            if not linked(current, generations[0]) or 0 < so_far < games:
                newer = _generation_player(networks[current], current, sims)
                older = _generation_player(networks[previous], previous, sims)
                play(newer, older, games - so_far, spec_of(current), spec_of(previous))
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
        raise RunStateError(f"{run.path}: nothing to rate: one generation, no arena games and no anchor")
    reference = anchor_players[0].name if anchor_players else generations[0]
    if pinned:
        ratings = fit_ratings(all_games, pinned=pinned)
        scale = ", ".join(f"{spec} = {elo:g}" for spec, elo in pinned.items())
    else:
        ratings = fit_ratings(all_games, anchor=reference)
        pinned, scale = {reference: 0.0}, f"{reference} = 0"
    plot = Path(plot_path) if plot_path is not None else run.path / "ratings" / "elo.png"
    for name in ratings:  # generations known only from arena records are plotted too
        match = re.fullmatch(r"gen-(\d+)", name)
        if match:
            numbers.setdefault(name, int(match.group(1)))
    plot_ratings(ratings, numbers, [player.name for player in anchor_players], plot, scale)
    return {
        "run_dir": str(run.path), "anchor": reference, "pinned": pinned, "scale": scale, "sims": sims, "new_games": played,
        "games": len(all_games), "plot": str(plot),
        "ratings": {name: {"elo": r.elo, "elo_low": r.elo_low, "elo_high": r.elo_high, "games": r.games,
                           "score": r.score, "generation": numbers.get(name)} for name, r in ratings.items()},
        "table": format_ratings_table(ratings),
    }
