"""Starting Ray for a run (``workers.cluster``) without starting it: whether a config fits the machine.

Ray itself is started by the tests of the driver (``tests/test_driver.py``, ``tests/test_training.py``).
"""

from __future__ import annotations

import pytest

from alphazero.config import load_config
from workers.cluster import RunError, available_cpus, check_fits, gpu_placement_error


@pytest.mark.parametrize("cpus", [1, 2, 3, 8])
def test_a_config_that_fits_gets_the_machine_and_one_that_does_not_is_refused_with_the_fixes(cpus: int) -> None:
    fits = load_config(None, [f"workers.num_selfplay_workers={cpus}", "workers.learner_cpus=0"])
    assert check_fits(fits, cpus=cpus) == cpus
    big = load_config(None, [f"workers.num_selfplay_workers={cpus + 3}", "workers.learner_cpus=1",
                             "workers.arena_cpus=0.5"])
    with pytest.raises(RunError) as caught:
        check_fits(big, cpus=cpus)
    message = str(caught.value)
    assert f"asks for {cpus + 4.5:g} CPUs" in message and f"this machine has {cpus}" in message
    # The suggested fix leaves room for the learner and the arena; none when not even one actor fits.
    fix = f"--set workers.num_selfplay_workers={cpus - 2}" if cpus >= 3 else None
    assert (fix in message) if fix else "workers.num_selfplay_workers=" not in message
    assert "--address" in message and "--oversubscribe" in message
    assert check_fits(big, oversubscribe=True, cpus=cpus) == cpus + 5  # a Ray as large as the config asks


def test_the_machine_is_what_this_process_may_use() -> None:
    cpus = available_cpus()
    assert cpus >= 1
    assert check_fits(load_config(None, [f"workers.num_selfplay_workers={cpus}", "workers.learner_cpus=0"])) == cpus


def test_cuda_without_a_gpu_is_refused() -> None:
    import torch

    config = load_config(None, ["train.device=cuda"])
    if torch.cuda.is_available():
        assert check_fits(config) >= 1
    else:
        with pytest.raises(RunError, match="train.device is cuda but this machine has no CUDA GPU"):
            check_fits(config)


# -- GPU shares: placed as Ray places them, refused up front with the numbers --------------------------------


def _gpu_config(actors: int, selfplay: float, learner: float = 0.0, arena: float = 0.0):
    return load_config(None, [f"workers.num_selfplay_workers={actors}", f"workers.selfplay_gpus={selfplay}",
                              f"workers.learner_gpus={learner}", f"workers.arena_gpus={arena}"])


@pytest.mark.parametrize("actors, selfplay, learner, arena, nodes", [
    (4, 0.25, 0, 0, [1]),  # four actors share one GPU
    (3, 0.25, 0.25, 0, [1]),  # three actors and the learner share it
    (5, 0.25, 0.5, 0.25, [2]),  # the learner on half a GPU, the arena and five actors on the rest
    (3, 0.4, 0, 0, [2]),  # two of 0.4 share a GPU, the third goes to the next
    (8, 1, 2, 0, [4, 6]),  # whole GPUs: the learner's two on the driver's node
    (1, 0, 0, 0, []),  # no GPU asked for: nothing to check, even on a machine without one
])
def test_gpu_shares_that_ray_can_place_pass(actors, selfplay, learner, arena, nodes) -> None:
    assert gpu_placement_error(_gpu_config(actors, selfplay, learner, arena), nodes) is None


def test_gpu_shares_beyond_the_gpus_are_refused_with_the_numbers_and_the_fix() -> None:
    message = gpu_placement_error(_gpu_config(4, 0.25, 0.25), [1])
    assert message is not None
    assert "asks for 1.25 GPUs (4 self-play x 0.25 + learner 0.25 + arena 0)" in message
    assert "places on 2 GPUs; at most 4 self-play actors share a GPU" in message
    assert "the cluster has 1 GPU" in message and "--set workers.num_selfplay_workers=3 to fit" in message
    # The sum (1.8) fits in two GPUs, but no two actors of 0.6 share one: three are needed.
    packed = gpu_placement_error(_gpu_config(3, 0.6), [1, 1], where="this machine")
    assert packed is not None and "asks for 1.8 GPUs" in packed and "places on 3 GPUs" in packed
    assert "this machine has 2 GPUs (1, 1 per node)" in packed and "num_selfplay_workers=2 to fit" in packed
    # Whole GPUs of one actor come from one node: two nodes of one GPU do not hold a learner of two.
    learner = gpu_placement_error(_gpu_config(1, 0, learner=2), [1, 1])
    assert learner is not None and "learner asks for 2 GPUs on the driver's node" in learner and "which has 1" in learner
    assert gpu_placement_error(_gpu_config(1, 0, learner=2), [2, 1]) is None


def test_check_fits_refuses_gpu_shares_the_machine_lacks_even_when_oversubscribing() -> None:
    config = _gpu_config(2, 0.5)
    assert check_fits(config, cpus=2, gpus=1) == 2
    for oversubscribe in (False, True):
        with pytest.raises(RunError, match=r"asks for 1 GPU .* but this machine has 0 GPUs"):
            check_fits(config, oversubscribe=oversubscribe, cpus=2, gpus=0)
    assert check_fits(_gpu_config(2, 0), cpus=2, gpus=0) == 2  # the default asks for none


def test_an_actor_runs_on_cuda_only_when_given_a_gpu_that_torch_sees() -> None:
    from workers.actors import actor_device

    assert actor_device("self-play actor", 0.0, [], False) == ("cpu", None)
    assert actor_device("self-play actor", 0.0, ["0"], True) == ("cpu", None)  # no share: never an unaccounted GPU
    assert actor_device("self-play actor", 0.25, ["1"], True) == ("cuda", None)
    device, warning = actor_device("self-play actor", 0.25, ["1"], False)
    assert device == "cpu" and warning is not None
    assert "self-play actor was given GPU 1 by Ray" in warning and "sees no CUDA device" in warning
    assert "runs on the CPU" in warning
    device, warning = actor_device("learner", 1.0, [], True)
    assert device == "cpu" and warning is not None and "Ray gave it none" in warning


def test_the_shipped_gpu_configs_fit_the_machines_they_are_for() -> None:
    from pathlib import Path

    configs = Path(__file__).resolve().parents[1] / "configs"
    desktop = load_config(configs / "gpu.yaml")  # one GPU and eight cores, shares summing to one GPU
    workers = desktop.workers
    assert workers.num_selfplay_workers * workers.selfplay_gpus + workers.learner_gpus + workers.arena_gpus == pytest.approx(1)
    assert check_fits(desktop, cpus=8, gpus=1) == 8
    with pytest.raises(RunError, match="this machine has 0 GPUs"):
        check_fits(desktop, cpus=8, gpus=0)
    cluster = load_config(configs / "large.yaml")  # configs/cluster.yaml: a head of one GPU, three nodes of four
    assert cluster.workers.selfplay_gpus > 0 and cluster.workers.learner_gpus == 1
    assert gpu_placement_error(cluster, [1, 4, 4, 4]) is None
    assert gpu_placement_error(cluster, [0, 4, 4, 4]) is not None  # the learner needs the head's GPU
    assert gpu_placement_error(cluster, [1, 4, 4]) is not None


def test_bench_selfplay_on_cuda_gives_each_actor_a_share_and_none_on_the_cpu() -> None:
    from workers.bench import bench_gpu_share

    config = load_config(None)
    assert bench_gpu_share(config, 4, "cpu") == 0.0
    assert bench_gpu_share(config, 4, "cuda") == 0.25  # the config says 0: an equal share of one GPU
    assert bench_gpu_share(config, 3, "cuda") == 0.3333  # on Ray's grid of 1/10,000
    assert bench_gpu_share(config, 1, "cuda") == 1.0
    assert bench_gpu_share(load_config(None, ["workers.selfplay_gpus=0.5"]), 4, "cuda") == 0.5  # the config's own
