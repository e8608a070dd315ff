"""Start and stop the search service as a child process on 127.0.0.1 (for tests,
benchmarks and `flowserve bench teola --live`): a free port, `/health` polled up to a
deadline, the process ended on exit."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from flowserve.retrieval.errors import RetrievalError

# a small topical corpus, one topic per file (tests and `flowserve bench teola --live`)
SAMPLE_CORPUS: dict[str, str] = {
    "volcano.txt": "Volcanoes erupt when magma rises through the crust. Lava flows and ash clouds follow an "
                   "eruption; basalt forms when lava cools. Mount Etna is an active volcano in Sicily.",
    "bread.txt": "Bread dough is made from flour, water, salt and yeast. The yeast ferments sugars and the "
                 "dough rises; baking in a hot oven sets the crumb and browns the crust of the loaf.",
    "orbit.txt": "A satellite stays in orbit because its speed balances the pull of gravity. The Moon orbits "
                 "the Earth every 27 days; geostationary satellites orbit once per day above the equator.",
    "tide.txt": "Tides rise and fall twice a day because the Moon's gravity pulls the oceans. Spring tides "
                "come when the Sun and the Moon line up; neap tides when they pull at right angles.",
    "coffee.txt": "Coffee beans are the roasted seeds of the coffee cherry. Roasting browns the beans through "
                  "the Maillard reaction; espresso forces hot water through finely ground coffee.",
    "glacier.txt": "Glaciers form where snow piles up faster than it melts and compacts into ice. They flow "
                   "slowly downhill, carving U-shaped valleys and leaving moraines of rock behind.",
}


def write_corpus(folder: Path, texts: Mapping[str, str]) -> Path:
    """Write `texts` (file name → text) into `folder` (created if needed); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SearchServiceProcess:
    def __init__(self, corpus: Sequence[str | Path], key: str | None = None, delay_s: float = 0.0,
                 log_path: Path | None = None) -> None:
        self.corpus = [str(p) for p in corpus]
        self.key, self.delay_s, self.log_path = key, delay_s, log_path
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> SearchServiceProcess:
        assert self._proc is None, "started twice"
        self.port = free_port()
        cmd = [sys.executable, "-m", "flowserve.retrieval.search_service", "--corpus", *self.corpus,
               "--port", str(self.port), "--delay-s", str(self.delay_s)] + (["--key", self.key] if self.key else [])
        if self.log_path:  # the child keeps its own descriptor: close ours at once
            with open(self.log_path, "wb") as log:
                self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        else:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=1.0) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RetrievalError(f"search service exited with code {self._proc.returncode} "
                                         f"(log: {self.log_path})")
                try:
                    if http.get(f"{self.url}/health").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)  # polling interval of a deadline-bounded wait
        self.stop()
        raise RetrievalError(f"search service was not healthy after {timeout_s:g} s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> SearchServiceProcess:
        return self.start() if self._proc is None else self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
