import os
import shutil
import uuid
from pathlib import Path

import pytest

from harness import BRIDGE_BIN, CLAUDE_BIN, Sandbox

RUNTIMES = ["smol", "threads"]


def pytest_configure(config):
    missing = [p for p in (CLAUDE_BIN, BRIDGE_BIN) if not os.access(p, os.X_OK)]
    if missing:
        raise pytest.UsageError(
            "missing: " + ", ".join(missing)
            + " (npm install --prefix tests/e2e; cargo build --release -p claude-ide-bridge-cli)")
    if not shutil.which("tmux"):
        raise pytest.UsageError("tmux is not installed")


@pytest.fixture(params=RUNTIMES)
def runtime(request):
    return request.param


@pytest.fixture
def sb(tmp_path_factory, request):
    # Short paths: tmux sockets and the client's screen both prefer them.
    root = Path(tmp_path_factory.mktemp("sb", numbered=True))
    box = Sandbox(root, "e2e-" + uuid.uuid4().hex[:10])
    yield box
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(f"\nsandbox kept at {root}")
    box.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "call":
        item.rep_call = rep
    return rep
