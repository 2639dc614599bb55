"""Run folders: absolute, unique, never inside Ray's working-dir copy; stage outputs go inside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkernel.train.run_folder import RunFolderError, inside_run, resolve_run_folder

RAY_COPY = Path("/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_abc")


def test_default_is_a_new_folder_under_home_each_time(tmp_path):
    first = resolve_run_folder(None, RAY_COPY, tmp_path)
    second = resolve_run_folder(None, RAY_COPY, tmp_path)
    assert first.parent == second.parent == tmp_path / "drkernel-runs"
    assert first != second and first.is_absolute()


def test_given_folder_is_made_absolute_against_the_callers_cwd(tmp_path):
    assert resolve_run_folder("runs/x", tmp_path, Path("/home/u")) == tmp_path / "runs" / "x"
    assert resolve_run_folder(str(tmp_path / "abs"), Path("/elsewhere"), Path("/home/u")) == tmp_path / "abs"


def test_a_folder_inside_rays_copy_is_refused_with_the_way_out():
    with pytest.raises(RunFolderError, match=r"inside Ray's temporary copy.*--output-dir"):
        resolve_run_folder("runs/train", RAY_COPY, Path("/home/u"))


def test_relative_stage_outputs_land_in_the_run_folder(tmp_path):
    assert inside_run("sft", tmp_path) == str(tmp_path / "sft")
    assert inside_run("/data/sft", tmp_path) == "/data/sft"
