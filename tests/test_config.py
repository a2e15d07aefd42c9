"""Config groups compose; typos and bad values fail early, naming the key and the fix."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf.errors import ConfigKeyError, ValidationError

from runners.identity import config_hash, predictions_hash
from runners.validation import ConfigError, validate_config
from tests.conftest import ROOT


def test_default_config_composes_with_every_group(make_cfg):
    cfg = make_cfg()
    assert cfg.system.name == "arag"
    assert cfg.model.name == "offline"
    assert cfg.judge.name == "none"
    assert cfg.max_loops == 22
    assert cfg.dataset.name == "sample"
    assert cfg.tracking.uri.startswith("sqlite:///")
    assert str(cfg.cache.mode.value) == "read_write"


def test_claude_model_configs_carry_prices_and_context(make_cfg):
    haiku = make_cfg("model=claude-haiku-4-5").model
    assert (haiku.price_input, haiku.price_output, haiku.price_cache_read,
            haiku.price_cache_write) == (1.0, 5.0, 0.10, 1.25)
    sonnet = make_cfg("model=claude-sonnet-4-6").model
    assert (sonnet.price_input, sonnet.price_output, sonnet.price_cache_read,
            sonnet.price_cache_write) == (3.0, 15.0, 0.30, 3.75)
    assert sonnet.context_limit >= 200_000 and sonnet.provider == "anthropic"


def test_unknown_group_option_names_the_choices(make_cfg):
    with pytest.raises(MissingConfigException) as err:
        make_cfg("system=agentic")
    message = str(err.value)
    assert "system/agentic" in message or "agentic" in message
    for choice in ("arag", "naive", "stuffing"):
        assert choice in message


def test_key_typo_fails_at_compose_time(make_cfg):
    with pytest.raises((ConfigCompositionException, ConfigKeyError)) as err:
        make_cfg("max_lops=3")
    assert "max_lops" in str(err.value)


def test_wrong_type_and_bad_enum_fail_at_compose_time(make_cfg):
    with pytest.raises((ConfigCompositionException, ValidationError)) as err:
        make_cfg("max_loops=many")
    assert "max_loops" in str(err.value)
    with pytest.raises((ConfigCompositionException, ValidationError)) as err:
        make_cfg("retrieval.scope=planet")
    message = f"{err.value} {err.value.__cause__}"
    assert "document" in message and "corpus" in message


@pytest.mark.parametrize("override,key", [("max_loops=-1", "max_loops"),
                                          ("target_length=0", "target_length"),
                                          ("runner.concurrency=0", "runner.concurrency"),
                                          ("retrieval.top_k=0", "retrieval.top_k")])
def test_invalid_values_name_key_and_fix(make_cfg, override, key):
    with pytest.raises(ConfigError) as err:
        validate_config(make_cfg(override))
    assert f"{key}=" in str(err.value) and "Fix:" in str(err.value)


@pytest.mark.parametrize("override,says", [
    ("report.fail_on=[rouge_2:0.01]", "report.fail_on names 'rouge_2', a metric no scorer "
                                      "declares"),
    ("report.fail_on=[rouge2_f1:nan]", "a finite margin"),
    ("report.fail_on=[rouge2_f1:0.01,rouge2_f1:0.2]", "two rules for 'rouge2_f1'"),
    ("report.decide_on=[rouge2_f1,rouge2_f1]", "report.decide_on=['rouge2_f1', 'rouge2_f1'] "
                                               "is invalid: it must be a list naming each "
                                               "metric once. Fix: report.decide_on=[rouge2_f1]"),
    ("report.on_inconclusive=maybe", "report.on_inconclusive='maybe' is invalid"),
])
def test_a_gate_that_could_never_fail_or_contradicts_itself_is_refused_before_any_run(
        make_cfg, override, says):
    with pytest.raises(ConfigError) as err:
        validate_config(make_cfg(override))
    assert says in str(err.value) and "Fix:" in str(err.value)


def test_config_hash_ignores_cosmetic_keys_but_not_what_changes_results(make_cfg):
    base = make_cfg()
    assert config_hash(base) == config_hash(make_cfg("runner.concurrency=16"))
    assert config_hash(base) != config_hash(make_cfg("max_loops=3"))
    assert predictions_hash(base) == predictions_hash(make_cfg("metrics.bertscore.num_layers=4"))
    assert predictions_hash(base) != predictions_hash(make_cfg("system=naive"))


@pytest.mark.parametrize("launcher,target", [
    ("joblib", "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
    ("submitit_slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ("ray", "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"),
])
def test_cluster_launchers_compose(tmp_path, launcher, target):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra/launcher={launcher}"],
                      return_hydra_config=True)
    assert cfg.hydra.launcher._target_ == target


def test_a_config_is_read_once_typed_and_each_reader_gets_its_own_copy(make_cfg, monkeypatch):
    """The job reads typed values (enum members, plain lists), the check runs once per
    config in a process (a sweep's pre-flight and its jobs share it), an edited input file
    is read anew, and a caller changing its copy changes no other job's."""
    from arag.config import Scope
    from runners import settings as settings_module
    from runners.config import RunConfig

    checked: list[object] = []
    real = settings_module.validate_config
    monkeypatch.setattr(settings_module, "validate_config",
                        lambda cfg: (checked.append(cfg), real(cfg))[1])
    cfg = make_cfg("system=naive", "retrieval.top_k=7")
    first = settings_module.read(cfg)
    assert isinstance(first.config, RunConfig) and first.config.retrieval.scope is Scope.document
    assert first.config.retrieval.top_k == 7 and isinstance(first.config.system.tools, list)
    assert first.config_hash == config_hash(cfg) and first.tree["retrieval"]["scope"] == "document"
    first.config.retrieval.top_k = 99
    second = settings_module.read(make_cfg("system=naive", "retrieval.top_k=7"))
    assert len(checked) == 1 and second.config.retrieval.top_k == 7
    settings_module.read(make_cfg("system=naive", "retrieval.top_k=8"))
    assert len(checked) == 2


@pytest.mark.parametrize("mode, swept", [("RUN", []), ("MULTIRUN", ["judge", "judge.base_url"])])
def test_a_run_label_never_carries_an_endpoint_url(mode, swept):
    from types import SimpleNamespace

    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from runners.naming import job_run_name

    cfg = OmegaConf.create({"system": {"kind": "naive", "name": "naive"},
                            "judge": {"base_url": "http://127.0.0.1:8123"}})
    hc = SimpleNamespace(mode=getattr(RunMode, mode), runtime=SimpleNamespace(
        choices={"judge": "claude-haiku-4-5"}), overrides=SimpleNamespace(task=[
            "system=naive", "judge=claude-haiku-4-5", "judge.base_url=http://127.0.0.1:8123"]))
    name = job_run_name(cfg, hc, swept)
    assert name == "naive judge=claude-haiku-4-5" and "http" not in name
