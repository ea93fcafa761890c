"""The HTML report in a real browser (headless Chromium from Debian's packages), and self-contained."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from jobstate.main import main

from .review_history import build_pipeline_history

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run installs it)"
)


def _pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode an 8-bit RGB or RGBA PNG with zlib alone: width, height, RGB pixels."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8
    assert color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, out = bytearray(stride), []
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += [(line[i], line[i + 1], line[i + 2]) for i in range(0, stride, bpp)]
        prev = line
    return width, height, out


def _render(page: Path, tmp_path: Path) -> tuple[list[tuple[int, int, int]], str]:
    assert CHROMIUM is not None
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,800",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _pixels(shot.read_bytes())[2], proc.stderr


def _console(log: str) -> list[str]:
    # with --enable-logging every console message of the page is one ":CONSOLE" line
    return [line for line in log.splitlines() if ":CONSOLE" in line]


@pytest.fixture
def page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    repo = build_pipeline_history(tmp_path / "pipeline")
    out = tmp_path / "report.html"
    code = main(["report", "--repo", str(repo), "--format", "html", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    return out


def test_html_report_is_self_contained_without_script(page: Path) -> None:
    html = page.read_text()
    assert "<script" not in html.lower()
    assert "@import" not in html
    assert not re.search(r"url\(", html)
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", html)
    assert refs == ["data:,"]  # the favicon, so that not even that is requested
    assert html.count("<svg") == 2  # the spend chart (one currency) and the timeline


@needs_chromium
# a real Chromium starts (its own 120 s limit per page)
@pytest.mark.timeout(240)
def test_html_report_renders_in_chromium_without_console_errors(page: Path, tmp_path: Path) -> None:
    pixels, log = _render(page, tmp_path)
    ink = sum(1 for p in pixels if p != (255, 255, 255))
    assert ink > len(pixels) // 50, "the screenshot is (nearly) blank"
    assert (0x1B, 0x5E, 0x20) in set(pixels), "the timeline's completed episodes are not drawn"
    assert (0x2F, 0x80, 0xED) in set(pixels), "the spend chart's bars are not drawn"
    assert _console(log) == []


@needs_chromium
# two real Chromium runs (120 s limit each)
@pytest.mark.timeout(240)
def test_browser_check_catches_a_console_error_and_a_blank_page(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                   '<script>console.error("boom")</script></body></html>')  # fmt: skip
    pixels, log = _render(bad, tmp_path)
    assert any('"boom"' in line for line in _console(log))
    assert sum(1 for p in pixels if p != (255, 255, 255)) < len(pixels) // 50
