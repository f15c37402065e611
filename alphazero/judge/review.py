"""Game review: a UCI engine (Stockfish) scores every position of finished games, and each move is graded
the way Lichess grades a game's moves, so a player's losses can be read as "how many moves threw the game
away, and when" rather than only as a score.

What it owns: reading games (an arena or ladder ``--out`` file, or PGN), scoring their positions with an engine
(one process per worker thread), the per-move grades and the per-player summary, and a resumable review
file. It must not know how the games were played (any player, any engine, any source).

Perspective and scale, at every step:
- a position's score is centipawns for the side to move there, clamped to +-1000 (Lichess's ceiling); a
  mate either way counts as +-1000, a checkmated side to move -1000, a stalemate or dead position 0
  (terminal positions are not sent to the engine);
- a move's grade compares the mover's winning chances before it (the score of the position it was played
  in) and after it (minus the score of the position it leads to, which is the opponent's to move), with
  Lichess's fit wc(cp) = 2 / (1 + exp(-0.00368208 cp)) - 1 in [-1, 1]: a drop of 0.1 or more is an
  inaccuracy, 0.2 a mistake, 0.3 a blunder (lila's ``Advice`` thresholds, without its mate advice);
- centipawn loss is max(0, before - after) on the clamped scores (ACPL, the mean over a player's moves);
- a move's accuracy is Lichess's 103.1668 exp(-0.04354 (W_before - W_after)) - 3.1669, clipped to
  [0, 100], with W = 50 + 50 wc the win percentage; a player's accuracy here is the plain mean over moves
  (Lichess's game accuracy also weights by volatility).

Cost: one engine search per position from the first move after the opening to the last position, so a
game of P plies costs about P searches (the position after a move is the one before the reply). At depth
10 with one thread Stockfish 15.1 takes ~1.3 ms a middlegame position on these machines (100 games of ~80
plies in 11 s), more in long endgames.
With one engine thread, a fixed depth or node count and ``ucinewgame`` before each game, scores do not
depend on the order games are reviewed in or on the number of workers.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import shlex
import statistics
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import chess
import chess.engine
import chess.pgn

from alphazero.board.game import RESULT_VALUES
from alphazero.errors import InputError
from alphazero.fileio import append_jsonl, output_file, read_jsonl, read_text

REVIEW_FORMAT_VERSION = 1
CEILING_CP = 1000
"""Scores are clamped to +-CEILING_CP centipawns (a mate is the ceiling), as Lichess clamps them."""
WC_SLOPE = 0.00368208
"""Lichess's fit of winning chances to centipawns: wc = 2 / (1 + exp(-WC_SLOPE cp)) - 1."""
GRADES = (("blunder", 0.3), ("mistake", 0.2), ("inaccuracy", 0.1))
"""A move's grade by the drop in the mover's winning chances (the first threshold it reaches)."""


@dataclass(frozen=True)
class ReviewGame:
    """One finished game to review: its players, result, start position, moves (UCI) and the plies of its
    opening, which are not graded (book moves). ``source`` says where it came from (``file:line`` or
    ``file#game``); ``key`` identifies the game itself (start, moves, players) for a resumed review."""

    source: str
    white: str
    black: str
    result: str
    start_fen: str
    moves: tuple[str, ...]
    book_plies: int

    @property
    def key(self) -> str:
        text = "\n".join((self.white, self.black, self.start_fen, " ".join(self.moves)))
        return hashlib.sha1(text.encode("utf-8")).hexdigest()


def winning_chances(cp: float) -> float:
    """Lichess's winning chances in [-1, 1] of a score in centipawns (for the same side)."""
    return 2.0 / (1.0 + math.exp(-WC_SLOPE * cp)) - 1.0


def clamp(cp: float) -> int:
    return int(max(-CEILING_CP, min(CEILING_CP, round(cp))))


def grade_move(before: int, after: int) -> dict[str, Any]:
    """The grade of one move from the mover's clamped scores before and after it (centipawns, mover's view):
    the drop in winning chances, the centipawn loss, the move's accuracy and its label (or None)."""
    drop = winning_chances(before) - winning_chances(after)
    accuracy = 103.1668 * math.exp(-0.04354 * 50.0 * max(drop, 0.0)) - 3.1669
    label = next((name for name, threshold in GRADES if drop >= threshold - 1e-12), None)
    return {"drop": drop, "cp_loss": max(0, before - after), "accuracy": min(100.0, max(0.0, accuracy)), "label": label}


# --------------------------------------------------------------------------------------------
# Reading games


def _parsed(game: chess.pgn.Game | None, where: str) -> chess.pgn.Game:
    if game is None:
        raise InputError(f"{where}: no game in its PGN")
    if game.errors:
        raise InputError(f"{where}: its PGN does not parse: {game.errors[0]}")
    return game


def _from_pgn(game: chess.pgn.Game, source: str, book_plies: int | None) -> ReviewGame:
    moves = tuple(move.uci() for move in game.mainline_moves())
    if book_plies is None:  # this project's PGN names its book opening by its moves (UCI) in "Opening"
        opening = game.headers.get("Opening", "").split()
        book_plies = len(opening) if opening and tuple(opening) == moves[:len(opening)] else 0
    return ReviewGame(source, game.headers.get("White", "?"), game.headers.get("Black", "?"), game.headers.get("Result", "*"),
                      game.board().fen(), moves, min(book_plies, len(moves)))


def read_games(path: str | Path, skip_plies: int | None = None) -> list[ReviewGame]:
    """The games of ``path``: an arena or ladder games file (``--out``, JSON lines, each record's PGN; an arena
    record's book plies from its opening) or a PGN file (book plies from an ``Opening`` header that lists the first moves,
    as this project's PGN does, else none). ``skip_plies`` overrides the book plies of every game.
    A game that does not parse raises ``InputError`` naming it; a torn last JSON line is skipped."""
    path = Path(path)
    if skip_plies is not None and skip_plies < 0:
        raise InputError(f"--skip-plies must be >= 0, got {skip_plies}")
    if not path.is_file():
        raise InputError(f"{path}: no such games file")
    games: list[ReviewGame] = []
    if path.suffix == ".jsonl":
        for number, record in enumerate(read_jsonl(path, "arena or ladder games file (.jsonl)"), start=1):
            where = f"{path}:{number}"
            if not isinstance(record, dict) or not isinstance(record.get("pgn"), str):
                raise InputError(f"{where}: not an arena or ladder game record (no pgn)")
            game = _parsed(chess.pgn.read_game(io.StringIO(record["pgn"])), where)
            book = skip_plies
            opening = record.get("opening")
            if book is None and isinstance(opening, dict):  # an arena record; a ladder's names its moves in the PGN
                book = len(opening.get("moves", ()))
            games.append(_from_pgn(game, where, book))
        return games
    text = read_text(path, "PGN file")
    handle = io.StringIO(text)
    number = 0
    while (found := chess.pgn.read_game(handle)) is not None:
        number += 1
        games.append(_from_pgn(_parsed(found, f"{path}#{number}"), f"{path}#{number}", skip_plies))
    if not games:
        raise InputError(f"{path}: no games (expected PGN, or an arena or ladder --out file named .jsonl)")
    return games


# --------------------------------------------------------------------------------------------
# Scoring positions


@dataclass(frozen=True)
class EngineSettings:
    """The engine and the limit of each position's search. ``depth`` or ``nodes`` (one of them) keeps a
    review reproducible; the engine runs one thread."""

    command: str
    depth: int | None = 10
    nodes: int | None = None
    hash_mb: int = 16

    def limit(self) -> chess.engine.Limit:
        return chess.engine.Limit(depth=self.depth, nodes=self.nodes)

    def check(self) -> None:
        if (self.depth is None) == (self.nodes is None):
            raise InputError("give one of --depth and --nodes")
        for name, value in (("--depth", self.depth), ("--nodes", self.nodes), ("--hash", self.hash_mb)):
            if value is not None and value < 1:
                raise InputError(f"{name} must be positive, got {value}")


def open_engine(settings: EngineSettings) -> chess.engine.SimpleEngine:
    """Start the engine (one thread, ``hash_mb`` of hash); ``InputError`` when it cannot be started."""
    try:
        engine = chess.engine.SimpleEngine.popen_uci(shlex.split(settings.command))
    except (OSError, chess.engine.EngineError, TimeoutError, ValueError) as error:
        raise InputError(f"--engine {settings.command!r} could not be started as a UCI engine: {error}") from None
    options = {name.lower(): name for name in engine.options}
    wanted = {"threads": 1, "hash": settings.hash_mb}
    with contextlib.suppress(chess.engine.EngineError):
        engine.configure({options[key]: value for key, value in wanted.items() if key in options})
    return engine


def position_score(engine: chess.engine.SimpleEngine, board: chess.Board, limit: chess.engine.Limit,
                   game_key: str) -> tuple[int, str | None]:
    """The clamped score (centipawns, side to move) of ``board`` and the engine's best move (UCI; None at a
    terminal position, which is scored by the rules without the engine)."""
    if board.is_checkmate():
        return -CEILING_CP, None
    if board.is_stalemate() or board.is_insufficient_material():
        return 0, None
    info = engine.analyse(board, limit, game=game_key)
    score = info.get("score")
    if score is None:
        raise RuntimeError(f"the engine gave no score for {board.fen()}")
    pv = info.get("pv") or []
    return clamp(score.relative.score(mate_score=100 * CEILING_CP)), (pv[0].uci() if pv else None)


def review_game(engine: chess.engine.SimpleEngine, game: ReviewGame, settings: EngineSettings,
                stop: threading.Event | None = None) -> dict[str, Any]:
    """The review record of one game: every position's score from the first graded move's position to the
    last, and the engine's best move in each. Raises ``InterruptedError`` when ``stop`` is set."""
    try:
        board = chess.Board(game.start_fen)
        for move in game.moves[:game.book_plies]:
            board.push_uci(move)
    except ValueError as error:
        raise InputError(f"{game.source}: {error}") from None
    limit, key = settings.limit(), game.key
    scores: list[int] = []
    best: list[str | None] = []
    for ply in range(game.book_plies, len(game.moves) + 1):
        if stop is not None and stop.is_set():
            raise InterruptedError
        score, best_move = position_score(engine, board, limit, key)
        scores.append(score)
        best.append(best_move)
        if ply < len(game.moves):
            try:
                board.push_uci(game.moves[ply])
            except ValueError as error:
                raise InputError(f"{game.source}: ply {ply + 1}: {error}") from None
    return {"format_version": REVIEW_FORMAT_VERSION, "key": key, "source": game.source, "white": game.white,
            "black": game.black, "result": game.result, "start_fen": game.start_fen, "moves": list(game.moves),
            "book_plies": game.book_plies, "scores": scores, "best": best}


# --------------------------------------------------------------------------------------------
# Grades and the summary


def graded_moves(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every graded move of a review record: ply (0-based from the start position), side ("white" or
    "black"), the move (UCI), the engine's best move there, the mover's scores before and after, and
    ``grade_move``'s fields."""
    start = chess.Board(record["start_fen"])
    white_first = start.turn == chess.WHITE
    scores, best, moves, book = record["scores"], record["best"], record["moves"], record["book_plies"]
    out = []
    for index in range(len(scores) - 1):
        ply = book + index
        white = (ply % 2 == 0) == white_first
        before, after = scores[index], -scores[index + 1]
        out.append({"ply": ply, "side": "white" if white else "black", "move": moves[ply], "best": best[index],
                    "before": before, "after": after, **grade_move(before, after)})
    return out


def summarise(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per player name (both colours together), in order of first appearance: games, graded moves,
    ACPL, mean accuracy, inaccuracies, mistakes, blunders (and per game), games lost and those of them that
    hold a blunder of this player, and the median full-move number of a game's first blunder."""
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        moves = graded_moves(record)
        for side, name in (("white", record["white"]), ("black", record["black"])):
            row = rows.setdefault(name, {"player": name, "games": 0, "moves": 0, "cp_loss": 0, "accuracy_sum": 0.0,
                                         "inaccuracies": 0, "mistakes": 0, "blunders": 0, "lost": 0,
                                         "lost_with_blunder": 0, "first_blunders": []})
            mine = [move for move in moves if move["side"] == side]
            row["games"] += 1
            row["moves"] += len(mine)
            row["cp_loss"] += sum(move["cp_loss"] for move in mine)
            row["accuracy_sum"] += sum(move["accuracy"] for move in mine)
            counts = {name: sum(move["label"] == name for move in mine) for name, _ in GRADES}
            row["inaccuracies"] += counts["inaccuracy"]
            row["mistakes"] += counts["mistake"]
            row["blunders"] += counts["blunder"]
            blunders = [move for move in mine if move["label"] == "blunder"]
            if blunders:
                row["first_blunders"].append(blunders[0]["ply"] // 2 + 1)
            if RESULT_VALUES.get(record["result"]) == (-1.0 if side == "white" else 1.0):  # this side lost
                row["lost"] += 1
                row["lost_with_blunder"] += bool(blunders)
    summary = []
    for row in rows.values():
        moves = row["moves"]
        summary.append({
            "player": row["player"], "games": row["games"], "moves": moves,
            "acpl": row["cp_loss"] / moves if moves else None,
            "accuracy": row["accuracy_sum"] / moves if moves else None,
            "inaccuracies": row["inaccuracies"], "mistakes": row["mistakes"], "blunders": row["blunders"],
            "blunders_per_game": row["blunders"] / row["games"], "lost": row["lost"],
            "lost_with_blunder": row["lost_with_blunder"],
            "first_blunder_move_median": statistics.median(row["first_blunders"]) if row["first_blunders"] else None,
        })
    return summary


# --------------------------------------------------------------------------------------------
# The review: resumable, one engine per worker


def _settings_record(settings: EngineSettings, engine_name: str) -> dict[str, Any]:
    return {"engine": engine_name, "depth": settings.depth, "nodes": settings.nodes}


def stored_reviews(path: str | Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The reviews already in ``path`` by game key; ``InputError`` when the file holds another engine's or
    another limit's reviews (scores at different settings do not mix) or is not a review file."""
    stored: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(read_jsonl(path, "review file (--out)"), start=1):
        version = record.get("format_version") if isinstance(record, dict) else None
        if isinstance(version, int) and version > REVIEW_FORMAT_VERSION:
            raise InputError(f"{path}: line {number} was written by a newer version (format_version {version})")
        if version != REVIEW_FORMAT_VERSION or not isinstance(record.get("scores"), list) or "key" not in record:
            raise InputError(f"{path}: line {number} is not a review record; give another --out")
        if record.get("settings") != settings:
            raise InputError(f"{path}: holds reviews made with {record.get('settings')}, not {settings}; give another --out")
        stored.setdefault(record["key"], record)
    return stored


def run_review(games: Sequence[ReviewGame], settings: EngineSettings, workers: int = 1, out: str | Path | None = None,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Review ``games`` with ``workers`` engine processes (threads here; the engines do the work) and return
    ``{"engine", "settings", "games", "new_games", "positions", "players": summarise(...), "records": [...]}``,
    a record per game given (games identical move for move are searched once and counted each time).
    With ``out`` each finished game is appended at once, and games already there (same engine, same limit)
    are not searched again; a Ctrl-C stops the workers between positions and keeps what was written."""
    settings.check()
    if workers < 1:
        raise InputError(f"--workers must be positive, got {workers}")
    if out is not None:
        out = output_file(out, "review file (--out)")
    probe = open_engine(settings)
    engine_name = str(probe.id.get("name", settings.command))
    probe.quit()
    stamp = _settings_record(settings, engine_name)
    stored = stored_reviews(out, stamp) if out is not None else {}
    keys = list(dict.fromkeys(game.key for game in games))
    records = {key: stored[key] for key in keys if key in stored}
    pending = [game for game in {game.key: game for game in games}.values() if game.key not in records]
    stop = threading.Event()
    lock = threading.Lock()
    local = threading.local()
    started: list[chess.engine.SimpleEngine] = []

    def work(game: ReviewGame) -> dict[str, Any]:
        engine = getattr(local, "engine", None)
        if engine is None:
            engine = local.engine = open_engine(settings)
            with lock:
                started.append(engine)
        record = {**review_game(engine, game, settings, stop), "settings": stamp}
        if out is not None:
            with lock:
                append_jsonl(out, record)
        return record

    try:
        with ThreadPoolExecutor(max_workers=min(workers, max(1, len(pending)))) as pool:
            futures: set[Future] = {pool.submit(work, game) for game in pending}
            try:
                while futures:
                    finished, futures = wait(futures, timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in finished:
                        record = future.result()
                        records[record["key"]] = record
                        if progress is not None:
                            progress(len(records) - (len(keys) - len(pending)), len(pending))
            except BaseException:
                stop.set()  # the workers stop between positions; games not begun are not begun
                for future in futures:
                    future.cancel()
                raise
    finally:
        for engine in started:
            with contextlib.suppress(chess.engine.EngineError, chess.engine.EngineTerminatedError):
                engine.quit()
    # A game played twice move for move (deterministic players) is searched once and counted twice.
    ordered = [{**records[game.key], "source": game.source} for game in games if game.key in records]
    return {"engine": engine_name, "settings": stamp, "games": len(ordered), "new_games": len(pending),
            "positions": sum(len(record["scores"]) for record in ordered), "players": summarise(ordered),
            "records": ordered}


def blunder_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every blunder as a row: the position's FEN, the move played and the engine's best, the mover's scores
    before and after, the player and where the game came from."""
    rows = []
    for record in records:
        board = chess.Board(record["start_fen"])
        moves = record["moves"]
        graded = {move["ply"]: move for move in graded_moves(record)}
        for ply, move in enumerate(moves):
            mark = graded.get(ply)
            if mark is not None and mark["label"] == "blunder":
                rows.append({"fen": board.fen(), "played": move, "best": mark["best"], "before": mark["before"],
                             "after": mark["after"], "player": record[mark["side"]], "source": record["source"],
                             "move_number": ply // 2 + 1})
            board.push_uci(move)
    return rows


def format_review(report: dict[str, Any]) -> str:
    """The report as a table: one row per player."""
    limit = f"depth {report['settings']['depth']}" if report["settings"]["depth"] else f"{report['settings']['nodes']} nodes"
    lines = [f"{report['games']} games ({report['new_games']} reviewed now), {report['positions']} positions, "
             f"{report['engine']} at {limit} a position",
             f"{'player':<48} {'games':>5} {'moves':>6} {'ACPL':>6} {'accuracy':>8} {'inacc.':>6} {'mistakes':>8} "
             f"{'blunders':>8} {'/game':>6} {'lost':>5} {'lost w/ blunder':>15} {'1st blunder (move)':>18}"]
    for row in report["players"]:
        name = row["player"] if len(row["player"]) <= 48 else row["player"][:16] + "..." + row["player"][-29:]
        acpl = f"{row['acpl']:.0f}" if row["acpl"] is not None else "-"
        accuracy = f"{row['accuracy']:.1f}%" if row["accuracy"] is not None else "-"
        first = f"{row['first_blunder_move_median']:g}" if row["first_blunder_move_median"] is not None else "-"
        lines.append(f"{name:<48} {row['games']:>5} {row['moves']:>6} {acpl:>6} {accuracy:>8} {row['inaccuracies']:>6} "
                     f"{row['mistakes']:>8} {row['blunders']:>8} {row['blunders_per_game']:>6.2f} {row['lost']:>5} "
                     f"{row['lost_with_blunder']:>15} {first:>18}")
    return "\n".join(lines)
