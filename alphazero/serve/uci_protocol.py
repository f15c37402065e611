"""UCI protocol: input lines -> typed commands, options as a table of data, replies as text.

Owns the grammar of the Universal Chess Interface as an engine hears and speaks it: ``parse_line``
turns one line into a command value (``Go``, ``Position``, ``SetOption``, ...) or says what is wrong
with it; ``Option`` / ``OptionTable`` declare an engine's options once each (name, type, default,
range, the setting it sets) and both print their ``option`` lines and check ``setoption`` values;
``format_info`` / ``format_bestmove`` write replies. Knows nothing of threads, searches or networks:
the engine (``alphazero.serve.uci``) reads commands, keeps the state and decides what they mean.

Grammar
=======

``uci``, ``debug on|off``, ``isready``, ``setoption name <id> [value <x>]``, ``register`` (ignored),
``ucinewgame``, ``position startpos|fen FEN [moves ...]``, ``go [limits]`` (``alphazero.serve.uci_limits``),
``stop``, ``ponderhit``, ``quit``. A line whose first token is unknown is searched for a known
command further on, as the UCI spec asks ("joho debug on" is ``debug on``; ``ParsedLine.skipped``
holds "joho"). A line with no known command, or a command with bad arguments, parses to no command
and an ``error`` (the engine answers it with ``info string``): a bad ``position`` (no
``startpos``/``fen``, a bad FEN) leaves the previous position. Two commands are kept however bad
their arguments, as Stockfish 15.1 keeps them: ``go`` (``parse_go`` skips what it cannot read and
notes it, so every ``go`` ends in a ``bestmove``) and the move list of ``position``, which ends at
its first illegal or unreadable move: the position reached before it stands, and
``Position.note`` says which move was dropped. Blank lines are nothing at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import chess

from alphazero.board.encoding import board_from_fen
from alphazero.serve.uci_limits import GoParams, parse_go

# --------------------------------------------------------------------------------------------------
# Commands


@dataclass(frozen=True)
class Uci:
    pass


@dataclass(frozen=True)
class Debug:
    on: bool


@dataclass(frozen=True)
class IsReady:
    pass


@dataclass(frozen=True)
class SetOption:
    name: str  # as sent, spaces kept ("Move Overhead")
    value: str  # "" when the command has no value (a button)


@dataclass(frozen=True)
class Register:
    pass


@dataclass(frozen=True)
class UciNewGame:
    pass


@dataclass(frozen=True)
class Position:
    board: chess.Board  # with the moves on its stack
    note: str | None = None  # why the move list was cut short, if it was
    tokens: tuple[str, ...] = ()  # the arguments as sent, for the next command to extend (``parse_line``'s ``known``)


@dataclass(frozen=True)
class Go:
    params: GoParams


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class PonderHit:
    pass


@dataclass(frozen=True)
class Quit:
    pass


Command = Uci | Debug | IsReady | SetOption | Register | UciNewGame | Position | Go | Stop | PonderHit | Quit


@dataclass(frozen=True)
class ParsedLine:
    """One input line: the command (``None`` if there is none to obey), the unknown tokens skipped
    before it, and what was wrong when the line has a command word with bad arguments, or none."""

    command: Command | None
    skipped: tuple[str, ...] = ()
    error: str | None = None


def parse_position(args: Sequence[str], notes: list[str] | None = None, known: Position | None = None) -> chess.Board:
    """The tokens after ``position`` -> the board (with its moves on the stack); ``ValueError`` if
    the start (``startpos``, ``fen FEN``, the word ``moves``) is bad. The move list ends at its first
    illegal move (Stockfish's rule), which ``notes`` (when given) gets a sentence about.

    ``known``: the last position parsed. When ``args`` repeat its tokens, move list included, and add
    moves (a GUI sends the whole game before every move), only the new moves are checked and played
    on a copy of its board: checking each move of a long game costs milliseconds a move, on the clock."""
    if (known is not None and known.note is None and "moves" in known.tokens
            and len(args) > len(known.tokens) and tuple(args[:len(known.tokens)]) == known.tokens):
        return _play_moves(known.board.copy(), args[len(known.tokens):], len(known.board.move_stack) + 1, notes)
    if not args:
        raise ValueError("position: expected 'startpos' or 'fen <FEN>'")
    kind = args[0].lower()
    if kind == "startpos":
        board = chess.Board()
        rest = list(args[1:])
    elif kind == "fen":
        fields: list[str] = []
        i = 1
        while i < len(args) and args[i].lower() != "moves":
            fields.append(args[i])
            i += 1
        if not fields:
            raise ValueError("position fen: missing FEN")
        if len(fields) > 6:
            raise ValueError(f"position fen: too many FEN fields in {' '.join(fields)!r}")
        board = board_from_fen(" ".join(fields))
        rest = list(args[i:])
    else:
        raise ValueError(f"position: expected 'startpos' or 'fen', got {args[0]!r}")
    if not rest:
        return board
    if rest[0].lower() != "moves":
        raise ValueError(f"position: expected 'moves', got {rest[0]!r}")
    return _play_moves(board, rest[1:], 1, notes)


def _play_moves(board: chess.Board, tokens: Sequence[str], first: int, notes: list[str] | None) -> chess.Board:
    """Play the UCI ``tokens`` on ``board`` up to the first one not legal (``first``: the number of
    the first token in the command's move list)."""
    for ply, token in enumerate(tokens, start=first):
        try:
            move = board.parse_uci(token)
        except ValueError:
            move = None
        if not move:  # illegal, unreadable or the null move 0000
            if notes is not None:
                notes.append(f"position: move {ply} {token!r} is not legal in {board.fen()}; it and the moves "
                             f"after it are dropped: the position after the first {ply - 1} stands")
            break
        board.push(move)
    return board


def _parse_debug(args: list[str]) -> Debug:
    if len(args) != 1 or args[0].lower() not in ("on", "off"):
        raise ValueError("debug: expected 'debug on' or 'debug off'")
    return Debug(args[0].lower() == "on")


def _parse_setoption(args: list[str]) -> SetOption:
    lowered = [a.lower() for a in args]
    if not args or lowered[0] != "name" or len(args) < 2 or lowered[1] == "value":
        raise ValueError("setoption: expected 'setoption name <id> [value <x>]'")
    if "value" in lowered:
        at = lowered.index("value")
        return SetOption(" ".join(args[1:at]), " ".join(args[at + 1 :]))
    return SetOption(" ".join(args[1:]), "")


def _parse_position_command(args: list[str], known: Position | None = None) -> Position:
    notes: list[str] = []
    try:
        board = parse_position(args, notes, known)
    except ValueError as error:
        raise ValueError(f"{error}; position unchanged") from None
    return Position(board, notes[0] if notes else None, tuple(args))


def _parse_go_command(args: list[str]) -> Go:
    return Go(parse_go(args))


def _no_args(command: Command):
    return lambda args: command  # extra tokens after an argument-less command are ignored, as before


_PARSERS = {
    "uci": _no_args(Uci()),
    "debug": _parse_debug,
    "isready": _no_args(IsReady()),
    "setoption": _parse_setoption,
    "register": _no_args(Register()),
    "ucinewgame": _no_args(UciNewGame()),
    "position": _parse_position_command,
    "go": _parse_go_command,
    "stop": _no_args(Stop()),
    "ponderhit": _no_args(PonderHit()),
    "quit": _no_args(Quit()),
}
COMMAND_WORDS = tuple(_PARSERS)


def parse_line(line: str, known: Position | None = None) -> ParsedLine | None:
    """One input line -> ``ParsedLine``; ``None`` for a blank line. Never raises. ``known``: the last
    ``Position`` parsed, which a ``position`` command that extends it continues (``parse_position``)."""
    tokens = line.split()
    if not tokens:
        return None
    for index, token in enumerate(tokens):
        parser = _PARSERS.get(token.lower())
        if parser is None:
            continue
        skipped = tuple(tokens[:index])
        try:
            if parser is _parse_position_command:
                return ParsedLine(_parse_position_command(tokens[index + 1 :], known), skipped)
            return ParsedLine(parser(tokens[index + 1 :]), skipped)
        except ValueError as error:
            return ParsedLine(None, skipped, str(error))
    return ParsedLine(None, error=f"unknown command {line.strip()!r}")


# --------------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Option:
    """One engine option. ``kind``: ``spin`` (int in [low, high]), ``check`` (bool), ``float`` (a float
    in (low, high), announced as UCI type ``string`` since UCI has no float type) or ``string``.
    ``sets`` names the engine setting it changes."""

    name: str
    kind: str
    default: Any
    sets: str
    low: float | None = None
    high: float | None = None
    help: str = ""

    @property
    def key(self) -> str:
        """How ``setoption`` names are matched: without spaces, case-insensitive ("Move Overhead")."""
        return option_key(self.name)

    def declaration(self) -> str:
        """The ``option`` line of the ``uci`` reply."""
        if self.kind == "spin":
            return f"option name {self.name} type spin default {self.default} min {self.low} max {self.high}"
        if self.kind == "check":
            return f"option name {self.name} type check default {'true' if self.default else 'false'}"
        return f"option name {self.name} type string default {self.default}"

    def parse(self, value: str, name: str | None = None) -> Any:
        """The setting for ``setoption ... value <value>``; ``ValueError`` naming the option and the rule."""
        name = name or self.name
        if self.kind == "spin":
            assert self.low is not None and self.high is not None  # a spin option has both bounds
            try:
                number = int(value)
            except ValueError:
                raise ValueError(f"{name} value {value!r} is not an integer") from None
            if not self.low <= number <= self.high:
                raise ValueError(f"{name} must be in [{self.low}, {self.high}], got {number}")
            return number
        if self.kind == "check":
            if value.lower() not in ("true", "false"):
                raise ValueError(f"{name} value must be true or false, got {value!r}")
            return value.lower() == "true"
        if self.kind == "float":
            assert self.low is not None and self.high is not None  # a float option has both bounds
            try:
                real = float(value)
            except ValueError:
                raise ValueError(f"{name} value {value!r} is not a number") from None
            if not self.low < real < self.high:
                raise ValueError(f"{name} must be in ({self.low}, {self.high}), got {value!r}")
            return real
        return value


def option_key(name: str) -> str:
    return name.replace(" ", "").lower()


class OptionTable:
    """An engine's options in the order it announces them, plus names it accepts and ignores
    (what GUIs send unasked, such as ``Hash`` to an engine without one)."""

    def __init__(self, options: Iterable[Option], ignored: Iterable[str] = ()) -> None:
        self.options = tuple(options)
        self._by_key = {option.key: option for option in self.options}
        self.ignored = frozenset(option_key(name) for name in ignored)

    def declarations(self) -> list[str]:
        return [option.declaration() for option in self.options]

    def defaults(self) -> dict[str, Any]:
        """The settings before any ``setoption``: ``{option.sets: option.default}``."""
        return {option.sets: option.default for option in self.options}

    def parse(self, command: SetOption) -> tuple[str, Any] | None:
        """``(setting, value)`` for a ``setoption``, ``None`` for an accepted-and-ignored name;
        ``ValueError`` for an unknown name or a bad value."""
        key = option_key(command.name)
        option = self._by_key.get(key)
        if option is None:
            if key in self.ignored:
                return None
            known = ", ".join(option.name for option in self.options)
            raise ValueError(f"unknown option {command.name!r} (known: {known})")
        return option.sets, option.parse(command.value, command.name)


# --------------------------------------------------------------------------------------------------
# Replies


def format_score(cp: int | None, mate: int | None) -> str:
    """``mate M`` (moves, negative when the side to move is mated) if ``mate`` is set, else ``cp X``."""
    return f"mate {mate}" if mate is not None else f"cp {cp}"


def format_info(**fields: Any) -> str:
    """``info`` and the fields in the order given; ``None`` values are left out, ``pv`` is a list
    of moves (``chess.Move`` or UCI strings) and left out when empty, ``score`` is preformatted
    (``format_score``). ``format_info(depth=3, score="cp 20", pv=["e2e4"])`` ->
    ``info depth 3 score cp 20 pv e2e4``."""
    parts = ["info"]
    for name, value in fields.items():
        if value is None:
            continue
        if name == "pv":
            if not value:
                continue
            value = " ".join(move.uci() if isinstance(move, chess.Move) else str(move) for move in value)
        parts.append(f"{name} {value}")
    return " ".join(parts)


def format_info_string(text: str) -> str:
    """``info string`` with ``text`` on one line."""
    return "info string " + " ".join(text.split())


def format_bestmove(move: chess.Move | None, ponder: chess.Move | None = None) -> str:
    """``bestmove m [ponder p]``; no move (no legal move) is ``0000``."""
    text = f"bestmove {'0000' if move is None else move.uci()}"
    return text + (f" ponder {ponder.uci()}" if ponder is not None and move is not None else "")
