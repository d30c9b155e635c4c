"""Debian's `prometheus` on a loopback port, scraping given targets every second, for tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.live import free_port


class PrometheusError(RuntimeError):
    """Prometheus would not start, or answered a query with an error."""


def scrape_config(jobs: dict[str, str], rule_files: list[Path]) -> str:
    """A prometheus.yml (JSON is valid YAML): one job per `name: host:port`, scraped every two
    seconds with that long to answer (a CPU engine busy generating can take over a second to
    render /metrics, and a failed scrape leaves rate() without its second sample), rules
    evaluated every second."""
    return json.dumps({
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                           for job, target in jobs.items()],
    }, indent=2)


class RunningPrometheus:
    def __init__(self, directory: Path, jobs: dict[str, str], rule_files: list[Path]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusError("Debian's prometheus is not installed: run `make test` "
                                  "(scripts/setup.sh --test-tools installs it)")
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "prometheus.yml"
        config.write_text(scrape_config(jobs, rule_files))
        self.port = free_port()
        self.log = directory / "prometheus.log"
        self.command = [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                        f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0  # epoch seconds

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RunningPrometheus:
        self.started = time.time()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        try:
            while not self._ready():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise PrometheusError(
                        f"prometheus did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.1)
        except BaseException:  # a failed start, or a stop signal while it starts: nothing left running
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """`data` of an HTTP API answer; a query Prometheus refuses (bad PromQL) raises with its message."""
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as err:
            body = json.load(err)
        if body.get("status") != "success":
            raise PrometheusError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (a scalar result becomes one unlabelled sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def targets_scraped_since(self, moment: float) -> bool:
        """Every active target's last scrape began after `moment` (epoch seconds) and succeeded."""
        active = self.api("targets")["activeTargets"]
        return bool(active) and all(
            t["health"] == "up" and _epoch(t["lastScrape"]) > moment for t in active)

    def rules_evaluated_since(self, moment: float) -> bool:
        groups = self.api("rules")["groups"]
        return bool(groups) and all(_epoch(g["lastEvaluation"]) > moment for g in groups)


def _epoch(rfc3339: str) -> float:
    """Prometheus's timestamps (RFC 3339 with nanoseconds, which `datetime` cannot read) as epoch seconds."""
    match = re.fullmatch(r"([^.]+?)(\.\d+)?(Z|[+-]\d\d:\d\d)", rfc3339)
    if match is None:
        raise PrometheusError(f"unexpected timestamp from prometheus: {rfc3339!r}")
    head, fraction, zone = match.groups()
    moment = datetime.fromisoformat(head + ("+00:00" if zone == "Z" else zone)).timestamp()
    return moment + float(fraction or 0)
