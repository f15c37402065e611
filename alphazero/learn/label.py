"""Labelling positions with a UCI engine, and the resumable CSV the labels go to.

Owns the label file (columns ``COLUMNS``, one row a position, appended) and the ``Labeller``: one
engine process (``--labeller uci:COMMAND?Option=value&depth=D&nodes=N&movetime=MS``, the player spec
grammar of ``alphazero.judge.players``) analysing one position at a time. Knows nothing of Ray: ``run_label``
labels in this process, or hands the positions to a ``runner`` (``workers.label``) that fans them out.

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
========== ===============================================================================

Positions come from a file (``alphazero.learn.positions``: a run's replay, a PGN, EPD/FEN lines, a CSV)
or are **played** (a polyglot book, ``.bin``): the engine plays itself from the book's openings, as
Stockfish's ``gensfen`` and bullet's data generators make NNUE data, and every position it searches
is a row, labelled by the very search that chose its move (``GameTask``, ``Labeller.play``). A few
uniformly random moves early in each game (``random_moves`` of the first ``RANDOM_PLIES`` plies after
the book; gensfen's default is 5 in 24) spread the games over positions no engine would reach, where
one side has blundered: the positions a weak player must learn to punish. A game ends when it is over
by the rules, at ``max_plies``, or when the engine has seen a score beyond ``ADJUDICATE_CP`` for
``ADJUDICATE_PLIES`` plies in a row (won; mates found are played out).

Resuming: the file is appended to, and a run skips every position whose ``position_key`` is already
in it (played games: a position already written is not written again). A run killed mid-write
leaves at most one unterminated last line; ``existing_labels`` cuts it off (the position is labelled
again). Rows are written whole, one ``write`` each, flushed per batch.

Labelling is slow: each position costs one engine search (Stockfish 15.1 at depth 12 on one core,
measured in docs/RESULTS.md).
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
from alphazero.learn.positions import BadInput, position_key, read_fens, source_kind, unique_fens

COLUMNS = ("fen", "score_cp", "mate", "best_uci", "wdl_win", "wdl_draw", "wdl_loss")
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
    engine's best move and score."""

    opening: Opening
    seed: int
    random_moves: int = 5
    max_plies: int = 400


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


class Labeller:
    """One UCI engine process; ``label(fens)`` analyses each position to the spec's limit (slow).

    python-chess starts the engine once to check the spec's options (a bad name or value is an
    ``InputError``) and to learn the engine's option names; the positions then go over the pipes
    (``_PipeEngine``)."""

    def __init__(self, labeller_spec: str) -> None:
        try:
            self.command, self.options, self.limit = parse_uci_spec(labeller_spec)
        except ValueError as error:
            raise InputError(f"--labeller: {error}") from None
        self.spec = labeller_spec
        self.go = go_command(self.limit)
        try:
            checker = UCIPlayer(self.command, self.options, self.limit, name=self.spec)
        except ValueError as error:
            raise InputError(f"--labeller: {error}") from None
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
            raise InputError(f"--labeller: {self.command!r} could not be started: {error}") from None

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
        return Labelled(fen, (fen, cp, mate, best.uci(), win, draw, loss))

    def label(self, fens: Sequence[str]) -> list[Labelled]:
        return [self.label_one(fen) for fen in fens]

    def play(self, task: GameTask) -> list[Labelled]:
        """The rows of one game the engine plays against itself (``GameTask``); an engine failure ends
        the game there (the failure is the last item)."""
        board = chess.Board(task.opening.fen)
        for text in task.opening.moves:
            board.push_uci(text)
        rng = np.random.default_rng(task.seed)
        count = min(task.random_moves, RANDOM_PLIES)
        random_plies = set(rng.choice(RANDOM_PLIES, size=count, replace=False).tolist()) if count > 0 else set()
        results: list[Labelled] = []
        decided = 0
        for ply in range(task.max_plies):
            if terminal_status(board) is not None:
                break
            result = self.label_one(board.fen())
            results.append(result)
            if result.row is None:
                break
            _, cp, mate, best, *_ = result.row
            decided = decided + 1 if (not mate and abs(int(cp)) > ADJUDICATE_CP) else 0
            if decided >= ADJUDICATE_PLIES:
                break
            if ply in random_plies:
                legal = list(board.legal_moves)
                board.push(legal[int(rng.integers(len(legal)))])
            else:
                board.push_uci(best)
        return results

    def run(self, task: Task) -> list[Labelled]:
        """A task's rows: ``play`` for a game, ``label`` for a batch of positions."""
        return self.play(task) if isinstance(task, GameTask) else self.label(task)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


# ---- the label file ---------------------------------------------------------------------------


def existing_labels(path: str | os.PathLike) -> set[str]:
    """The ``position_key`` of every row already in the label file ``path`` (none when it is missing or
    empty); writes nothing but a repair: an unterminated last line (a kill mid-write) is cut off.

    A file with another header, or a row of the wrong width, raises ``InputError`` naming the line:
    it is not a label file and is left as it is (checked before anything is cut). The header is
    written with the first rows (``run_label``)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return set()
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1  # 0: even the header was torn
    header = ",".join(COLUMNS)
    done: set[str] = set()
    if keep == 0:
        if not header.startswith(data.decode("utf-8", errors="replace")):
            raise InputError(f"{path}:1: not a label file (expected the header {header}); choose another --out")
    else:
        reader = csv.reader(io.StringIO(data[:keep].decode("utf-8", errors="replace")))
        first = next(reader, None)
        if first != list(COLUMNS):
            raise InputError(f"{path}:1: not a label file (header {first!r}, expected {header}); "
                             "choose another --out")
        for row in reader:
            if len(row) != len(COLUMNS):
                raise InputError(f"{path}:{reader.line_num}: {len(row)} fields, expected {len(COLUMNS)} ({header})")
            done.add(position_key(row[0]))
    if keep < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(keep)
    return done


def format_rows(rows: Sequence[tuple[str, ...]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


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
    labeller = Labeller(labeller_spec)
    try:
        for task in tasks:
            on_results(labeller.run(task))
    finally:
        labeller.close()


def game_tasks(book: str | os.PathLike, seed: int, random_moves: int, max_plies: int = 400) -> Iterator[GameTask]:
    """Endless games, each from its own weighted random 8-ply walk of the polyglot ``book`` and with
    its own seed for the random moves, both derived from ``seed``."""
    if random_moves < 0 or random_moves > RANDOM_PLIES:
        raise InputError(f"--random-moves must be in [0, {RANDOM_PLIES}], got {random_moves}")
    number = 0
    while True:
        game_seed = seed * 1_000_003 + number
        (opening,) = book_openings(Path(book), 1, plies=8, seed=game_seed)
        yield GameTask(opening, seed=game_seed, random_moves=random_moves, max_plies=max_plies)
        number += 1


def run_label(source: str | os.PathLike, labeller_spec: str, out: str | os.PathLike, limit: int | None = None,
              runner: Runner | None = None, log: Callable[[str], None] | None = None,
              progress: bool = False, minutes: float | None = None, random_moves: int = 5,
              seed: int | None = None) -> dict:
    """``alphazero label``: label the distinct positions of ``source`` not yet in ``out``; returns a summary.

    A file source: ``limit`` keeps its first ``limit`` distinct positions (so a rerun with the same
    limit finishes the same set). A book (``.bin``) source: games are played (module docstring) until
    ``limit`` new positions are written or ``minutes`` are up; one of the two is required; ``seed``
    (default: the number of rows already in ``out``, so a resumed run plays new games) picks openings
    and random moves. ``minutes`` stops handing out work after that time, for either source; the
    work under way is finished and written. Bad input lines and engine failures go to ``log``
    (default stderr) and are skipped; failed positions are not written, so a rerun tries them again.
    """
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if minutes is not None and minutes <= 0:
        raise InputError(f"--minutes must be positive, got {minutes}")
    output_file(out, "--out")
    playing = source_kind(source) == "book"
    if playing and limit is None and minutes is None:
        raise InputError(f"{source}: a book is played until --limit positions or --minutes; give one")
    bad: list[BadInput] = []  # logged once the input is read: an input with no position at all is one error
    Labeller(labeller_spec).close()  # a bad spec or engine fails now, before the input is read
    done = existing_labels(out)
    started = time.perf_counter()
    deadline = None if minutes is None else time.monotonic() + 60.0 * minutes
    counts = {"labelled": 0, "failed": 0, "repeated": 0, "games": 0}

    if playing:
        fens: list[str] = []
        todo_count = limit or 0
        tasks: Iterable[Task] = game_tasks(source, len(done) if seed is None else seed, random_moves)
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
            yield task

    bar = ProgressBar(todo_count) if progress and todo_count else None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", newline="", encoding="utf-8") as handle:
        if handle.tell() == 0:
            handle.write(",".join(COLUMNS) + "\n")

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
                handle.write(format_rows(rows))
                handle.flush()
            counts["labelled"] += len(rows)
            counts["games"] += bool(playing)
            if bar is not None:
                bar.add(len(rows) if playing else len(results))

        try:
            if playing or todo_count:  # nothing left to label starts no engine (nor Ray)
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
