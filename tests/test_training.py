"""The training driver end to end on one shared two-node Ray cluster (loopback only).

One ``ray.cluster_utils.Cluster`` (a head of two CPUs and one logical GPU, and a node of one CPU) serves
the whole module (no test but the GPU ones asks for the GPU, which CUDA-less torch cannot use): the
``alphazero train`` commands run in subprocesses that join it (``--address``), each in a session of
its own so that everything it starts can be found and killed by PID; the driver tests that need to
reach inside (a failing disk, a flaky actor, an arena worker that dies) run ``run_training`` in this
process against the same cluster. One smoke run (a new run from ``--init NET``, two generations, a
promotion threshold low enough that its candidates are promoted) is shared by the tests that only
read a finished run. Runs that are refused before Ray starts run the command in this process.
Preemption (the whole process tree killed) is ``tests/test_preemption.py``: those runs start their own Ray.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from alphazero.checkpoint import RunDirectory, read_jsonl
from alphazero.config import load_config
from alphazero.learn.replay import read_shard, shard_paths
from alphazero.nets.inference import int8_pays, native_cpu_precision
from alphazero.nets.network import PolicyValueNet, load_network, net_to_payload, save_network
from commands.main import main
from tests.runs import SMOKE, run_events, run_state, run_to_end, start, train_command, wait_for
from tools.sessions import kill_session

# A candidate is kept only if it loses every game. 80 steps of 64 between candidates, and at most a quarter of
# the positions trained (reuse 0.25): the second arena waits for 20,480 positions more than the first, about
# 10 s of self-play on two busy cores, while the first arena takes 1.5-3 s. Most of them come from games begun
# after the first promotion (the learner cannot run ahead). With reuse 1 (5,120 positions) the margin was
# under 2x, and a loaded CI machine once wrote no game of version 1 before the second arena ended the run.
SMOKE_SETTINGS = ["arena.threshold=0.05", "train.max_sample_reuse=0.25", "arena.steps_per_generation=80"]

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("compiled_search")]


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    node = {"node_ip_address": "127.0.0.2", "object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "num_cpus": 2, "num_gpus": 1,
                                                            "include_dashboard": False})
    try:
        cluster.add_node(**node, num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def _train_here(capsys, *args: str) -> tuple[int, str]:
    """``alphazero train ARGS`` in this process (for runs refused before Ray starts): exit code, stderr."""
    code = main(["train", *args])
    return code, capsys.readouterr().err


# ------------------------------------------------------------------------------ one finished smoke run


@pytest.fixture(scope="module")
def smoke_run(cluster, tmp_path_factory) -> Path:
    """A new run from ``--init NET`` (``NET`` is ``RUN/../init.pt``) to the smoke config's two generations."""
    base = tmp_path_factory.mktemp("smoke")
    torch.manual_seed(123)
    save_network(PolicyValueNet(load_config(SMOKE).network), base / "init.pt")
    run_dir = base / "run"
    settings = [f"--set={setting}" for setting in SMOKE_SETTINGS]
    result = run_to_end(train_command(run_dir, "--init", str(base / "init.pt"), *settings, address=cluster.address))
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_smoke_run_end_to_end(smoke_run: Path) -> None:
    run = RunDirectory(smoke_run)
    state = run.read_state()
    config = load_config(SMOKE, SMOKE_SETTINGS)
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


def test_train_init_makes_the_network_generation_zero(smoke_run: Path) -> None:
    init = smoke_run.parent / "init.pt"
    generation_zero = load_network(RunDirectory(smoke_run).network_path(0)).state_dict()
    for key, value in load_network(init).state_dict().items():
        assert torch.equal(generation_zero[key], value), key
    first = run_events(smoke_run)[0]
    assert first["event"] == "run_started" and first["init"] == str(init)


def test_a_promotion_reaches_the_self_play_actors(smoke_run: Path) -> None:
    """After the first arena promotes its candidate, the actors play their new games with it (version 1)."""
    state = RunDirectory(smoke_run).read_state()
    assert state.arenas[0].promoted  # the threshold keeps a candidate only if it lost all four games
    assert state.network_version == sum(a.promoted for a in state.arenas)
    assert state.best_generation == max(a.generation for a in state.arenas if a.promoted)
    versions = np.concatenate([read_shard(path).network_versions for path in shard_paths(smoke_run / "replay")])
    # Games begun before the promotion are tagged 0 (those in flight finish with the new network), games
    # begun after it 1; the second promotion ends the run.
    assert versions[0] == 0 and 1 in versions and versions.max() <= state.network_version


def test_tensorboard_shows_the_learner_self_play_and_arena_curves(smoke_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    state = RunDirectory(smoke_run).read_state()
    scalars: dict[str, list] = {}
    files = sorted((smoke_run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) >= 2  # the driver's and the learner's
    for path in files:
        events = EventAccumulator(str(path))
        events.Reload()
        for tag in events.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend(events.Scalars(tag))
    assert {"learner/loss", "learner/value_loss", "learner/policy_loss", "learner/learning_rate",
            "selfplay/games_per_s", "selfplay/positions_per_s", "arena/elo", "arena/score", "arena/promoted",
            "value_targets/decisive", "value_targets/max_length"} <= set(scalars)
    assert max(point.step for point in scalars["learner/loss"]) == state.learner_step
    assert [(p.step, p.value) for p in sorted(scalars["arena/score"], key=lambda p: p.step)] == [
        (arena.learner_step, pytest.approx(arena.score)) for arena in state.arenas]


def test_new_run_refuses_existing_directory_and_corrupt_files_are_named(smoke_run: Path, tmp_path: Path, capsys) -> None:
    code, err = _train_here(capsys, "--run-dir", str(smoke_run), "--config", str(SMOKE))
    assert code == 2 and "already holds a run" in err

    best = f"networks/gen-{run_state(smoke_run)['best_generation']:04d}.pt"
    for victim, cut in (("learner.pt", 100), ("state.json", 20), (best, 50)):
        copy = tmp_path / victim.replace("/", "_")
        shutil.copytree(smoke_run, copy)
        target = copy / victim
        data = target.read_bytes()
        target.write_bytes(data[:cut])
        before = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name != ".train.lock"}
        code, err = _train_here(capsys, "--run-dir", str(copy), "--resume")
        assert code == 2, err[-2000:]
        assert str(target) in err or victim.split("/")[-1] in err
        after = {p: p.stat().st_size for p in copy.rglob("*") if p.is_file() and p.name != ".train.lock"}
        assert after == before, "a failed resume must not change the run directory"

    copy = tmp_path / "shard"
    shutil.copytree(smoke_run, copy)
    shard = shard_paths(copy / "replay")[0]
    shard.write_bytes(shard.read_bytes()[:64])
    code, err = _train_here(capsys, "--run-dir", str(copy), "--resume")
    assert code == 2 and shard.name in err


def test_bad_config_and_conflicting_resume_are_refused(smoke_run: Path, tmp_path: Path, capsys) -> None:
    bad = _train_here(capsys, "--run-dir", str(tmp_path / "new"), "--config", str(SMOKE), "--set", "train.batchsize=3")
    assert bad[0] == 2 and "train.batchsize" in bad[1]
    wrong_type = _train_here(capsys, "--run-dir", str(tmp_path / "new"), "--config", str(SMOKE),
                             "--set", "search.num_simulations=many")
    assert wrong_type[0] == 2 and "search.num_simulations" in wrong_type[1]
    conflict = _train_here(capsys, "--run-dir", str(smoke_run), "--config", str(SMOKE), "--resume",
                           "--set", "network.channels=32")
    assert conflict[0] == 2 and "network.channels" in conflict[1]
    assert not (tmp_path / "new").exists()


def test_a_config_larger_than_the_machine_is_refused_before_anything_starts(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "big"
    code, err = _train_here(capsys, "--run-dir", str(run_dir), "--config", str(SMOKE),
                            "--set", "workers.num_selfplay_workers=500")
    assert code == 2
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err[-2000:]
    assert "asks for 501 CPUs" in lines[0] and "--address" in lines[0] and "--oversubscribe" in lines[0]
    assert "workers.num_selfplay_workers=" in lines[0]
    assert not run_dir.exists()  # nothing started, nothing written


# ------------------------------------------------------------------------------ runs on the shared cluster


def test_actor_start_is_retried_then_fails_with_a_clear_error(cluster, tmp_path: Path) -> None:
    import ray

    from workers.cluster import ACTOR_START_ATTEMPTS, RunError, start_actor

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

    ray.init(address=cluster.address, log_to_driver=False)
    try:
        events: list[dict] = []

        def log_event(name: str, **fields) -> None:
            events.append({"event": name, **fields})

        cls = ray.remote(num_cpus=0, max_restarts=0)(_FlakyActor)

        counter = tmp_path / "one-death"
        _, info = start_actor("flaky", lambda: cls.remote(str(counter), 1), timeout=60, log_event=log_event,
                              retry_delay=0.1)
        assert info == {"attempt": 2}
        assert [e["attempt"] for e in events if e["event"] == "actor_start_failed"] == [1]

        events.clear()
        counter = tmp_path / "always-dies"
        with pytest.raises(RunError, match="flaky actor failed to start"):
            start_actor("flaky", lambda: cls.remote(str(counter), 99), timeout=60, log_event=log_event, retry_delay=0.1)
        assert [e["attempt"] for e in events if e["event"] == "actor_start_failed"] == [1, 2, 3]
        assert int(counter.read_text()) == ACTOR_START_ATTEMPTS
    finally:
        ray.shutdown()


def test_a_failed_write_stops_the_run_with_one_line_and_resume_works(cluster, tmp_path: Path, monkeypatch) -> None:
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
    config = load_config(SMOKE, ["max_generations=2"])
    with pytest.raises(RunError) as caught:
        run_training(config, run_dir, address=cluster.address)
    message = str(caught.value)
    assert "No space left on device" in message and str(run_dir / "replay") in message and "--resume" in message
    assert "\n" not in message
    shards = shard_paths(run_dir / "replay")
    assert len(shards) == 2 and not list((run_dir / "replay").glob(".*"))  # no half-written file left
    state = RunDirectory(run_dir).read_state()
    assert state.games == sum(read_shard(p).num_games for p in shards) > 0

    monkeypatch.undo()  # space is back
    resumed = run_training(config, run_dir, resume=True, address=cluster.address)
    assert resumed.generation == 2 and resumed.games > state.games


def test_gpu_shares_pack_onto_one_gpu_and_actors_without_cuda_fall_back_to_the_cpu(cluster, tmp_path: Path) -> None:
    """The head declares one logical GPU on a machine without CUDA. Three self-play actors of 0.25 (started
    by the pool, as a run starts them) and the learner of 0.25 (started by the driver) all land on it: Ray
    tells each it has GPU 0; each finds no CUDA, runs on the CPU, says why (events, one console line) and
    works. A fifth share is refused by the check a run makes before its first actor, with the numbers."""
    import ray

    from workers.cluster import RunError, check_cluster_gpus
    from workers.driver import Driver
    from workers.progress import Progress

    config = load_config(SMOKE, ["workers.num_selfplay_workers=3", "workers.selfplay_gpus=0.25",
                                 "workers.cpus_per_selfplay_worker=0", "workers.learner_gpus=0.25",
                                 "workers.learner_cpus=0", "selfplay.max_plies=4", "selfplay.games_per_call=1"])
    lines: list[str] = []

    class _Lines(Progress):
        def message(self, text: str) -> None:
            lines.append(text)

    ray.init(address=cluster.address, log_to_driver=False)
    driver = Driver(config, tmp_path / "run", resume=False, progress=_Lines())
    learner = None
    try:
        check_cluster_gpus(config)  # exactly one GPU's worth: fits
        learner, learner_info = driver._make_learner()
        driver.pool.set_weights(0, ray.put(net_to_payload(PolicyValueNet(config.network))))
        driver.pool.start_all(0, [[], [], []])
        for ref, (kind, index) in list(driver.pending.items()):
            assert kind == "start"
            ray.wait([ref], timeout=120)
            driver.pending.pop(ref)
            driver.pool.on_start(index, ref)  # logs selfplay_started, then submits the first play call
        assert driver.pool.num_running == 3
        started = run_events(tmp_path / "run", "selfplay_started")
        for info in [learner_info, *started]:
            assert info["gpu_ids"] == ["0"] and info["device"] == "cpu", info
            assert "was given GPU 0 by Ray" in info["warning"] and "runs on the CPU" in info["warning"]
        # the CPU's settings (self-play's: int8 where it pays), not CUDA's fp16
        assert {info["precision"] for info in started} == {"int8" if int8_pays() else native_cpu_precision()}
        assert ray.available_resources().get("GPU", 0.0) == 0.0  # four quarters: the GPU is full
        warnings = [line for line in lines if line.startswith("warning:")]
        assert len(warnings) == 2 and "learner was given GPU 0" in warnings[0]  # the learner's, one for the actors
        expected = "int8 (onnx)" if int8_pays() else f"{native_cpu_precision()} ({started[0]['backend']})"
        assert [line for line in lines if line.startswith("self-play network:")] == [f"self-play network: cpu {expected}"]
        plays = [ref for ref, (kind, _) in driver.pending.items() if kind == "play"]
        games, counters = ray.get(plays[0], timeout=120)
        assert counters["positions"] > 0  # the fallen-back actor plays

        one_more = load_config(SMOKE, ["workers.num_selfplay_workers=4", "workers.selfplay_gpus=0.25",
                                       "workers.learner_gpus=0.25"])
        with pytest.raises(RunError) as caught:
            check_cluster_gpus(one_more)
        message = str(caught.value)
        assert "asks for 1.25 GPUs (4 self-play x 0.25 + learner 0.25 + arena 0)" in message
        assert "the cluster has 1 GPU" in message and "num_selfplay_workers=3 to fit" in message
    finally:
        driver.pool.kill_all()
        if learner is not None:
            ray.kill(learner)
        driver.close()
        ray.shutdown()


def test_selfplay_spreads_over_both_nodes_and_a_dead_or_failing_arena_worker_loses_no_game(cluster, tmp_path: Path,
                                                                                          monkeypatch) -> None:
    """Two self-play actors, one on each node. Generation 1: the first arena worker dies after one game;
    its replacement plays the three missing games. Generation 2: the same worker (one plays every arena)
    fails in its first arena (an error in its code); that arena is abandoned, and the next candidate's
    arena, on a new worker, decides the generation."""
    import workers.driver
    from workers.actors import ArenaGames, ArenaWorker

    marks = tmp_path / "arena-workers"
    marks.mkdir()

    # Defined here so that Ray ships it by value; each arena begun writes its games and its process to ``marks``.
    class _FailingArenaWorker(ArenaWorker):
        def play(self, max_seconds: float, arena: ArenaGames | None = None):
            if arena is not None:
                generation = arena.generation
                self.generation, self.number, self.calls = generation, len(list(marks.glob(f"{generation}-*"))), 0
                (marks / f"{generation}-{self.number}").write_text(
                    json.dumps({"games": [entry[0] for entry in arena.schedule], "pid": os.getpid()}))
            self.calls += 1
            if (self.generation, self.number, self.calls) == (1, 0, 2):
                os._exit(1)  # the process dies, as on a SIGKILL
            if (self.generation, self.number) == (2, 0):
                raise ValueError("a bug in the arena")
            return super().play(max_seconds, arena)

    monkeypatch.setattr(workers.driver, "ArenaWorker", _FailingArenaWorker)
    run_dir = tmp_path / "run"
    # One game at a time: the first play call returns when game 0 ends.
    config = load_config(SMOKE, ["max_generations=2", "arena.concurrency=1", "workers.num_selfplay_workers=2"])
    state = workers.driver.run_training(config, run_dir, address=cluster.address)
    nodes = {e["node_id"] for e in run_events(run_dir, "selfplay_started")}
    assert len(nodes) == 2, nodes

    given = {path.name: json.loads(path.read_text()) for path in marks.iterdir()}
    assert {name: mark["games"] for name, mark in given.items()} == {
        "1-0": [0, 1, 2, 3], "1-1": [1, 2, 3], "2-0": [0, 1, 2, 3], "2-1": [0, 1, 2, 3]}
    pids = {name: mark["pid"] for name, mark in given.items()}
    assert pids["1-0"] != pids["1-1"] == pids["2-0"] != pids["2-1"]  # replaced after a death or a failure only
    died = run_events(run_dir, "arena_worker_died")
    assert [e["generation"] for e in died] == [1]
    failed = run_events(run_dir, "arena_failed")
    assert [e["generation"] for e in failed] == [2] and "a bug in the arena" in failed[0]["error"]
    started = [(e["generation"], e["learner_step"]) for e in run_events(run_dir, "arena_started")]
    assert [g for g, _ in started] == [1, 2, 2] and started[2][1] > started[1][1]  # a newer candidate
    assert state.generation == 2 and [a.generation for a in state.arenas] == [1, 2] and state.pending_arena is None
    assert state.arenas[1].learner_step == started[2][1]
    for generation in (1, 2):
        lines = read_jsonl(run_dir / "arena" / f"gen-{generation:04d}.jsonl")
        assert sorted(line["index"] for line in lines) == [0, 1, 2, 3]  # every game once, none lost to the death


def test_at_max_minutes_arena_final_plays_the_newest_weights_in_a_last_arena(cluster, tmp_path: Path, capsys) -> None:
    """``arena.final``: no arena falls due during the run; at ``max_minutes`` self-play stops and the learner's
    weights play one arena, decided and recorded before the run stops. A resume finds nothing newer to play, and
    stops before it starts anything."""
    from workers.driver import run_training

    run_dir = tmp_path / "run"
    config = load_config(SMOKE, ["max_generations=0", "max_minutes=0.3", "arena.final=true",
                                 "arena.steps_per_generation=100000"])
    state = run_training(config, run_dir, address=cluster.address)
    assert state.learner_step > 0 and state.elapsed_s >= 18
    assert [(a.generation, a.learner_step) for a in state.arenas] == [(1, state.learner_step)]
    assert state.generation == 1 and state.pending_arena is None
    assert len(read_jsonl(run_dir / "arena" / "gen-0001.jsonl")) == 4
    events = [e["event"] for e in run_events(run_dir)]
    assert events.index("arena_started") < events.index("arena") < events.index("run_stopped")
    # Self-play stopped at the deadline: every game is in a shard, and none came after the arena began.
    shards = shard_paths(run_dir / "replay")
    assert state.games == sum(read_shard(p).num_games for p in shards)
    assert max(p.stat().st_mtime for p in shards) <= run_events(run_dir, "arena_started")[0]["time"]
    assert run_events(run_dir, "run_stopped")[-1]["reason"] == "reached max_minutes=0.3"
    err = capsys.readouterr().err
    assert "self-play stopped; arena.final" in err and "| self-play stopped |" in err.split("[gen 1] arena")[-1]

    # The resume has nothing left to do: it says so and starts no actor (the events are as they were).
    events_before = run_events(run_dir)
    resumed = run_training(load_config(RunDirectory(run_dir).config_path), run_dir, resume=True, address=cluster.address)
    assert len(resumed.arenas) == 1 and resumed.learner_step == state.learner_step
    assert run_events(run_dir) == events_before
    assert "stopped: reached max_minutes=0.3, nothing left to do" in capsys.readouterr().err


def test_with_no_arena_games_every_candidate_is_promoted_and_reaches_self_play(cluster, tmp_path: Path) -> None:
    """``arena.games=0`` (AlphaZero's continual update): each generation's candidate becomes the best with no
    arena games, and the self-play actors play it."""
    from workers.driver import run_training

    run_dir = tmp_path / "run"
    state = run_training(load_config(SMOKE, ["arena.games=0", "arena.steps_per_generation=60"]), run_dir,
                         address=cluster.address)
    assert (state.generation, state.best_generation, state.network_version) == (2, 2, 2)
    assert state.arenas == [] and state.pending_arena is None and not list((run_dir / "arena").glob("*.jsonl"))
    promoted = run_events(run_dir, "promoted")
    assert [(e["generation"], e["gated"]) for e in promoted] == [(1, False), (2, False)]
    assert 0 < promoted[0]["learner_step"] < promoted[1]["learner_step"] <= state.learner_step
    assert [e["generation"] for e in run_events(run_dir, "selfplay_stats")] == [1, 2]
    assert load_network(run_dir / "networks" / "gen-0002.pt").config == load_config(SMOKE).network
    # Self-play switched to the promoted network: games begun after the first promotion are tagged 1.
    versions = np.concatenate([read_shard(path).network_versions for path in shard_paths(run_dir / "replay")])
    assert versions[0] == 0 and 1 in versions


def test_killed_actors_are_replaced_and_ctrl_c_stops_the_run_with_its_state_saved(cluster, tmp_path: Path) -> None:
    """A killed self-play actor and a killed learner are replaced and the run goes on (an arena is decided
    after the learner came back); Ctrl-C then stops it: the learner call in flight is waited for and the
    state saved. The resume goes on, and stops by itself at ``max_minutes`` of run time (both processes')."""
    from workers.driver import run_training

    run_dir = tmp_path / "run"
    process = start(train_command(run_dir, "--set", "max_generations=0", "--set", "max_minutes=0",
                                    address=cluster.address))
    try:
        wait_for(lambda: run_events(run_dir, "selfplay_started") and run_state(run_dir)["games"] > 0, 120, "self-play")
        os.kill(run_events(run_dir, "selfplay_started")[0]["pid"], signal.SIGKILL)
        wait_for(lambda: run_state(run_dir)["learner_step"] > 0, 120, "training")
        saved_step = run_state(run_dir)["learner_step"]
        os.kill(run_events(run_dir, "learner_started")[0]["pid"], signal.SIGKILL)

        def arena_after_the_new_learner() -> bool:
            kinds = [e["event"] for e in run_events(run_dir)]
            starts = [number for number, kind in enumerate(kinds) if kind == "learner_started"]
            return len(starts) == 2 and "arena" in kinds[starts[1]:]

        wait_for(arena_after_the_new_learner, 120, "an arena decided after the learner came back")
        wait_for(lambda: len(run_events(run_dir, "selfplay_started")) == 2, 120, "the new self-play actor")
        process.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            kill_session(process)
    assert process.returncode == 0, err[-3000:]
    events = run_events(run_dir)
    assert any(e["event"] == "selfplay_died" for e in events)
    assert any(e["event"] == "learner_died" for e in events)
    assert len([e for e in events if e["event"] == "selfplay_started"]) == 2
    learners = [e for e in events if e["event"] == "learner_started"]
    assert len(learners) == 2 and learners[1]["step"] >= saved_step  # reloaded its last save
    assert "stopped: interrupted" in err and events[-1]["event"] == "run_stopped" and events[-1]["reason"] == "interrupted"
    run = RunDirectory(run_dir)
    state = run.read_state()
    assert json.loads(out.splitlines()[-1])["learner_step"] == state.learner_step
    # The learner call in flight was waited for: the state, the learner's save and its metrics agree.
    learner = torch.load(run.learner_path, weights_only=True)
    assert state.learner_step == learner["step"] == read_jsonl(run.metrics_path)[-1]["step"]
    assert state.samples_trained == learner["samples_trained"]
    assert state.games == sum(read_shard(p).num_games for p in shard_paths(run.replay_dir)) > 0

    minutes = round(state.elapsed_s / 60 + 0.05, 3)
    resumed = run_training(load_config(run.config_path, [f"max_minutes={minutes}"]), run_dir, resume=True,
                           address=cluster.address)
    assert resumed.elapsed_s >= minutes * 60 and resumed.learner_step >= state.learner_step
    assert resumed.games >= state.games
    stopped = run_events(run_dir)[-1]
    assert stopped["event"] == "run_stopped" and stopped["reason"] == f"reached max_minutes={minutes}"
    assert run.read_state().elapsed_s == pytest.approx(resumed.elapsed_s)
