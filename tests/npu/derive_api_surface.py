"""Write tests/npu/api_surface.json: the torch_npu and vllm-ascend names this project's NPU code may use, read
from those packages' real sources as files (nothing is imported, nothing is installed).

    python tests/npu/derive_api_surface.py TORCH_NPU_SRC VLLM_ASCEND_SRC [--torch-npu-ref REF] \
        [--vllm-ascend-ref REF] [--out tests/npu/api_surface.json]

TORCH_NPU_SRC is a checkout of github.com/Ascend/pytorch at the torch-npu release of the NPU version set
(README "Running on Ascend"), or an unpacked torch_npu wheel's site-packages folder; VLLM_ASCEND_SRC a checkout
of github.com/vllm-project/vllm-ascend at the vllm-ascend release (or its unpacked wheel). The fixture is
checked in; CI never runs this script and never downloads either package. tests/npu/fake_npu.py builds a fake
torch.npu / torch_npu from the fixture, so code calling a name these sources do not define fails its tests.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path


def _module_all(path: Path) -> list[str]:
    """A module's literal `__all__`."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return sorted(ast.literal_eval(node.value))
    raise ValueError(f"{path} has no literal __all__")


def _class_members(path: Path, name: str) -> dict[str, list[str]]:
    """Methods, class attributes and `self.x =` assignments of class `name`, and its bases' names."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == name:
            methods = sorted(n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            attrs = {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            attrs |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            assigned = {
                t.attr
                for n in ast.walk(node)
                if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            }
            return {
                "bases": [ast.unparse(b) for b in node.bases],
                "methods": methods,
                "class_attributes": sorted(attrs),
                "instance_attributes": sorted(assigned),
            }
    raise ValueError(f"{path} defines no class {name}")


def _class_literals(path: Path, name: str) -> dict[str, object]:
    """Literal class attributes (`ray_device_key: str = "NPU"`) of class `name`."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == name:
            out: dict[str, object] = {}
            for n in node.body:
                target = (
                    n.target if isinstance(n, ast.AnnAssign) else (n.targets[0] if isinstance(n, ast.Assign) else None)
                )
                if isinstance(target, ast.Name) and getattr(n, "value", None) is not None:
                    try:
                        out[target.id] = ast.literal_eval(n.value)
                    except ValueError:
                        continue
            return out
    raise ValueError(f"{path} defines no class {name}")


def _cpp_getters(path: Path) -> list[str]:
    """Python attribute names a C++ type exports through its PyGetSetDef table."""
    return sorted(set(re.findall(r'\{"(\w+)",\s*\(getter\)', path.read_text())))


def _cpp_enum_values(path: Path, enum: str) -> list[str]:
    """Members of a pybind11 `py::enum_<...>(m, "enum")` definition."""
    text = path.read_text()
    start = text.index(f'"{enum}")')
    end = text.index(";", start)
    return re.findall(r'\.value\("(\w+)"', text[start:end])


def _list_literal(path: Path, attr: str) -> list[str]:
    """A class-level list literal `ATTR = [...]` anywhere in the file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise ValueError(f"{path} has no literal {attr}")


def _commit(root: Path, ref: str | None) -> str | None:
    """The ref given (a tree exported with `git archive` has no history), else the checkout's HEAD."""
    if ref:
        return ref
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def torch_npu_surface(root: Path, ref: str | None = None) -> dict[str, object]:
    pkg = root / "torch_npu"
    csrc = pkg / "csrc"
    return {
        "source": {"repo": "github.com/Ascend/pytorch", "commit": _commit(root, ref)},
        "modules": {
            "torch.npu": _module_all(pkg / "npu" / "__init__.py"),
            "torch_npu.profiler": _module_all(pkg / "profiler" / "__init__.py"),
        },
        "classes": {
            "torch.npu.Event": _class_members(pkg / "npu" / "streams.py", "Event")["methods"],
            "torch.npu.Stream": sorted(
                set(_class_members(pkg / "npu" / "streams.py", "Stream")["methods"])
                | set(_cpp_getters(csrc / "npu" / "Stream.cpp"))
            ),
            "torch_npu.profiler.ProfilerActivity": _cpp_enum_values(csrc / "profiler" / "init.cpp", "ProfilerActivity"),
        },
        "kernel_details_csv": {
            "file": "kernel_details.csv",
            "headers": _list_literal(
                pkg / "profiler" / "analysis" / "prof_common_func" / "_csv_headers.py", "OP_SUMMARY_KERNEL_BASE_HEADERS"
            ),
        },
    }


def vllm_ascend_surface(root: Path, ref: str | None = None) -> dict[str, object]:
    pkg = root / "vllm_ascend"
    setup = (root / "setup.py").read_text()
    plugin = re.search(r'"vllm\.platform_plugins":\s*\[\s*"([^"]+)"', setup)
    return {
        "source": {"repo": "github.com/vllm-project/vllm-ascend", "commit": _commit(root, ref)},
        "platform_plugin": plugin.group(1) if plugin else None,
        "platform": {
            k: v
            for k, v in _class_literals(pkg / "platform.py", "NPUPlatform").items()
            if k in ("device_name", "device_type", "ray_device_key", "device_control_env_var", "dispatch_key")
        },
        "worker": {
            "class": "vllm_ascend.worker.worker.NPUWorker",
            **_class_members(pkg / "worker" / "worker.py", "NPUWorker"),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("torch_npu_src", type=Path)
    parser.add_argument("vllm_ascend_src", type=Path)
    parser.add_argument("--torch-npu-ref", default=None, help="tag and commit the torch_npu tree came from")
    parser.add_argument("--vllm-ascend-ref", default=None, help="tag and commit the vllm-ascend tree came from")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("api_surface.json"))
    args = parser.parse_args()
    surface = {
        "torch_npu": torch_npu_surface(args.torch_npu_src, args.torch_npu_ref),
        "vllm_ascend": vllm_ascend_surface(args.vllm_ascend_src, args.vllm_ascend_ref),
    }
    args.out.write_text(json.dumps(surface, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
