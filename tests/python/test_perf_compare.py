"""python -m accl.perf --compare mpi,gloo --csv: the peers' columns, the CSV, and the
'not available' lines for peers that are not installed (either way passes)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

import accl
from accl.perf import options, output, table

HOST_MODE = not accl.query_mode()[0]
HAVE = {
    "mpi": importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun") is not None,
    "gloo": importlib.util.find_spec("torch") is not None,
}
SIZES = [8, 64, 512, 4096, 32768]  # -b 8 -e 64K -f 8


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")
@pytest.mark.timeout(60)
def test_perf_compare_mpi_gloo_csv_json(tmp_path):
    out_csv, out_json = tmp_path / "out.csv", tmp_path / "out.json"
    env = {**os.environ, "NCCL_SOCKET_IFNAME": "lo"}
    res = subprocess.run(
        [sys.executable, "-m", "accl.perf", "allreduce", "-np", "2", "-b", "8", "-e", "64K",
         "-f", "8", "-n", "2", "-w", "1", "--compare", "mpi,gloo", "--csv", str(out_csv),
         "-J", str(out_json)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    header = [line for line in out.splitlines() if line.startswith("#") and "#wrong" in line]
    assert len(header) == 1, out
    for col in ("mpi time", "x mpi", "gloo time", "x gloo"):
        assert col in header[0], header[0]
    rows = _rows(out)
    assert [int(r[0]) for r in rows] == SIZES
    assert all(len(r) == 13 + 4 for r in rows), rows  # 13 nccl-tests columns, 2 per peer
    assert "# Out of bounds values : 0 OK" in out

    with open(out_csv, newline="") as f:
        recs = list(csv.DictReader(f))
    assert list(recs[0]) == output.fields(["mpi", "gloo"])
    assert [int(r["size"]) for r in recs] == SIZES
    for r in recs:
        assert r["type"] == "float" and r["redop"] == "sum" and r["nranks"] == "2"
        assert float(r["time_us"]) > 0 and float(r["ip_time_us"]) > 0
        assert r["wrong"] == "0" and r["ip_wrong"] == "0"
    doc = json.loads(out_json.read_text())
    assert [r["size"] for r in doc["rows"]] == SIZES

    for peer, (line_no, col) in {"mpi": (13, 0), "gloo": (15, 2)}.items():
        if not HAVE[peer]:
            assert f"# {peer}: not available (" in out, out
            assert all(r[13 + col] == "N/A" for r in rows)
            assert all(r[f"{peer}_time_us"] == "" and r[f"x_{peer}"] == "" for r in recs)
            assert doc["peers"][peer]["available"] is False
            continue
        # installed: it ran, unless it could not start here (then said so, not failed)
        if f"# {peer}: not available (" in out:
            pytest.skip(f"{peer} is installed but could not run here: {out}")
        assert f"# {peer}: " in out and f"'x {peer}' = {peer} time / ACCL" in out
        for r, rec in zip(rows, recs):
            peer_us, ratio = float(r[line_no]), float(r[line_no + 1])
            assert peer_us > 0 and ratio > 0
            assert float(rec[f"{peer}_time_us"]) == pytest.approx(peer_us, rel=0.01, abs=0.01)
            ours = float(rec["ip_time_us"] if peer == "gloo" else rec["time_us"])
            assert float(rec[f"x_{peer}"]) == pytest.approx(float(rec[f"{peer}_time_us"]) / ours)
        assert doc["peers"][peer]["available"] is True


def test_compare_flag_parsing_and_header():
    opts = options.parse(["allreduce", "--compare", "gloo,mpi,gloo", "--csv", "x.csv",
                          "-J", "x.json", "--plot", "x.png", "--progress"])
    assert opts.compare == ["gloo", "mpi"]
    assert (opts.csv, opts.json, opts.plot, opts.progress) == ("x.csv", "x.json", "x.png", True)
    assert options.parse(["allreduce"]).compare == []
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "--compare", "nccl"])
    plain = table.header()
    assert table.compare_header(plain, []) == plain
    wide = table.compare_header(plain, ["mpi"])
    assert wide[2].startswith(plain[2]) and wide[2].endswith("mpi time   x mpi")
    assert table.compare_part(None, None).split() == ["N/A", "N/A"]
    assert table.compare_part(12.5, 2.0).split() == ["12.50", "2.00"]
    # a ratio that two decimals would print as 0.00 (ACCL slowed down by a loaded machine) stays above 0
    assert table.compare_part(6.12, 0.0012).split() == ["6.12", "1e-03"]


def test_plot_without_matplotlib_is_a_message(tmp_path):
    rows = [{"size": 8, "type": "float", "redop": "sum", "busbw": 0.1, "ip_busbw": 0.2,
             "mpi_busbw": 0.3}]
    if importlib.util.find_spec("matplotlib") is None:
        why = output.write_plot(str(tmp_path / "p.png"), rows, ["mpi"], "t")
        assert why and "matplotlib" in why
        assert not (tmp_path / "p.png").exists()
    else:
        assert output.write_plot(str(tmp_path / "p.png"), rows, ["mpi"], "t") is None
        assert (tmp_path / "p.png").stat().st_size > 0
