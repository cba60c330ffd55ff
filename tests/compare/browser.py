"""Debian's chromium, headless, for the report test: installed by apt-get
where missing (as tests/slurm_cluster.py installs Slurm), run with its own
throw-away profile and no background network traffic, to dump the DOM and
take a screenshot of a page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr",
         # nothing leaves the machine, even where the browser itself would ask
         "--host-resolver-rules=MAP * ~NOTFOUND")
BLANK = "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body></body></html>"


class ChromiumUnavailable(RuntimeError):
    pass


def ensure_chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ChromiumUnavailable("chromium is not installed and this is not a root Debian machine "
                                  "(apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "chromium"]
    if subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, check=True, timeout=600)
        subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=900)
    return shutil.which("chromium") or "/usr/bin/chromium"


@dataclass(frozen=True)
class Page:
    dom: str
    log: str  # chromium's stderr while loading the page, for the dump
    requests: frozenset[str]  # scheme://host/path of every URL in the network log


def _requests(net_log: Path) -> frozenset[str]:
    text = net_log.read_text(errors="replace") if net_log.is_file() else ""
    urls = (urlsplit(u) for u in re.findall(r'"url":"([^"]+)"', text))
    return frozenset(f"{u.scheme}://{u.netloc}{u.path}" for u in urls if u.scheme not in ("data", "file"))


def _run(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], text=True,
                          capture_output=True, timeout=120)


def load(page: Path, screenshot: Path, width: int = 1400, height: int = 2400) -> Page:
    """The page's DOM after loading, and a screenshot of its first width x height pixels."""
    binary = ensure_chromium()
    profile = screenshot.with_suffix(".profile")
    url = page.resolve().as_uri()
    net_log = screenshot.with_suffix(".netlog.json")
    dom = _run(binary, profile, f"--log-net-log={net_log}", "--dump-dom", url)
    if dom.returncode != 0:
        raise AssertionError(f"chromium --dump-dom {url} failed ({dom.returncode}): {dom.stderr[-2000:]}")
    shot = _run(binary, profile, f"--window-size={width},{height}", f"--screenshot={screenshot}", url)
    if shot.returncode != 0 or not screenshot.is_file():
        raise AssertionError(f"chromium --screenshot {url} failed ({shot.returncode}): {shot.stderr[-2000:]}")
    return Page(dom.stdout, dom.stderr + shot.stderr, _requests(net_log))


def own_requests(page: Path, workdir: Path) -> frozenset[str]:
    """The requests the page makes beyond those chromium makes for a blank page of its own."""
    blank = workdir / "blank.html"
    blank.write_text(BLANK)
    return load(page, workdir / "page.png").requests - load(blank, workdir / "blank.png").requests


def pdf_pages(page: Path, pdf: Path) -> int:
    """The page printed to an A4 PDF by chromium (the page's print stylesheet applies): its page count."""
    binary = ensure_chromium()
    done = _run(binary, pdf.with_suffix(".profile"), "--no-pdf-header-footer", f"--print-to-pdf={pdf}",
                page.resolve().as_uri())
    if done.returncode != 0 or not pdf.is_file():
        raise AssertionError(f"chromium --print-to-pdf failed ({done.returncode}): {done.stderr[-2000:]}")
    # chromium writes each page as an uncompressed /Type /Page dictionary
    return len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf.read_bytes()))
