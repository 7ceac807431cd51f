"""`make demo` runs its whole story on a stack of its own and meets every bound it states (it exits non-zero when
one is missed): the test holds it to that, and to the lines a reader relies on."""

import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.demo]


def test_the_demo_tells_the_whole_story_within_its_bounds() -> None:
    done = subprocess.run([sys.executable, "-m", "vigil_cli", "demo"], capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, (out[-3000:], done.stderr[-3000:])
    assert re.search(r"3 pods, 3 with the injected sidecar", out), out
    assert re.search(r"its sidecar reported the stall after \d+s", out), out
    assert re.search(r"consuming again \d+s after the stall; generations \[(\d+)\] -> \[\1\] \(0 rebalances", out), out
    assert re.search(r"rolled out orders-\S+: 3/3 pod\(s\) restarted", out), out
    assert re.search(r"3 pods restarted in \d+s; generations \[(\d+)\] -> \[\1\] \(0 rebalances", out), out
    assert re.search(r"report in \d+s: open \S+report\.html", out), out
    # the stalled app's restart was bridged: the report counts it among vigil's saves
    assert re.search(r"what vigil prevented: [1-9]\d* restart\(s\) bridged by vigil", out), out
    assert "stack down (" in out
