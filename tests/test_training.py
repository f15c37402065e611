"""End-to-end training runs on Ray (loopback only): smoke run, two-node cluster, SIGKILL + resume,
a killed self-play actor, corrupt checkpoints and bad configs.

Each run is the real ``alphazero train`` command in a subprocess of its own session, so every
process it starts (Ray's included) can be found by session id and killed by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphazero.checkpoint import RunDirectory, read_jsonl
from alphazero.config import load_config
from alphazero.replay import read_shard, shard_paths

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "configs" / "smoke.yaml"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _train_command(run_dir: Path, *extra: str, config: Path | None = SMOKE) -> list[str]:
    command = [sys.executable, "-m", "alphazero.cli", "train", "--run-dir", str(run_dir), *extra]
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
        before = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file()}
        result = _run(_train_command(copy, "--resume", config=None), timeout=60)
        assert result.returncode == 2, result.stderr[-2000:]
        assert str(target) in result.stderr or victim.split("/")[-1] in result.stderr
        after = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file()}
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
                                 "--set", "workers.num_selfplay_workers=2", config=None))
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

    from workers.cluster import start_ray
    from workers.driver import ACTOR_START_ATTEMPTS, Driver, RunError

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
        driver = Driver.__new__(Driver)  # only the run's event log is needed here
        driver.run = type("Run", (), {"log_event": lambda self, name, **fields: events.append({"event": name, **fields})})()
        cls = ray.remote(num_cpus=0, max_restarts=0)(_FlakyActor)

        counter = tmp_path / "one-death"
        _, info = driver._start_actor("flaky", lambda: cls.remote(str(counter), 1), timeout=60)
        assert info == {"attempt": 2}
        assert [e["attempt"] for e in events if e["event"] == "actor_start_failed"] == [1]

        events.clear()
        counter = tmp_path / "always-dies"
        with pytest.raises(RunError, match="flaky actor failed to start"):
            driver._start_actor("flaky", lambda: cls.remote(str(counter), 99), timeout=60)
        assert int(counter.read_text()) == ACTOR_START_ATTEMPTS
    finally:
        ray.shutdown()
