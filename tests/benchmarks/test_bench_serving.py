"""`bench serving` against a real server or replicas behind the balancer: every load phase
runs, nothing fails."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks.speed import balancer, load_client, synthetic_bundles
from benchmarks.speed.serving_profile import stage_of
from data.errors import RecsysInputError
from tests.benchmarks.helpers import run_bench


def test_bench_serving_loads_a_real_server_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_png = tmp_path / "serving.json", tmp_path / "serving.png"
    result = run_bench(
        capsys, "serving", "--items", "2000", "--duration", "1", "--concurrency", "4",
        "--rate", "50", "--index", "flat", "--dim", "32", "--work-dir", str(tmp_path / "work"),
        "--out", str(out_json), "--plot", str(out_png),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    assert record["machine"]["load_before"] >= 0 and record["machine"]["load_after"] >= 0
    (run,) = record["metrics"]["runs"]
    assert run["items"] == 2000 and run["raw"]["index"]["kind"] == "flat"
    assert run["dim"] == record["config"]["dim"] == run["raw"]["index"]["dim"] == 32
    assert run["raw"]["recall_at_10_vs_exact"] == 1.0  # flat is the exact search
    open_loop, closed = run["loads"]
    assert open_loop["mode"].startswith("open loop") and closed["mode"].startswith("closed")
    for load in (open_loop, closed):
        assert load["requests"] > 0 and load["errors"] == 0
        assert 0 < load["p50_ms"] <= load["p95_ms"] <= load["p99_ms"] <= load["max_ms"]
    assert open_loop["requests"] == 50  # 1 s on the 50 req/s schedule, however fast the server
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("option", "value"),
    [("--rate", "-1"), ("--rate", "0"), ("--rate", "inf"), ("--rate", "nan"),
     ("--duration", "0"), ("--duration", "-2"), ("--duration", "inf"), ("--duration", "nan"),
     ("--concurrency", "0")],
)  # fmt: skip
def test_a_load_that_would_never_end_or_send_nothing_is_refused_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    work = tmp_path / "work"
    result = run_bench(capsys, "serving", "--items", "2000", "--work-dir", str(work), option, value)
    assert result.returncode == 2 and option in result.stderr
    assert not work.exists()  # no bundle written, no server started


def test_an_unwritable_result_file_is_refused_before_any_server(
    tmp_path: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    for option in ("--out", "--plot"):
        result = run_bench(
            capsys, "serving", "--items", "2000", "--duration", "1",
            "--work-dir", str(work), option, str(blocker / "serving.out"),
        )  # fmt: skip
        assert result.returncode == 2 and option in result.stderr and not work.exists()


def _trained_like_table(path: Path, rows: int = 3001, dim: int = 16) -> Path:
    """An `.npy` table with a trained table's traits: a mean direction, a falling spectrum."""
    rng = np.random.default_rng(0)
    scales = np.geomspace(1.0, 0.01, dim)
    table = (0.3 + rng.standard_normal((rows, dim)) * scales).astype(np.float32)
    table[0] = 0.0
    np.save(path, table)
    return path


def test_a_table_like_a_trained_one_reports_recall_by_ef_search_and_a_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "serving.json"
    result = run_bench(
        capsys, "serving", "--items", "3000", "--duration", "2", "--concurrency", "4",
        "--rate", "20", "--index", "hnsw", "--dim", "16", "--ef-search", "32", "--profile",
        "--like", str(_trained_like_table(tmp_path / "table.npy")),
        "--work-dir", str(tmp_path / "work"), "--out", str(out_json),
        "--plot", str(tmp_path / "serving.png"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    assert "Gaussian of" in record["config"]["embeddings"]
    like = record["config"]["like_table"]
    assert like["rows"] == 3000 and 1 <= like["rank_90"] <= 16  # the padding row left out
    (run,) = record["metrics"]["runs"]
    recall = run["raw"]["recall_at_10_vs_exact"]
    assert list(recall) == ["32", "64", "128", "256", "512", "1024"]
    assert run["raw"]["index"]["efSearch"] == 32
    assert all(0 < r <= 1 for r in recall.values()) and recall["256"] >= recall["32"]
    profiled = run["loads"][2]
    assert profiled["mode"] == "closed loop, profiled" and profiled["errors"] == 0
    assert profiled["server_cpu_ms_per_request"] > 0 and profiled["client_cpu_ms_per_request"] > 0
    assert 0 < profiled["server_cores_busy"] <= 2.5  # the server's threads, over the load
    shares = profiled["server_stage_shares"]
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01) and "HTTP and event loop" in shares


def test_a_like_table_of_another_width_is_refused_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    table = _trained_like_table(tmp_path / "table.npy", dim=16)
    result = run_bench(capsys, "serving", "--items", "2000", "--dim", "32", "--like", str(table),
                       "--work-dir", str(work))  # fmt: skip
    assert result.returncode == 2 and "16 wide" in result.stderr and not work.exists()
    (tmp_path / "junk.npy").write_text("not a table")
    result = run_bench(capsys, "serving", "--like", str(tmp_path / "junk.npy"), "--work-dir",
                       str(work))  # fmt: skip
    assert result.returncode == 2 and "--like" in result.stderr and not work.exists()


@pytest.mark.slow  # over 8 s: `make test-all` runs it; `make test` keeps CI within 8 minutes
def test_a_bundle_is_served_as_it_is_with_histories_of_its_own_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_thread: None
) -> None:
    """A published bundle (written as `recsys train` writes one, with ids of its own)."""
    from model.bundle import ModelBundle

    bundle = synthetic_bundles.synthetic_bundle(tmp_path / "home", 300, 16, 0, item_prefix="i")
    known = ModelBundle.load(bundle, load_tower=False).item_ids[1:]
    out_json = tmp_path / "serving.json"
    result = run_bench(
        capsys, "serving", "--bundle", str(bundle), "--duration", "1", "--concurrency", "2",
        "--rate", "20", "--index", "hnsw", "--ef-search", "16", "--work-dir",
        str(tmp_path / "work"), "--out", str(out_json), "--plot", str(tmp_path / "serving.png"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    assert record["config"]["items"] == [len(known)] and record["config"]["dim"] == 16
    assert "trained bundle served as it is (bench-300-d16" in record["config"]["embeddings"]
    (run,) = record["metrics"]["runs"]
    assert run["items"] == len(known) and run["dim"] == 16
    assert all(load["errors"] == 0 and load["requests"] > 0 for load in run["loads"])
    recall = run["raw"]["recall_at_10_vs_exact"]  # the sessions' ids looked up in the bundle
    assert "16" in recall and recall["1024"] == 1.0  # a search as wide as the catalogue is exact


@pytest.mark.parametrize("extra", [["--items", "100"], ["--dim", "16"], ["--like", "t.npy"]])
def test_a_trained_bundle_takes_no_size_width_or_law_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    work = tmp_path / "work"
    result = run_bench(
        capsys, "serving", "--bundle", str(tmp_path), *extra, "--work-dir", str(work)
    )
    assert result.returncode == 2 and extra[0] in result.stderr and not work.exists()


def test_a_bundle_that_is_not_one_is_refused_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    for bundle in (tmp_path / "none", tmp_path):  # no folder; a folder without a manifest
        result = run_bench(capsys, "serving", "--bundle", str(bundle), "--work-dir", str(work))
        assert result.returncode == 2 and "--bundle" in result.stderr and not work.exists()


def test_a_stack_goes_to_the_first_stage_its_innermost_frames_reach() -> None:
    search = "run (uvicorn/server.py:1);go (serving/batcher.py:5);search (faiss/__init__.py:9)"
    assert stage_of(search) == "index search"
    assert stage_of("run (uvicorn/server.py:1);parse (httptools/parser.py:3)") == (
        "HTTP and event loop"
    )
    assert stage_of("main (elsewhere.py:1)") == "other"


def test_the_balancer_config_is_the_shipped_one_pointed_at_local_replicas(tmp_path: Path) -> None:
    shipped = balancer.SHIPPED.read_text()
    conf = balancer.local_config([9001, 9002], 9100, tmp_path, shipped)
    assert "server 127.0.0.1:9001;" in conf and "server 127.0.0.1:9002;" in conf
    assert "listen 127.0.0.1:9100;" in conf and "resolver" not in conf and "api:8000" not in conf
    assert f"pid {tmp_path}/nginx.pid;" in conf and f"access_log {tmp_path}/access.log;" in conf
    for rule in re.findall(r"^\s*proxy_next_upstream [^;]*;", shipped, flags=re.MULTILINE):
        assert rule in conf  # the retry rules measured are the shipped ones
    with pytest.raises(ValueError, match="listen 8000"):
        balancer.local_config([9001], 9100, tmp_path, shipped.replace("listen 8000;", ""))


def test_replicas_without_nginx_are_refused_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(balancer.shutil, "which", lambda *args, **kwargs: None)
    work = tmp_path / "work"
    result = run_bench(capsys, "serving", "--items", "2000", "--replicas", "2", "--work-dir",
                       str(work))  # fmt: skip
    assert result.returncode == 2 and "nginx" in result.stderr and not work.exists()


def _has_nginx() -> bool:
    try:
        balancer.require_nginx()
    except RecsysInputError:
        return False
    return True


@pytest.mark.skipif(not _has_nginx(), reason="no nginx: apt install nginx-light")
def test_replicas_behind_the_balancer_share_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "serving.json"
    result = run_bench(
        capsys, "serving", "--items", "2000", "--duration", "3", "--concurrency", "8",
        "--rate", "40", "--index", "flat", "--dim", "16", "--replicas", "2", "--profile",
        "--work-dir", str(tmp_path / "work"), "--out", str(out_json),
        "--plot", str(tmp_path / "serving.png"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out_json.read_text())
    assert record["config"]["replicas"] == 2 and "nginx" in record["config"]["balancer"]
    (run,) = record["metrics"]["runs"]
    assert run["replicas"] == 2 and all(load["errors"] == 0 for load in run["loads"])
    profiled = run["loads"][2]
    assert profiled["balancer_cpu_ms_per_request"] > 0
    assert len(profiled["each_server_cores_busy"]) == 2
    assert profiled["stage_shares_of"] == "server process 1 of 2"
    assert min(profiled["each_server_cores_busy"]) > 0.25 * max(profiled["each_server_cores_busy"])
    lines = (tmp_path / "work" / "balancer" / "access.log").read_text().splitlines()
    assert len(lines) >= sum(load["requests"] for load in run["loads"])  # all went through it


def test_a_trained_bundle_is_linked_never_written_and_a_reused_folder_relinks(
    tmp_path: Path,
) -> None:
    from benchmarks.speed import served_catalogue

    first, second = (
        synthetic_bundles.synthetic_bundle(tmp_path / name, 50, 8, seed=seed)
        for name, seed in (("a", 0), ("b", 1))
    )  # the same version name, bench-50-d8
    work = tmp_path / "work"
    served = served_catalogue.trained(first, work)
    (served.bundle_dir / "index-cache.faiss").write_text("built for the first")
    assert not (first / "index-cache.faiss").exists()  # the cache stays in the work folder
    served = served_catalogue.trained(second, work)
    assert {p.resolve().parent for p in served.bundle_dir.iterdir()} == {second.resolve()}
    assert len(served.item_ids) == 50


def test_a_law_of_unit_rows_draws_unit_rows_and_a_cached_bundle_draws_none(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((500, 8)) + 2.0
    unit = synthetic_bundles.TrainedLaw(rows / np.linalg.norm(rows, axis=1, keepdims=True), rng)
    loose = synthetic_bundles.TrainedLaw(rows, rng)
    assert unit.unit and not loose.unit and unit.fingerprint() != loose.fingerprint()
    norms = np.linalg.norm(unit.draw(1000, rng), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    assert np.linalg.norm(loose.draw(1000, rng), axis=1).std() > 0.1
    calls = []

    def draw() -> np.ndarray:
        calls.append(1)
        return unit.draw(50, np.random.default_rng(0))

    for _ in range(2):
        synthetic_bundles.synthetic_bundle(tmp_path, 50, 8, seed=0, table=draw, table_name="u")
    assert calls == [1]


def test_the_load_client_opens_a_new_connection_when_the_server_ends_one() -> None:
    """nginx closes a client connection after `keepalive_requests` answers: no error."""
    import asyncio

    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%sContent-Type: text/plain\r\n\r\nok"

    async def main() -> tuple[dict, int]:
        opened = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal opened
            opened += 1
            for n in range(3):  # three answers, the last one saying the connection ends
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                writer.write(answer % (b"Connection: close\r\n" if n == 2 else b""))
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            bodies = load_client.bodies([str(i) for i in range(1, 51)], 10, 0)
            result = await load_client.run_load(port, bodies, 0.5, 1, None)
        return result, opened

    result, opened = asyncio.run(main())
    assert result["errors"] == 0 and result["requests"] > 6 and opened >= result["requests"] // 3
