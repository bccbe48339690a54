"""requirements.lock: the exact versions make lab and make test install, consistent with pyproject.toml and environment.yml."""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import bootstrap  # noqa: E402


def locked() -> dict[str, Version]:
    out = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = Version(version)
    return out


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in bootstrap.TEST_EXTRAS:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_every_requirement_but_torch_is_locked_at_a_version_pyproject_allows() -> None:
    lock = locked()
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name == "torch":
            assert name not in lock, "torch is chosen per machine (bootstrap.DEFAULT_TORCH), not locked"
            continue
        assert name in lock, f"{req.name} is not in requirements.lock: run make lock"
        assert req.specifier.contains(lock[name], prereleases=True), f"{req}: locked {lock[name]}"


def test_environment_yml_asks_for_what_the_lock_holds() -> None:
    lock = locked()
    conda_names = {"pytorch": "torch"}
    seen = 0
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"^\s*-\s+([A-Za-z0-9_.-]+)\s*(>=|==)?\s*([0-9][^\s#]*)?", line)
        if not m or m[1] in ("python", "pip", "conda-forge"):
            continue
        name = canonicalize_name(conda_names.get(m[1], m[1]))
        if name == "torch":
            continue
        seen += 1
        assert name in lock, f"environment.yml lists {m[1]}, which requirements.lock does not hold"
        if m[3]:
            assert (lock[name] >= Version(m[3])) if m[2] == ">=" else lock[name] == Version(m[3]), (line, lock[name])
    assert seen >= 10


def test_make_lab_and_make_test_install_with_the_lock() -> None:
    assert bootstrap.lock_args() == ["-c", bootstrap.LOCK]
    makefile = (ROOT / "Makefile").read_text()
    assert "lock: setup" in makefile


def test_this_environment_holds_the_locked_versions_of_the_courses_requirements() -> None:
    """make test set this environment up from the lock: each direct requirement at its locked version."""
    lock = locked()
    wrong = {}
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name in lock:
            try:
                have = Version(md.version(req.name))
            except md.PackageNotFoundError:
                continue  # an extra this environment did not install (make lab's)
            if have != lock[name]:
                wrong[req.name] = (str(have), str(lock[name]))
    assert wrong == {}, f"installed versus locked: {wrong} (an environment set up before the lock changed: make clean-venv)"


def test_every_locked_package_installs_on_the_oldest_python_311_a_machine_may_have() -> None:
    """The course asks for Python 3.11 or newer, and Debian 12 (the class server's usual host) ships 3.11.2: a locked
    version whose Requires-Python wants a later 3.11 (soupsieve 3 and 4 want 3.11.5) makes the locked install fail
    there and fall back to unlocked versions. Read from this environment, which make test installs from the lock."""
    from packaging.specifiers import SpecifierSet

    lock, oldest, refusing = locked(), Version("3.11.0"), {}
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        wants = dist.metadata.get("Requires-Python")
        if name in lock and dist.version == str(lock[name]) and wants and oldest not in SpecifierSet(wants):
            refusing[name] = f"{dist.version} (Requires-Python {wants})"
    assert refusing == {}, f"locked versions Python 3.11.0 cannot install: {refusing}; pin an older one and make lock"
