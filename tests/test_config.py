"""Tests for the run configuration (``alphazero.config``): loading, overrides, validation, round trips.

Every expectation is derived from the YAML text or the override given, never from the loader itself.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from alphazero.config import (
    ConfigError,
    RunConfig,
    config_from_dict,
    config_to_dict,
    load_config,
)

ROOT = Path(__file__).resolve().parents[1]
# cluster.yaml is a Ray cluster-launcher file, not a run configuration (see its header comment).
RUN_CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if p.name != "cluster.yaml")


def _write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


# -- every shipped config ------------------------------------------------------------------------


def test_there_are_run_configs_to_check():
    names = {p.name for p in RUN_CONFIGS}
    assert {"default.yaml", "smoke.yaml", "quickstart.yaml", "large.yaml", "supervised.yaml", "gpu.yaml"} <= names


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_shipped_config_loads_with_every_value_from_the_file(path):
    config = load_config(path)
    assert isinstance(config, RunConfig)
    data = yaml.safe_load(path.read_text())
    for key, value in data.items():
        if isinstance(value, dict):
            section = getattr(config, key)
            for inner, inner_value in value.items():
                assert _plain(getattr(section, inner)) == inner_value, f"{key}.{inner}"
        else:
            assert getattr(config, key) == value, key


def test_cluster_yaml_is_not_a_run_config():
    # The cluster-launcher file has keys no run config knows: loading it must say which.
    with pytest.raises(ConfigError, match="cluster_name|max_workers|provider|auth"):
        load_config(ROOT / "configs" / "cluster.yaml")


def test_the_dataclass_defaults_are_configs_default_yaml():
    # One source of defaults: the measured CPU setup. A config file states only what it changes.
    assert load_config(ROOT / "configs" / "default.yaml") == RunConfig()
    assert load_config(None) == RunConfig()


# -- unknown keys ----------------------------------------------------------------------------------


def test_unknown_top_level_key_is_named(tmp_path):
    path = _write(tmp_path, "seed: 1\nsede: 2\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "sede" in str(error.value)


@pytest.mark.parametrize("section", ["network", "search", "selfplay", "train", "arena", "workers"])
def test_unknown_key_in_a_section_is_named_with_its_dots(tmp_path, section):
    path = _write(tmp_path, f"{section}: {{no_such_option: 3}}\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert f"{section}.no_such_option" in str(error.value)


def test_unknown_key_given_as_override_is_named():
    with pytest.raises(ConfigError) as error:
        load_config(None, ["train.batchsize=64"])
    assert "train.batchsize" in str(error.value)


# -- types -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.batch_size=many", "train.batch_size"),  # string for int
        ("train.batch_size=2.5", "train.batch_size"),  # float for int
        ("selfplay.max_plies=true", "selfplay.max_plies"),  # bool for int
        ("seed=false", "seed"),  # bool for int at top level
        ("search.num_simulations='16'", "search.num_simulations"),  # quoted number is a string
        ("train.learning_rate=fast", "train.learning_rate"),  # string for float
        ("train.learning_rate=true", "train.learning_rate"),  # bool for float
        ("train.value_from_unfinished=1", "train.value_from_unfinished"),  # int for bool
        ("train.device=3", "train.device"),  # int for string
        ("train.lr_milestones=10", "train.lr_milestones"),  # scalar for list
        ("train.lr_milestones=[10, ten]", "train.lr_milestones[1]"),  # bad list element
        ("network=4", "network"),  # scalar for a section
    ],
)
def test_wrong_type_is_rejected_naming_the_key(override, key):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    assert key in str(error.value)


def test_zero_arena_games_means_no_gating():
    assert load_config(None, ["arena.games=0"]).arena.games == 0


def test_wrong_type_in_file_is_rejected_naming_the_key(tmp_path):
    path = _write(tmp_path, "arena:\n  games: 2.0\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "arena.games" in str(error.value)


def test_int_is_accepted_for_a_float_and_becomes_a_float():
    config = load_config(None, ["train.learning_rate=1", "max_minutes=5"])
    assert config.train.learning_rate == 1.0 and isinstance(config.train.learning_rate, float)
    assert config.max_minutes == 5.0 and isinstance(config.max_minutes, float)


# -- overrides ---------------------------------------------------------------------------------------


def test_overrides_apply_over_the_file(tmp_path):
    path = _write(tmp_path, "seed: 3\nnetwork: {blocks: 2, channels: 16}\ntrain: {batch_size: 32}\n")
    config = load_config(path, [
        "network.blocks=5", "train.lr_milestones=[10,20]", "search.num_simulations=7", "seed=9",
        "arena.opening_book=books/main.bin", "train.device=cpu",
    ])
    assert config.network.blocks == 5
    assert config.network.channels == 16  # untouched file value kept
    assert config.train.batch_size == 32
    assert config.train.lr_milestones == (10, 20)
    assert config.search.num_simulations == 7  # a section absent from the file
    assert config.seed == 9
    assert config.arena.opening_book == "books/main.bin"
    assert config.train.device == "cpu"


def test_later_override_wins():
    assert load_config(None, ["seed=1", "seed=2"]).seed == 2


def test_override_value_may_contain_equals_sign():
    config = load_config(None, ["arena.opening_book=a=b.bin"])
    assert config.arena.opening_book == "a=b.bin"


def test_override_does_not_touch_the_file(tmp_path):
    text = "seed: 3\n"
    path = _write(tmp_path, text)
    load_config(path, ["seed=4"])
    assert path.read_text() == text


@pytest.mark.parametrize("override", ["train.batch_size", "=5", "...=5", "train.batch_size 64"])
def test_bad_override_syntax_is_a_config_error(override):
    with pytest.raises(ConfigError):
        load_config(None, [override])


def test_override_into_a_scalar_is_rejected(tmp_path):
    path = _write(tmp_path, "seed: 1\n")
    with pytest.raises(ConfigError) as error:
        load_config(path, ["seed.value=2"])
    assert "seed" in str(error.value)


# -- invalid values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, key",
    [
        ("arena.games=3", "arena.games"),
        ("arena.games=-2", "arena.games"),
        ("arena.threshold=1.5", "arena.threshold"),
        ("arena.threshold=0", "arena.threshold"),
        ("search.num_simulations=-1", "search.num_simulations"),
        ("search.num_simulations=0", "search.num_simulations"),
        ("arena.num_simulations=-4", "arena.num_simulations"),
        ("train.lr_milestones=[20,10]", "train.lr_milestones"),
        ("train.lr_anneal_fraction=1.5", "train.lr_anneal_fraction"),
        ("train.lr_anneal_floor=-0.1", "train.lr_anneal_floor"),
        ("train.learning_rate=0", "train.learning_rate"),
        ("train.q_weight=1.5", "train.q_weight"),
        ("train.device=tpu", "train.device"),
        ("train.optimizer=adam", "train.optimizer"),
        ("selfplay.max_plies=0", "selfplay.max_plies"),
        ("network.policy_kernel=2", "network.policy_kernel"),
        ("workers.num_selfplay_workers=0", "workers.num_selfplay_workers"),
        ("max_generations=-1", "max_generations"),
    ],
)
def test_invalid_value_is_rejected_naming_the_key(override, key):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    assert key in str(error.value)


@pytest.mark.parametrize(
    "override, words",
    [
        ("workers.selfplay_gpus=-0.25", "must be a number >= 0"),
        ("workers.learner_gpus=-1", "must be a number >= 0"),
        ("workers.arena_gpus=.nan", "must be a number >= 0"),
        ("workers.selfplay_gpus=.inf", "must be a number >= 0"),
        ("workers.selfplay_gpus=1.5", "a whole number of GPUs, got 1.5"),
        ("workers.learner_gpus=2.25", "a whole number of GPUs, got 2.25"),
        ("workers.selfplay_gpus=0.33333", "more than 4 decimal places"),
        ("workers.selfplay_gpus=quarter", "expected a number, got 'quarter'"),
        ("workers.learner_gpus=true", "expected a number"),
        ("search.precision=fp8", "must be auto, fp32, fp16, bf16 or int8"),
        ("search.channels_last=3", "expected true, false or a word"),
        ("search.pin_memory=sometimes", "must be true, false or auto"),
    ],
)
def test_bad_gpu_shares_and_inference_settings_are_one_line_naming_the_key(override, words):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    message = str(error.value)
    assert override.split("=")[0] in message and words in message and "\n" not in message


def test_gpu_shares_ray_can_place_are_accepted():
    config = load_config(None, ["workers.selfplay_gpus=0.25", "workers.learner_gpus=2", "workers.arena_gpus=1",
                                "search.precision=bf16", "search.channels_last=true", "search.pin_memory=false"])
    assert (config.workers.selfplay_gpus, config.workers.learner_gpus, config.workers.arena_gpus) == (0.25, 2.0, 1.0)
    assert (config.search.precision, config.search.channels_last, config.search.pin_memory) == ("bf16", True, False)
    assert RunConfig().workers.selfplay_gpus == 0  # the default plays on the CPU


def test_torch_only_inference_settings_with_the_onnx_backend_are_refused():
    with pytest.raises(ConfigError, match="run in the torch backend"):
        load_config(None, ["search.backend=onnx", "search.precision=fp16"])
    with pytest.raises(ConfigError, match="run in the torch backend"):
        load_config(None, ["search.backend=onnx", "search.channels_last=true"])
    assert load_config(None, ["search.backend=onnx", "search.precision=fp32"]).search.backend == "onnx"


def test_window_smaller_than_batch_is_rejected():
    with pytest.raises(ConfigError) as error:
        load_config(None, ["train.batch_size=64", "train.window_positions=32"])
    assert "train.window_positions" in str(error.value)


def test_boundary_values_are_accepted():
    config = load_config(None, ["arena.games=2", "arena.threshold=1", "search.num_simulations=1"])
    assert (config.arena.games, config.arena.threshold, config.search.num_simulations) == (2, 1.0, 1)


def test_config_is_frozen():
    config = load_config(None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.train.batch_size = 1  # type: ignore[misc]


# -- round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_config_to_dict_round_trips_through_yaml(path):
    config = load_config(path, ["train.lr_milestones=[5, 50]"])
    data = config_to_dict(config)
    assert data["train"]["lr_milestones"] == [5, 50]  # plain YAML list, not a tuple
    text = yaml.safe_dump(data)  # safe_dump refuses non-plain types
    assert config_from_dict(yaml.safe_load(text)) == config
    assert config_from_dict(data) == config


# -- file errors ------------------------------------------------------------------------------------------


def test_missing_file_is_named(tmp_path):
    path = tmp_path / "nowhere" / "run.yaml"
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)


def test_invalid_yaml_is_named(tmp_path):
    path = _write(tmp_path, "train: {batch_size: 32\nseed: [1, 2\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)


def test_a_binary_config_file_is_one_line(tmp_path, one_line_error):
    path = tmp_path / "run.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert f"{path}:1: not a text file" in one_line_error("bench", "--config", str(path))


def test_non_mapping_yaml_is_named(tmp_path):
    path = _write(tmp_path, "- seed\n- 1\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(_write(tmp_path, "# nothing but a comment\n")) == RunConfig()


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["network.moves_left_utility=0.1"], "network.moves_left_utility needs network.moves_left_head: true"),
        (["network.moves_left_head=true", "network.moves_left_utility=1.5"], "network.moves_left_utility must be in [0, 1]"),
        (["network.moves_left_head=true", "train.moves_left_weight=-1"], "train.moves_left_weight must be >= 0"),
    ],
)
def test_bad_moves_left_settings_are_refused_naming_the_key(overrides, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_config(None, overrides)
    head = load_config(None, ["network.moves_left_head=true", "network.moves_left_utility=0.1"])
    assert head.network.moves_left_head and head.network.moves_left_utility == 0.1
