"""``/metrics`` of a real ``memfs serve --workers 2``: one sum over both workers.

The server runs prometheus_client's multiprocess mode in a private folder it makes
under ``$XDG_RUNTIME_DIR`` (here inside ``tmp_path``, so the test can look at it):
every worker writes its own files there and a scrape, whichever worker answers it,
adds them all up. The folder is 0700 and gone once the server has stopped.
"""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from servers_real import RealServer

AGENT = "tenants/zqx-owner-5521/agent"
PATH = "/memories/zqx-private-path.md"
ROUTE = "/healthz"


def healthz_counted(text: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "memfs_http_requests_total" and sample.labels.get("route") == ROUTE:
                total += sample.value
    return total


def per_worker(folder: Path) -> dict[str, float]:
    """/healthz requests each worker counted, read from its own counter file."""
    out: dict[str, float] = {}
    for file in folder.glob("counter_*.db"):
        pid = file.stem.removeprefix("counter_")
        for key, value, _ts, _pos in MmapedDict.read_all_values_from_file(str(file)):  # type: ignore[no-untyped-call]
            if '"memfs_http_requests_total"' in key and f'"{ROUTE}"' in key:
                out[pid] = out.get(pid, 0.0) + value
    return out


def _healthz(url: str) -> int:
    response = httpx.get(url + ROUTE, timeout=30)
    assert response.json() == {"status": "ok"}
    return response.status_code


def _grown(start: dict[str, float], now: dict[str, float]) -> list[str]:
    """The workers that counted /healthz requests since ``start``."""
    return [pid for pid, n in now.items() if n > start.get(pid, 0.0)]


def test_two_workers_report_one_sum_and_no_ids(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    server = RealServer(tmp_path / "data", workers=2, env={"XDG_RUNTIME_DIR": str(runtime)})
    with server.start():
        [folder] = list(runtime.glob("memfs-metrics-*"))
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        with server.client() as client:
            agent = quote(AGENT, safe="")
            assert client.put(f"/v1/agents/{agent}", json={}).status_code == 201
            written = client.put(
                f"/v1/agents/{agent}/memories/{PATH.removeprefix('/memories/')}",
                content=b"secret words",
                headers={"Content-Type": "text/markdown"},
            )
            assert written.status_code == 201, written.text
        with httpx.Client(base_url=server.url, timeout=30) as plain:
            baseline = healthz_counted(plain.get("/metrics").text)
        start = per_worker(folder)
        # A new connection per request, a few at once, lets the kernel hand them to
        # either worker; keep going (bounded) until both have answered some.
        sent = 0
        with ThreadPoolExecutor(4) as pool:
            while sent < 4000 and len(_grown(start, per_worker(folder))) < 2:
                statuses = list(pool.map(_healthz, [server.url] * 20))
                assert statuses == [200] * 20
                sent += 20
        counts = per_worker(folder)
        assert len(_grown(start, counts)) == 2, counts
        # Each scrape lands on either worker and shows the same total: all of them.
        for _ in range(6):
            with httpx.Client(base_url=server.url, timeout=30) as plain:
                scraped = plain.get("/metrics")
            assert scraped.status_code == 200
            assert healthz_counted(scraped.text) == baseline + sent == sum(counts.values())
            for secret in ("zqx", quote(AGENT, safe=""), "secret words"):
                assert secret not in scraped.text
        assert "memfs_commits_total 1.0" in scraped.text
    assert not folder.exists()
