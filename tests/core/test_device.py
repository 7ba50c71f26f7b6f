"""The one device switch, CUDA determinism and the ``deterministic`` tag (issue 39), all on CPU: a CUDA host is
simulated by monkeypatching :func:`icml25.core.device.cuda_available`, never by touching a GPU."""
from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from icml25.core import device as dev
from icml25.core.claims import Claim, Evidence, load_claims, summarize, verdict, write_claims
from icml25.core.config import ConfigError
from icml25.core.seed import seed_everything
from icml25.core.workflow import resolve_study
from icml25.studies import STUDIES, study_config_class, study_stage_keys

from conftest import ROOT, copy_project, run_snakemake, tail


@pytest.fixture
def torch_flags(monkeypatch):
    """Restore torch's global determinism / cuDNN / SDPA flags and the job environment after a test."""
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
             torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
             torch.backends.cuda.math_sdp_enabled())
    for var in ("CUBLAS_WORKSPACE_CONFIG", dev.ENV_DEVICE, dev.ENV_DETERMINISTIC, dev.ENV_SOURCE):
        monkeypatch.delenv(var, raising=False)
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[2], saved[3]
    torch.backends.cuda.enable_flash_sdp(saved[4])
    torch.backends.cuda.enable_mem_efficient_sdp(saved[5])
    torch.backends.cuda.enable_math_sdp(saved[6])


def test_every_device_key_is_a_key_of_its_study():
    """The registry names a real field of each study's Config, and each such study has a stage reading it."""
    from icml25.core.config import check_stage_keys

    for slug, key in dev.DEVICE_KEYS.items():
        assert slug in STUDIES
        check_stage_keys(study_config_class(slug), {"device": [key]})
        assert any(dev.stage_uses_device(slug, s, study_stage_keys(slug)) for s in study_stage_keys(slug)), slug


def test_resolve(monkeypatch):
    monkeypatch.setattr(dev, "cuda_available", lambda: True)
    assert dev.resolve("auto") == "cuda" and dev.resolve("cpu") == "cpu"
    monkeypatch.setattr(dev, "cuda_available", lambda: False)
    assert dev.resolve("auto") == "cpu"
    assert dev.resolve("cuda") == "cuda"  # no check at parse time: a login node may plan GPU jobs
    with pytest.raises(ConfigError, match=r"^device: must be one of auto, cpu, cuda, got 'gpu'"):
        dev.resolve("gpu")


def test_cuda_available_honours_an_empty_visible_list(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert dev.cuda_available() is False


def test_apply_device_writes_the_study_key_unless_the_user_set_it():
    merged = {"seeds": [0], "train": {"device": "cpu", "epochs": 3}}
    out = dev.apply_device("lfss", merged, "cuda")
    assert out == {"seeds": [0], "train": {"device": "cuda", "epochs": 3}}
    assert merged["train"]["device"] == "cpu"  # pure
    assert dev.apply_device("lfss", merged, "cuda", {"train": {"device": "cpu"}})["train"]["device"] == "cpu"
    assert dev.apply_device("lfss", merged, "cuda", {"train": {"epochs": 5}})["train"]["device"] == "cuda"
    assert dev.apply_device("lfss", merged, None) == merged  # no switch in the global config
    assert dev.apply_device("cat_iv", {"n": [1]}, "cuda") == {"n": [1]}  # no device key
    assert dev.apply_device("ntk_dfl", {"device": "cpu"}, "cuda") == {"device": "cuda"}  # top-level key
    with pytest.raises(ConfigError, match="resolve it first"):
        dev.apply_device("lfss", merged, "auto")


@pytest.mark.parametrize("slug", sorted(dev.DEVICE_KEYS))
def test_resolve_study_applies_the_switch(slug, monkeypatch):
    """Through the real study yaml and Config: the switch reaches the key; an explicit override wins."""
    monkeypatch.setattr(dev, "cuda_available", lambda: False)
    cls = study_config_class(slug)
    key = dev.DEVICE_KEYS[slug]
    for scale in ("smoke", "paper"):
        base = {"studies": "all", "scale": scale, "data_source": "offline"}
        assert dev.study_device(slug, resolve_study(slug, cls, {**base, "device": "cuda"}, ROOT)) == "cuda"
        assert dev.study_device(slug, resolve_study(slug, cls, {**base, "device": "auto"}, ROOT)) == "cpu"
        override: dict = {}
        node = override
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = "cpu"
        pinned = resolve_study(slug, cls, {**base, "device": "cuda", "overrides": {slug: override}}, ROOT)
        assert dev.study_device(slug, pinned) == "cpu"


def test_gpu_request_and_device_arg():
    keys = study_stage_keys("lfss")
    cuda, cpu = {"train": {"device": "cuda"}}, {"train": {"device": "cpu"}}
    assert dev.gpu_request("lfss", "train", cuda, keys) == 1
    assert dev.gpu_request("lfss", "train", cpu, keys) == 0
    assert dev.gpu_request("lfss", "evaluate", cuda, keys) == 0  # does not read train.device
    assert dev.gpu_request("roste", "train", {"paper": {"device": "cuda"}}, study_stage_keys("roste"), 8) == 8
    assert dev.gpu_request("cat_iv", "train", {}, study_stage_keys("cat_iv"), 2) == 2  # no key: rule decides
    g = {"device": "cuda"}
    assert dev.job_device_arg("lfss", "train", cuda, keys, g) == " --device cuda"
    assert dev.job_device_arg("lfss", "evaluate", cuda, keys, g) == ""
    assert dev.job_device_arg("lfss", "train", cuda, keys, {}) == ""  # no switch
    pinned = {"device": "cuda", "overrides": {"lfss": {"train": {"device": "cuda"}}}}
    assert dev.job_device_arg("lfss", "train", cuda, keys, pinned) == ""  # the user's key, not the switch
    assert dev.stage_uses_device("fedecado", "train", study_stage_keys("fedecado"), "fedavg")
    assert not dev.stage_uses_device("fedecado", "train", study_stage_keys("fedecado"), "quad_fedavg")
    assert not dev.stage_uses_device("kernel_adaptation", "train", study_stage_keys("kernel_adaptation"), "nngp")


def _sets(monkeypatch) -> None:
    monkeypatch.setattr(dev, "cuda_available", lambda: True)


def test_a_cuda_job_sets_every_determinism_switch(monkeypatch, torch_flags):
    """What a cuda job does before its stage, checked on CPU: env before CUDA init, strict deterministic
    algorithms, no cuDNN benchmark, deterministic cuDNN, math attention only; seeding keeps it strict."""
    _sets(monkeypatch)
    torch.backends.cudnn.benchmark = True
    torch.use_deterministic_algorithms(False)
    assert dev.setup_job("lfss", "cuda") == "cuda"
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
    assert torch.backends.cudnn.benchmark is False and torch.backends.cudnn.deterministic is True
    assert torch.backends.cuda.math_sdp_enabled()
    assert not torch.backends.cuda.flash_sdp_enabled() and not torch.backends.cuda.mem_efficient_sdp_enabled()
    assert os.environ[dev.ENV_DEVICE] == "cuda" and dev.deterministic() and dev.strict_determinism()
    seed_everything(0)  # a study seeding afterwards must not fall back to warn-only
    assert not torch.is_deterministic_algorithms_warn_only_enabled()


def test_a_cpu_job_stays_warn_only(monkeypatch, torch_flags):
    _sets(monkeypatch)
    assert dev.setup_job("lfss", "cpu") == "cpu"
    seed_everything(0)
    assert torch.is_deterministic_algorithms_warn_only_enabled() and dev.deterministic()
    assert "CUBLAS_WORKSPACE_CONFIG" not in __import__("os").environ


def test_a_bad_cublas_setting_is_refused(monkeypatch, torch_flags):
    _sets(monkeypatch)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    with pytest.raises(ConfigError, match="CUBLAS_WORKSPACE_CONFIG"):
        dev.setup_job("lfss", "cuda")


def test_a_nondeterministic_study_is_tagged(monkeypatch, torch_flags, tmp_path):
    """A study listed with an op lacking a deterministic CUDA kernel runs warn-only, and its run tags and
    claims.json say deterministic: false; its jobs that do not use the device (evaluate) say so too."""
    _sets(monkeypatch)
    monkeypatch.setitem(dev.NONDETERMINISTIC_CUDA, "lfss", "a scatter_add_ backward")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA Fake")
    dev.setup_job("lfss", "cuda")
    assert torch.is_deterministic_algorithms_warn_only_enabled() and not dev.deterministic()
    tags = dev.run_tags()
    assert tags["device"] == "cuda" and tags["deterministic"] == "false" and tags["gpu_name"] == "NVIDIA Fake"
    assert tags["torch_version"] == torch.__version__.split("+")[0] or tags["torch_version"] == torch.__version__
    assert tags["cuda_version"] == str(torch.version.cuda)
    assert dev.setup_job("lfss", "cuda", uses_device=False) == "cpu"  # e.g. the evaluate job
    c = Claim(id="c1", statement="s", source="paper", data="synthetic", test="mean >= 0.9", threshold="0.9",
              verdict=verdict(0.95 >= 0.9), statistic=0.95, metrics={"arm": summarize([0.9, 1.0])},
              evidence=Evidence(2, "seeds", False, "t 95%, n=2 seeds"))
    doc = write_claims(tmp_path / "claims.json", study="lfss", scale="smoke", data_source="offline", claims=[c])
    assert doc["deterministic"] is False and load_claims(tmp_path / "claims.json")["deterministic"] is False
    dev.setup_job("lfss", "cpu")
    doc = write_claims(tmp_path / "claims.json", study="lfss", scale="smoke", data_source="offline", claims=[c])
    assert doc["deterministic"] is True


def test_widen_interval():
    assert dev.widen_interval(0.1, 0.3, [0.5, 0.5, 0.5]) == (0.1, 0.3)
    low, high = dev.widen_interval(0.1, 0.3, [0.50, 0.54, 0.52])
    assert low == pytest.approx(0.08) and high == pytest.approx(0.32)
    with pytest.raises(ValueError, match="two repeats"):
        dev.widen_interval(0, 1, [0.5])


def test_cpu_run_tags_do_not_import_torch_facts(monkeypatch, torch_flags):
    dev.setup_job("cat_iv", None)
    tags = dev.run_tags()
    assert tags["device"] == "cpu" and "gpu_name" not in tags and tags["deterministic"] == "true"


def _stage(argv, monkeypatch, capsys):
    from icml25.studies.lfss.__main__ import main  # the study's stage CLI

    monkeypatch.setattr(dev, "cuda_available", lambda: False)
    code = main(argv)
    return code, capsys.readouterr().err


def test_a_cuda_job_without_a_gpu_fails_at_once_naming_the_key(monkeypatch, capsys, torch_flags):
    """The switch (--device) names `device`; the study's own key names itself; nothing of the stage runs."""
    code, err = _stage(["train", "--scale", "smoke", "--device", "cuda", "--no-track", "--arm", "x"],
                       monkeypatch, capsys)
    assert code == 2 and re.search(r"config error: device: cuda requested for lfss, but no CUDA device", err), err
    from icml25.core.config import load_yaml, merge_scale

    raw = merge_scale(load_yaml(ROOT / "config/studies/lfss.yaml"), "smoke", {"train": {"device": "cuda"}})
    code, err = _stage(["train", "--config-json", json.dumps(raw), "--no-track", "--arm", "x"], monkeypatch, capsys)
    assert code == 2 and "config error: lfss.train.device: cuda requested" in err, err


@pytest.mark.slow
def test_snakemake_switch_reaches_every_torch_job_and_the_gpu_request(tmp_path):
    """`snakemake -n --config device=cuda` (SLURM profile, no GPU here): every job whose stage reads a device
    key carries `--device cuda` and asks for a GPU; with device=cpu at paper scale none does, and none asks."""
    work = copy_project(tmp_path / "work")
    studies = "[" + ",".join(sorted(dev.DEVICE_KEYS)) + "]"

    def dry(device: str, scale: str) -> list[tuple[str, str, str]]:
        out = run_snakemake(work, "-n", "-p", "--profile", "workflow/profiles/slurm", "--config",
                            f"scale={scale}", f"device={device}", f"studies={studies}", timeout=300)
        assert out.returncode == 0, tail(out)
        jobs = []
        for block in re.split(r"\n(?=(?:local)?rule \S+:)", out.stdout):
            rule = re.match(r"(?:local)?rule (\S+):", block)
            cmd = re.search(r"python -m icml25\.studies\.\S+ .*", block)
            if rule and cmd and "__" in rule.group(1):
                gpu = re.search(r"resources: .*?\bgpu=(\d+)", block)
                arm = re.search(r"--arm (\S+)", cmd.group(0))
                dev_arg = re.search(r"--device (\S+)", cmd.group(0))
                jobs.append((rule.group(1), arm.group(1) if arm else "", dev_arg.group(1) if dev_arg else "",
                             gpu.group(1) if gpu else "0"))
        return jobs

    jobs = dry("cuda", "smoke")
    torch_jobs = [j for j in jobs if dev.stage_uses_device(j[0].split("__")[0], j[0].split("__")[1],
                                                           study_stage_keys(j[0].split("__")[0]))]
    assert {j[0].split("__")[0] for j in torch_jobs} == set(dev.DEVICE_KEYS)
    assert all(j[2] == "cuda" for j in torch_jobs), [j for j in torch_jobs if j[2] != "cuda"]
    assert not [j for j in jobs if j not in torch_jobs and j[2]]  # no other job gets --device
    uses_gpu = [j for j in torch_jobs if dev.stage_uses_device(j[0].split("__")[0], j[0].split("__")[1],
                                                               study_stage_keys(j[0].split("__")[0]), j[1] or None)]
    assert uses_gpu and all(j[3] != "0" for j in uses_gpu), [j for j in uses_gpu if j[3] == "0"]
    assert all(j[3] == "0" for j in torch_jobs if j not in uses_gpu)  # quad / kernel arms: no GPU
    paper_cpu = dry("cpu", "paper")
    assert all(j[2] in ("", "cpu") for j in paper_cpu)
    registry = [j for j in paper_cpu if j[0].split("__")[0] in dev.DEVICE_KEYS and j[0] != "sard__preprocess"]
    assert registry and all(j[3] == "0" for j in registry), [j for j in registry if j[3] != "0"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_stage_runs_are_tagged_with_the_device(monkeypatch, torch_flags):
    """stage_main hands run_tags() to the MLflow run of every job (captured here instead of opening a store)."""
    import contextlib

    from icml25.core import cli, tracking

    seen = {}

    @contextlib.contextmanager
    def fake_stage_run(slug, stage, **kwargs):
        seen.update(kwargs.get("tags") or {})
        yield cli._NullRun()

    monkeypatch.setattr(tracking, "stage_run", fake_stage_run)
    monkeypatch.setattr(dev, "cuda_available", lambda: False)
    from icml25.studies.lfss.__main__ import main

    assert main(["noop", "--scale", "smoke", "--device", "cpu"]) == 0
    assert seen["device"] == "cpu" and seen["deterministic"] == "true" and seen["torch_version"]
