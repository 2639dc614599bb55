"""Every torch.npu / torch_npu name the project's code uses, and every vllm-ascend fact it relies on, exists in
the real packages' sources as tests/npu/api_surface.json records them (derive_api_surface.py made it)."""

from __future__ import annotations

import ast
from pathlib import Path

from fake_npu import SURFACE, TORCH_NPU

from drkernel.placement import RAY_RESOURCE
from drkernel.train.backend import DIST_BACKEND, choose_backend
from serve_apps.vllm_worker import WeightLoaderExtension

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("drkernel", "serve_apps", "actors", "pipelines", "benchmarks")
VLLM_ASCEND = SURFACE["vllm_ascend"]


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    if isinstance(node, ast.Call):  # torch.npu.current_stream().npu_stream
        inner = _dotted(node.func)
        return f"{inner}().{'.'.join(reversed(parts))}" if inner and parts else None
    return None


def npu_names(source: str) -> set[str]:
    """Dotted torch.npu / torch_npu chains in `source` (`self.torch.npu` counts as `torch.npu`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            name = (_dotted(node) or "").removeprefix("self.")
            if name.startswith(("torch.npu.", "torch_npu.")):
                found.add(name)
    return found


def unknown(names: set[str]) -> list[str]:
    """The names in `names` the real torch_npu does not define."""
    modules, classes = TORCH_NPU["modules"], TORCH_NPU["classes"]
    bad = []
    for name in sorted(names):
        head, _, rest = name.partition("().")
        if head == "torch_npu.npu" or head.startswith("torch_npu.npu."):
            head = "torch.npu" + head.removeprefix("torch_npu.npu")
        parts = head.split(".")
        module = ".".join(parts[:2])
        if module not in modules or (len(parts) > 2 and parts[2] not in modules[module]):
            bad.append(name)
            continue
        if len(parts) == 2:
            continue
        member = rest.split(".")[0] if rest else (parts[3] if len(parts) > 3 else None)
        owner = {"current_stream": "torch.npu.Stream", "Event": "torch.npu.Event", "Stream": "torch.npu.Stream"}
        cls = f"{module}.{parts[2]}" if f"{module}.{parts[2]}" in classes else owner.get(parts[2])
        if member is not None and cls in classes and member not in classes[cls]:
            bad.append(name)
    return bad


def test_every_npu_name_in_the_code_exists_in_torch_npu():
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            names |= npu_names(path.read_text())
    assert {"torch.npu.Event", "torch.npu.synchronize", "torch_npu.profiler.profile"} <= names  # the scan sees them
    assert "torch.npu.current_stream().npu_stream" in names
    assert unknown(names) == []


def test_a_wrong_name_is_caught():
    wrong = npu_names(
        "import torch, torch_npu\n"
        "torch.npu.synchronise()\n"
        "torch.npu.current_stream().cuda_stream\n"
        "torch_npu.profiler.ProfilerActivity.CUDA\n"
        "torch.npu.Event(enable_timing=True)\n"
    )
    assert unknown(wrong) == [
        "torch.npu.current_stream().cuda_stream",
        "torch.npu.synchronise",
        "torch_npu.profiler.ProfilerActivity.CUDA",
    ]


def test_vllm_ascend_facts_the_code_relies_on():
    assert VLLM_ASCEND["platform"]["ray_device_key"] == RAY_RESOURCE["npu"]  # Ray schedules replicas on "NPU"
    trainer = choose_backend("npu", 2, {"cpu": True, "npu": True})
    assert VLLM_ASCEND["platform"]["device_type"] == trainer.device and trainer.dist_backend == DIST_BACKEND["npu"]
    assert VLLM_ASCEND["platform_plugin"] == "ascend = vllm_ascend:register"
    # the weight-load extension reads these from vLLM's worker: the NPU worker sets them, WorkerBase holds vllm_config
    worker = VLLM_ASCEND["worker"]
    needed = set(WeightLoaderExtension.__annotations__)
    assert needed - set(worker["instance_attributes"]) == {"vllm_config"} and worker["bases"] == ["WorkerBase"]
    readme = (ROOT / "README.md").read_text()
    assert VLLM_ASCEND["platform"]["device_control_env_var"] in readme
