"""One report page for every result (``tessera report`` / ``make report``).

Reads every ``build/bench/*.json`` present (the bench scripts' outputs and
``make synth``'s ``synth.json``), ``build/demo/summary.json`` (``make demo``)
and the bench PNGs, and writes ``build/report/index.html``: a self-contained
page (matplotlib PNGs embedded as base64 ``data:`` URIs, inline CSS, no
scripts, opens from disk) with

* one section per paper (Simba, T3, Monad): the bench's figures, a
  model / paper ratio plot and a model / paper / difference table per figure;
* one section per RTL block family (PE, NoC, Global PE, T3 track & trigger):
  the ``make demo`` verification rows, throughput / utilisation, latency-load
  curves and the synthesis row;
* other ``build/bench`` files (chiplet and package layers, mutation score, any
  new file) rendered generically;
* the list of expected inputs that are missing or unreadable (never fatal).

Every figure names the command that regenerates it.  Every number a table
shows from a JSON file carries ``data-src="FILE#/json/pointer"`` and
``data-value`` (the exact value): tests/test_report.py resolves each pointer
and compares.  Schema drift: any dict with ``model`` and ``paper`` keys is a
comparison row wherever it sits; the file-specific renderers fall back to the
generic one if a key they expect is gone.

Left out: interactivity (no JavaScript), history across runs, the tests'
pass/fail record (pytest output is not saved anywhere this can read).
"""
from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import os
import re
import time
from pathlib import Path

# file stem -> (section, command that regenerates it)
KNOWN = {
    "simba_repro": ("Simba", "python bench/simba_repro.py"),
    "t3_repro": ("T3", "python bench/t3_repro.py"),
    "monad_repro": ("Monad", "python bench/monad_repro.py"),
    "pe_utilization": ("pe", "python bench/pe_utilization.py"),
    "noc_throughput": ("noc", "python bench/noc_throughput.py"),
    "gpe_bandwidth": ("global_pe", "python bench/gpe_bandwidth.py"),
    "t3_rtl": ("t3rtl", "python bench/t3_rtl.py"),
    "synth": ("synth", "make synth"),
    "chiplet_layer": ("other", "python bench/chiplet_layer.py"),
    "package_layer": ("other", "python bench/package_layer.py"),
    "mutation": ("other", "python bench/mutation.py"),
}
OPTIONAL = {"chiplet_layer", "package_layer", "mutation"}
# intermediate files the benches leave behind: not results
SKIP = re.compile(r"\.raw$|^arch_|_raw$")
PAPERS = [("Simba", "simba_repro", "simba_*.png",
           "Shao et al., Simba (MICRO'19 / CACM'21), Sec. 4-5"),
          ("T3", "t3_repro", "t3/*.png", "Pati et al., T3 (ASPLOS'24), Sec. 6"),
          ("Monad", "monad_repro", "monad_*.png", "Hao et al., Monad, Sec. V")]
# RTL block families: (section id, title, blocks, bench stems)
FAMILIES = [
    ("pe", "Simba PE and PE chain", ["pe", "pe_chain"], ["pe_utilization"]),
    ("noc", "NoC: router, mesh, two-level NoC/NoP", ["router", "mesh", "nocsys"], ["noc_throughput"]),
    ("global_pe", "Simba Global PE", ["global_pe"], ["gpe_bandwidth"]),
    ("t3rtl", "T3 track & trigger", ["tracker", "dma_table", "t3_node", "mca"], ["t3_rtl"]),
]
DEMO_CMD = "make demo"


# --------------------------------------------------------------------------- helpers
def esc(x) -> str:
    return html.escape(str(x), quote=True)


def fmt(v) -> str:
    """How a table shows a value (the exact value is in data-value)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == 0:
            return "0"
        if abs(v) >= 1e4:
            return f"{v:.0f}"
        return f"{v:.4g}"
    if v is None:
        return "-"
    return str(v)


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def ptr(*parts) -> str:
    """JSON pointer (RFC 6901) of a path."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(doc, pointer: str):
    """Value at a JSON pointer (used by the tests)."""
    cur = doc
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        cur = cur[int(key)] if isinstance(cur, list) else cur[key]
    return cur


def cell(v, src: str | None = None, cls: str = "") -> str:
    """A <td>; numbers from a JSON file carry their source pointer and exact value."""
    attrs = ""
    if src is not None and (is_num(v) or isinstance(v, bool)):
        attrs = f' data-src="{esc(src)}" data-value="{esc(json.dumps(v))}"'
    if cls or is_num(v):
        attrs += f' class="{esc((cls + " num").strip() if is_num(v) else cls)}"'
    return f"<td{attrs}>{esc(fmt(v))}</td>"


def table(header, rows, cls="") -> str:
    """rows: lists of ready <td> strings."""
    h = "".join(f"<th>{esc(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


class Page:
    """Collects sections, figures (each with the command that regenerates it) and missing inputs."""

    def __init__(self):
        self.parts: list[str] = []
        self.figures: list[tuple[str, str]] = []       # (id, title)
        self.missing: list[str] = []
        self._ids: set[str] = set()

    def add(self, text: str):
        self.parts.append(text)

    def _id(self, title: str) -> str:
        base = "fig-" + (re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "x")
        fid, k = base, 2
        while fid in self._ids:
            fid, k = f"{base}-{k}", k + 1
        self._ids.add(fid)
        return fid

    def figure(self, title: str, png: bytes, command: str, caption: str = ""):
        fid = self._id(title)
        self.figures.append((fid, title))
        data = base64.b64encode(png).decode("ascii")
        self.add(f'<figure id="{fid}" data-title="{esc(title)}">'
                 f'<img alt="{esc(title)}" src="data:image/png;base64,{data}">'
                 f'<figcaption><b>{esc(title)}</b>{" - " + esc(caption) if caption else ""}'
                 f'<br>regenerate: <code class="cmd">{esc(command)}</code></figcaption></figure>')

    def plot(self, title: str, draw, command: str, caption: str = "", size=(6.4, 3.6)):
        """Render ``draw(ax)`` with matplotlib and embed it; a failing plot is reported, not fatal."""
        try:
            png = _render(draw, size)
        except Exception as err:                      # noqa: BLE001 -- reported on the page
            self.add(f'<p class="warn">plot "{esc(title)}" failed: {esc(err)}</p>')
            return
        self.figure(title, png, command, caption)


def _render(draw, size) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=size)
    try:
        draw(ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


# --------------------------------------------------------------------------- comparisons
def comparisons(doc, path=()):
    """Every dict with ``model`` and ``paper`` keys: (path, dict), in document order."""
    if isinstance(doc, dict):
        if "model" in doc and "paper" in doc:
            yield path, doc
            return
        for k, v in doc.items():
            yield from comparisons(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from comparisons(v, path + (i,))


def _label(path, d) -> str:
    if "name" in d:
        return str(d["name"])
    parts = [str(p) for p in path if not isinstance(p, int) and p not in ("figures", "vs_paper")]
    return " / ".join(parts[1:] if len(parts) > 1 else parts)


def _group(path, d) -> str:
    if "name" in d:
        m = re.match(r"(fig\s*\d+)", str(d["name"]), re.I)
        return m.group(1).replace(" ", "").lower() if m else "headline"
    parts = [p for p in path if not isinstance(p, int) and p != "figures"]
    return str(parts[0]) if parts else "values"


def fig_numbers(name: str) -> set[int]:
    out = set()
    for m in re.finditer(r"fig(\d+(?:_\d+(?![a-z0-9]))*)", name.lower()):
        out |= {int(x) for x in m.group(1).split("_")}
    return out


def png_title(paper: str, png: Path) -> str:
    nums = sorted(fig_numbers(png.stem))
    head = f"Fig {'/'.join(map(str, nums))}" if nums else png.stem.replace(paper.lower() + "_", "").replace("_", " ")
    return f"{paper} {head} ({png.name})"


def comparison_groups(doc):
    groups: dict[str, list] = {}
    for path, d in comparisons(doc):
        groups.setdefault(_group(path, d), []).append((path, d))
    return groups


def comparison_table(fname: str, rows) -> str:
    out = []
    for path, d in rows:
        p = ptr(*path)
        model, paper = d.get("model"), d.get("paper")
        if "diff" in d and d["diff"] is not None:
            diff = cell(d["diff"], f"{fname}#{p}/diff")
        elif is_num(model) and is_num(paper):
            diff = (f'<td class="num" data-computed="model-paper" data-value="{esc(json.dumps(model - paper))}">'
                    f"{esc(fmt(model - paper))}</td>")
        else:
            diff = "<td>-</td>"
        rel = d.get("rel_diff")
        if rel is None and is_num(model) and is_num(paper) and paper:
            rel = (model - paper) / paper
        reltxt = f"{rel:+.1%}" if is_num(rel) else "-"
        note = d.get("note") or ""
        out.append([f"<td>{esc(_label(path, d))}</td>", cell(model, f"{fname}#{p}/model"),
                    cell(paper, f"{fname}#{p}/paper"), diff, f'<td class="num">{esc(reltxt)}</td>',
                    f"<td>{esc(d.get('unit') or '')}</td>", f'<td class="note">{esc(note)}</td>'])
    return table(["value", "model", "paper", "model - paper", "relative", "unit", "note"], out, "cmp")


def ratio_plot(page: Page, title: str, groups: dict, command: str):
    """model / paper for every numeric comparison, one bar each, coloured by figure."""
    items = []
    for g, rows in groups.items():
        for path, d in rows:
            m, p = d.get("model"), d.get("paper")
            if is_num(m) and is_num(p) and p != 0:
                items.append((g, _label(path, d), m / p))
    if not items:
        return

    def draw(ax):
        import matplotlib
        cmap = matplotlib.colormaps["tab10"]
        colours = {}
        for i, (g, lab, r) in enumerate(items):
            first = g not in colours
            c = colours.setdefault(g, cmap(len(colours) % 10))
            ax.barh(i, r, color=c, label=g if first else None)
        ax.axvline(1.0, color="k", lw=0.8)
        if all(r > 0 for *_, r in items) and max(r for *_, r in items) / min(r for *_, r in items) > 20:
            ax.set_xscale("log")
        ax.set_yticks(range(len(items)), [lab if len(lab) <= 48 else lab[:46] + ".." for _, lab, _ in items],
                      fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("model / paper (1 = matches the paper)")
        ax.legend(fontsize=6, loc="best")
    page.plot(title, draw, command, "every numeric model/paper pair in the tables below",
              size=(7.5, max(2.5, 0.18 * len(items) + 1)))


# --------------------------------------------------------------------------- generic
def scalars(doc, path=(), depth=0, limit=80):
    """(path, value) of scalar leaves of dicts, not descending into lists, up to depth 2."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, (int, float, str, bool)) or v is None:
                out.append((path + (k,), v))
            elif isinstance(v, dict) and depth < 2 and not ("model" in v and "paper" in v):
                out += scalars(v, path + (k,), depth + 1, limit)
            if len(out) >= limit:
                break
    return out[:limit]


def record_lists(doc, path=(), depth=0):
    """Lists of dicts (tables) up to depth 3."""
    if isinstance(doc, list) and doc and all(isinstance(x, dict) for x in doc):
        yield path, doc
    elif isinstance(doc, dict) and depth < 3:
        for k, v in doc.items():
            yield from record_lists(v, path + (k,), depth + 1)


def records_table(fname: str, path, recs, max_rows=40) -> str:
    cols = []
    for r in recs:
        for k, v in r.items():
            if k not in cols and (isinstance(v, (int, float, str, bool)) or v is None):
                cols.append(k)
    cols = cols[:12]
    rows = []
    for i, r in enumerate(recs[:max_rows]):
        rows.append([cell(r.get(c), f"{fname}#{ptr(*path, i, c)}") if c in r else "<td></td>"
                     for c in cols])
    more = f"<p>({len(recs) - max_rows} more rows in {esc(fname)})</p>" if len(recs) > max_rows else ""
    return table(cols, rows) + more


def scalar_table(fname: str, items) -> str:
    rows = [[f"<td>{esc('.'.join(str(p) for p in path))}</td>", cell(v, f"{fname}#{ptr(*path)}")]
            for path, v in items]
    return table(["key", "value"], rows, "kv")


def generic(page: Page, fname: str, doc, command: str, title: str):
    groups = comparison_groups(doc)
    if groups:
        ratio_plot(page, f"{title}: model / paper", groups, command)
        for g, rows in groups.items():
            page.add(f"<h4>{esc(g)}</h4>" + comparison_table(fname, rows))
    sc = scalars(doc)
    if sc:
        page.add(scalar_table(fname, sc))
    seen = 0
    for path, recs in record_lists(doc):
        if seen >= 3:
            break
        if any("model" in r and "paper" in r for r in recs):
            continue
        page.add(f"<h4>{esc('.'.join(str(p) for p in path) or fname)}</h4>"
                 + records_table(fname, path, recs))
        seen += 1


# --------------------------------------------------------------------------- inputs
def load_inputs(build: Path):
    """(docs {stem: json}, problems [text]) from build/bench/*.json."""
    bench = build / "bench"
    docs, problems = {}, []
    for path in sorted(bench.glob("*.json")) if bench.is_dir() else []:
        if SKIP.search(path.stem):
            continue
        try:
            docs[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            problems.append(f"{path}: unreadable ({err})")
    for stem, (_, cmd) in KNOWN.items():
        if stem not in docs and not any(stem in p for p in problems):
            opt = " (optional)" if stem in OPTIONAL else ""
            problems.append(f"{bench / (stem + '.json')}: missing{opt} - run <code>{esc(cmd)}</code>")
    return docs, problems


# --------------------------------------------------------------------------- papers
def paper_section(page: Page, build: Path, name: str, stem: str, pattern: str, cite: str, docs):
    cmd = KNOWN[stem][1]
    page.add(f'<section id="paper-{name.lower()}"><h2>{esc(name)}</h2><p>{esc(cite)}. '
             f"Source: <code>build/bench/{stem}.json</code>, regenerate: <code class=\"cmd\">{esc(cmd)}</code></p>")
    doc = docs.get(stem)
    pngs = sorted((build / "bench").glob(pattern))
    if doc is None:
        page.add(f'<p class="warn">build/bench/{stem}.json is missing: run <code>{esc(cmd)}</code>.</p>')
    groups = comparison_groups(doc) if doc is not None else {}
    used = set()
    for g, rows in groups.items():
        page.add(f"<h3>{esc(g)}</h3>")
        nums = fig_numbers(g)
        for png in pngs:
            match = (nums & fig_numbers(png.stem)) if nums else (len(g) > 3 and g.lower() in png.stem.lower())
            if match and png not in used:
                used.add(png)
                page.figure(png_title(name, png), png.read_bytes(), cmd,
                            f"plot written by the bench ({png.relative_to(build)})")
        page.add(comparison_table(f"{stem}.json", rows))
    rest = [p for p in pngs if p not in used]
    if rest:
        page.add("<h3>other figures</h3>")
        for png in rest:
            page.figure(png_title(name, png), png.read_bytes(), cmd,
                        f"plot written by the bench ({png.relative_to(build)})")
    if groups:
        ratio_plot(page, f"{name}: model / paper, every compared value", groups, cmd)
    if doc is not None:
        notes = doc.get("note") or doc.get("closing_note") or doc.get("notes")
        if isinstance(notes, list):
            notes = "\n".join(str(n) for n in notes)
        if notes:
            page.add(f"<details><summary>differences from the paper, as the bench explains them</summary>"
                     f"<pre>{esc(notes)}</pre></details>")
        info = [(p, v) for p, v in scalars(doc, limit=20) if len(p) == 1 and not isinstance(v, str)]
        if info:
            page.add("<h4>run</h4>" + scalar_table(f"{stem}.json", info))
    page.add("</section>")


# --------------------------------------------------------------------------- RTL
def demo_rows(build: Path, page: Page):
    path = build / "demo" / "summary.json"
    if not path.exists():
        page.missing.append(f"{path}: missing - run <code>{DEMO_CMD}</code>")
        return None
    try:
        rows = json.loads(path.read_text())
        return {r["block"]: (i, r) for i, r in enumerate(rows) if isinstance(r, dict) and "block" in r}
    except (OSError, ValueError, TypeError, KeyError) as err:
        page.missing.append(f"{path}: unreadable ({esc(err)})")
        return None


def demo_table(demo, names) -> str:
    rows = []
    for n in names:
        if n not in demo:
            continue
        i, r = demo[n]
        src = f"demo/summary.json#/{i}"
        rows.append([f"<td>{esc(n)}</td>", f"<td>{esc(r.get('what') or r.get('detail') or '')}</td>",
                     cell(r.get("checks", "-"), src + "/checks"), cell(r.get("cycles", "-"), src + "/cycles"),
                     cell(r.get("seconds", "-"), src + "/seconds"),
                     f'<td class="{"ok" if r.get("status") == "pass" else "bad"}">{esc(r.get("status"))}</td>'])
    if not rows:
        return ""
    return "<h3>verification (make demo)</h3>" + table(
        ["block", "what was checked against what", "checks", "cycles", "seconds", "status"], rows)


SYNTH_COLS = ["lut4", "ff", "bram", "lutram", "dsp", "fmax_mhz", "fmax_mhz_grade8"]


def synth_table(doc, names) -> str:
    blocks = (doc or {}).get("blocks") or {}
    rows = []
    for n in names:
        r = blocks.get(n)
        if not isinstance(r, dict):
            continue
        crit = r.get("critical_path") or {}
        crit_t = f"{crit.get('from', '?')} -> {crit.get('to', '?')}" if crit else ""
        mems = r.get("memories") or []
        mem_t = ", ".join(f"{m.get('name')} {m.get('bits')} b -> {m.get('mapped_to')}" for m in mems
                          if isinstance(m, dict))
        rows.append([f"<td>{esc(n)}</td>"] + [cell(r.get(c), f"synth.json#{ptr('blocks', n, c)}")
                                              for c in SYNTH_COLS]
                    + [f'<td class="note">{esc(crit_t)}</td>', f'<td class="note">{esc(mem_t)}</td>',
                       f"<td>{esc(r.get('status', ''))}</td>"])
    if not rows:
        return ""
    return table(["block", "LUT4", "FF", "DP16KD", "LUTRAM", "MULT18", "Fmax sg6 (MHz)", "Fmax sg8 (MHz)",
                  "critical path", "memories", "status"], rows)


def _pe(page, doc, cmd, build):
    tiles = doc["tiles"]
    rows = [[f"<td>{esc(t['name'])}</td>", f"<td>{esc(t.get('layer', ''))}</td>",
             cell(t["mac_ops"], f"pe_utilization.json#{ptr('tiles', i, 'mac_ops')}"),
             cell(t["cycles"], f"pe_utilization.json#{ptr('tiles', i, 'cycles')}"),
             cell(t["utilization"], f"pe_utilization.json#{ptr('tiles', i, 'utilization')}"),
             cell(t.get("large"), f"pe_utilization.json#{ptr('tiles', i, 'large')}")]
            for i, t in enumerate(tiles)]
    target = doc.get("target")

    def draw(ax):
        ax.bar(range(len(tiles)), [t["utilization"] for t in tiles],
               color=["tab:blue" if t.get("large") else "tab:gray" for t in tiles])
        if is_num(target):
            ax.axhline(target, color="r", ls="--", lw=0.8, label=f"target {target}")
            ax.legend(fontsize=7)
        ax.set_xticks(range(len(tiles)), [t["name"] for t in tiles], rotation=60, ha="right", fontsize=6)
        ax.set_ylabel("utilisation (useful MACs / cycle / K0*C0)")
        ax.set_ylim(0, 1.05)
    page.plot("PE utilisation per ResNet-50 tile (RTL)", draw, cmd,
              "blue: large tiles (the target applies), grey: small tiles")
    page.add(table(["tile", "layer", "MAC ops", "cycles", "utilisation", "large"], rows))
    page.add(scalar_table("pe_utilization.json",
                          [((k,), doc[k]) for k in doc if is_num(doc[k]) or isinstance(doc[k], bool)]))


def _noc_curve(build: Path, doc):
    """Latency-load points: from the JSON if it has them (kind latency_load / a 'curve' list), else the CSV."""
    if isinstance(doc, dict) and isinstance(doc.get("curve"), list):
        return doc["curve"], "noc_throughput.json"
    pts = [e for e in (doc if isinstance(doc, list) else []) if e.get("kind") == "latency_load"]
    if pts:
        return pts, "noc_throughput.json"
    path = build / "bench" / "noc_latency_load.csv"
    if path.exists():
        with open(path, newline="") as fh:
            rows = []
            for r in csv.DictReader(fh):
                rows.append({k: (float(v) if re.fullmatch(r"-?[0-9.eE+-]+", v or "") else v)
                             for k, v in r.items()})
        return rows, "noc_latency_load.csv"
    return [], None


def _noc(page, doc, cmd, build):
    entries = doc if isinstance(doc, list) else doc.get("entries", [])
    base = () if isinstance(doc, list) else ("entries",)
    sat = [(i, e) for i, e in enumerate(entries) if "saturation_flits_per_node_cycle" in e]
    curve, src = _noc_curve(build, doc)
    if curve:
        def draw(ax):
            keys = []
            for c in curve:
                k = (c.get("mesh"), c.get("config"))
                if k not in keys:
                    keys.append(k)
            for k in keys:
                pts = [c for c in curve if (c.get("mesh"), c.get("config")) == k]
                ax.plot([p["accepted"] for p in pts], [p["latency_cycles"] for p in pts], "o-",
                        ms=3, label=f"{k[0]} {k[1]}")
            ax.set_xlabel("accepted load (flits/node/cycle)")
            ax.set_ylabel("latency (cycles)")
            ax.set_ylim(0, min(200, max(p["latency_cycles"] for p in curve) * 1.1))
            ax.legend(fontsize=7)
        page.plot("NoC latency-load curves (RTL, uniform random)", draw, cmd, f"data: build/bench/{src}")
    if sat:
        def draw2(ax):
            labels = [f"{e['mesh']} {e.get('config', '')} {e.get('packet_flits', '')}f" for _, e in sat]
            ax.bar(range(len(sat)), [e["saturation_flits_per_node_cycle"] for _, e in sat], label="RTL")
            ax.plot(range(len(sat)), [e.get("bound", float("nan")) for _, e in sat], "r_", ms=20,
                    label="bound 4/k")
            ax.set_xticks(range(len(sat)), labels, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel("saturation (flits/node/cycle)")
            ax.legend(fontsize=7)
        page.plot("NoC saturation throughput vs bisection bound", draw2, cmd)
        cols = ["mesh", "config", "packet_flits", "zero_load_latency_cycles", "zero_load_cycles_per_hop",
                "saturation_flits_per_node_cycle", "bound", "fraction_of_bound", "router_errors"]
        page.add(table(cols, [[cell(e.get(c), f"noc_throughput.json#{ptr(*base, i, c)}") for c in cols]
                              for i, e in sat]))
    other = [e for e in entries if "saturation_flits_per_node_cycle" not in e]
    if other:
        cols = []
        for e in other:
            cols += [k for k, v in e.items() if k not in cols and not isinstance(v, (list, dict))]
        page.add("<h4>multicast</h4>" + table(
            cols, [[cell(e.get(c), f"noc_throughput.json#{ptr(*base, entries.index(e), c)}") if c in e
                    else "<td></td>" for c in cols] for e in other]))


def _bars(page, fname, doc, keys, title, cmd, target=None, ylabel=""):
    keys = [k for k in keys if is_num(doc.get(k))]
    if keys:
        def draw(ax):
            ax.bar(range(len(keys)), [doc[k] for k in keys])
            if target is not None:
                ax.axhline(target, color="r", ls="--", lw=0.8, label=f"target {target}")
                ax.legend(fontsize=7)
            ax.set_xticks(range(len(keys)), [k.replace("_per_cycle", "/cycle") for k in keys],
                          rotation=20, ha="right", fontsize=7)
            ax.set_ylabel(ylabel)
        page.plot(title, draw, cmd)
    page.add(scalar_table(fname, scalars(doc)))


def _gpe(page, doc, cmd, build):
    _bars(page, "gpe_bandwidth.json", doc,
          ["send_unicast_flits_per_cycle", "send_multicast_flits_per_cycle", "recv_words_per_cycle"],
          "Global PE send/receive throughput (RTL)", cmd, doc.get("target_send_flits_per_cycle"),
          "per cycle")


def _t3rtl(page, doc, cmd, build):
    _bars(page, "t3_rtl.json", doc, ["tracker_updates_per_cycle", "arbiter_grants_per_cycle"],
          "T3 tracker and arbiter throughput (RTL)", cmd, 1.0, "operations per cycle")


SPECIFIC = {"pe_utilization": _pe, "noc_throughput": _noc, "gpe_bandwidth": _gpe, "t3_rtl": _t3rtl}


def family_section(page: Page, build: Path, fid, title, names, stems, docs, demo):
    page.add(f'<section id="rtl-{fid}"><h2>{esc(title)}</h2><p>blocks: {esc(", ".join(names))}</p>')
    if demo:
        page.add(demo_table(demo, names))
    for stem in stems:
        cmd = KNOWN[stem][1]
        page.add(f"<h3>{esc(stem)}</h3><p>source <code>build/bench/{stem}.json</code>, regenerate: "
                 f'<code class="cmd">{esc(cmd)}</code></p>')
        doc = docs.get(stem)
        if doc is None:
            page.add(f'<p class="warn">missing: run <code>{esc(cmd)}</code></p>')
            continue
        mark = len(page.parts)
        try:
            SPECIFIC[stem](page, doc, cmd, build)
        except Exception as err:                      # noqa: BLE001 -- schema drift: generic view
            del page.parts[mark:]
            page.add(f'<p class="warn">(layout of {esc(stem)}.json changed: {esc(type(err).__name__)} '
                     f"{esc(err)}; shown generically)</p>")
            generic(page, f"{stem}.json", doc, cmd, stem)
    st = synth_table(docs.get("synth"), names)
    if st:
        page.add('<h3>synthesis</h3><p>regenerate: <code class="cmd">make synth</code></p>' + st)
    page.add("</section>")


def synth_section(page: Page, docs):
    doc = docs.get("synth")
    page.add('<section id="synth"><h2>Synthesis (ECP5)</h2>')
    if doc is None:
        page.add('<p class="warn">build/bench/synth.json is missing: run <code>make synth</code>.</p>')
        page.add("</section>")
        return
    dev = doc.get("device") or {}
    if isinstance(dev, dict):
        page.add("<p>" + esc(", ".join(f"{k}: {v}" for k, v in dev.items())) + "</p>")
    blocks = doc.get("blocks") or {}
    names = sorted(blocks)
    fm = [(n, blocks[n].get("fmax_mhz")) for n in names if isinstance(blocks[n], dict)]
    if any(is_num(v) for _, v in fm):
        def draw(ax):
            ax.bar(range(len(fm)), [v if is_num(v) else 0 for _, v in fm])
            c = dev.get("constraint_mhz") if isinstance(dev, dict) else None
            if is_num(c):
                ax.axhline(c, color="r", ls="--", lw=0.8, label=f"{c:g} MHz")
                ax.legend(fontsize=7)
            ax.set_xticks(range(len(fm)), [n for n, _ in fm], rotation=30, ha="right", fontsize=7)
            ax.set_ylabel("Fmax, speed grade 6 (MHz)")
        page.plot("Synthesis: Fmax per block (ECP5 speed grade 6)", draw, "make synth")
    page.add(synth_table(doc, names))
    page.add("</section>")


# --------------------------------------------------------------------------- page
CSS = """body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px}
th{background:#eee}td.num{text-align:right;font-family:monospace}td.note{font-size:11px;color:#555}
td.ok{color:#070}td.bad{color:#b00;font-weight:bold}.warn{color:#b60}figure{margin:1em 0}
figure img{max-width:100%;border:1px solid #ddd}code.cmd{background:#f3f3f3;padding:1px 4px}
section{border-top:2px solid #888;margin-top:2em}pre{white-space:pre-wrap;font-size:12px}"""


def build_page(build: Path) -> tuple[str, Page]:
    build = Path(build)
    page = Page()
    docs, problems = load_inputs(build)
    page.missing += problems
    demo = demo_rows(build, page)
    for name, stem, pattern, cite in PAPERS:
        paper_section(page, build, name, stem, pattern, cite, docs)
    for fid, title, names, stems in FAMILIES:
        family_section(page, build, fid, title, names, stems, docs, demo)
    known_blocks = {n for _, _, names, _ in FAMILIES for n in names}
    extra = sorted(set(demo or {}) - known_blocks)
    if extra:
        page.add('<section id="rtl-other"><h2>Other blocks and models (make demo)</h2>'
                 + demo_table(demo, extra) + synth_table(docs.get("synth"), extra) + "</section>")
    synth_section(page, docs)
    others = [s for s in docs if s not in KNOWN or KNOWN[s][0] == "other"]
    if others:
        page.add('<section id="other"><h2>Other results</h2>')
        for stem in others:
            cmd = KNOWN.get(stem, (None, f"python bench/{stem}.py"))[1]
            page.add(f'<h3 id="other-{esc(stem)}">{esc(stem)}</h3><p>source <code>build/bench/{stem}.json</code>, '
                     f'regenerate: <code class="cmd">{esc(cmd)}</code></p>')
            generic(page, f"{stem}.json", docs[stem], cmd, stem)
        page.add("</section>")
    index = "".join(f'<li><a href="#{fid}">{esc(t)}</a></li>' for fid, t in page.figures)
    miss = "".join(f"<li>{m}</li>" for m in page.missing)
    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tessera report</title>"
            f"<style>{CSS}</style></head><body><h1>Tessera: results beside the papers</h1>"
            f"<p>generated {esc(time.strftime('%Y-%m-%d %H:%M:%S'))} from <code>{esc(build)}</code> "
            f"by <code class=\"cmd\">tessera report</code> (<code>make report</code>)</p>"
            f"<nav><a href=\"#paper-simba\">Simba</a> | <a href=\"#paper-t3\">T3</a> | "
            f"<a href=\"#paper-monad\">Monad</a> | "
            + " | ".join(f'<a href="#rtl-{fid}">{esc(fid)}</a>' for fid, *_ in FAMILIES)
            + ' | <a href="#synth">synthesis</a> | <a href="#missing">missing inputs</a></nav>'
            f'<section id="missing"><h2>Missing inputs</h2>'
            + (f'<ul class="missing">{miss}</ul>' if miss else "<p>none</p>") + "</section>"
            f'<section id="figures"><h2>Figures</h2><ol class="figure-index">{index}</ol></section>')
    return head + "".join(page.parts) + "</body></html>\n", page


def write_report(build: Path | str | None = None, out: Path | str | None = None) -> Path:
    build = Path(build or os.environ.get("TESSERA_BUILD", "build"))
    out = Path(out) if out else build / "report" / "index.html"
    text, _ = build_page(build)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="tessera report", description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, default=None, help="build directory (default $TESSERA_BUILD or build)")
    ap.add_argument("--out", type=Path, default=None, help="output file (default BUILD/report/index.html)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    return run_cli(args)


def run_cli(args) -> int:
    t0 = time.time()
    build = Path(args.build or os.environ.get("TESSERA_BUILD", "build"))
    text, page = build_page(build)
    out = Path(args.out) if args.out else build / "report" / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if not getattr(args, "quiet", False):
        print(f"{len(page.figures)} figures, {len(page.missing)} missing inputs, "
              f"{time.time() - t0:.1f} s")
    print(out.resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
