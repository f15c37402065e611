"""``alphazero nnue loop``: the bootstrapping loop of NNUE generations, unattended and resumable.

A turn is what docs/RESULTS.md ("NNUE from our own games") did by hand for generations 3 and 4:

1. **games**: the current net plays itself (``ab:NET?nodes=N``, book openings plus a few random moves,
   ``run_label``'s played games) until the turn's file holds ``positions`` positions; with ``opponent_lag`` K it
   plays the net of the turn K before its own instead (``datagen --opponent``: White and Black in turn, only the
   player's positions written), the nets before turn 0 being ``ancestors`` (the start net's forebears, newest
   first; where they run out, the oldest one known; where none is older than the player, it plays itself);
   with ``self_positions`` N the player then also plays itself for N positions (``turn-k-self.csv``), so the
   turn holds both kinds of games: the recipe of generations 6 and 8 in docs/RESULTS.md, where the games
   against the older net alone and the player's own games alone were each level and the two together
   separated;
2. **training**: the current net is fine-tuned (``train_nnue`` with ``init``, a small learning rate: the rate
   that kept generation 2 and mended it, where the from-scratch rate forgot it) on the games of the last
   ``window`` turns (each turn's files), this turn's among them: AlphaZero's and lc0's window of recent games. Turn 0's games are
   ``start_data``, the files the start net learned from, so the first turns also see them. The default window
   of 1 is this turn's games alone;
3. **gauntlet**: the new net plays fixed players outside the loop (``ab:material`` by default) at a fixed
   time a move, book openings, both colours, fishtest's adjudication; its Elo with a 95% interval.

The new net then plays the next turn's games (with ``gate``, the best net so far by its gauntlet does: a turn
that falls plays no games and is fine-tuned from no further). Turn 0 is the starting net's gauntlet alone, so every
turn's figure has the same baseline beside it. A turn's step against an outside player (+20 to +40 in
the turns measured by hand) is smaller than one match resolves, so the loop's measure is the trend of
the gauntlet over turns, not one turn's figure; head to head against its parent a turn looks far
stronger than it is (+151 head to head, +40 against PeSTO, for generation 3).

Everything lives in one directory: ``loop.json`` (the settings and each turn's finished steps, written
atomically after every step), ``turn-000.npz`` (a copy of the starting net), and for turn k
``turn-k.csv`` (its games; ``turn-k-self.csv`` its player's own games), ``turn-k.npz`` (its net; ``turn-k.train/`` the trainer's state and curves),
``turn-k-vs-j.jsonl`` (its gauntlet games against the j-th player). Each step resumes as its own command
does (datagen appends to its file up to the target, the trainer continues from its state, the arena plays
the game pairs not yet in its file), so the same command continues a loop stopped at any moment; a larger
``turns`` extends a finished one. The directory has one writer at a time (``DirectoryLock``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from alphazero.errors import InputError
from alphazero.fileio import DirectoryLock, atomic_write, atomic_write_text

STATE = "loop.json"
VERSION = 1
SEED_STRIDE = 10_000_000  # turn k's games are seeded from k * SEED_STRIDE + the positions already in its file
SELF_SEEDS = SEED_STRIDE // 2  # and its player's own games (self_positions) from k * SEED_STRIDE + SELF_SEEDS + those

Log = Callable[[str], None]
LabelRunner = Callable[..., dict]
ArenaRunner = Callable[..., dict]
TrainRunner = Callable[..., dict]


@dataclass(frozen=True)
class LoopSettings:
    """What decides a loop's results; a resumed loop must be asked the same (``turns`` and the number
    of workers may change)."""

    start: str
    positions: int = 1_000_000
    nodes: int = 5000
    random_moves: int = 2
    book: str = "/usr/share/games/gnuchess/book.bin"
    lr: float = 2e-4
    lr_decay: float = 0.9
    epochs: int = 10
    batch_size: int = 1024
    mirror: bool = True
    gauntlet: tuple[str, ...] = ()  # default: ab:material at movetime
    gauntlet_games: int = 400
    movetime: int = 20
    gate: bool = False  # True: the best net so far by its gauntlet plays each turn's games, not the newest
    window: int = 1  # a turn fine-tunes on the games of the last `window` turns (1: its own alone)
    start_data: tuple[str, ...] = ()  # turn 0's games: files of positions the start net learned from
    opponent_lag: int = 0  # 0: the player plays itself; K: it plays the net of the turn K before its own
    ancestors: tuple[str, ...] = ()  # the start net's forebears, newest first: the lagged opponents of the first turns
    self_positions: int = 0  # N > 0: each turn the player also plays itself for N positions, trained on with the rest

    def opponents(self) -> tuple[str, ...]:
        return self.gauntlet or (f"ab:material?movetime={self.movetime}",)

    def check(self) -> None:
        for name in ("positions", "nodes", "epochs", "batch_size", "movetime", "window"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name in ("random_moves", "opponent_lag", "self_positions"):
            if getattr(self, name) < 0:
                raise InputError(f"--{name.replace('_', '-')} must be at least 0, got {getattr(self, name)}")
        if not self.lr > 0 or not 0 < self.lr_decay <= 1:
            raise InputError(f"--lr must be positive and --lr-decay in (0, 1], got {self.lr} and {self.lr_decay}")
        if self.gauntlet_games < 2 or self.gauntlet_games % 2:
            raise InputError(f"--gauntlet-games must be a positive even number (each opening with both colours), "
                             f"got {self.gauntlet_games}")
        if not Path(self.book).is_file():
            raise InputError(f"--book {self.book}: no such file")
        for flag, paths in (("--start-data", self.start_data), ("--ancestor", self.ancestors)):
            for path in paths:
                if not Path(path).is_file():
                    raise InputError(f"{flag} {path}: no such file")

    def record(self) -> dict[str, Any]:
        record = asdict(self)
        record["start"] = str(Path(self.start).resolve())
        record["gauntlet"] = list(self.opponents())
        record["start_data"] = [str(Path(path).resolve()) for path in self.start_data]
        record["ancestors"] = [str(Path(path).resolve()) for path in self.ancestors]
        return record


def turn_name(turn: int) -> str:
    return f"turn-{turn:03d}"


class Loop:
    """One loop directory: its settings, its turns, and the steps that run them."""

    def __init__(self, directory: str | os.PathLike, settings: LoopSettings, log: Log | None = None,
                 label: LabelRunner | None = None, train: TrainRunner | None = None, arena: ArenaRunner | None = None,
                 workers: int = 1) -> None:
        from alphazero.judge.arena import Adjudication
        from alphazero.judge.match import run_arena
        from alphazero.learn.label import run_label

        self.directory = Path(directory).resolve()  # the players' specs name it: the same from any directory
        self.settings = settings
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.label = label or run_label
        self.train = train or _train
        self.arena = arena or run_arena
        self.workers = workers
        self.adjudication = Adjudication()
        self.state: dict[str, Any] = {}

    # -- the state file -------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.directory / name

    def load_or_create(self) -> None:
        """Read ``loop.json`` (its settings must match) or start the directory with a copy of the start net."""
        from alphazero.nets.nnue_file import load_nnue

        state_path = self.path(STATE)
        wanted = self.settings.record()
        if state_path.is_file():
            try:
                state = json.loads(state_path.read_text(encoding="utf-8"))
                stored = state["settings"]
                turns = state["turns"]
            except (ValueError, KeyError, TypeError) as error:
                raise InputError(f"{state_path}: not a loop state file ({error})") from None
            defaults = LoopSettings(start="").record()  # a setting added since the loop began holds its default
            differ = sorted(key for key in set(wanted) | set(stored)
                            if wanted.get(key) != stored.get(key, defaults.get(key)))
            if differ:
                raise InputError(f"{state_path}: a loop with other {', '.join(differ)} "
                                 f"({'; '.join(f'{k}: {stored.get(k)!r}' for k in differ)}); give another --dir")
            if not isinstance(turns, list) or not turns:
                raise InputError(f"{state_path}: no turns recorded")
            self.state = state
            return
        for net in (self.settings.start, *self.settings.ancestors):
            load_nnue(net)  # a bad net fails now, with its own message
        first = self.path(f"{turn_name(0)}.npz")
        atomic_write(first, lambda handle: handle.write(Path(self.settings.start).read_bytes()))
        self.state = {"version": VERSION, "settings": wanted, "turns": [{"turn": 0, "net": first.name}]}
        self.save()

    def save(self) -> None:
        atomic_write_text(self.path(STATE), json.dumps(self.state, indent=1) + "\n")

    # -- the steps ------------------------------------------------------------------------------------
    def opponent(self, player_turn: int) -> str | None:
        """The net that turn ``player_turn``'s net meets in its games: the one ``opponent_lag`` places before it
        in the line of nets (the ancestors, oldest first, then each turn's), or the line's first where the lag
        reaches past it; None where that is the player itself (no lag, or turn 0 with no ancestors)."""
        line = [*reversed(self.settings.record()["ancestors"]),
                *(str(self.path(turn["net"])) for turn in self.state["turns"][:player_turn + 1])]
        theirs = max(len(line) - 1 - self.settings.opponent_lag, 0)
        return None if theirs == len(line) - 1 else line[theirs]

    def games(self, turn: dict[str, Any], player: dict[str, Any]) -> None:
        """The turn's games: its player against the lagged opponent (or itself), into ``turn-k.csv``."""
        opponent = self.opponent(player["turn"])
        out = f"{turn_name(turn['turn'])}.csv"
        turn["games"] = self.play(turn, player, opponent, out, self.settings.positions, seed=turn["turn"] * SEED_STRIDE)
        turn["player"] = player["net"]
        turn["opponent"] = self.relative(opponent) if opponent else None
        turn["data"] = out
        self.save()

    def own_games(self, turn: dict[str, Any], player: dict[str, Any]) -> None:
        """With ``self_positions``: the same player's games against itself as well, into ``turn-k-self.csv``."""
        out = f"{turn_name(turn['turn'])}-self.csv"
        turn["self_games"] = self.play(turn, player, None, out, self.settings.self_positions,
                                       seed=turn["turn"] * SEED_STRIDE + SELF_SEEDS)
        turn["self_data"] = out
        self.save()

    def play(self, turn: dict[str, Any], player: dict[str, Any], opponent: str | None, name: str, positions: int,
             seed: int) -> dict[str, Any]:
        """Games of ``player`` against ``opponent`` (None: itself) until the file ``name`` holds ``positions``
        positions; what they gave."""
        from alphazero.learn.label import LabelFile

        s = self.settings
        out = self.path(name)
        spec = f"ab:{self.path(player['net'])}?nodes={s.nodes}"
        against = f" against {self.relative(opponent)}" if opponent else ""
        self.log(f"[loop] {turn_name(turn['turn'])}: games of {player['net']}{against} at {s.nodes} nodes until "
                 f"{out.name} holds {positions} positions")
        # Each turn its own openings and random moves (datagen's default seed, the rows already in the file,
        # would give every turn's file the same ones), and a resumed sitting new games after those played.
        before = len(LabelFile(out).existing())
        summary = self.label(s.book, spec, str(out), random_moves=s.random_moves, file_positions=positions,
                             seed=seed + before, opponent=f"ab:{opponent}?nodes={s.nodes}" if opponent else "")
        return {"positions_in_file": before + summary["labelled"],
                **{key: summary[key] for key in ("games", "labelled", "repeated", "seconds") if key in summary}}

    def relative(self, path: str) -> str:
        """A file's name in ``loop.json``: its name within the loop's directory, else its whole path."""
        return Path(path).name if Path(path).parent == self.directory else path

    def window_data(self, turn: int) -> list[str]:
        """The files turn ``turn`` fine-tunes on: the games of turns ``turn - window + 1`` to ``turn`` (each turn's
        own games after its games against the older net), turn 0's being the start data."""
        files: list[str] = []
        for record in self.state["turns"][max(0, turn - self.settings.window + 1):turn + 1]:
            if record["turn"] == 0:
                files.extend(self.settings.record()["start_data"])
            else:
                files.extend(str(self.path(record[key])) for key in ("data", "self_data") if key in record)
        return files

    def training(self, turn: dict[str, Any]) -> None:
        s = self.settings
        name = turn_name(turn["turn"])
        out = self.path(f"{name}.npz")
        data = self.window_data(turn["turn"])
        self.log(f"[loop] {name}: fine-tuning {turn['player']} on {', '.join(self.relative(f) for f in data)} (lr {s.lr:g}, "
                 f"x{s.lr_decay:g} an epoch, {s.epochs} epochs)")
        summary = self.train(data=tuple(data), out=str(out), init=str(self.path(turn["player"])),
                             lr=s.lr, lr_decay=s.lr_decay, epochs=s.epochs, batch_size=s.batch_size, mirror=s.mirror,
                             cache_dir=str(self.path("nnue-cache")), log=self.log)
        turn["net"] = out.name
        turn["training"] = {"data": [self.relative(f) for f in data],
                            "positions": summary.get("positions"), "train_positions": summary.get("train_positions"),
                            "held_out_before": summary.get("initial", {}).get("held_out_loss"),
                            "held_out_after": summary.get("final", {}).get("held_out_loss"),
                            "seconds": summary.get("seconds")}
        self.save()

    def gauntlet(self, turn: dict[str, Any]) -> None:
        s = self.settings
        name = turn_name(turn["turn"])
        results = turn.setdefault("gauntlet", {})
        for index, opponent in enumerate(s.opponents()):
            if opponent in results:
                continue
            spec = f"ab:{self.path(turn['net'])}?movetime={s.movetime}"
            self.log(f"[loop] {name}: {turn['net']} against {opponent}, {s.gauntlet_games} games at {s.movetime} ms")
            report = self.arena(spec, opponent, s.gauntlet_games, openings_path=s.book, seed=0,
                                adjudication=self.adjudication, out=str(self.path(f"{name}-vs-{index}.jsonl")),
                                parallelism=self.workers)
            # The interval of the game pairs where there are pairs (each opening played with both colours
            # makes the two games of a pair correlated: the pentanomial interval is the honest one).
            penta = report.get("pentanomial")
            figures = penta if penta is not None else report
            results[opponent] = {"games": report["games"], "wins": report["wins"], "draws": report["draws"],
                                 "losses": report["losses"], "elo": figures["elo"], "elo_low": figures["elo_low"],
                                 "elo_high": figures["elo_high"], "interval": "pentanomial" if penta else "trinomial",
                                 "pentanomial": penta["counts"] if penta else None}
            self.save()
            self.log(f"[loop] {name}: {format_gauntlet(results[opponent])} against {opponent}")

    # -- the whole ------------------------------------------------------------------------------------
    def run(self, turns: int) -> dict[str, Any]:
        """Run (or continue) the loop until it has ``turns`` turns after the start; returns the state."""
        if turns < 0:
            raise InputError(f"--turns must be at least 0, got {turns}")
        self.settings.check()
        with DirectoryLock(self.directory, "loop"):
            self.load_or_create()
            records = self.state["turns"]
            while True:
                last = records[-1]
                if last["turn"] > 0:
                    self.step(last)
                if len(last.get("gauntlet", {})) < len(self.settings.opponents()):
                    self.gauntlet(last)
                if last["turn"] >= turns:
                    break
                records.append({"turn": last["turn"] + 1})
                self.save()
            return self.state

    def step(self, turn: dict[str, Any]) -> None:
        own = self.settings.self_positions > 0
        if "data" not in turn or own and "self_data" not in turn:
            player, newest = self.player(turn["turn"]), self.state["turns"][turn["turn"] - 1]
            if player is not newest:
                opponents = self.settings.opponents()
                self.log(f"[loop] {turn_name(turn['turn'])}: the gate keeps {player['net']} (gauntlet "
                         f"{gauntlet_mean(player, opponents):+.0f}) over {newest['net']} "
                         f"({gauntlet_mean(newest, opponents):+.0f})")
            if "data" not in turn:
                self.games(turn, player)
            if own and "self_data" not in turn:
                self.own_games(turn, player)
        if "net" not in turn:
            self.training(turn)

    def player(self, turn: int) -> dict[str, Any]:
        """The turn whose net plays turn ``turn``'s games (and is fine-tuned on them): the one before it, or
        with ``gate`` the best of the turns before it by its gauntlet (the mean Elo over the fixed players;
        a tie goes to the newer net). The gate reads point estimates: a turn whose step is below what one
        gauntlet resolves passes or fails by chance, but a turn that falls by more than that plays no games."""
        before = self.state["turns"][:turn]
        if not self.settings.gate:
            return before[-1]
        opponents = self.settings.opponents()
        return max(reversed(before), key=lambda record: gauntlet_mean(record, opponents))  # first maximum: the newest


def _train(log: Log, **options: Any) -> dict:
    from alphazero.learn.nnue_train import TrainOptions, train_nnue

    return train_nnue(TrainOptions(**options), log)


def gauntlet_mean(turn: dict[str, Any], opponents: tuple[str, ...]) -> float:
    """A finished turn's Elo against the fixed players, their mean."""
    return sum(turn["gauntlet"][o]["elo"] for o in opponents) / len(opponents)


def format_gauntlet(result: dict[str, Any]) -> str:
    return (f"{result['wins']}/{result['draws']}/{result['losses']}, {result['elo']:+.0f} "
            f"[{result['elo_low']:+.0f}, {result['elo_high']:+.0f}]")


def format_loop(state: dict[str, Any]) -> str:
    """The turns as a table: each net, its data, its training and its gauntlet figures."""
    opponents = state["settings"]["gauntlet"]
    lines = ["turn  net            games of                              positions        held-out loss       "
             + "  ".join(f"against {o}" for o in opponents)]
    for turn in state["turns"]:
        games = turn.get("games", {})
        training = turn.get("training", {})
        loss = (f"{training['held_out_before']:.5f} -> {training['held_out_after']:.5f}"
                if training.get("held_out_before") is not None and training.get("held_out_after") is not None else "")
        gauntlet = turn.get("gauntlet", {})
        figures = "  ".join(format_gauntlet(gauntlet[o]) if o in gauntlet else "(not played)" for o in opponents)
        games_of = turn.get("player", "") + (f" v {Path(turn['opponent']).name}" if turn.get("opponent") else "")
        positions = str(games.get("positions_in_file", ""))
        if "self_games" in turn:  # and the player's own games
            games_of, positions = f"{games_of} + self", f"{positions}+{turn['self_games']['positions_in_file']}"
        lines.append(f"{turn['turn']:>4}  {turn.get('net', '(training)'):<13}  {games_of:<36}  "
                     f"{positions:>15}  "
                     f"{loss:<18}  {figures}")
    return "\n".join(lines)
