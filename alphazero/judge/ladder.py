"""The ``alphazero ladder`` command's work: one player's Elo on a UCI engine's calibrated ``UCI_Elo`` scale.

A *scale* is a UCI engine with ``UCI_LimitStrength`` and ``UCI_Elo`` (Stockfish 15.1: 1350-2850, calibrated
against CCRL 40/4 engines): each level ``uci:ENGINE?UCI_LimitStrength=true&UCI_Elo=L&movetime=MS`` is a
player *pinned* at Elo L. A ladder plays the player against these levels in *rounds* (``batch`` games
each, every opening with both colours) and picks each round's opponent from the results so far
(``Ladder.climb``): the maximum-likelihood estimate of the player (``guess`` before any game) is moved
at most ``MAX_MOVE`` from the last opponent's rating, and the nearest level (rounded to ``step``)
plays next, so the levels bracket the player's 50% point where a game tells the most. It stops when the
player has ``games`` games, or earlier when its interval's half width is ``precision`` or less.

Below the engine's floor the levels say little (a player at 850 scores a few percent against 1350).
There the ladder plays *links*: players such as ``ab:material?depth=1`` that are not pinned but laddered
themselves, once, against the levels (``link_games`` games, in the same file), and then played by
weaker players. Links are tried in the order given (strongest first; each is laddered against the
levels and the links before it) and only when a player's estimate falls ``LINK_MARGIN`` below the floor;
then the nearest of the floor level and the links plays. The link's
rating is not fixed: it is fitted in the same likelihood as everything else, so its own uncertainty
widens the player's interval.

The fit (``alphazero.judge.elo.fit_ratings``): Bradley-Terry maximum likelihood over every game in the
file, draws as half points (as Ordo), one virtual draw per pair of players who met (the project's
prior), the levels pinned at their ``UCI_Elo``; intervals are 95% profile-likelihood intervals (asymmetric
where the score is lopsided; the links refitted at every point).

The file (``out``): one JSON line per finished game (``LADDER_FORMAT_VERSION``), appended as it ends. A
ladder resumes from it: stored rounds are completed and the ladder goes on where it stopped, so with
deterministic players an interrupted ladder ends with the same table as an uninterrupted one; another
player's ladder on the same file reuses the links' games. Games are played by a ``Runner``:
``play_here`` in this process, or ``workers.ladder`` as Ray tasks. Never touches Ray; parses no command
line (``commands.ladder`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shlex
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import chess
import chess.engine
import numpy as np

from alphazero.errors import InputError
from alphazero.fileio import DirectoryLock, append_jsonl, output_file, read_jsonl
from alphazero.judge.arena import Adjudication, GameResult, Match, ScheduledGame, match_schedule
from alphazero.judge.elo import Rating, fit_ratings
from alphazero.judge.match import match_openings, player_seeds
from alphazero.judge.players import make_player

LADDER_FORMAT_VERSION = 1
"""``format_version`` of each line of a ladder file: one finished game (``player``'s ``score`` against
``opponent``, ``opponent_elo`` the level's pinned rating or null for a link), with its ``round`` and
``index`` in the round, the engine's name as ``scale``, and the PGN."""

DEFAULT_LINKS = ("ab:material?depth=1",)
"""The links below Stockfish 15.1's floor: material alpha-beta at depth 1 scored 8/1/11 against UCI_Elo 1350."""

MAX_MOVE = 200.0
"""The most the next opponent's rating moves away from the last one's in one round (Elo)."""

LINK_MARGIN = 200.0
"""Links are laddered and played only for a player estimated this far below the floor or more: closer, a
game against the floor level still tells three quarters of what an even game does (p (1 - p) = 0.18 at
-200 Elo against 0.25), and a link would add its own uncertainty."""

# (player spec, opponent spec, games to play, max plies, seed, on_games) -> None. Plays every game of the
# schedule (game index, opening, player has White) and hands finished games to on_games as they end.
Runner = Callable[[str, str, Sequence[ScheduledGame], int, int, Callable[[list[GameResult]], None], Adjudication | None],
                  None]


@dataclass(frozen=True)
class Scale:
    """A UCI engine's ``UCI_Elo`` levels as pinned players: its ``name`` (from ``id name``) and range."""

    command: str
    name: str
    floor: int
    ceiling: int
    movetime_ms: float

    def level_spec(self, elo: int) -> str:
        """The player spec of the level ``elo`` (a ``uci:`` spec at a fixed time a move)."""
        return f"uci:{self.command}?UCI_LimitStrength=true&UCI_Elo={elo}&movetime={self.movetime_ms:g}"

    def level(self, elo: float, step: int) -> int:
        """The level nearest ``elo`` on a grid of ``step`` from the floor, within the engine's range."""
        snapped = self.floor + step * round((elo - self.floor) / step)
        return int(min(max(snapped, self.floor), self.ceiling))


def probe_scale(command: str, movetime_ms: float) -> Scale:
    """Start ``command`` once to read its name and its ``UCI_Elo`` range; ``InputError`` when it cannot start
    or has no calibrated strength (no ``UCI_Elo`` and ``UCI_LimitStrength`` options)."""
    if not movetime_ms > 0 or not math.isfinite(movetime_ms):
        raise InputError(f"--movetime must be a positive number of milliseconds, got {movetime_ms}")
    try:
        engine = chess.engine.SimpleEngine.popen_uci(shlex.split(command))
    except (OSError, chess.engine.EngineError, asyncio.TimeoutError, ValueError) as error:
        raise InputError(f"--engine {command!r} could not be started as a UCI engine: {error}") from None
    try:
        options = {name.lower(): option for name, option in engine.options.items()}
        name = str(engine.id.get("name", command))
        if "uci_elo" not in options or "uci_limitstrength" not in options:
            raise InputError(f"--engine {command!r} ({name}) has no UCI_Elo and UCI_LimitStrength options: no calibrated scale")
        option = options["uci_elo"]
        if option.min is None or option.max is None or option.min > option.max:
            raise InputError(f"--engine {command!r} ({name}): its UCI_Elo option gives no range")
        return Scale(command, name, int(option.min), int(option.max), float(movetime_ms))
    finally:
        with contextlib.suppress(chess.engine.EngineError, chess.engine.EngineTerminatedError):
            engine.quit()


@dataclass(frozen=True)
class LadderSettings:
    """How a ladder plays: ``batch`` games a round, ``guess`` the first target, opponents' levels on a grid
    of ``step``, links laddered with ``link_games`` each; openings, game length and seed as ``arena``'s."""

    batch: int = 10
    guess: float = 1500.0
    step: int = 50
    link_games: int = 200
    openings: str | Path | None = None
    opening_plies: int | None = None
    max_plies: int = 400
    seed: int = 0
    adjudication: Adjudication | None = None  # None: every game played out

    def check(self) -> None:
        """``InputError`` naming the first bad setting."""
        if self.batch < 2 or self.batch % 2:
            raise InputError(f"--batch must be a positive even number (each opening with both colours), got {self.batch}")
        if not math.isfinite(self.guess):
            raise InputError(f"--guess must be a number, got {self.guess}")
        if self.step < 1:
            raise InputError(f"--step must be positive, got {self.step}")
        if self.link_games < 1:
            raise InputError(f"--link-games must be positive, got {self.link_games}")
        if self.max_plies < 1:
            raise InputError(f"--max-plies must be positive, got {self.max_plies}")


def round_seed(seed: int, player: str, number: int) -> int:
    """The seed of round ``number`` of ``player``'s ladder: its openings and its players' seeds."""
    return int(np.random.SeedSequence([seed, zlib.crc32(player.encode()), number]).generate_state(1)[0])


def play_schedule(spec_a: str, spec_b: str, schedule: Sequence[ScheduledGame], max_plies: int, seed: int,
                  chunk: int = 0, on_game: Callable[[GameResult], None] | None = None,
                  adjudication: Adjudication | None = None) -> list[GameResult]:
    """Build both players from their specs and play ``schedule`` in this process, all games at once.

    The unit of work of a ladder round (``workers.ladder`` runs chunks of it as Ray tasks); the players are
    seeded from ``seed`` and ``chunk`` (``player_seeds``) and closed at the end."""
    seed_a, seed_b = player_seeds(seed, chunk)
    results: list[GameResult] = []
    with contextlib.ExitStack() as stack:
        player_a = make_player(spec_a, seed=seed_a)
        stack.callback(player_a.close)
        player_b = make_player(spec_b, seed=seed_b)
        stack.callback(player_b.close)
        match = Match(player_a, player_b, schedule, max_plies, concurrency=max(1, len(schedule)),
                      event=f"ladder: {spec_a} vs {spec_b}", adjudication=adjudication)
        while not match.done:
            for game in match.step():
                results.append(game)
                if on_game is not None:
                    on_game(game)
    return results


def play_here(spec_a: str, spec_b: str, schedule: Sequence[ScheduledGame], max_plies: int, seed: int,
              on_games: Callable[[list[GameResult]], None], adjudication: Adjudication | None = None) -> None:
    """The sequential ``Runner``: every game of the round in this process, each handed on as it ends."""
    play_schedule(spec_a, spec_b, schedule, max_plies, seed, on_game=lambda game: on_games([game]),
                  adjudication=adjudication)


def _check_record(path: Path, number: int, record: dict[str, Any]) -> None:
    version = record.get("format_version")
    if isinstance(version, int) and version > LADDER_FORMAT_VERSION:
        raise InputError(f"{path}: line {number} was written by a newer version (format_version {version})")
    fields = (isinstance(record.get("player"), str) and isinstance(record.get("opponent"), str)
              and isinstance(record.get("round"), int) and isinstance(record.get("index"), int)
              and record.get("score") in (0.0, 0.5, 1.0) and version == LADDER_FORMAT_VERSION
              and (record.get("opponent_elo") is None or isinstance(record.get("opponent_elo"), (int, float))))
    if not fields or record["player"] == record["opponent"] or record["round"] < 0 or record["index"] < 0:
        raise InputError(f"{path}: line {number} is not a ladder game record")


def read_ladder(path: str | Path, scale_name: str | None = None) -> list[dict[str, Any]]:
    """The game records of a ladder file (none when it does not exist), checked: each a game of this
    format, on one scale (``scale_name`` when given), every level pinned at one rating. A torn last line
    (a kill while writing) is skipped; a game stored twice counts once."""
    path = Path(path)
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, int, int]] = set()
    pins: dict[str, float] = {}
    for number, record in enumerate(read_jsonl(path, "ladder file (--out)"), start=1):
        if not isinstance(record, dict):
            raise InputError(f"{path}: line {number} is not a ladder game record")
        _check_record(path, number, record)
        if scale_name is not None and record.get("scale") != scale_name:
            raise InputError(f"{path}: holds a ladder on {record.get('scale')!r}'s scale, not {scale_name!r}'s; "
                             "give another --out")
        scale_name = record.get("scale")
        elo = record["opponent_elo"]
        if elo is not None and pins.setdefault(record["opponent"], float(elo)) != float(elo):
            raise InputError(f"{path}: line {number} pins {record['opponent']!r} at {elo}, an earlier line at "
                             f"{pins[record['opponent']]:g}")
        key = (record["player"], record["round"], record["index"])
        if key not in seen:
            seen.add(key)
            records.append(record)
    return records


def _label(spec: str, elo: float | None) -> str:
    """How a report names an opponent: a level by its rating, a link by its spec."""
    return f"UCI_Elo {elo:g}" if elo is not None else spec


@dataclass
class _Round:
    opponent: str
    opponent_elo: float | None
    indices: set[int]


class Ladder:
    """The games of one ladder file (``out``; None: kept in memory only) and the climbs that add to it.

    ``climb(player, ...)`` plays rounds until the player's budget or precision is reached; ``report(player)``
    fits every game and says the player's rating on the scale. Each game is appended to ``out`` as it
    ends, so a stopped ladder resumes from the file."""

    def __init__(self, scale: Scale, settings: LadderSettings, runner: Runner = play_here,
                 out: str | Path | None = None, log: Callable[[str], None] | None = None) -> None:
        settings.check()
        self.scale = scale
        self.settings = settings
        self.runner = runner
        self.out = Path(out) if out is not None else None
        self.log = log or (lambda message: None)
        self.records = read_ladder(self.out, scale.name) if self.out is not None else []
        self.new_games = 0  # games this object played (the rest came from the file)
        self.calibrated: set[str] = set()  # links laddered in this process (or found complete)

    # ----------------------------------------------------------------------------------------
    # The fit

    def ratings(self, intervals: str = "wald") -> dict[str, Rating]:
        """Every player of the file on the scale, the levels pinned (empty before the first game)."""
        if not self.records:
            return {}
        games = [(record["player"], record["opponent"], float(record["score"])) for record in self.records]
        pins = {record["opponent"]: float(record["opponent_elo"]) for record in self.records
                if record["opponent_elo"] is not None}
        try:
            return fit_ratings(games, pinned=pins, intervals=intervals)
        except ValueError as error:  # only a file written by hand gets here: say which
            raise InputError(f"{self.out or 'ladder'}: {error}") from None

    def _rounds(self, player: str) -> dict[int, _Round]:
        rounds: dict[int, _Round] = {}
        for record in self.records:
            if record["player"] == player:
                entry = rounds.setdefault(record["round"], _Round(record["opponent"], record["opponent_elo"], set()))
                entry.indices.add(record["index"])
        return rounds

    # ----------------------------------------------------------------------------------------
    # The climb

    def climb(self, player: str, games: int, links: Sequence[str] = (), precision: float | None = None) -> None:
        """Play ``player`` in rounds until it has ``games`` games as the ladder's player (or its 95% interval
        is at most ``2 * precision`` wide), stored rounds first (a partial one is completed)."""
        player = player.strip()
        links = [link.strip() for link in links if link.strip() != player]
        number, previous = 0, None
        while True:
            rounds = self._rounds(player)
            before = sum(len(entry.indices) for key, entry in rounds.items() if key < number)
            size = min(self.settings.batch, games - before)
            stored = rounds.get(number)
            if stored is not None:
                opponent, elo = stored.opponent, stored.opponent_elo
                missing = [index for index in range(size) if index not in stored.indices]
            else:
                if size <= 0 or (precision is not None and number > 0 and self._half_width(player) <= precision):
                    return
                opponent, elo = self._opponent(player, links, previous)
                missing = list(range(size))
            if missing:
                self._play(player, number, opponent, elo, missing)
            number, previous = number + 1, opponent

    def _half_width(self, player: str) -> float:
        rating = self.ratings(intervals="profile")[player]
        return 0.5 * (rating.elo_high - rating.elo_low)

    def _opponent(self, player: str, links: Sequence[str], previous: str | None) -> tuple[str, float | None]:
        """The next round's opponent: the level (or link) whose rating is nearest the player's estimate moved
        at most ``MAX_MOVE`` from the last opponent, never the player itself (the scale's own engine at a level:
        the nearest other level); links are laddered first when they are needed."""
        ratings = self.ratings()
        estimate = target = ratings[player].elo if player in ratings else self.settings.guess
        if previous is not None:
            last = ratings[previous].elo
            target = min(max(estimate, last - MAX_MOVE), last + MAX_MOVE)
        step = self.settings.step
        level = self.scale.level(target, step)
        if self.scale.level_spec(level) == player:  # the scale's engine laddered on its own scale: never itself
            others = {self.scale.level(level + offset, step) for offset in (-step, step)} - {level}
            level = min(others, key=lambda other: (abs(other - target), other), default=level)
        candidates: list[tuple[float, int, str, float | None]] = [(abs(level - target), 0, self.scale.level_spec(level), level)]
        if estimate < self.scale.floor - LINK_MARGIN:
            for number, link in enumerate(links):
                self._calibrate(link, links[:number])
                rating = self.ratings()[link].elo
                candidates.append((abs(rating - target), number + 1, link, None))
                if rating <= target:
                    break  # the weaker links are not needed
        _, _, spec, elo = min(candidates)
        return spec, elo

    def _calibrate(self, link: str, stronger: Sequence[str]) -> None:
        if link in self.calibrated:
            return
        self.log(f"[ladder] link {link}: laddered against the levels ({self.settings.link_games} games)")
        self.climb(link, self.settings.link_games, stronger)
        self.calibrated.add(link)

    def _play(self, player: str, number: int, opponent: str, elo: float | None, indices: Sequence[int]) -> None:
        seed = round_seed(self.settings.seed, player, number)
        pairs = max(math.ceil(self.settings.batch / 2), max(indices) // 2 + 1)  # the round's openings, always the same
        openings = match_openings(pairs, self.settings.openings, self.settings.opening_plies, seed)
        wanted = set(indices)
        schedule = [entry for entry in match_schedule(openings) if entry[0] in wanted]
        estimate = self.ratings().get(player)
        self.log(f"[ladder] {player}: round {number}, {len(schedule)} games against {_label(opponent, elo)}"
                 + (f" (estimate {estimate.elo:.0f} after {estimate.games} games)" if estimate is not None else ""))

        def accept(results: list[GameResult]) -> None:
            for game in results:
                record = {"format_version": LADDER_FORMAT_VERSION, "scale": self.scale.name, "player": player,
                          "round": number, "index": game.index, "opponent": opponent,
                          "opponent_elo": int(elo) if elo is not None and float(elo).is_integer() else elo,
                          "score": game.score_a, "result": game.result, "termination": game.termination,
                          "plies": game.plies, "opening": game.opening.name, "white": game.a_is_white,
                          "time": time.time(), "pgn": game.pgn}
                if self.out is not None:
                    append_jsonl(self.out, record)
                self.records.append(record)
                self.new_games += 1

        self.runner(player, opponent, schedule, self.settings.max_plies, seed, accept, self.settings.adjudication)

    # ----------------------------------------------------------------------------------------
    # The result

    def report(self, player: str) -> dict[str, Any]:
        """``player``'s rating on the scale with its 95% profile-likelihood interval, its games against each
        opponent, and the links' ratings, as plain data (``text`` is the headline)."""
        player = player.strip()
        ratings = self.ratings(intervals="profile")
        if player not in ratings:
            raise InputError(f"{player!r} has no ladder games yet")
        rating = ratings[player]
        opponents: dict[str, dict[str, Any]] = {}
        for record in self.records:
            if player not in (record["player"], record["opponent"]):
                continue
            mine = record["player"] == player
            other = record["opponent"] if mine else record["player"]
            pinned = record["opponent_elo"] if mine else None
            entry = opponents.setdefault(other, {"spec": other, "pinned": pinned is not None, "wins": 0, "draws": 0,
                                                 "losses": 0})
            score = float(record["score"]) if mine else 1.0 - float(record["score"])
            entry[{1.0: "wins", 0.5: "draws", 0.0: "losses"}[score]] += 1
        for spec, entry in opponents.items():
            other = ratings[spec]
            entry.update(label=_label(spec, other.elo if entry["pinned"] else None), elo=other.elo,
                         elo_low=_bound(other.elo_low), elo_high=_bound(other.elo_high),
                         games=entry["wins"] + entry["draws"] + entry["losses"])
        ordered = sorted(opponents.values(), key=lambda entry: (-entry["elo"], entry["spec"]))
        return {"player": player, "scale": self.scale.name, "elo": rating.elo, "elo_low": _bound(rating.elo_low),
                "elo_high": _bound(rating.elo_high), "games": rating.games, "score": rating.score,
                "new_games": self.new_games, "opponents": ordered, "out": str(self.out) if self.out else None,
                "interval": "95% profile likelihood, levels pinned at their UCI_Elo",
                "text": f"{scale_elo_text(rating)} on {self.scale.name}'s UCI_Elo scale"}


def _bound(value: float) -> float | None:
    """An interval end as JSON holds it: None where there is no bound."""
    return None if math.isinf(value) else value


def scale_elo_text(rating: Rating) -> str:
    """``Elo X [low, high]``, whole numbers; an open end reads ``no lower bound`` / ``no upper bound``."""
    low = f"{rating.elo_low:.0f}" if _bound(rating.elo_low) is not None else "no lower bound"
    high = f"{rating.elo_high:.0f}" if _bound(rating.elo_high) is not None else "no upper bound"
    return f"Elo {rating.elo:.0f} [{low}, {high}]"


def format_ladder_report(report: dict[str, Any]) -> str:
    """The human-readable form of ``Ladder.report``: the headline, then one line per opponent."""
    lines = [report["text"],
             f"{report['player']}: {report['games']} games ({report['new_games']} new), score "
             f"{100.0 * report['score']:.1f}%; {report['interval']}"]
    rows = [("opponent", "Elo", "95% interval", "games", "W/D/L", "score")]
    for entry in report["opponents"]:
        games = entry["games"]
        interval = "pinned" if entry["pinned"] else "[{}, {}]".format(
            "-" if entry["elo_low"] is None else f"{entry['elo_low']:.0f}",
            "-" if entry["elo_high"] is None else f"{entry['elo_high']:.0f}")
        rows.append((entry["label"], f"{entry['elo']:.0f}", interval, str(games),
                     f"{entry['wins']}/{entry['draws']}/{entry['losses']}",
                     f"{100.0 * (entry['wins'] + 0.5 * entry['draws']) / games:.1f}%"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(width) if column == 0 else cell.rjust(width)
                        for column, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows]
    if report["out"]:
        lines.append(f"games in {report['out']}")
    return "\n".join(lines)


def default_engine() -> str:
    """The scale's engine when none is named: ``stockfish`` on the PATH, else Debian's /usr/games/stockfish."""
    return shutil.which("stockfish") or "/usr/games/stockfish"


def run_ladder(spec: str, games: int, out: str | Path | None = None, engine: str | None = None,
               movetime_ms: float = 100.0, links: Sequence[str] = DEFAULT_LINKS,
               settings: LadderSettings = LadderSettings(), precision: float | None = None, runner: Runner = play_here,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Ladder ``spec`` to ``games`` games (or ``precision``) on ``engine``'s ``UCI_Elo`` scale and report it.

    Everything a user can get wrong is checked before the first game: the numbers, ``out`` (and the lock
    that keeps one writer per ladder file), the engine and its scale, the player and link specs."""
    spec = spec.strip()
    if games < 1:
        raise InputError(f"--games must be positive, got {games}")
    if precision is not None and not (precision > 0 and math.isfinite(precision)):
        raise InputError(f"--precision must be a positive number of Elo, got {precision}")
    settings.check()
    with contextlib.ExitStack() as stack:
        if out is not None:
            path = output_file(out, "--out")
            stack.enter_context(DirectoryLock(path.parent, f"ladder-{path.name}"))
        scale = probe_scale(engine or default_engine(), movetime_ms)
        for text in dict.fromkeys([spec, *links]):  # a bad spec fails now, with its message
            make_player(text).close()
        ladder = Ladder(scale, settings, runner, out, log)
        ladder.climb(spec, games, links, precision)
        return ladder.report(spec)
