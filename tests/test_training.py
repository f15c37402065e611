"""End-to-end training runs on Ray (loopback only): smoke run, two-node cluster, SIGKILL + resume,
a killed self-play actor, corrupt checkpoints and bad configs.

Each run is the real ``alphazero train`` command in a subprocess of its own session, so every
process it starts (Ray's included) can be found by session id and killed by PID.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphazero.checkpoint import RunDirectory, read_jsonl
from alphazero.config import load_config
from alphazero.learn.replay import read_shard, shard_paths

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _train_command(run_dir: Path, *extra: str, config: Path | None = SMOKE) -> list[str]:
    command = [sys.executable, "-m", "commands.main", "train", "--run-dir", str(run_dir), *extra]
    if config is not None:
        command += ["--config", str(config)]
    return command


def _session_pids(session: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) == session:
                pids.append(int(entry.name))
        except (ProcessLookupError, PermissionError):
            continue
    return pids


def _kill_session(process: subprocess.Popen) -> None:
    """SIGKILL every process of the run's session (the driver, Ray's services, its workers)."""
    for pid in _session_pids(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(timeout=30)
    deadline = time.time() + 30
    while _session_pids(process.pid) and time.time() < deadline:
        time.sleep(0.2)


def _run(command: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(process)
        raise
    finally:
        if process.poll() is None:
            _kill_session(process)
    # Whatever the driver left behind in its session is a leak.
    leftovers = _session_pids(process.pid)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _state(run_dir: Path) -> dict:
    return json.loads((run_dir / "state.json").read_text())


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("smoke") / "run"
    result = _run(_train_command(run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_smoke_run_end_to_end(smoke_run: Path) -> None:
    run = RunDirectory(smoke_run)
    state = run.read_state()
    config = load_config(SMOKE)
    assert state.generation == 2 and len(state.arenas) == 2
    for generation, arena in enumerate(state.arenas, 1):
        assert arena.generation == generation
        assert arena.wins + arena.draws + arena.losses == config.arena.games
        assert arena.promoted == (arena.score >= config.arena.threshold)
        assert run.network_path(generation).is_file()
        assert (smoke_run / "arena" / f"gen-{generation:04d}.pgn").read_text().count("[Result ") == config.arena.games
    assert run.network_path(0).is_file() and run.learner_path.is_file()
    assert (smoke_run / "arena.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run.read_config() == config
    shards = shard_paths(run.replay_dir)
    games = [read_shard(p) for p in shards]
    assert sum(s.num_games for s in games) == state.games > 0
    assert sum(s.num_positions for s in games) == state.positions
    metrics = read_jsonl(run.metrics_path)
    assert metrics and metrics[-1]["step"] == state.learner_step
    assert {"loss", "value_loss", "policy_loss", "learning_rate", "samples_per_s"} <= set(metrics[-1])
    # The reuse bound holds: samples trained never exceed max_sample_reuse x positions.
    assert state.samples_trained <= config.train.max_sample_reuse * state.positions
    events = [e["event"] for e in read_jsonl(run.events_path)]
    assert events[0] == "run_started" and events[-1] == "run_stopped" and events.count("arena") == 2


def test_new_run_refuses_existing_directory_and_corrupt_files_are_named(smoke_run: Path, tmp_path: Path) -> None:
    again = _run(_train_command(smoke_run), timeout=60)
    assert again.returncode == 2 and "already holds a run" in again.stderr

    best = f"networks/gen-{_state(smoke_run)['best_generation']:04d}.pt"
    for victim, cut in (("learner.pt", 100), ("state.json", 20), (best, 50)):
        copy = tmp_path / victim.replace("/", "_")
        shutil.copytree(smoke_run, copy)
        target = copy / victim
        data = target.read_bytes()
        target.write_bytes(data[:cut])
        before = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name != ".train.lock"}
        result = _run(_train_command(copy, "--resume", config=None), timeout=60)
        assert result.returncode == 2, result.stderr[-2000:]
        assert str(target) in result.stderr or victim.split("/")[-1] in result.stderr
        after = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name != ".train.lock"}
        assert after == before, "a failed resume must not change the run directory"

    copy = tmp_path / "shard"
    shutil.copytree(smoke_run, copy)
    shard = shard_paths(copy / "replay")[0]
    shard.write_bytes(shard.read_bytes()[:64])
    result = _run(_train_command(copy, "--resume", config=None), timeout=60)
    assert result.returncode == 2 and shard.name in result.stderr


def test_bad_config_and_conflicting_resume_are_refused(smoke_run: Path, tmp_path: Path) -> None:
    bad = _run(_train_command(tmp_path / "new", "--set", "train.batchsize=3"), timeout=60)
    assert bad.returncode == 2 and "train.batchsize" in bad.stderr
    wrong_type = _run(_train_command(tmp_path / "new", "--set", "search.num_simulations=many"), timeout=60)
    assert wrong_type.returncode == 2 and "search.num_simulations" in wrong_type.stderr
    conflict = _run(_train_command(smoke_run, "--resume", "--set", "network.channels=32"), timeout=60)
    assert conflict.returncode == 2 and "network.channels" in conflict.stderr
    assert not (tmp_path / "new").exists()


def test_sigkill_then_resume_continues_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = subprocess.Popen(_train_command(run_dir, "--set", "max_generations=20"), cwd=ROOT, env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: (run_dir / "state.json").exists() and _state(run_dir)["generation"] >= 1, 150, "generation 1")
    finally:
        _kill_session(process)
    assert not _session_pids(process.pid)
    killed = _state(run_dir)
    games_on_disk = sum(read_shard(p).num_games for p in shard_paths(run_dir / "replay"))
    assert games_on_disk >= killed["games"] > 0  # every game counted is on disk; none was lost

    # Resume with a different number of self-play actors and a nearer goal.
    target = killed["generation"] + 1
    result = _run(_train_command(run_dir, "--resume", "--set", f"max_generations={target}",
                                 "--set", "workers.num_selfplay_workers=2", "--oversubscribe", config=None))
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = _state(run_dir)
    assert resumed["generation"] == target
    assert [a["generation"] for a in resumed["arenas"]] == list(range(1, target + 1))
    assert resumed["games"] >= games_on_disk and resumed["learner_step"] >= killed["learner_step"]
    events = read_jsonl(run_dir / "events.jsonl")
    resumed_event = next(e for e in events if e["event"] == "run_resumed")
    assert resumed_event["games"] == games_on_disk and resumed_event["generation"] == killed["generation"]
    assert sum(1 for e in events if e["event"] == "selfplay_started") >= 3  # 1 before, 2 after


def test_killed_selfplay_actor_and_learner_are_replaced_and_run_completes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = subprocess.Popen(_train_command(run_dir, "--set", "max_generations=3"), cwd=ROOT, env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        def started(kind: str) -> list[dict]:
            return [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == kind]

        _wait_for(lambda: started("selfplay_started") and (run_dir / "state.json").exists() and _state(run_dir)["games"] > 0,
                  120, "self-play")
        os.kill(started("selfplay_started")[0]["pid"], signal.SIGKILL)
        _wait_for(lambda: _state(run_dir)["learner_step"] > 0, 120, "training")
        saved_step = _state(run_dir)["learner_step"]
        os.kill(started("learner_started")[0]["pid"], signal.SIGKILL)
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            _kill_session(process)
    assert process.returncode == 0, err[-3000:]
    events = read_jsonl(run_dir / "events.jsonl")
    assert any(e["event"] == "selfplay_died" for e in events)
    assert any(e["event"] == "learner_died" for e in events)
    assert len([e for e in events if e["event"] == "selfplay_started"]) == 2
    learners = [e for e in events if e["event"] == "learner_started"]
    assert len(learners) == 2 and learners[1]["step"] >= saved_step  # reloaded its last save
    assert _state(run_dir)["generation"] == 3


def test_two_node_cluster_places_selfplay_on_both_nodes(tmp_path: Path) -> None:
    import ray
    from ray.cluster_utils import Cluster

    from workers.driver import run_training

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "node_ip_address": "127.0.0.2", "object_store_memory": 100 * 1024 * 1024,
        "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.2", object_store_memory=100 * 1024 * 1024)
        cluster.wait_for_nodes()
        config = load_config(SMOKE, ["workers.num_selfplay_workers=2", "max_generations=1"])
        run_dir = tmp_path / "run"
        state = run_training(config, run_dir, address=cluster.address)
        assert state.generation == 1
        nodes = {e["node_id"] for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == "selfplay_started"}
        assert len(nodes) == 2, nodes
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def test_actor_start_is_retried_then_fails_with_a_clear_error(tmp_path: Path) -> None:
    import ray

    from workers.cluster import ACTOR_START_ATTEMPTS, RunError, start_actor, start_ray

    # Defined here so that Ray ships it by value (the test module is not importable by its workers).
    class _FlakyActor:
        """Dies in ``info()`` while the shared counter file says so: a start Ray loses."""

        def __init__(self, counter: str, deaths: int) -> None:
            self.counter, self.deaths = Path(counter), deaths

        def info(self) -> dict:
            seen = int(self.counter.read_text()) if self.counter.exists() else 0
            self.counter.write_text(str(seen + 1))
            if seen < self.deaths:
                os._exit(1)
            return {"attempt": seen + 1}

    assert start_ray(None, num_cpus=1, object_store_memory_mb=100, log_to_driver=False)
    try:
        events: list[dict] = []

        def log_event(name: str, **fields) -> None:
            events.append({"event": name, **fields})

        cls = ray.remote(num_cpus=0, max_restarts=0)(_FlakyActor)

        counter = tmp_path / "one-death"
        _, info = start_actor("flaky", lambda: cls.remote(str(counter), 1), timeout=60, log_event=log_event)
        assert info == {"attempt": 2}
        assert [e["attempt"] for e in events if e["event"] == "actor_start_failed"] == [1]

        events.clear()
        counter = tmp_path / "always-dies"
        with pytest.raises(RunError, match="flaky actor failed to start"):
            start_actor("flaky", lambda: cls.remote(str(counter), 99), timeout=60, log_event=log_event)
        assert int(counter.read_text()) == ACTOR_START_ATTEMPTS
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------ what clusters do to runs


def test_a_config_larger_than_the_machine_is_refused_before_anything_starts(tmp_path: Path) -> None:
    run_dir = tmp_path / "big"
    result = _run(_train_command(run_dir, "--set", "workers.num_selfplay_workers=500"), timeout=60)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "asks for 501 CPUs" in lines[0] and "--address" in lines[0] and "--oversubscribe" in lines[0]
    assert "workers.num_selfplay_workers=" in lines[0]
    assert not run_dir.exists()  # nothing started, nothing written


def _arena_games_on_disk(run_dir: Path) -> dict[int, list[dict]]:
    games: dict[int, list[dict]] = {}
    for path in sorted((run_dir / "arena").glob("gen-*.jsonl")):
        games[int(path.stem.split("-")[1])] = read_jsonl(path)
    return games


def _mid_arena(run_dir: Path) -> bool:
    """True while the arena in flight has saved some, not all, of its games."""
    try:
        pending = _state(run_dir).get("pending_arena")
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    if not pending:
        return False
    saved = len(read_jsonl(run_dir / "arena" / f"gen-{pending['generation']:04d}.jsonl"))
    return 0 < saved < 2 * len(pending["openings"])


def test_chaos_sigkills_at_random_moments_lose_nothing_and_arenas_complete(tmp_path: Path) -> None:
    """SIGKILL the whole process tree at seeded random moments, resume each time; nothing is lost.

    Two kills at random moments, one in the middle of an arena; a second driver started on the run
    directory while the first runs is refused. Then the run goes to its end.
    """
    rng = random.Random(2026)
    run_dir = tmp_path / "run"
    settings = ["--set", "max_generations=4", "--set", "arena.games=8", "--set", "arena.concurrency=2",
                "--set", "arena.num_simulations=16", "--set", "arena.max_plies=60"]
    kills = 0
    step_after_kill: list[int] = []
    while kills < 3:
        command = (_train_command(run_dir, *settings) if kills == 0
                   else _train_command(run_dir, "--resume", *settings, config=None))
        process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            _wait_for(lambda: (run_dir / "state.json").exists(), 120, "the run's state")
            if kills == 0:
                second = _run(_train_command(run_dir, "--resume", config=None), timeout=60)
                assert second.returncode == 2
                assert f"in use by another train (host {socket.gethostname()} pid {process.pid})" in second.stderr
            if kills < 2:
                time.sleep(rng.uniform(4.0, 12.0))
            else:
                _wait_for(lambda: _mid_arena(run_dir), 240, "an arena with some of its games played")
        finally:
            _kill_session(process)
        kills += 1
        state = _state(run_dir)
        shards = [read_shard(path) for path in shard_paths(run_dir / "replay")]  # every shard loads
        assert sum(s.num_games for s in shards) >= state["games"]  # every game counted is on disk
        step_after_kill.append(state["learner_step"])

    result = _run(_train_command(run_dir, "--resume", *settings, config=None))
    assert result.returncode == 0, result.stderr[-3000:]
    state = _state(run_dir)
    shards = [read_shard(path) for path in shard_paths(run_dir / "replay")]
    assert state["games"] == sum(s.num_games for s in shards)  # counted exactly once each
    assert state["positions"] == sum(s.num_positions for s in shards)
    assert step_after_kill == sorted(step_after_kill) and state["learner_step"] >= step_after_kill[-1]
    events = read_jsonl(run_dir / "events.jsonl")
    learner_steps = [e["step"] for e in events if e["event"] == "learner_started"]
    assert learner_steps == sorted(learner_steps)  # each restart reloads at least what was saved
    resumes = [e for e in events if e["event"] == "run_resumed"]
    # A kill may land before a resumed driver has logged anything; the last one was mid-arena.
    assert 1 <= len(resumes) <= 3 and resumes[-1]["pending_arena"] is not None
    # Self-play games in flight at a kill were continued by the next driver.
    assert any(e["event"] == "inflight_restored" and e["games"] > 0 for e in events)
    assert [a["generation"] for a in state["arenas"]] == [1, 2, 3, 4] and state["pending_arena"] is None
    on_disk = _arena_games_on_disk(run_dir)
    for arena in state["arenas"]:
        lines = on_disk[arena["generation"]]
        assert sorted(line["index"] for line in lines) == list(range(8))  # each game played exactly once
        assert arena["wins"] + arena["draws"] + arena["losses"] == 8
        pgn = (run_dir / "arena" / f"gen-{arena['generation']:04d}.pgn").read_text()
        assert pgn.count("[Result ") == 8
    continued = on_disk[resumes[-1]["pending_arena"]]
    processes = len({line["pid"] for line in continued})
    assert processes >= 2  # begun by one driver, finished by a later one (an arena may span several kills)
    arena_events = {e["generation"]: e for e in events if e["event"] == "arena"}
    assert arena_events[resumes[-1]["pending_arena"]]["processes"] == processes
    restored = sum(e["games"] for e in events if e["event"] == "inflight_restored")
    print(f"chaos: {kills} kills, {len(shards)} shards, {state['games']} games, {state['positions']} positions "
          f"checked, {restored} games in flight continued, {len(state['arenas'])} arenas of 8 games complete")


def test_a_failed_write_stops_the_run_with_one_line_and_resume_works(tmp_path: Path, monkeypatch) -> None:
    import errno

    import alphazero.learn.replay
    from workers.cluster import RunError
    from workers.driver import run_training

    real_write = alphazero.learn.replay.atomic_write
    calls = {"n": 0}

    def disk_fills_up(path, write):
        if not Path(path).name.startswith("shard-"):
            return real_write(path, write)
        calls["n"] += 1  # the third shard meets a full disk
        if calls["n"] < 3:
            return real_write(path, write)

        def half_then_full(handle):
            handle.write(b"PK\x03\x04 half a shard")
            raise OSError(errno.ENOSPC, "No space left on device")

        return real_write(path, half_then_full)

    monkeypatch.setattr(alphazero.learn.replay, "atomic_write", disk_fills_up)
    run_dir = tmp_path / "run"
    config = load_config(SMOKE, ["max_generations=3"])
    with pytest.raises(RunError) as caught:
        run_training(config, run_dir)
    message = str(caught.value)
    assert "No space left on device" in message and str(run_dir / "replay") in message and "--resume" in message
    assert "\n" not in message
    shards = shard_paths(run_dir / "replay")
    assert len(shards) == 2 and not list((run_dir / "replay").glob(".*"))  # no half-written file left
    state = RunDirectory(run_dir).read_state()
    assert state.games == sum(read_shard(p).num_games for p in shards) > 0

    monkeypatch.undo()  # space is back
    resumed = run_training(config, run_dir, resume=True)
    assert resumed.generation == 3 and resumed.games > state.games


def test_a_lost_node_leaves_the_run_going_and_its_actors_come_back_with_a_new_node(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    node_args = {"num_cpus": 1, "node_ip_address": "127.0.0.2", "object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**node_args, "num_cpus": 2, "include_dashboard": False})
    process = None
    try:
        worker_node = cluster.add_node(**node_args)
        cluster.wait_for_nodes()
        run_dir = tmp_path / "run"
        # Head: learner (1 CPU) + one self-play actor; the second actor can only live on the worker node.
        process = subprocess.Popen(
            _train_command(run_dir, "--address", cluster.address, "--set", "workers.num_selfplay_workers=2",
                           "--set", "max_generations=6"),
            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

        def events(kind: str) -> list[dict]:
            return [e for e in read_jsonl(run_dir / "events.jsonl") if e["event"] == kind]

        _wait_for(lambda: len(events("selfplay_started")) == 2, 120, "two self-play actors")
        assert len({e["node_id"] for e in events("selfplay_started")}) == 2
        cluster.remove_node(worker_node)  # its raylet and every process on it die
        _wait_for(lambda: events("selfplay_waiting"), 120, "the run to report the missing actor")
        assert events("selfplay_waiting")[0]["running"] == 1 and events("selfplay_waiting")[0]["wanted"] == 2
        games = _state(run_dir)["games"]
        _wait_for(lambda: _state(run_dir)["games"] > games, 120, "self-play going on with one actor")
        assert process.poll() is None
        cluster.add_node(**node_args)  # a node joins: the missing actor starts there
        _wait_for(lambda: events("selfplay_recovered"), 120, "the actor to come back")
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        assert len(events("selfplay_started")) == 3 and events("selfplay_died")
        assert _state(run_dir)["generation"] == 6
        assert "1 of 2 actors running: waiting for CPUs" in err
    finally:
        if process is not None and process.poll() is None:
            _kill_session(process)
        cluster.shutdown()
