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
import time

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
    if HAVE["gloo"]:  # the note that explains its ratios, with its smallest call's time
        note = next(line for line in out.splitlines() if line.startswith("# gloo: its 8 B call took "))
        assert "shared memory" in note

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


def test_compare_flag_parsing_and_header(monkeypatch):
    monkeypatch.setattr(options, "_matplotlib_found", lambda: True)
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


def test_plot_without_matplotlib_fails_before_the_run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(options, "_matplotlib_found", lambda: False)
    with pytest.raises(SystemExit) as e:
        options.parse(["allreduce", "--plot", str(tmp_path / "p.png")])
    assert e.value.code == 2
    assert "pip install 'accl[plot]'" in capsys.readouterr().err
    # As a user runs it: the launcher refuses before any rank starts.
    hide = ("import sys; sys.modules['matplotlib'] = None; from accl.perf.__main__ import main; "
            f"sys.exit(main(['allreduce', '-np', '2', '--plot', {str(tmp_path / 'p.png')!r}]))")
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "accl[plot]" in res.stderr, res.stdout + res.stderr
    assert time.monotonic() - t0 < 20 and "Collective test starting" not in res.stdout
    monkeypatch.setattr(options, "_matplotlib_found", lambda: True)
    with pytest.raises(SystemExit):  # a folder that is not there: said before the run too
        options.parse(["allreduce", "--plot", str(tmp_path / "no" / "p.png")])
    assert "cannot write" in capsys.readouterr().err


def test_plot_alone_sweeps_sizes_and_other_size_errors_name_the_defaults(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(options, "_matplotlib_found", lambda: True)
    opts = options.parse(["allreduce", "--plot", str(tmp_path / "p.png")])
    assert opts.sizes() == [8 << k for k in range(23)]  # 8 B .. 32 MiB, factor 2: a curve
    assert options.parse(["allreduce"]).sizes() == [32 << 20]  # without --plot: one size, as before
    assert options.parse(["allreduce", "--plot", "p.png", "-b", "1M", "-e", "4M"]).sizes() == [1 << 20, 2 << 20,
                                                                                           4 << 20]
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "-e", "1M"])
    assert "below -b's default (32M): give -b too" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "-b", "64M"])
    assert "above -e's default (32M)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "-b", "2M", "-e", "1M"])
    assert "-b (minbytes, 2097152) is larger than -e (maxbytes, 1048576)" in capsys.readouterr().err


def test_datatypes_all_and_help_list_all_twelve(capsys):
    assert options.parse(["allreduce", "-d", "all"]).datatypes == list(options.DATATYPES)
    assert len(options.DATATYPES) == 12
    with pytest.raises(SystemExit):
        options.parse(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(name in out for name in options.DATATYPES), out


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (pip install '.[plot]')")
@pytest.mark.timeout(180)
def test_plot_alone_draws_a_curve(tmp_path):
    png = tmp_path / "p.png"
    res = subprocess.run([sys.executable, "-m", "accl.perf", "allreduce", "-np", "2", "-n", "1", "-w", "0",
                          "--plot", str(png), "-J", str(tmp_path / "p.json")],
                         capture_output=True, text=True, timeout=170)
    assert res.returncode == 0, res.stdout + res.stderr
    assert png.stat().st_size > 10000
    rows = json.loads((tmp_path / "p.json").read_text())["rows"]
    assert [r["size"] for r in rows] == [8 << k for k in range(23)]


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
