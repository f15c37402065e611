"""`alphazero nnue loop`: turns of games -> fine-tune -> gauntlet, each step resumable, the settings held."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from alphazero.errors import InputError
from alphazero.learn.label import LabelFile, run_label
from alphazero.learn.nnue_loop import SEED_STRIDE, SELF_SEEDS, Loop, LoopSettings, format_loop
from commands.main import main

START = Path(__file__).resolve().parent.parent / "docs" / "nets" / "nnue-own-gen4.npz"
BOOK = "/usr/share/games/gnuchess/book.bin"


class Fakes:
    """Recording stand-ins for the trainer and the arena (the games are real: a few at 60 nodes)."""

    def __init__(self, stop_training_at: int | None = None, elos: dict[str, float] | None = None) -> None:
        self.labels: list[dict[str, Any]] = []
        self.trainings: list[dict[str, Any]] = []
        self.arenas: list[tuple[str, str, dict[str, Any]]] = []
        self.stop_training_at = stop_training_at
        self.stop_games_at: str | None = None  # a games file whose games are interrupted before they start
        self.elos = elos or {}  # net file name -> its gauntlet's Elo (default 100)

    def label(self, book: str, spec: str, out: str, **kw: Any) -> dict:
        if Path(out).name == self.stop_games_at:
            self.stop_games_at = None
            raise KeyboardInterrupt
        self.labels.append({"spec": spec, "out": out, **kw})
        return run_label(book, spec, out, **kw)

    def train(self, log: Any, **options: Any) -> dict:
        self.trainings.append(options)
        if self.stop_training_at is not None and Path(options["out"]).name == f"turn-{self.stop_training_at:03d}.npz":
            self.stop_training_at = None
            raise KeyboardInterrupt
        shutil.copyfile(options["init"], options["out"])
        return {"positions": 10, "train_positions": 9, "initial": {"held_out_loss": 0.002},
                "final": {"held_out_loss": 0.001}, "seconds": 1.0}

    def arena(self, spec_a: str, spec_b: str, games: int, **kw: Any) -> dict:
        self.arenas.append((spec_a, spec_b, kw))
        elo = self.elos.get(Path(spec_a.split("?")[0]).name, 100.0)
        return {"games": games, "wins": games, "draws": 0, "losses": 0, "elo": 90.0, "elo_low": 60.0, "elo_high": 120.0,
                "pentanomial": {"counts": [0, 0, 0, 0, games // 2], "elo": elo, "elo_low": elo - 50, "elo_high": elo + 50}}


def settings(**kw: Any) -> LoopSettings:
    return LoopSettings(start=str(START), **{"positions": 30, "nodes": 60, "epochs": 1, "gauntlet_games": 2,
                                              "movetime": 5, **kw})


def loop(directory: Path, fakes: Fakes, **kw: Any) -> Loop:
    return Loop(directory, settings(**kw), log=lambda line: None, label=fakes.label, train=fakes.train, arena=fakes.arena)


def test_each_turn_s_net_plays_the_next_turn_and_every_net_meets_the_gauntlet(tmp_path: Path) -> None:
    fakes = Fakes()
    state = loop(tmp_path, fakes).run(2)
    assert [turn["turn"] for turn in state["turns"]] == [0, 1, 2]
    assert (tmp_path / "turn-000.npz").read_bytes() == START.read_bytes()
    # turn k's games are played by turn k-1's net, and turn k's net is fine-tuned from it on those games alone
    assert [Path(call["spec"].split("?")[0][3:]).name for call in fakes.labels] == ["turn-000.npz", "turn-001.npz"]
    assert all(call["spec"].endswith("?nodes=60") and call["file_positions"] == 30 for call in fakes.labels)
    assert [(Path(t["init"]).name, [Path(d).name for d in t["data"]], Path(t["out"]).name) for t in fakes.trainings] == [
        ("turn-000.npz", ["turn-001.csv"], "turn-001.npz"), ("turn-001.npz", ["turn-002.csv"], "turn-002.npz")]
    assert all(t["lr"] == 2e-4 and t["mirror"] for t in fakes.trainings)
    # every net, the start's included, against the same outside player, the same openings, at the same time
    assert [(Path(a.split("?")[0][3:]).name, a.split("?")[1], b, kw["seed"], Path(kw["out"]).name)
            for a, b, kw in fakes.arenas] == [
        (f"turn-00{k}.npz", "movetime=5", "ab:material?movetime=5", 0, f"turn-00{k}-vs-0.jsonl") for k in range(3)]
    for turn in state["turns"][1:]:
        assert LabelFile(tmp_path / turn["data"]).existing() and turn["games"]["positions_in_file"] >= 30
    # the two turns' games are different games (each turn seeds its own openings and random moves)
    assert fakes.labels[0]["seed"] == SEED_STRIDE and fakes.labels[1]["seed"] == 2 * SEED_STRIDE
    assert LabelFile(tmp_path / "turn-001.csv").existing() != LabelFile(tmp_path / "turn-002.csv").existing()
    saved = json.loads((tmp_path / "loop.json").read_text())
    assert saved == state
    table = format_loop(state)
    assert table.count("0.00200 -> 0.00100") == 2 and table.count("2/0/0, +100 [+50, +150]") == 3


def test_a_stopped_loop_goes_on_where_it_stopped_and_more_turns_extend_it(tmp_path: Path) -> None:
    fakes = Fakes(stop_training_at=2)
    with pytest.raises(KeyboardInterrupt):
        loop(tmp_path, fakes).run(2)
    state = json.loads((tmp_path / "loop.json").read_text())
    assert "data" in state["turns"][2] and "net" not in state["turns"][2]  # the games were kept
    resumed = Fakes()
    state = loop(tmp_path, resumed).run(2)
    assert resumed.labels == []  # neither turn's games played again
    assert [Path(t["out"]).name for t in resumed.trainings] == ["turn-002.npz"]
    assert [Path(kw["out"]).name for _, _, kw in resumed.arenas] == ["turn-002-vs-0.jsonl"]
    extended = Fakes()
    state = loop(tmp_path, extended).run(3)
    assert [turn["turn"] for turn in state["turns"]] == [0, 1, 2, 3]
    assert [Path(t["init"]).name for t in extended.trainings] == ["turn-002.npz"]
    assert loop(tmp_path, Fakes()).run(1)["turns"][-1]["turn"] == 3  # fewer turns: nothing to do, nothing lost


def test_the_gate_keeps_the_best_net_by_its_gauntlet_as_the_player(tmp_path: Path) -> None:
    elos = {"turn-000.npz": 100.0, "turn-001.npz": 40.0, "turn-002.npz": 100.0, "turn-003.npz": 90.0}
    gated = Fakes(elos=elos)
    state = loop(tmp_path / "gated", gated, gate=True).run(4)
    # turn 1 fell: turn 2's games are the start's again, and turn 2 is fine-tuned from it; turn 2 ties the start
    # (the newer net wins a tie); turn 3 falls a little, so turn 4 is turn 2's again
    assert [Path(call["spec"].split("?")[0][3:]).name for call in gated.labels] == [
        "turn-000.npz", "turn-000.npz", "turn-002.npz", "turn-002.npz"]
    assert [Path(t["init"]).name for t in gated.trainings] == ["turn-000.npz", "turn-000.npz", "turn-002.npz",
                                                                 "turn-002.npz"]
    assert [turn.get("player") for turn in state["turns"]] == [None, "turn-000.npz", "turn-000.npz", "turn-002.npz",
                                                               "turn-002.npz"]
    assert "turn-002.npz" in format_loop(state).splitlines()[4]
    # without the gate the newest net plays, however its gauntlet went
    newest = Fakes(elos=elos)
    loop(tmp_path / "newest", newest).run(4)
    assert [Path(t["init"]).name for t in newest.trainings] == [f"turn-00{k}.npz" for k in range(4)]
    # a loop begun before the gate existed (no "gate" in its settings) goes on as the default, without it
    path = tmp_path / "newest" / "loop.json"
    old = json.loads(path.read_text())
    del old["settings"]["gate"]
    path.write_text(json.dumps(old))
    assert loop(tmp_path / "newest", Fakes()).run(4)["turns"][-1]["turn"] == 4
    with pytest.raises(InputError, match="other gate"):
        loop(tmp_path / "newest", Fakes(), gate=True).run(4)


def test_a_loop_asked_other_settings_or_given_a_bad_start_says_so_and_writes_nothing(tmp_path: Path) -> None:
    loop(tmp_path / "a", Fakes()).run(0)
    before = (tmp_path / "a" / "loop.json").read_text()
    with pytest.raises(InputError, match=r"other lr, nodes"):
        loop(tmp_path / "a", Fakes(), nodes=61, lr=1e-3).run(1)
    assert (tmp_path / "a" / "loop.json").read_text() == before
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a net")
    with pytest.raises(InputError, match="bad.npz"):
        Loop(tmp_path / "b", LoopSettings(start=str(bad)), log=lambda line: None).run(1)
    assert not (tmp_path / "b" / "loop.json").exists()
    for wrong, says in (({"gauntlet_games": 3}, "--gauntlet-games"), ({"positions": 0}, "--positions"),
                        ({"lr_decay": 1.5}, "--lr-decay"), ({"book": str(tmp_path / "none.bin")}, "--book")):
        with pytest.raises(InputError, match=says):
            loop(tmp_path / "c", Fakes(), **wrong).run(1)


def test_the_command_runs_a_real_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start_data = tmp_path / "start.csv"  # the start net's games: with --window 2, turn 1 learns from them too
    run_label(BOOK, "ab:material?nodes=60", str(start_data), file_positions=30)
    code = main(["nnue", "loop", "--dir", str(tmp_path / "loop"), "--start", str(START), "--turns", "1",
                 "--positions", "40", "--nodes", "60", "--epochs", "1", "--gauntlet-games", "2", "--movetime", "5",
                 "--window", "2", "--start-data", str(start_data), "--self-positions", "20", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    state = json.loads(captured.out)
    last = state["turns"][-1]
    assert last["net"] == "turn-001.npz" and last["training"]["held_out_after"] > 0
    assert last["training"]["data"] == [str(start_data.resolve()), "turn-001.csv", "turn-001-self.csv"]
    assert state["settings"]["self_positions"] == 20 and last["self_games"]["positions_in_file"] >= 20
    assert sum(last["gauntlet"]["ab:material?movetime=5"][k] for k in ("wins", "draws", "losses")) == 2
    assert (tmp_path / "loop" / "turn-001.npz").read_bytes() != START.read_bytes()  # trained, not copied


def test_a_second_writer_of_the_same_loop_is_refused(tmp_path: Path) -> None:
    from alphazero.errors import UserError
    from alphazero.fileio import DirectoryLock

    with DirectoryLock(tmp_path, "loop"), pytest.raises(UserError, match="loop"):
        loop(tmp_path, Fakes()).run(1)
    assert not (tmp_path / "loop.json").exists()


def test_a_window_trains_each_turn_on_the_last_turns_games_with_the_start_data_as_turn_0(tmp_path: Path) -> None:
    start_data = tmp_path / "start.csv"
    run_label(BOOK, "ab:material?nodes=60", str(start_data), file_positions=20)
    fakes = Fakes()
    state = loop(tmp_path / "w", fakes, window=2, start_data=(str(start_data),)).run(3)
    assert [[Path(d).name for d in t["data"]] for t in fakes.trainings] == [
        ["start.csv", "turn-001.csv"], ["turn-001.csv", "turn-002.csv"], ["turn-002.csv", "turn-003.csv"]]
    assert state["settings"]["window"] == 2 and state["settings"]["start_data"] == [str(start_data.resolve())]
    # a window wider than the turns so far takes them all; the start data without a window is recorded, not used
    wide = Fakes()
    loop(tmp_path / "wide", wide, window=5, start_data=(str(start_data),)).run(2)
    assert [[Path(d).name for d in t["data"]] for t in wide.trainings] == [
        ["start.csv", "turn-001.csv"], ["start.csv", "turn-001.csv", "turn-002.csv"]]
    alone = Fakes()
    loop(tmp_path / "alone", alone, start_data=(str(start_data),)).run(1)
    assert [[Path(d).name for d in t["data"]] for t in alone.trainings] == [["turn-001.csv"]]
    # a loop begun before the window existed goes on with the default; another window is another loop
    path = tmp_path / "alone" / "loop.json"
    old = json.loads(path.read_text())
    del old["settings"]["window"], old["settings"]["start_data"]
    path.write_text(json.dumps(old))
    with pytest.raises(InputError, match="other start_data"):
        loop(tmp_path / "alone", Fakes(), start_data=(str(start_data),)).run(1)
    assert loop(tmp_path / "alone", Fakes()).run(1)["turns"][-1]["turn"] == 1
    with pytest.raises(InputError, match="other window"):
        loop(tmp_path / "alone", Fakes(), window=3).run(1)
    for wrong, says in (({"window": 0}, "--window"), ({"start_data": (str(tmp_path / "none.csv"),)}, "--start-data")):
        with pytest.raises(InputError, match=says):
            loop(tmp_path / "bad", Fakes(), **wrong).run(1)
        assert not (tmp_path / "bad" / "loop.json").exists()


def test_a_lagged_opponent_is_the_net_k_turns_back_and_an_ancestor_before_turn_0(tmp_path: Path) -> None:
    ancestor = START.parent / "nnue-own-gen3.npz"  # generation 4's parent

    def players(fakes: Fakes) -> list[tuple[str, str]]:
        return [(Path(call["spec"].split("?")[0][3:]).name, Path(call["opponent"].split("?")[0][3:]).name)
                for call in fakes.labels]

    lagged = Fakes()
    state = loop(tmp_path / "lag1", lagged, opponent_lag=1, ancestors=(str(ancestor),)).run(3)
    assert players(lagged) == [("turn-000.npz", "nnue-own-gen3.npz"), ("turn-001.npz", "turn-000.npz"),
                               ("turn-002.npz", "turn-001.npz")]
    assert all(call["opponent"].endswith("?nodes=60") for call in lagged.labels)
    assert [turn.get("opponent") for turn in state["turns"]] == [None, str(ancestor), "turn-000.npz", "turn-001.npz"]
    assert "turn-000.npz v nnue-own-gen3.npz" in format_loop(state).splitlines()[2]
    assert state["settings"]["opponent_lag"] == 1 and state["settings"]["ancestors"] == [str(ancestor)]
    assert all(len(LabelFile(tmp_path / "lag1" / f"turn-00{k}.csv").existing()) >= 30 for k in (1, 2, 3))
    # a lag reaching past the ancestors takes the oldest known net; with none, turn 0's net plays itself
    far = Fakes()
    loop(tmp_path / "lag2", far, opponent_lag=2, ancestors=(str(ancestor),)).run(3)
    assert [opponent for _, opponent in players(far)] == ["nnue-own-gen3.npz", "nnue-own-gen3.npz", "turn-000.npz"]
    alone = Fakes()
    loop(tmp_path / "none", alone, opponent_lag=1).run(2)
    assert [call["opponent"] for call in alone.labels][0] == ""
    assert players(alone)[1] == ("turn-001.npz", "turn-000.npz")
    # another lag is another loop; a negative lag or a missing or broken ancestor is refused with nothing written
    with pytest.raises(InputError, match="other opponent_lag"):
        loop(tmp_path / "none", Fakes(), opponent_lag=2).run(2)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a net")
    for wrong, says in (({"opponent_lag": -1}, "--opponent-lag"), ({"ancestors": (str(tmp_path / "no.npz"),)}, "--ancestor"),
                        ({"opponent_lag": 1, "ancestors": (str(broken),)}, "broken.npz")):
        with pytest.raises(InputError, match=says):
            loop(tmp_path / "bad", Fakes(), **wrong).run(1)
        assert not (tmp_path / "bad" / "loop.json").exists()


def test_self_positions_add_the_player_s_own_games_to_each_turn_and_its_training(tmp_path: Path) -> None:
    ancestor = START.parent / "nnue-own-gen3.npz"
    fakes = Fakes()
    fakes.stop_games_at = "turn-002-self.csv"
    with pytest.raises(KeyboardInterrupt):
        loop(tmp_path, fakes, opponent_lag=1, ancestors=(str(ancestor),), self_positions=20, window=2).run(2)
    state = json.loads((tmp_path / "loop.json").read_text())
    assert "data" in state["turns"][2] and "self_data" not in state["turns"][2]  # the games against the older net kept
    resumed = Fakes()
    state = loop(tmp_path, resumed, opponent_lag=1, ancestors=(str(ancestor),), self_positions=20, window=2).run(2)
    calls = [*fakes.labels, *resumed.labels]
    # each turn: its player against the net before it, then the same player against itself, seeded apart
    assert [(Path(c["spec"].split("?")[0][3:]).name, Path(c["opponent"].split("?")[0][3:]).name if c["opponent"] else "",
             Path(c["out"]).name, c["file_positions"], c["seed"]) for c in calls] == [
        ("turn-000.npz", "nnue-own-gen3.npz", "turn-001.csv", 30, SEED_STRIDE),
        ("turn-000.npz", "", "turn-001-self.csv", 20, SEED_STRIDE + SELF_SEEDS),
        ("turn-001.npz", "turn-000.npz", "turn-002.csv", 30, 2 * SEED_STRIDE),
        ("turn-001.npz", "", "turn-002-self.csv", 20, 2 * SEED_STRIDE + SELF_SEEDS)]
    assert LabelFile(tmp_path / "turn-002-self.csv").existing() != LabelFile(tmp_path / "turn-002.csv").existing()
    # each net is fine-tuned on both kinds of games of the turns in its window
    assert [[Path(d).name for d in t["data"]] for t in [*fakes.trainings, *resumed.trainings]] == [
        ["turn-001.csv", "turn-001-self.csv"], ["turn-001.csv", "turn-001-self.csv", "turn-002.csv", "turn-002-self.csv"]]
    assert all(turn["self_games"]["positions_in_file"] >= 20 for turn in state["turns"][1:])
    assert "turn-001.npz v turn-000.npz + self" in format_loop(state)
    assert f"{state['turns'][2]['games']['positions_in_file']}+{state['turns'][2]['self_games']['positions_in_file']}" \
        in format_loop(state)
    # other own-games settings are another loop; a negative count is refused
    with pytest.raises(InputError, match="other self_positions"):
        loop(tmp_path, Fakes(), opponent_lag=1, ancestors=(str(ancestor),), window=2).run(2)
    with pytest.raises(InputError, match="--self-positions"):
        loop(tmp_path / "bad", Fakes(), self_positions=-1).run(1)
