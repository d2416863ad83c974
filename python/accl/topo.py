"""What ACCL makes of a job's hosts and NICs, without the job: the rails and
planes, the ring, which NICs each connection between hosts takes, the
hierarchical algorithms' rails and the double binary trees (the library's
own planning, acclTopoPlan).

    python -m accl.topo                      # this host's NICs, 2 hosts alike, 1 rank each
    python -m accl.topo --hosts 4 --ranks-per-host 8 --png plan.png
    python -m accl.topo --layout cluster.txt --json
    python -m accl.topo --topo-file node.xml --hosts 4   # a host as NCCL_TOPO_FILE describes it

A layout has a line per host (docs/python.md, `python -m accl.topo`):

    host NAME ranks 0,1,2,3 nics nic0=10.0.0.0/24@0000:17:00.0,nic1=10.0.1.0/24 [rails nic0:0:0,nic1:1:0]
    crossnic 2
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import xml.etree.ElementTree as ET

from . import _accl


def local_nics() -> str:
    """This host's NICs as the network backend sees them (NCCL_SOCKET_IFNAME,
    ACCL_NICS applied), as a layout's "nics ... [rails ...]" words."""
    return _accl.topo_local()


def file_nics(text: str) -> str:
    """The NICs a topology file (NCCL's XML, as NCCL_TOPO_FILE reads it)
    describes, as a layout's "nics ... [rails ...]" words: each <net>'s
    name, its subnet and PCI address (the <pci busid> above it) where
    given, and rails and planes where every <net> has one."""
    words, rails = [], []

    def walk(node: ET.Element, busid: str) -> None:
        busid = node.get("busid", busid) if node.tag == "pci" else busid
        if node.tag == "net":
            name = node.get("name")
            if not name:
                raise ValueError("a <net> element without a name")
            words.append(name + (f"={node.get('subnet')}" if node.get("subnet") else "") + (f"@{busid}" if busid else ""))
            if node.get("rail") is not None:
                rails.append(f"{name}:{node.get('rail')}:{node.get('plane', '0')}")
        for child in node:
            walk(child, busid)

    root = ET.fromstring(text)
    if root.tag != "system":
        raise ValueError("no <system> element")
    walk(root, "")
    return (f"nics {','.join(words)}" if words else "") + (f" rails {','.join(rails)}" if len(rails) == len(words) else "")


def alike(hosts: int, ranks_per_host: int, nics: str) -> str:
    """A layout of `hosts` hosts like this one, ranks numbered host by host."""
    lines = []
    for h in range(hosts):
        ranks = ",".join(str(h * ranks_per_host + i) for i in range(ranks_per_host))
        lines.append(f"host host{h} ranks {ranks} {nics}".rstrip())
    return "\n".join(lines) + "\n"


def plan(layout: str) -> dict:
    """The library's plan for a layout (ValueError-like InvalidArgumentError
    naming the line where it does not parse)."""
    return json.loads(_accl.topo_plan(layout))


def _lanes(hop: dict) -> str:
    return ", ".join(f"{a}>{b}" for a, b in hop["lanes"]) or "-"


def tables(p: dict) -> str:
    """The plan as text tables."""
    out = [f"# {len(p['hosts'])} hosts, {p['ranks']} ranks, {p['rails']} rail(s) x {p['planes']} plane(s) "
           f"(rails from {p['source']}; NCCL_CROSS_NIC={p['crossnic']})", "", "| host | ranks | NICs (rail/plane) |",
           "|---|---|---|"]
    for h in p["hosts"]:
        nics = ", ".join(f"{n['name']} {n['rail']}/{n['plane']}" for n in h["nics"]) or "none"
        out.append(f"| {h['name']} | {' '.join(map(str, h['ranks']))} | {nics} |")
    out += ["", "ring: " + " ".join(map(str, p["ring"])), ""]
    if p["ring_hops"]:
        out += ["| ring hop between hosts | lanes (sender's NIC > receiver's) |", "|---|---|"]
        out += [f"| {x['from']} -> {x['to']} | {_lanes(x)}{' (' + x['crosses'] + ')' if 'crosses' in x else ''} |"
                for x in p["ring_hops"]]
        out.append("")
    if p["hier"]:
        out += ["hierarchical allreduce, allgather, reducescatter: each rank along its rail", "",
                "| rail hop | lanes |", "|---|---|"]
        out += [f"| {x['from']} -> {x['to']} | {_lanes(x)}"
                f"{' (standing by: ' + ', '.join(f'{a}>{b}' for a, b in x['standby']) + ')' if x.get('standby') else ''} |"
                for x in p["rail_hops"]]
    else:
        out.append("hierarchical algorithms: no (they need 2+ hosts of as many ranks each, 2 or more)")
    out += ["", "trees (each rank's parent): " + " | ".join(" ".join(map(str, t)) for t in p["trees"])]
    return "\n".join(out) + "\n"


def picture(p: dict, path: str) -> None:
    """Hosts as columns of ranks above their NICs (coloured by rail), the
    rails' connections between hosts as lines, the ring's hops dashed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--png needs matplotlib (pip install matplotlib)") from None
    hosts = p["hosts"]
    tallest = max(len(h["ranks"]) + len(h["nics"]) for h in hosts)
    fig, ax = plt.subplots(figsize=(3 + 2.6 * len(hosts), 1.5 + 0.45 * tallest))
    colours = plt.get_cmap("tab10")
    where = {}  # ("rank", r) or ("nic", host, name) -> (x, y)
    for i, h in enumerate(hosts):
        x = i * 2.6
        height = 0.45 * (len(h["ranks"]) + len(h["nics"])) + 0.6
        ax.add_patch(plt.Rectangle((x - 0.2, -height + 0.3), 2.0, height, fill=False, lw=1))
        ax.text(x + 0.8, 0.45, h["name"], ha="center", fontsize=9, weight="bold")
        for k, r in enumerate(h["ranks"]):
            y = -0.45 * k
            where[("rank", r)] = (x + 0.1, y)
            ax.text(x, y, f"rank {r}", fontsize=8, va="center")
        for k, n in enumerate(h["nics"]):
            y = -0.45 * (len(h["ranks"]) + k) - 0.2
            where[("nic", i, n["name"])] = (x, y)  # the host's left edge; its box spans x+0.9 .. x+1.6
            ax.add_patch(plt.Rectangle((x + 0.9, y - 0.15), 0.7, 0.3, color=colours(max(n["rail"], 0) % 10),
                                       alpha=0.35 + 0.3 * max(n["plane"], 0)))
            ax.text(x + 1.25, y, n["name"], fontsize=7, ha="center", va="center")
    host_of = {r: i for i, h in enumerate(hosts) for r in h["ranks"]}
    for hops, style in ((p["rail_hops"], "-"), (p["ring_hops"], "--")):
        for x in hops:
            rank = where[("rank", x["from"])]
            for a, b in x["lanes"]:
                pa, pb = where.get(("nic", host_of[x["from"]], a)), where.get(("nic", host_of[x["to"]], b))
                if not (pa and pb):
                    continue
                right = pb[0] > pa[0]  # leave from the side that faces the other host
                start = (pa[0] + (1.6 if right else 0.9), pa[1])
                end = (pb[0] + (0.9 if right else 1.6), pb[1])
                ax.annotate("", end, start, arrowprops=dict(arrowstyle="->", ls=style, lw=0.8, alpha=0.7,
                                                            connectionstyle="arc3,rad=0.1"))
                if style == "-":  # the rank that sends on that NIC
                    ax.plot([rank[0] + 0.45, pa[0] + 0.9], [rank[1], pa[1]], lw=0.5, alpha=0.4,
                            color=colours(hosts[host_of[x["from"]]]["ranks"].index(x["from"]) % 10))
    tallest = max(len(h["ranks"]) + len(h["nics"]) for h in hosts)
    ax.set_xlim(-0.5, 2.6 * len(hosts))
    ax.set_ylim(-0.45 * tallest - 0.4, 0.9)
    ax.axis("off")
    ax.set_title(f"{p['rails']} rail(s) x {p['planes']} plane(s): rails' connections solid, ring hops dashed",
                 fontsize=9)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m accl.topo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", help="a layout file (a line per host); default: hosts like this one")
    ap.add_argument("--topo-file", help="hosts like the one a topology file (NCCL's XML) describes")
    ap.add_argument("--hosts", type=int, default=2, help="hosts like this one (2)")
    ap.add_argument("--ranks-per-host", type=int, default=1, help="ranks on each (1)")
    ap.add_argument("--json", action="store_true", help="the plan as JSON")
    ap.add_argument("--png", help="also draw the plan into this PNG file (needs matplotlib)")
    a = ap.parse_args(argv)
    if a.layout:
        with open(a.layout) as f:
            layout = f.read()
    else:
        if a.hosts < 1 or a.ranks_per_host < 1:
            ap.error("--hosts and --ranks-per-host are 1 or more")
        if a.topo_file:
            try:
                with open(a.topo_file) as f:
                    nics = file_nics(f.read())
            except (OSError, ValueError, ET.ParseError) as e:
                ap.error(f"--topo-file {a.topo_file}: {e}")
            print(f"# {a.topo_file}: {nics or 'no <net>'}", file=sys.stderr)
        else:
            nics = local_nics()
            print(f"# {socket.gethostname()}: {nics or 'no NIC (NCCL_SOCKET_IFNAME?)'}", file=sys.stderr)
        layout = alike(a.hosts, a.ranks_per_host, nics)
    p = plan(layout)
    print(json.dumps(p, indent=1) if a.json else tables(p), end="")
    if a.png:
        picture(p, a.png)
        print(f"# picture: {a.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
