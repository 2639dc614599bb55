"""The README's Layout and Configs sections against the tree, so that they cannot go stale: every repository-root
entry git tracks and every package or sub-package folder (with __init__.py) of drkernel/, actors/, serve_apps/ and
pipelines/ is an entry of the Layout block exactly once, every entry and every file or folder an entry's text
names exists, and the Configs section names every YAML file in configs/ and every module of drkernel/config/."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("drkernel", "actors", "serve_apps", "pipelines")
# A file (by its extension) or a folder (a trailing slash) named in an entry's text, relative to the entry's folder.
NAMED = re.compile(r"(?<![\w/.<>-])((?:[\w.-]+/)*[\w-]+(?:\.(?:py|json|parquet|yaml|md|txt)\b|/(?![\w<])))")


def tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return set(out.splitlines())


def section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def layout_entries() -> dict[str, list[str]]:
    """Entry path -> the lines of its text (an entry starts at column 0; indented lines continue it)."""
    block = section("Layout").split("```")[1]
    entries: dict[str, list[str]] = {}
    names: list[str] = []
    for line in block.splitlines()[1:]:
        if not line.strip():
            continue
        if line[0].isspace():
            entries[names[-1]].append(line.strip())
            continue
        name, _, rest = line.partition(" ")
        names.append(name)
        entries.setdefault(name, []).append(rest.strip())
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"README Layout names these entries more than once (keep one line each): {twice}"
    return entries


def required(files: set[str]) -> set[str]:
    """Repository-root entries and every package or sub-package folder of the four top-level packages."""
    roots = {f.split("/")[0] + ("/" if "/" in f else "") for f in files}
    packages = {f.removesuffix("__init__.py") for f in files if f.endswith("/__init__.py") and f.startswith(PACKAGES)}
    return roots | packages


def exists(path: str, files: set[str]) -> bool:
    return any(f.startswith(path) for f in files) if path.endswith("/") else path in files


def test_the_layout_names_every_package_and_root_entry_once_and_nothing_that_is_gone():
    files, entries = tracked(), layout_entries()
    missing = sorted(required(files) - set(entries))
    assert not missing, f"README Layout: add a line `<path>  <its purpose>` for each of {missing}"
    gone = sorted(name for name in entries if not exists(name, files))
    assert not gone, f"README Layout: remove (or rename) these entries, not in the tree: {gone}"
    stale = []
    for name, lines in entries.items():
        folder = name if name.endswith("/") else ""
        for named in NAMED.findall(" ".join(lines)):
            if not exists(folder + named, files):
                stale.append(f"{named} (in the line of {name})")
    assert not stale, f"README Layout: these files or folders are named but not in the tree, fix or remove: {stale}"


def test_the_configs_section_names_every_recipe_and_config_module():
    files, text = tracked(), section("Configs")
    wanted = sorted(
        Path(f).name
        for f in files
        if (f.startswith("configs/") and f.endswith(".yaml"))
        or (f.startswith("drkernel/config/") and f.endswith(".py") and not f.endswith("__init__.py"))
    )
    missing = [name for name in wanted if f"`{name}`" not in text]
    assert not missing, f"README Configs: say what each of these is (as `name`): {missing}"
