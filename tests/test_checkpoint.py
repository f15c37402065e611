"""Tests for the run directory (``alphazero.checkpoint``): run state, resume checks, atomic writes, JSONL."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import yaml

from alphazero import checkpoint
from alphazero.checkpoint import (
    ArenaRecord,
    RunDirectory,
    RunState,
    append_jsonl,
    atomic_write_text,
    config_changes,
    read_jsonl,
    resume_conflicts,
)
from alphazero.config import load_config
from alphazero.errors import ConfigError, InputError, RunStateError


def _arena(generation: int, promoted: bool) -> ArenaRecord:
    return ArenaRecord(
        generation=generation, candidate=f"gen-{generation:04d}", best="gen-0000", wins=7 + generation,
        draws=3, losses=10 - generation, score=0.5 + 0.0125 * generation, elo=12.5 * generation,
        elo_low=-40.25, elo_high=61.125, promoted=promoted, learner_step=500 * generation, time=1700000000.5 + generation,
    )


def _state() -> RunState:
    return RunState(
        generation=2, best_generation=1, network_version=1, games=321, positions=45678, learner_step=1000,
        samples_trained=256000, arenas=[_arena(1, True), _arena(2, False)], elapsed_s=1234.5,
    )


# -- run state -----------------------------------------------------------------------------------------


def test_run_state_round_trips_with_arena_records(tmp_path):
    run = RunDirectory(tmp_path / "run")
    state = _state()
    run.write_state(state)
    loaded = run.read_state()
    assert loaded == state
    assert all(isinstance(record, ArenaRecord) for record in loaded.arenas)
    assert [r.promoted for r in loaded.arenas] == [True, False]
    assert run.exists()


def test_run_state_json_is_plain_json():
    data = json.loads(_state().to_json())
    assert data["generation"] == 2
    assert data["arenas"][1]["candidate"] == "gen-0002"


def test_default_run_state_round_trips():
    assert RunState.from_json(RunState().to_json(), "x") == RunState()


@pytest.mark.parametrize(
    "text",
    [
        "",  # empty file
        '{"generation": 2, "best_gen',  # torn write
        "[1, 2, 3]",  # not an object
        "null",
        '{"generation": 1}',  # no format_version
        '{"format_version": 1, "generation": 1, "colour": "blue"}',  # unknown field
        '{"format_version": 1, "arenas": [{"generation": 1}]}',  # incomplete arena record
        '{"format_version": 1, "arenas": 5}',
        '{"format_version": 99, "generation": 1}',  # from a future version
    ],
)
def test_corrupt_run_state_names_the_file(tmp_path, text):
    run = RunDirectory(tmp_path)
    run.state_path.write_text(text)
    with pytest.raises(InputError) as error:
        run.read_state()
    assert str(run.state_path) in str(error.value)


def test_missing_run_state_names_the_file(tmp_path):
    run = RunDirectory(tmp_path / "empty")
    assert not run.exists()
    with pytest.raises(RunStateError) as error:
        run.read_state()
    assert str(run.state_path) in str(error.value)


def test_a_binary_run_file_and_a_file_given_as_a_run_are_named(tmp_path):
    run = RunDirectory(tmp_path)
    for path, read in ((run.state_path, run.read_state), (run.config_path, run.read_config)):
        path.write_bytes(b"\x89PNG\r\n\x1a\n")
        with pytest.raises(InputError, match=f"{path}:1: not a text file"):
            read()
    with pytest.raises(RunStateError, match="missing; is .* a run directory"):
        RunDirectory(run.state_path).read_config()  # was a NotADirectoryError


def test_config_round_trips_through_the_run_directory(tmp_path):
    run = RunDirectory(tmp_path)
    config = load_config(None, ["network.blocks=2", "train.lr_milestones=[100, 200]", "seed=7"])
    run.write_config(config)
    assert run.read_config() == config


def test_a_run_made_before_the_material_head_reads_back_without_it(tmp_path):
    # Its config.yaml has no material keys and its weights no material output: it must resume as it was.
    run = RunDirectory(tmp_path)
    run.write_config(load_config(None, ["network.material_head=false", "network.material_utility=0"]))
    data = yaml.safe_load(run.config_path.read_text())
    del data["network"]["material_head"], data["network"]["material_utility"]
    run.config_path.write_text(yaml.safe_dump(data))
    network = run.read_config().network
    assert not network.material_head and network.material_utility == 0.0
    assert load_config(None).network.material_head  # a new run has the head


def test_a_run_saved_with_the_old_name_of_a_key_resumes_with_its_value(tmp_path):
    # search.engine was renamed search.implementation: a run directory written before reads back as it was.
    run = RunDirectory(tmp_path)
    run.write_config(load_config(None, ["search.implementation=python"]))
    data = yaml.safe_load(run.config_path.read_text())
    data["search"]["engine"] = data["search"].pop("implementation")
    run.config_path.write_text(yaml.safe_dump(data))
    assert run.read_config().search.implementation == "python"
    # A config a user writes with the old name is refused, naming the new one.
    with pytest.raises(ConfigError, match="search.engine.*is now search.implementation"):
        load_config(None, ["search.engine=python"])


def test_corrupt_config_in_run_directory_names_the_file(tmp_path):
    run = RunDirectory(tmp_path)
    run.config_path.write_text("network: {blocks: 2\n")
    with pytest.raises(InputError) as error:
        run.read_config()
    assert str(run.config_path) in str(error.value)
    run.config_path.write_text("network: {blokcs: 2}\n")
    with pytest.raises(ConfigError) as error:
        run.read_config()
    assert str(run.config_path) in str(error.value) and "network.blokcs" in str(error.value)


# -- resume conflicts ------------------------------------------------------------------------------------


def test_resume_with_the_same_config_has_no_conflicts():
    config = load_config(None, ["network.blocks=2", "seed=3"])
    assert resume_conflicts(config, config) == []


def test_resume_reports_each_network_difference_and_the_seed():
    saved = load_config(None, ["network.blocks=2", "network.channels=32", "seed=3"])
    requested = load_config(None, ["network.blocks=4", "network.channels=64", "seed=4"])
    reasons = resume_conflicts(saved, requested)
    assert len(reasons) == 3
    text = "\n".join(reasons)
    assert "network.blocks" in text and "network.channels" in text and "seed" in text
    blocks = next(r for r in reasons if "network.blocks" in r)
    assert "2" in blocks and "4" in blocks  # both values shown


def test_resume_refuses_another_optimizer():
    saved = load_config(None, ["train.optimizer=sgd"])
    reasons = resume_conflicts(saved, load_config(None, ["train.optimizer=adamw"]))
    assert len(reasons) == 1 and "train.optimizer" in reasons[0] and "sgd" in reasons[0]


def test_resume_reports_a_single_head_difference():
    saved = load_config(None)
    requested = load_config(None, ["network.value_hidden=7"])
    reasons = resume_conflicts(saved, requested)
    assert len(reasons) == 1 and "network.value_hidden" in reasons[0]


def test_resume_allows_worker_budget_and_schedule_changes():
    saved = load_config(None, ["seed=5"])
    requested = load_config(None, [
        "seed=5", "workers.num_selfplay_workers=8", "workers.learner_cpus=4", "max_generations=10",
        "max_minutes=90", "train.batch_size=512", "train.learning_rate=0.001", "train.lr_milestones=[10]",
        "search.num_simulations=400", "selfplay.games_per_worker=64", "arena.games=40",
    ])
    assert saved != requested
    assert resume_conflicts(saved, requested) == []


def test_config_changes_lists_each_changed_setting_with_both_values_and_nothing_else():
    saved = load_config(None, ["seed=5", "workers.num_selfplay_workers=2"])
    assert config_changes(saved, saved) == []
    requested = load_config(None, ["seed=5", "workers.num_selfplay_workers=1", "train.lr_milestones=[10]",
                                   "search.precision=int8"])
    changes = config_changes(saved, requested)
    assert sorted(line.split(":")[0] for line in changes) == [
        "search.precision", "train.lr_milestones", "workers.num_selfplay_workers"]
    workers = next(line for line in changes if line.startswith("workers.num_selfplay_workers"))
    assert workers == "workers.num_selfplay_workers: 2 -> 1"
    assert config_changes(requested, saved) != changes  # the direction shows: old -> new


# -- atomic writes ----------------------------------------------------------------------------------------


def test_atomic_write_text_replaces_content_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "sub" / "state.json"
    atomic_write_text(path, "first version, rather long " * 20)
    atomic_write_text(path, "second")
    assert path.read_text() == "second"
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_failed_atomic_write_keeps_the_old_content(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    atomic_write_text(path, "old")

    def broken_fsync(fd):
        raise OSError("disk on fire")

    monkeypatch.setattr(checkpoint.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write_text(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


# -- JSONL ------------------------------------------------------------------------------------------------


def test_read_jsonl_of_missing_file_is_empty(tmp_path):
    assert read_jsonl(tmp_path / "metrics.jsonl") == []


def test_append_and_read_jsonl(tmp_path):
    path = tmp_path / "metrics.jsonl"
    records = [{"step": i, "loss": 1.0 / (i + 1), "tag": f"s{i}"} for i in range(4)]
    for record in records:
        append_jsonl(path, record)
    assert read_jsonl(path) == records


def test_read_jsonl_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "events.jsonl"
    append_jsonl(path, {"event": "start"})
    append_jsonl(path, {"event": "arena", "wins": 3})
    with open(path, "a") as handle:
        handle.write('{"event": "promo')  # the process was killed mid-write
    assert read_jsonl(path) == [{"event": "start"}, {"event": "arena", "wins": 3}]


def test_run_directory_logs_events(tmp_path):
    run = RunDirectory(tmp_path)
    run.log_event("promotion", generation=3)
    events = read_jsonl(run.events_path)
    assert len(events) == 1 and events[0]["event"] == "promotion" and events[0]["generation"] == 3


def test_records_appended_after_a_torn_line_are_kept(tmp_path):
    # A run killed mid-append, then resumed: the resumed run's records must not be lost.
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, {"step": 50})
    with open(path, "a") as handle:
        handle.write('{"step": 10')  # torn by the kill
    append_jsonl(path, {"step": 100})  # after the resume
    append_jsonl(path, {"step": 150})
    assert read_jsonl(path) == [{"step": 50}, {"step": 100}, {"step": 150}]


def test_arena_record_fields_survive_exactly():
    record = _arena(3, True)
    state = RunState(arenas=[record])
    loaded = RunState.from_json(state.to_json(), "x").arenas[0]
    assert dataclasses.asdict(loaded) == dataclasses.asdict(record)


# -- arenas in flight -------------------------------------------------------------------------------------


def test_pending_arena_round_trips_and_a_version_1_state_reads_as_having_none(tmp_path):
    from alphazero.checkpoint import PendingArena

    run = RunDirectory(tmp_path / "run")
    pending = PendingArena(generation=3, candidate="gen-0003.pt", best="gen-0001.pt", best_generation=1,
                           learner_step=900, openings=[["e2e4 e7e5", "startpos-fen", ["e2e4", "e7e5"]]], started=5.0)
    run.write_state(RunState(generation=2, pending_arena=pending))
    back = run.read_state()
    assert back.pending_arena == pending and back.pending_arena.num_games == 2
    data = json.loads(run.state_path.read_text())
    data.pop("pending_arena")
    data["format_version"] = 1  # written before arenas could be resumed
    run.state_path.write_text(json.dumps(data))
    assert run.read_state().pending_arena is None


def test_arena_games_are_read_by_index_first_line_wins_and_a_foreign_format_is_named(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.append_arena_game(2, {"index": 1, "result": "1-0", "pid": 10})
    run.append_arena_game(2, {"index": 0, "result": "0-1", "pid": 10})
    run.append_arena_game(2, {"index": 1, "result": "0-1", "pid": 11})  # a duplicate never counts twice
    with open(run.arena_games_path(2), "a") as handle:
        handle.write('{"format_version": 1, "ind')  # torn by a kill
    games = run.read_arena_games(2)
    assert sorted(games) == [0, 1] and games[1]["result"] == "1-0"
    assert run.read_arena_games(3) == {}
    append_jsonl(run.arena_games_path(4), {"format_version": 99, "index": 0})
    with pytest.raises(ValueError, match="gen-0004.jsonl"):
        run.read_arena_games(4)
