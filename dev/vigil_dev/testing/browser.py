"""Open a page in headless Chromium (the Debian package): what a user's browser would render, for report tests."""

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rendered:
    dom: str
    """The DOM after Chromium loaded the page (scripts run, nothing fetched: the report is self-contained)."""
    screenshot: Path


def render(page: Path, screenshot: Path, *, width: int = 1280, height: int = 2400) -> Rendered:
    """Load `page` from disk with the network off; write a PNG screenshot. A missing browser is an error that
    names the package, never a skip (`scripts/ensure-system-deps` installs it)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise AssertionError("headless Chromium is not installed (Debian: apt-get install chromium)")
    offline = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]  # any fetch would fail
    common = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *offline,
              f"--window-size={width},{height}"]  # fmt: skip
    url = page.resolve().as_uri()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run([*common, f"--screenshot={screenshot}", url], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    if shot.returncode != 0 or not screenshot.is_file():
        raise AssertionError(f"chromium could not screenshot {page}: {shot.stderr[-1500:]}")
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    if dom.returncode != 0:
        raise AssertionError(f"chromium could not load {page}: {dom.stderr[-1500:]}")
    return Rendered(dom.stdout, screenshot)
