"""One summary of a ci/test.sh run: a line per suite from its JUnit XML
(pytest --junitxml) and exit status, then the totals. Exits 1 if any suite
failed or left no result.

    python ci/summary.py RESULTS_DIR

RESULTS_DIR holds, per suite in run order, NN-name.xml and NN-name.rc: the
exit status and the seconds it took, or `skip` and why it did not run."""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(xml: Path) -> dict | None:
    """passed, failed, skipped of one JUnit file (failures and errors count as failed)."""
    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {"tests": 0, "failed": 0, "skipped": 0}
    for s in suites:
        total["tests"] += int(s.get("tests", 0))
        total["failed"] += int(s.get("failures", 0)) + int(s.get("errors", 0))
        total["skipped"] += int(s.get("skipped", 0))
    total["passed"] = total["tests"] - total["failed"] - total["skipped"]
    return total


def main(folder: str) -> int:
    rows, bad = [], 0
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for rc_file in sorted(Path(folder).glob("*.rc")):
        name = rc_file.stem.split("-", 1)[1]
        lines = rc_file.read_text().split()
        if lines and lines[0] == "skip":  # not run, and why
            rows.append((name, 0, 0, 0, "-", "not run: " + " ".join(lines[1:])))
            continue
        rc, seconds = int(lines[0]), int(lines[1]) if len(lines) > 1 else 0
        c = counts(rc_file.with_suffix(".xml"))
        # pytest: 0 all passed, 5 nothing collected (a -k that selects none here)
        ok = rc in (0, 5) and (c is None or c["failed"] == 0) and (c is not None or rc == 0)
        if c is None and rc != 5:
            result = "passed" if rc == 0 else f"FAILED (exit {rc}, no test report)"
        else:
            result = "passed" if ok else f"FAILED (exit {rc})"
        bad += not ok
        c = c or {"passed": 0, "failed": 0, "skipped": 0}
        for k in totals:
            totals[k] += c[k]
        rows.append((name, c["passed"], c["failed"], c["skipped"], f"{seconds // 60}:{seconds % 60:02d}", result))
    print("\n==> summary")
    print(f"  {'suite':<22} {'passed':>7} {'failed':>7} {'skipped':>8} {'time':>6}  result")
    for name, p, f, s, t, result in rows:
        print(f"  {name:<22} {p:>7} {f:>7} {s:>8} {t:>6}  {result}")
    what = "every suite passed" if not bad else f"{bad} suite(s) FAILED"
    print(f"{what}: {totals['passed']} tests passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
