"""A parsed nccl-tests table, as the perf drivers (perf/) print it; shared by
the host-mode (tests/perf) and device-mode (tests/gpu) driver tests."""
import re


class Table:
    """A parsed nccl-tests table."""

    def __init__(self, text):
        self.text = text
        self.rows = []
        self.skips = []
        self.devices = []
        self.header = None
        self.out_of_bounds = None
        self.avg_busbw = None
        for line in text.splitlines():
            if line.startswith("#  Rank"):
                self.devices.append(line)
            elif line.startswith("# Skipping "):
                self.skips.append(line[len("# Skipping "):])
            elif line.startswith("#") and "size" in line and "#wrong" in line:
                self.header = line.split()
            elif line.startswith("# Out of bounds values"):
                self.out_of_bounds = int(line.split(":")[1].split()[0])
            elif line.startswith("# Avg bus bandwidth"):
                self.avg_busbw = float(line.split(":")[1])
            elif line.strip() and not line.startswith("#") and re.match(r"^\s+\d+\s+\d+\s", line):
                f = line.split()
                assert len(f) == 13, line
                self.rows.append({
                    "size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3], "root": int(f[4]),
                    "oop": (float(f[5]), float(f[6]), float(f[7]), f[8]),
                    "ip": (float(f[9]), float(f[10]), float(f[11]), f[12]),
                })

    def assert_clean(self, expect_rows=True):
        assert self.header == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                               "time", "algbw", "busbw", "#wrong"], self.text
        assert self.out_of_bounds == 0, self.text
        assert self.avg_busbw is not None and self.avg_busbw >= 0
        if expect_rows:
            assert self.rows, self.text
        for r in self.rows:
            for part in (r["oop"], r["ip"]):
                assert part[3] in ("0", "N/A"), r
                assert part[0] >= 0, r
