"""Where a training run's files live: one absolute folder per run, outside Ray's copy of the working dir.

`ray job submit --working-dir .` starts the driver in a temporary copy of the checkout that Ray deletes
later and that other nodes do not see; a path resolved there (`runs/train`) loses the run's results and
fails on the first actor of another node that reads it. So a run folder is absolute: `trainer.output_dir`
when given (`--output-dir`), else a new `~/drkernel-runs/<time>-<random>`; and relative output paths of
the run's other stages (the SFT checkpoint, the untrained base model) live inside it.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

RUNS_HOME = "drkernel-runs"
RAY_WORKING_DIR_MARK = "runtime_resources"  # every runtime-env package Ray unpacks lives under this folder


class RunFolderError(ValueError):
    """A run folder that would be lost, or that does not hold the run being resumed."""


def inside_ray_copy(path: Path) -> bool:
    """Whether `path` lies in a folder Ray unpacked for a runtime env (deleted with it, private to one node)."""
    return RAY_WORKING_DIR_MARK in path.parts


def new_run_name(now: float | None = None) -> str:
    """A unique, sortable run name: UTC time plus 6 random hex digits."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def resolve_run_folder(output_dir: str | None, cwd: Path, home: Path) -> Path:
    """The absolute run folder: `output_dir` (relative to `cwd`), else a new one under `home`/drkernel-runs."""
    if output_dir is None:
        return (home / RUNS_HOME / new_run_name()).resolve()
    folder = (cwd / Path(output_dir).expanduser()).resolve()
    if inside_ray_copy(folder):
        raise RunFolderError(
            f"trainer.output_dir {output_dir!r} resolves to {folder}, inside Ray's temporary copy of the working "
            "dir: the results would be deleted with it and other nodes cannot read them. Give an absolute path "
            f"on storage every node shares (--output-dir), or leave it unset for ~/{RUNS_HOME}/<run>"
        )
    return folder


def inside_run(path: str, run_folder: Path) -> str:
    """An output path of one of the run's stages: relative ones go into the run folder."""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (run_folder / p).resolve())
