"""Labelling positions with a searcher, and the resumable file the labels go to.

Owns the label file (``LabelFile``: a CSV of ``COLUMNS``, or bullet's text format for a ``.txt``, one
row a position, appended) and the labellers (``make_labeller``): a UCI engine process
(``uci:COMMAND?Option=value&depth=D&nodes=N&movetime=MS``, the player spec grammar of
``alphazero.judge.players``; ``Labeller``) or our own alpha-beta in this process (``ab:EVAL?nodes=N...``;
``ABLabeller``), each analysing one position at a time. Knows nothing of Ray: ``run_label`` labels in this
process, or hands the positions to a ``runner`` (``workers.label``) that fans them out. ``alphazero
label`` and ``alphazero datagen`` (our alpha-beta playing itself, the way engines that train NNUEs from
zero make their data) both run ``run_label``.

A row, every figure from the side to move in ``fen``:

========== ===============================================================================
column     content
========== ===============================================================================
fen        the position (full FEN)
score_cp   centipawns; empty when the engine reports a mate
mate       signed moves to mate (+3: the side to move mates in 3; -2: it is mated in 2); else empty
best_uci   the engine's best move (first move of its principal variation), always legal
wdl_win    win / draw / loss per mille (sum 1000) when the engine reports WDL, else empty;
wdl_draw   ``UCI_ShowWDL`` is turned on when the engine has that option (Stockfish does) and the
wdl_loss   spec does not set it
result     a played game's result for the side to move: 1 (won), 0.5 (drawn), 0 (lost); empty for a
           position read from a file, or a game cut short by an engine failure
========== ===============================================================================

A label file written before ``result`` existed (``LEGACY_COLUMNS``) is still appended to, in its own
columns. bullet's text format (``alphazero.learn.bullet_text``: ``FEN | score | result``, both from
White's view) holds only positions with a score and a game result: it is written for played games only.

Positions come from a file (``alphazero.learn.positions``: a run's replay, a PGN, EPD/FEN lines, a CSV)
or are **played** (a polyglot book, ``.bin``): the engine plays itself from the book's openings, as
Stockfish's ``gensfen`` and bullet's data generators make NNUE data, and every position it searches
is a row, labelled by the very search that chose its move (``GameTask``, ``Searcher.play``); or it plays an
opponent, taking White and Black in turn, and only its own positions are rows. A few
uniformly random moves early in each game (``random_moves`` of the first ``RANDOM_PLIES`` plies after
the book; gensfen's default is 5 in 24) spread the games over positions no engine would reach, where
one side has blundered: the positions a weak player must learn to punish. A game ends when it is over
by the rules, at ``max_plies`` (scored a draw), or when the engine has seen a score beyond ``ADJUDICATE_CP``
for ``ADJUDICATE_PLIES`` plies in a row (won by the side the scores favour; mates found are played out).

Resuming: the file is appended to, and a run skips every position whose ``position_key`` is already
in it (played games: a position already written is not written again). A run killed mid-write
leaves at most one unterminated last line; ``LabelFile.existing`` cuts it off (the position is labelled
again). Rows are written whole, one ``write`` each, flushed per batch.

Labelling is slow: each position costs one search (Stockfish 15.1 at depth 12 on one core, measured in
docs/RESULTS.md; our alpha-beta at 5,000 nodes, a few milliseconds).
"""

from __future__ import annotations

import csv
import io
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, Union

import chess
import chess.engine
import numpy as np

from alphazero.board.game import legal_move, terminal_status
from alphazero.errors import InputError
from alphazero.fileio import output_file
from alphazero.judge.arena import Opening, book_openings
from alphazero.judge.players import UCIPlayer, parse_uci_spec
from alphazero.learn import bullet_text
from alphazero.learn.positions import BadInput, position_key, read_fens, source_kind, unique_fens
from alphazero.search.ab_player import make_ab_player

COLUMNS = ("fen", "score_cp", "mate", "best_uci", "wdl_win", "wdl_draw", "wdl_loss", "result")
LEGACY_COLUMNS = COLUMNS[:-1]  # label files written before played games kept their result
BATCH = 8  # positions per write (in-process) or per Ray task
RANDOM_PLIES = 24  # a played game's random moves fall in its first plies after the book
ADJUDICATE_CP = 2000  # a played game is over once every score for ADJUDICATE_PLIES plies is beyond this
ADJUDICATE_PLIES = 8


@dataclass(frozen=True)
class Labelled:
    """The result for one position: a row of ``COLUMNS``, or an engine failure (``row`` None)."""

    fen: str
    row: tuple[str, ...] | None
    error: str = ""


@dataclass(frozen=True)
class GameTask:
    """One game for the engine to play against itself from ``opening``, every position a row.

    ``random_moves`` distinct plies among the first ``RANDOM_PLIES`` after the opening are played as a
    uniformly random legal move (chosen with ``seed``); the row of such a position still holds the
    engine's best move and score. With an ``opponent`` (a labeller spec) the engine plays one side
    (``white``) and the opponent the other; the rows are the engine's positions only, each with the
    engine's score, so a file holds one searcher's labels whoever it played against."""

    opening: Opening
    seed: int
    random_moves: int = 5
    max_plies: int = 400
    opponent: str = ""  # a player spec: it plays the other side, and only the searcher's own moves are rows
    white: bool = True  # with an opponent: the searcher plays White


Task = Union[Sequence[str], GameTask]  # a batch of positions to label, or a game to play


class EngineFailed(RuntimeError):
    """The engine process died, or answered outside the UCI protocol."""


def go_command(limit: chess.engine.Limit) -> str:
    """The UCI ``go`` line for a spec's limit (``depth``, ``nodes``, ``movetime``; any together)."""
    parts = ["go"]
    if limit.depth is not None:
        parts += ["depth", str(limit.depth)]
    if limit.nodes is not None:
        parts += ["nodes", str(limit.nodes)]
    if limit.time is not None:
        parts += ["movetime", str(max(1, round(limit.time * 1000)))]
    return " ".join(parts)


def parse_info(line: str) -> dict[str, Any]:
    """The fields of a UCI ``info`` line a label needs: ``cp`` or ``mate``, ``wdl`` (three ints), ``pv``
    (move strings); absent fields are absent."""
    tokens = line.split()
    found: dict[str, Any] = {}
    i = 1
    while i < len(tokens):
        token = tokens[i]
        if token == "score" and i + 2 < len(tokens) and tokens[i + 1] in ("cp", "mate"):
            found[tokens[i + 1]] = int(tokens[i + 2])
            i += 3
            continue  # a "lowerbound" / "upperbound" after it is skipped below as an unknown token
        if token == "wdl" and i + 3 < len(tokens):
            found["wdl"] = (int(tokens[i + 1]), int(tokens[i + 2]), int(tokens[i + 3]))
            i += 4
            continue
        if token == "pv":
            found["pv"] = tokens[i + 1:]
            break
        if token == "string":
            break
        i += 1
    return found


class _PipeEngine:
    """A UCI engine spoken to over its pipes, one search at a time: ``analyse(fen)`` sends ``position`` and
    ``go`` and reads to ``bestmove``. python-chess's engine API costs about 2 ms of CPU a call in its
    event-loop thread, twice what Stockfish spends at depth 6 (measured, docs/RESULTS.md); this costs
    a line parse per ``info`` line. Options are checked and set by python-chess first (``Labeller``)."""

    def __init__(self, command: str, options: dict[str, str]) -> None:
        self.process = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._send("uci")
        self._read_until("uciok")
        for name, value in options.items():
            self._send(f"setoption name {name} value {value}")
        self._send("isready")
        self._read_until("readyok")

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise EngineFailed(f"the engine's input closed ({error})") from None

    def _readline(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise EngineFailed(f"the engine exited (code {self.process.poll()})")
        return line

    def _read_until(self, word: str) -> None:
        while self._readline().split()[:1] != [word]:
            pass

    def analyse(self, fen: str, go: str) -> tuple[dict[str, Any], str]:
        """(the fields of the last ``info`` line with a score, ``parse_info``; the ``bestmove`` move)."""
        self._send(f"position fen {fen}")
        self._send(go)
        info: dict[str, Any] = {}
        while True:
            line = self._readline()
            head = line.split()[:2]
            if not head:
                continue
            if head[0] == "info":
                try:
                    fields = parse_info(line)
                except ValueError:
                    raise EngineFailed(f"unreadable info line {line.strip()!r}") from None
                if "cp" in fields or "mate" in fields:
                    info = fields
            elif head[0] == "bestmove":
                return info, head[1] if len(head) > 1 else ""

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self._send("quit")
                self.process.wait(timeout=5)
            except (EngineFailed, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class Searcher:
    """What labels: ``label_one(fen)`` searches one position and returns its row (``Labelled``); ``play`` and
    ``label`` are built on it, the same for every kind of searcher (``make_labeller``). A game against an
    opponent (``GameTask.opponent``) starts that opponent's searcher once and keeps it for the searcher's
    lifetime."""

    spec = ""

    def __init__(self) -> None:
        self.opponents: dict[str, Searcher] = {}

    def label_one(self, fen: str) -> Labelled:
        raise NotImplementedError

    def new_game(self) -> None:
        """Forget what the last game taught (a transposition table), so a game's rows depend only on its task."""

    def opponent(self, spec: str) -> Searcher:
        if spec not in self.opponents:
            self.opponents[spec] = make_labeller(spec)
        return self.opponents[spec]

    def label(self, fens: Sequence[str]) -> list[Labelled]:
        return [self.label_one(fen) for fen in fens]

    def play(self, task: GameTask) -> list[Labelled]:
        """The rows of one game the searcher plays against itself (``GameTask``), each with the game's
        result for its side to move; an engine failure ends the game there (the failure is the last
        item, and the game's rows have no result)."""
        board = chess.Board(task.opening.fen)
        for text in task.opening.moves:
            board.push_uci(text)
        opponent = self.opponent(task.opponent) if task.opponent else None
        for searcher in (self, opponent):
            if searcher is not None:
                searcher.new_game()
        rng = np.random.default_rng(task.seed)
        count = min(task.random_moves, RANDOM_PLIES)
        random_plies = set(rng.choice(RANDOM_PLIES, size=count, replace=False).tolist()) if count > 0 else set()
        results: list[Labelled] = []
        turns: list[bool] = []  # the side to move of each row
        decided = 0
        white_value: float | None = 0.0  # the game's value for White; 0 (a draw) at max_plies
        for ply in range(task.max_plies):
            status = terminal_status(board)
            if status is not None:
                white_value = status[0] if board.turn == chess.WHITE else -status[0]
                break
            mover = self if opponent is None or board.turn == (chess.WHITE if task.white else chess.BLACK) else opponent
            result = mover.label_one(board.fen())
            if mover is self or result.row is None:  # an opponent's failure is reported like the searcher's own
                results.append(result)
                turns.append(board.turn)
            if result.row is None:
                white_value = None
                break
            _, cp, mate, best, *_ = result.row
            decided = decided + 1 if (not mate and abs(int(cp)) > ADJUDICATE_CP) else 0
            if decided >= ADJUDICATE_PLIES:
                winner_is_mover = int(cp) > 0
                white_value = 1.0 if winner_is_mover == (board.turn == chess.WHITE) else -1.0
                break
            if ply in random_plies:
                legal = list(board.legal_moves)
                board.push(legal[int(rng.integers(len(legal)))])
            else:
                board.push_uci(best)
        if white_value is None:
            return results
        scored = []
        for result, turn in zip(results, turns):
            value = white_value if turn == chess.WHITE else -white_value
            assert result.row is not None
            scored.append(Labelled(result.fen, result.row[:-1] + (format_result(value),)))
        return scored

    def run(self, task: Task) -> list[Labelled]:
        """A task's rows: ``play`` for a game, ``label`` for a batch of positions."""
        return self.play(task) if isinstance(task, GameTask) else self.label(task)

    def close(self) -> None:
        for opponent in self.opponents.values():
            opponent.close()
        self.opponents.clear()


def format_result(value: float) -> str:
    """A game's value for a side (+1 / 0 / -1) as the ``result`` column writes it: 1, 0.5 or 0."""
    return {1.0: "1", 0.0: "0.5", -1.0: "0"}[value]


class Labeller(Searcher):
    """One UCI engine process; ``label(fens)`` analyses each position to the spec's limit (slow).

    python-chess starts the engine once to check the spec's options (a bad name or value is an
    ``InputError``) and to learn the engine's option names; the positions then go over the pipes
    (``_PipeEngine``)."""

    def __init__(self, labeller_spec: str) -> None:
        super().__init__()
        try:
            self.command, self.options, self.limit = parse_uci_spec(labeller_spec)
        except ValueError as error:
            raise InputError(f"labeller: {error}") from None
        self.spec = labeller_spec
        self.go = go_command(self.limit)
        try:
            checker = UCIPlayer(self.command, self.options, self.limit, name=self.spec)
        except ValueError as error:
            raise InputError(f"labeller: {error}") from None
        engine = checker.engine
        names = {name.lower(): name for name in engine.options}
        self.engine_options = {names[key.lower()]: value for key, value in self.options.items()}
        if "uci_showwdl" in names and "uci_showwdl" not in {key.lower() for key in self.options}:
            self.engine_options[names["uci_showwdl"]] = "true"
        checker.close()
        self.engine: _PipeEngine | None = None
        self._start()

    def _start(self) -> None:
        try:
            self.engine = _PipeEngine(self.command, self.engine_options)
        except (OSError, EngineFailed) as error:
            raise InputError(f"labeller: {self.command!r} could not be started: {error}") from None

    def label_one(self, fen: str) -> Labelled:
        """One position; an engine that dies or errs is restarted and the position reported as failed."""
        board = chess.Board(fen)
        engine = self.engine
        assert engine is not None, "the engine is started in __init__ and after every failure"
        try:
            info, bestmove = engine.analyse(board.fen(), self.go)
        except EngineFailed as error:
            self.close()
            self._start()
            return Labelled(fen, None, f"engine failed ({error})")
        pv = info.get("pv") or []
        text = pv[0] if pv else bestmove
        try:
            best = legal_move(board, text)
        except ValueError:
            return Labelled(fen, None, f"engine gave no legal best move ({text or None})")
        cp = str(info["cp"]) if "cp" in info else ""
        mate = str(info["mate"]) if "mate" in info else ""
        win = draw = loss = ""
        if "wdl" in info:
            win, draw, loss = (str(value) for value in info["wdl"])
        return Labelled(fen, (fen, cp, mate, best.uci(), win, draw, loss, ""))

    def close(self) -> None:
        super().close()
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class ABLabeller(Searcher):
    """Our alpha-beta (an ``ab:`` spec, ``alphazero.search.ab_player``) in this process: each position is
    one search to the spec's limit (``nodes=N`` makes the labels independent of the machine's speed);
    the transposition table is cleared before each game, so a game's rows depend only on its task."""

    def __init__(self, labeller_spec: str) -> None:
        super().__init__()
        self.spec = labeller_spec
        self.player = make_ab_player(labeller_spec)

    def label_one(self, fen: str) -> Labelled:
        board = chess.Board(fen)
        (move,) = self.player.choose_moves([board])
        info = self.player.last_info()
        cp = "" if info.mate is not None or info.score_cp is None else str(info.score_cp)
        mate = "" if info.mate is None else str(info.mate)
        return Labelled(fen, (fen, cp, mate, move.uci(), "", "", "", ""))

    def new_game(self) -> None:
        self.player.search.clear()


def make_labeller(spec: str) -> Searcher:
    """The labeller a spec names: ``ab:...`` our alpha-beta, ``uci:...`` a UCI engine; any other spec, or a
    bad one, is an ``InputError`` naming it."""
    kind = spec.strip().partition(":")[0].lower()
    if kind == "ab":
        return ABLabeller(spec)
    if kind == "uci":
        return Labeller(spec)
    raise InputError(f"labeller {spec!r}: expected our alpha-beta, ab:material|NNUE?nodes=N&depth=D&movetime=MS, "
                     f"or a UCI engine, uci:COMMAND?Option=value&depth=D&nodes=N&movetime=MS")


# ---- the label file ---------------------------------------------------------------------------


class LabelFile:
    """The file labels are appended to: bullet's text format for a ``.txt`` path (played games only), a
    CSV of ``COLUMNS`` otherwise (module docstring). ``existing()`` reads what is there; ``format(rows)``
    turns rows of ``COLUMNS`` into the file's text (a row with no result has no bullet line)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.kind = "bullet" if self.path.suffix.lower() == ".txt" else "csv"
        self.columns: tuple[str, ...] = COLUMNS

    def existing(self) -> set[str]:
        """The ``position_key`` of every row already in the file (none when it is missing or empty);
        writes nothing but a repair: an unterminated last line (a kill mid-write) is cut off.

        A CSV with another header (``LEGACY_COLUMNS`` is taken, and kept), a row of the wrong width or a
        line that is not bullet's raises ``InputError`` naming the line: it is not a label file and is
        left as it is (checked before anything is cut). A CSV's header is written with the first rows."""
        path = self.path
        if not path.is_file() or path.stat().st_size == 0:
            return set()
        data = path.read_bytes()
        keep = data.rfind(b"\n") + 1  # 0: even the first line was torn
        text = data[:keep].decode("utf-8", errors="replace")
        done = self._read_bullet(text) if self.kind == "bullet" else self._read_csv(data, keep, text)
        if keep < len(data):
            with open(path, "r+b") as handle:
                handle.truncate(keep)
        return done

    def _read_csv(self, data: bytes, keep: int, text: str) -> set[str]:
        header = ",".join(COLUMNS)
        where = f"{self.path}:1"
        if keep == 0:
            torn = data.decode("utf-8", errors="replace")
            if not (header.startswith(torn) or ",".join(LEGACY_COLUMNS).startswith(torn)):
                raise InputError(f"{where}: not a label file (expected the header {header}); choose another --out")
            return set()
        reader = csv.reader(io.StringIO(text))
        first = next(reader, None)
        if first not in (list(COLUMNS), list(LEGACY_COLUMNS)):
            raise InputError(f"{where}: not a label file (header {first!r}, expected {header}); choose another --out")
        self.columns = tuple(first)
        done: set[str] = set()
        for row in reader:
            if len(row) != len(self.columns):
                raise InputError(f"{self.path}:{reader.line_num}: {len(row)} fields, expected {len(self.columns)} "
                                 f"({','.join(self.columns)})")
            done.add(position_key(row[0]))
        return done

    def _read_bullet(self, text: str) -> set[str]:
        done: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                fen, _, _ = bullet_text.parse_line(line)
            except ValueError as error:
                raise InputError(f"{self.path}:{number}: not bullet's text format ({error}); choose another --out") \
                    from None
            done.add(position_key(fen))
        return done

    def header(self) -> str:
        """What a new file starts with (a CSV's header line; nothing for bullet's format)."""
        return ",".join(self.columns) + "\n" if self.kind == "csv" else ""

    def format(self, rows: Sequence[tuple[str, ...]]) -> str:
        """``rows`` (tuples of ``COLUMNS``) as the file's text; bullet's format skips rows with no result."""
        if self.kind == "bullet":
            return "".join(bullet_line(row) for row in rows if row[-1])
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(row[:len(self.columns)] for row in rows)
        return buffer.getvalue()


def bullet_line(row: tuple[str, ...]) -> str:
    """One row of ``COLUMNS`` (scores from the side to move) as a bullet line (from White's)."""
    fen, cp, mate, *_, result = row
    sign = 1 if fen.split()[1] == "w" else -1
    white_result = float(result) if sign == 1 else 1.0 - float(result)
    return bullet_text.format_line(fen, sign * int(cp) if cp else None, sign * int(mate) if mate else None,
                                   white_result)


# ---- progress ---------------------------------------------------------------------------------


class ProgressBar:
    """A one-line bar on ``stream`` when it is a terminal; silent otherwise."""

    def __init__(self, total: int, stream=sys.stderr, label: str = "label") -> None:
        self.total, self.stream, self.label = total, stream, label
        self.enabled = stream.isatty()
        self.done = 0
        self.start = time.monotonic()
        self.last = 0.0

    def add(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and (now - self.last >= 0.2 or self.done >= self.total):
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            self.stream.write(f"\r\x1b[2K{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                              f"{rate:.1f} pos/s ETA {int(eta // 60)}:{int(eta % 60):02d}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ---- the command ------------------------------------------------------------------------------

# Runs each task of ``tasks`` (taken from the iterator as engines become free, so a time limit can end
# it) with ``labeller_spec`` and hands each task's results to ``on_results`` (in any order).
Runner = Callable[[Iterator[Task], str, Callable[[list[Labelled]], None]], None]


def label_in_process(tasks: Iterator[Task], labeller_spec: str, on_results: Callable[[list[Labelled]], None]) -> None:
    """The ``Runner`` without Ray: one engine in this process."""
    labeller = make_labeller(labeller_spec)
    try:
        for task in tasks:
            on_results(labeller.run(task))
    finally:
        labeller.close()


def game_tasks(book: str | os.PathLike, seed: int, random_moves: int, max_plies: int = 400,
               opponent: str = "") -> Iterator[GameTask]:
    """Endless games, each from its own weighted random 8-ply walk of the polyglot ``book`` and with
    its own seed for the random moves, both derived from ``seed``; against an ``opponent`` the searcher
    takes White and Black in turn."""
    if random_moves < 0 or random_moves > RANDOM_PLIES:
        raise InputError(f"--random-moves must be in [0, {RANDOM_PLIES}], got {random_moves}")
    number = 0
    while True:
        game_seed = seed * 1_000_003 + number
        (opening,) = book_openings(Path(book), 1, plies=8, seed=game_seed)
        yield GameTask(opening, seed=game_seed, random_moves=random_moves, max_plies=max_plies, opponent=opponent,
                       white=number % 2 == 0)
        number += 1


def run_label(source: str | os.PathLike, labeller_spec: str, out: str | os.PathLike, limit: int | None = None,
              runner: Runner | None = None, log: Callable[[str], None] | None = None,
              progress: bool = False, minutes: float | None = None, random_moves: int = 5,
              seed: int | None = None, games: int | None = None, file_positions: int | None = None,
              opponent: str = "") -> dict:
    """``alphazero label``: label the distinct positions of ``source`` not yet in ``out``; returns a summary.

    A file source: ``limit`` keeps its first ``limit`` distinct positions (so a rerun with the same
    limit finishes the same set). A book (``.bin``) source: games are played (module docstring) until
    ``limit`` new positions are written or ``minutes`` are up; one of the two is required; ``seed``
    (default: the number of rows already in ``out``, so a resumed run plays new games) picks openings
    and random moves; ``games`` stops after that many games, ``file_positions`` once the file holds that
    many positions (so the same command resumed finishes the same target); an ``opponent`` (a labeller
    spec) plays the other side of every game, and only the labeller's own positions are written
    (``GameTask``). ``minutes`` stops handing
    out work after that time, for either source; the work under way is finished and written. Bad input
    lines and engine failures go to ``log`` (default stderr) and are skipped; failed positions are not
    written, so a rerun tries them again. ``out`` is a CSV, or bullet's text format for a ``.txt``
    (played games only: ``LabelFile``).
    """
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if minutes is not None and minutes <= 0:
        raise InputError(f"--minutes must be positive, got {minutes}")
    for name, value in (("--games", games), ("--positions", file_positions)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    output_file(out, "--out")
    label_file = LabelFile(out)
    playing = source_kind(source) == "book"
    if playing and limit is None and minutes is None and games is None and file_positions is None:
        raise InputError(f"{source}: a book is played until --limit positions or --minutes; give one")
    if label_file.kind == "bullet" and not playing:
        raise InputError(f"{out}: bullet's text format needs each position's game result, which only played games "
                         "have; play from a book (.bin) or write a .csv")
    bad: list[BadInput] = []  # logged once the input is read: an input with no position at all is one error
    if opponent and not playing:
        raise InputError(f"{source}: an opponent plays games; play from a book (.bin)")
    for spec in filter(None, (labeller_spec, opponent)):
        make_labeller(spec).close()  # a bad spec or engine fails now, before the input is read
    done = label_file.existing()
    if playing and file_positions is not None:
        wanted = max(0, file_positions - len(done))
        limit = wanted if limit is None else min(limit, wanted)
    started = time.perf_counter()
    deadline = None if minutes is None else time.monotonic() + 60.0 * minutes
    counts = {"labelled": 0, "failed": 0, "repeated": 0, "games": 0, "handed_out": 0}

    if playing:
        fens: list[str] = []
        todo_count = limit or 0
        tasks: Iterable[Task] = game_tasks(source, len(done) if seed is None else seed, random_moves,
                                           opponent=opponent)
    else:
        fens = unique_fens(read_fens(source, bad.append), limit)
        if not fens:
            raise InputError(f"{source}: no position could be read"
                             + (f" ({len(bad)} bad lines, the first {bad[0]})" if bad else ""))
        for item in bad:
            log(f"label: {item}; skipped")
        todo = [fen for fen in fens if position_key(fen) not in done]
        todo_count = len(todo)
        tasks = (todo[start:start + BATCH] for start in range(0, len(todo), BATCH))

    def until_done(tasks: Iterable[Task]) -> Iterator[Task]:
        for task in tasks:
            if deadline is not None and time.monotonic() >= deadline:
                return
            if playing and limit is not None and counts["labelled"] >= limit:
                return
            if playing and games is not None and counts["handed_out"] >= games:
                return
            counts["handed_out"] += 1
            yield task

    bar = ProgressBar(todo_count) if progress and todo_count else None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", newline="", encoding="utf-8") as handle:
        if handle.tell() == 0:
            handle.write(label_file.header())

        def on_results(results: list[Labelled]) -> None:
            rows = []
            for result in results:
                if result.row is None:
                    log(f"label: {result.fen}: {result.error}; skipped")
                    counts["failed"] += 1
                    continue
                key = position_key(result.fen)
                if key in done:  # played games pass through positions already written
                    counts["repeated"] += 1
                    continue
                done.add(key)
                rows.append(result.row)
            if limit is not None and playing:
                rows = rows[:max(0, limit - counts["labelled"])]
            if rows:
                handle.write(label_file.format(rows))
                handle.flush()
            counts["labelled"] += len(rows)
            counts["games"] += bool(playing)
            if bar is not None:
                bar.add(len(rows) if playing else len(results))

        try:
            if (playing and limit != 0) or todo_count:  # nothing left to label starts no engine (nor Ray)
                (runner or label_in_process)(until_done(tasks), labeller_spec, on_results)
        finally:
            if bar is not None:
                bar.close()
            handle.flush()
            os.fsync(handle.fileno())
    seconds = time.perf_counter() - started
    summary = {"out": str(out), "labelled": counts["labelled"], "failed": counts["failed"], "bad_lines": len(bad),
               "seconds": round(seconds, 2),
               "positions_per_s": round(counts["labelled"] / seconds, 2) if seconds > 0 else None}
    if playing:
        summary.update(games=counts["games"], repeated=counts["repeated"])
    else:
        summary.update(positions=len(fens), already_labelled=len(fens) - todo_count)
    return summary
