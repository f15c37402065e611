"""Preemption on Ray (loopback only): the whole process tree of a run SIGKILLed and resumed, and a lost node.

Each run is the real ``alphazero train`` command in a subprocess of its own session with its own
Ray, so a kill takes everything it started (the driver, Ray's services, the actors), as a preempted
machine does, and every process can be found by session id and killed by PID (``tools/sessions.py``,
which ``tools/preemption.py``, the long experiment of docs/RESULTS.md, uses too). Kills land after a
save has been observed, never by the clock alone.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from alphazero.checkpoint import read_jsonl
from alphazero.learn.replay import read_shard, shard_paths
from commands.main import main
from tests.runs import run_state, run_to_end, start, train_command, wait_for
from tools.sessions import kill_session, session_pids

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("compiled_search")]


def _shards(run_dir: Path) -> list:
    return [read_shard(path) for path in shard_paths(run_dir / "replay")]  # every shard loads


def _arena_games_on_disk(run_dir: Path) -> dict[int, list[dict]]:
    games: dict[int, list[dict]] = {}
    for path in sorted((run_dir / "arena").glob("gen-*.jsonl")):
        games[int(path.stem.split("-")[1])] = read_jsonl(path)
    return games


def _mid_arena(run_dir: Path) -> bool:
    """True while the arena in flight has saved some, not all, of its games."""
    pending = run_state(run_dir).get("pending_arena")
    if not pending:
        return False
    saved = len(read_jsonl(run_dir / "arena" / f"gen-{pending['generation']:04d}.jsonl"))
    return 0 < saved < 2 * len(pending["openings"])


def _arena_lines(run_dir: Path) -> int:
    return sum(len(lines) for lines in _arena_games_on_disk(run_dir).values())


def test_sigkills_at_any_moment_lose_nothing_and_the_resumed_run_goes_on_to_its_end(tmp_path: Path, capsys) -> None:
    """SIGKILL the whole process tree, resume, SIGKILL again, resume to the end; nothing is lost.

    Kill 1 lands at a seeded random moment after the run has saved games in flight and finished games;
    while that run lives, a second driver on the same directory is refused. Kill 2 lands in the middle
    of an arena, once the resumed run has saved a game of it. The last resume runs two self-play actors
    instead of one, with a nearer goal: the generation of that arena.
    """
    rng = random.Random(2026)
    run_dir = tmp_path / "run"
    arena = ["--set", "arena.games=8", "--set", "arena.concurrency=2", "--set", "arena.num_simulations=16",
             "--set", "arena.max_plies=60"]
    killed: list[dict] = []
    games_on_disk = 0
    for kill in range(2):
        command = (train_command(run_dir, "--set", "max_generations=20", *arena) if kill == 0
                   else train_command(run_dir, "--resume", config=None))
        process = start(command, subprocess.DEVNULL)
        try:
            if kill == 0:
                # Saves observed: games in flight (replay/inflight.npz) and finished games (a shard).
                wait_for(lambda: (run_dir / "replay" / "inflight.npz").exists() and run_state(run_dir)["games"] > 0,
                         150, "the first saves of self-play")
                code = main(["train", "--resume", "--run-dir", str(run_dir)])
                err = capsys.readouterr().err
                assert code == 2 and f"in use by another train (host {socket.gethostname()} pid {process.pid})" in err, err
                time.sleep(rng.uniform(0.0, 3.0))  # a random moment after the saves, not a synchronisation
            else:  # this driver has saved an arena game, and its arena is not finished
                wait_for(lambda: _mid_arena(run_dir) and _arena_lines(run_dir) > lines_at_first_kill, 240,
                         "an arena game saved by the resumed run, and more to play")
        finally:
            kill_session(process)
        assert not session_pids(process.pid)  # the kill took every process of the run
        killed.append(run_state(run_dir))
        if kill == 0:
            lines_at_first_kill = _arena_lines(run_dir)
        games_on_disk = sum(s.num_games for s in _shards(run_dir))
        assert games_on_disk >= killed[-1]["games"] > 0  # every game counted is on disk; none was lost

    target = killed[-1]["generation"] + 1  # the arena cut by the kill decides it
    result = run_to_end(train_command(run_dir, "--resume", "--set", f"max_generations={target}",
                                      "--set", "workers.num_selfplay_workers=2", "--oversubscribe", config=None))
    assert result.returncode == 0, result.stderr[-3000:]
    state = run_state(run_dir)
    shards = _shards(run_dir)
    assert state["games"] == sum(s.num_games for s in shards) >= games_on_disk  # counted exactly once each
    assert state["positions"] == sum(s.num_positions for s in shards)
    steps = [k["learner_step"] for k in killed]
    assert steps == sorted(steps) and state["learner_step"] >= steps[-1]
    events = read_jsonl(run_dir / "events.jsonl")
    learner_steps = [e["step"] for e in events if e["event"] == "learner_started"]
    assert learner_steps == sorted(learner_steps)  # each restart reloads at least what was saved
    resumes = [e for e in events if e["event"] == "run_resumed"]
    assert len(resumes) == 2 and resumes[-1]["pending_arena"] is not None  # the last kill was mid-arena
    # A resume runs the config it is given, and says what that changes from the run's own config.yaml.
    assert resumes[0]["config_changes"] == []
    assert sorted(c.split(":")[0] for c in resumes[-1]["config_changes"]) == [
        "max_generations", "workers.num_selfplay_workers"]
    assert "resuming with 2 setting(s)" in result.stdout + result.stderr
    assert resumes[-1]["games"] == games_on_disk and resumes[-1]["generation"] == killed[-1]["generation"]
    # Self-play games in flight at a kill were continued by the next driver (the first kill came after a save).
    assert [e["games"] > 0 for e in events if e["event"] == "inflight_restored"] == [True, True]
    assert sum(1 for e in events if e["event"] == "selfplay_started") >= 3  # 1, maybe 1, then 2 actors
    assert [a["generation"] for a in state["arenas"]] == list(range(1, target + 1)) and state["pending_arena"] is None
    on_disk = _arena_games_on_disk(run_dir)
    for record in state["arenas"]:
        lines = on_disk[record["generation"]]
        assert sorted(line["index"] for line in lines) == list(range(8))  # each game played exactly once
        assert record["wins"] + record["draws"] + record["losses"] == 8
        assert (run_dir / "arena" / f"gen-{record['generation']:04d}.pgn").read_text().count("[Result ") == 8
    continued = on_disk[resumes[-1]["pending_arena"]]
    processes = len({line["pid"] for line in continued})
    assert processes >= 2  # begun by one driver, finished by a later one (an arena may span several kills)
    arena_events = {e["generation"]: e for e in events if e["event"] == "arena"}
    assert arena_events[resumes[-1]["pending_arena"]]["processes"] == processes


def test_a_lost_node_leaves_the_run_going_and_its_actors_come_back_with_a_new_node(tmp_path: Path) -> None:
    """Then the run goes on with both actors until a SIGTERM (a preemption notice) stops it as Ctrl-C would:
    the state saved, exit status 0."""
    from ray.cluster_utils import Cluster

    node_args = {"num_cpus": 1, "node_ip_address": "127.0.0.2", "object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**node_args, "num_cpus": 2, "include_dashboard": False})
    process = None
    try:
        worker_node = cluster.add_node(**node_args)
        cluster.wait_for_nodes()
        run_dir = tmp_path / "run"
        # Head: learner (1 CPU) + one self-play actor; the second actor can only live on the worker node.
        process = start(train_command(run_dir, "--address", cluster.address, "--set", "workers.num_selfplay_workers=2",
                                      "--set", "max_generations=0", "--set", "max_minutes=0"))

        def events(kind: str) -> list[dict]:
            return [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == kind]

        # On a loaded machine the second actor can take over WAITING_NOTICE_SECONDS to start: the run then logs
        # a waiting notice and its recovery before any node is lost. Wait until every notice has its recovery,
        # and count only the notices after the loss.
        wait_for(lambda: len(events("selfplay_started")) == 2
                 and len(events("selfplay_waiting")) == len(events("selfplay_recovered")), 120, "two self-play actors")
        assert len({e["node_id"] for e in events("selfplay_started")}) == 2
        notices = len(events("selfplay_waiting"))
        cluster.remove_node(worker_node)  # its raylet and every process on it die
        wait_for(lambda: len(events("selfplay_waiting")) > notices, 120, "the run to report the missing actor")
        assert events("selfplay_waiting")[notices]["running"] == 1 and events("selfplay_waiting")[notices]["wanted"] == 2
        games = run_state(run_dir)["games"]
        wait_for(lambda: run_state(run_dir)["games"] > games, 120, "self-play going on with one actor")
        assert process.poll() is None
        cluster.add_node(**node_args)  # a node joins: the missing actor starts there
        wait_for(lambda: len(events("selfplay_recovered")) > notices, 120, "the actor to come back")
        assert len(events("selfplay_started")) == 3
        games = run_state(run_dir)["games"]
        wait_for(lambda: run_state(run_dir)["games"] > games, 120, "self-play going on with both actors")
        process.send_signal(signal.SIGTERM)  # a preemption notice (a spot node, Slurm, docker stop): as Ctrl-C
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        assert len(events("selfplay_started")) == 3 and events("selfplay_died")
        assert "1 of 2 actors running: waiting for CPUs" in err and "stopped: interrupted" in err
    finally:
        if process is not None and process.poll() is None:
            kill_session(process)
        cluster.shutdown()
