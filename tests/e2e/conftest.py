import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from harness import BRIDGE_BIN, CLAUDE_BIN, WIN_BRIDGE, WIN_CLAUDE, Sandbox

RUNTIMES = ["smol", "threads"]


def pytest_configure(config):
    if WIN_CLAUDE or WIN_BRIDGE:
        # test_windows.py's run (scripts/test-all.d/platforms.sh): the Windows programs, under Wine
        missing = [p for p in (WIN_CLAUDE, WIN_BRIDGE) if not p or not os.path.isfile(p)]
        if missing or not shutil.which("wine"):
            raise pytest.UsageError(
                "E2E_WINDOWS_CLAUDE and E2E_WINDOWS_BRIDGE must name claude.exe and claude-ide-bridge.exe, "
                f"and wine be installed (missing: {missing})")
    else:
        missing = [p for p in (CLAUDE_BIN, BRIDGE_BIN) if not os.access(p, os.X_OK)]
        if missing:
            raise pytest.UsageError(
                "missing: " + ", ".join(missing)
                + " (npm install --prefix tests/e2e; cargo build --release -p claude-ide-bridge-cli)")
    if not shutil.which("tmux"):
        raise pytest.UsageError("tmux is not installed")


# A workspace of a realistic size (scenario 11): the source distribution of requests 2.32.3 from PyPI, fetched
# once with pip into a cache (scripts/test-all.d/e2e.sh fetches it before pytest runs; by hand, the first test
# that needs it does).
REQUESTS_SDIST = "requests-2.32.3.tar.gz"


def requests_cache():
    return Path(os.environ.get("E2E_CACHE") or Path.home() / ".cache" / "claude-ide-bridge-e2e")


@pytest.fixture(scope="session")
def requests_sdist():
    cache = requests_cache()
    sdist = cache / REQUESTS_SDIST
    if not sdist.exists():
        cache.mkdir(parents=True, exist_ok=True)
        # Into a directory of its own, then renamed: two test processes may fetch it at once.
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                  "-d", tmp, "requests==2.32.3"], capture_output=True, text=True, timeout=300)
            if got.returncode != 0 or not (Path(tmp) / REQUESTS_SDIST).exists():
                pytest.fail(f"pip download requests==2.32.3 failed ({got.returncode}):\n{got.stdout}\n{got.stderr}")
            os.replace(Path(tmp) / REQUESTS_SDIST, sdist)
    return sdist


@pytest.fixture(params=RUNTIMES)
def runtime(request):
    return request.param


@pytest.fixture
def sb(tmp_path_factory, request):
    # Short paths: tmux sockets and the client's screen both prefer them.
    root = Path(tmp_path_factory.mktemp("sb", numbered=True))
    # a test file may name its own kind (test_windows.py: the Windows programs under Wine)
    box = getattr(request.module, "SANDBOX", Sandbox)(root, "e2e-" + uuid.uuid4().hex[:10])
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
