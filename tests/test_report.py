"""tessera report (build/report/index.html) and the make-demo plumbing it reads.

The page must be valid HTML (balanced tags), every figure it names must be an
embedded PNG, every number a table shows from a JSON file must equal the JSON
(``data-src`` pointer + ``data-value``), missing inputs must be listed, and a
changed schema must not crash it.  Fixture JSONs below, plus the real
build/bench files when present."""
from __future__ import annotations

import base64
import io
import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tessera import report as R

REPO = Path(__file__).resolve().parent.parent
VOID = {"img", "br", "meta", "hr", "input", "link", "wbr", "col", "area", "base", "source"}


class Page(HTMLParser):
    """Checks tag balance and collects figures, the figure index and data cells."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors = [], []
        self.figures, self.index, self.cells, self.imgs = {}, [], [], []
        self._fig = None
        self._td = None
        self._li_missing = False
        self.missing = []
        self._in_missing = False
        self.captions = {}
        self._cap = None
        self._in_index = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "figure":
            self._fig = a.get("id")
            self.figures[self._fig] = []
        if tag == "img":
            self.imgs.append(a.get("src", ""))
            if self._fig:
                self.figures[self._fig].append(a.get("src", ""))
        if tag == "ol" and a.get("class") == "figure-index":
            self._in_index = True
        if tag == "a" and self._in_index:
            self.index.append(a["href"].lstrip("#"))
        if tag == "td":
            self._td = [a, ""]
        if tag == "ul" and a.get("class") == "missing":
            self._in_missing = True
        if tag == "li" and self._in_missing:
            self.missing.append("")
        if tag == "figcaption":
            self._cap = self._fig
            self.captions[self._fig] = ""

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()
        if tag == "figure":
            self._fig = None
        if tag == "td" and self._td is not None:
            self.cells.append(tuple(self._td))
            self._td = None
        if tag == "ul":
            self._in_missing = False
        if tag == "ol":
            self._in_index = False
        if tag == "figcaption":
            self._cap = None

    def handle_data(self, data):
        if self._td is not None:
            self._td[1] += data
        if self._in_missing and self.missing:
            self.missing[-1] += data
        if self._cap:
            self.captions[self._cap] += data


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    p.close()
    return p


def load_docs(build: Path) -> dict:
    docs = {f.name: json.loads(f.read_text()) for f in (build / "bench").glob("*.json")}
    s = build / "demo" / "summary.json"
    if s.exists():
        docs["demo/summary.json"] = json.loads(s.read_text())
    return docs


def check_page(text: str, build: Path) -> Page:
    p = parse(text)
    assert not p.errors, p.errors[:5]
    assert not p.stack, f"unclosed tags {p.stack[:5]}"
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text and 'src="http' not in text and "href=\"http" not in text
    # every figure the page names is an embedded PNG with the command that regenerates it
    assert len(p.index) == len(set(p.index))
    assert set(p.index) == set(p.figures), "figure index != figures on the page"
    for fid in p.index:
        srcs = p.figures[fid]
        assert len(srcs) == 1, fid
        assert srcs[0].startswith("data:image/png;base64,"), fid
        png = base64.b64decode(srcs[0].split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 200, fid
        assert "regenerate:" in p.captions[fid] and ("python bench/" in p.captions[fid]
                                                    or "make " in p.captions[fid]), fid
    # every number from a JSON file equals the JSON
    docs = load_docs(build)
    n = 0
    for attrs, text_ in p.cells:
        if "data-src" in attrs:
            fname, pointer = attrs["data-src"].split("#", 1)
            want = R.resolve(docs[fname], pointer)
            got = json.loads(attrs["data-value"])
            assert got == want and type(got) is type(want), (attrs["data-src"], got, want)
            assert text_ == R.fmt(want), (attrs["data-src"], text_, want)
            if R.is_num(want) and want != 0:
                assert math.isclose(float(text_), want, rel_tol=5e-4, abs_tol=0.5), (text_, want)
            n += 1
    return p, n


def _png() -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


SIMBA = {"samples_per_layer": 50, "entries": [
    {"name": "fig5 res2a best chiplet count", "model": 8, "paper": "8-32", "unit": ""},
    {"name": "fig6 res3a latency decrease at 25 Gb/s", "model": 0.4321, "paper": 0.27, "unit": "fraction",
     "diff": 0.4321 - 0.27, "rel_diff": (0.4321 - 0.27) / 0.27},
    {"name": "peak TOPS, 1 chiplet", "model": 4.0123456, "paper": 4.01, "unit": "TOPS",
     "diff": 0.0023456, "rel_diff": 0.0023456 / 4.01},
    {"name": "energy", "model": 123456.75, "paper": None, "unit": "uJ"}],
    "note": "why the numbers differ"}
T3 = {"system": {"peak_fp16_TFLOPs": 185.0}, "figures": {
    "fig15_16": {"rows": [], "vs_paper": {"ideal_geomean": {"model": 12.5, "paper": 15.0, "diff": -2.5}}},
    "fig18": {"reduction_max": {"model": 30.0, "paper": 22.0, "diff": 8.0}},
    "fig20": {"rows": [{"model": "t-nlg", "tp": 8, "sublayer": "OP", "base": 1.5, "x2": 2.5}]}},
    "closing_note": ["line one", "line two"], "runtime_s": 3.25}
MONAD = {"mode": "quick", "fig3": {"tpu_die": {"model": 0.8, "paper": "< 1 (qualitative)", "diff": None,
                                               "unit": ""}},
         "fig7": {"edp_reduction_vs_simba": {"model": 0.2, "paper": 0.16, "diff": 0.04, "unit": ""}}}
PE = {"block": "pe", "target": 0.95, "min_utilization_large_tiles": 0.97, "tiles": [
    {"name": "res2a", "layer": "res2a_branch2a", "mac_ops": 4096, "cycles": 520, "utilization": 0.9846,
     "large": True, "edge": False},
    {"name": "edge", "layer": "res5", "mac_ops": 100, "cycles": 40, "utilization": 0.5, "large": False}]}
NOC = [{"mesh": "4x4", "config": "1vc_x_4", "packet_flits": 1, "zero_load_latency_cycles": 9.5,
        "zero_load_cycles_per_hop": 2.001, "saturation_flits_per_node_cycle": 0.8125, "bound": 1.0,
        "fraction_of_bound": 0.8125, "router_errors": 0},
       {"kind": "multicast", "mesh": "4x4", "source": [0, 0], "destinations": 16,
        "xy_tree_link_traversals": 15, "minimum_link_traversals": 15}]
CURVE = "mesh,config,offered,accepted,latency_cycles\n4x4,1vc_x_4,0.1,0.1,10.5\n4x4,1vc_x_4,0.5,0.49,30.25\n"
GPE = {"send_unicast_flits_per_cycle": 0.9961, "send_multicast_flits_per_cycle": 0.99,
       "recv_words_per_cycle": 0.97, "ewise_bytes_per_cycle": 21.3, "target_send_flits_per_cycle": 0.95,
       "meets_target": True, "details": {"tile_words": 16}}
T3RTL = {"tracker_updates_per_cycle": 1.0, "arbiter_grants_per_cycle": 0.9975, "rs_cycles": 2345}
SYNTH = {"device": {"part": "LFE5U-85F", "constraint_mhz": 100.0}, "blocks": {
    "router": {"lut4": 5123, "ff": 900, "bram": 0, "lutram": 40, "dsp": 0, "fmax_mhz": 101.3,
               "fmax_mhz_grade8": 130.2, "critical_path": {"from": "a", "to": "b"},
               "memories": [{"name": "buf", "bits": 512, "mapped_to": "lutram"}], "status": "ok"},
    "pe": {"lut4": 20000, "ff": 3000, "bram": 20, "lutram": 0, "dsp": 16, "fmax_mhz": 88.25,
           "fmax_mhz_grade8": None, "status": "ok"}}}
DEMO = [{"block": "mesh", "checks": 1234, "cycles": 5678, "status": "pass", "seconds": 40.5,
         "what": "3x3 mesh: 108 packets (200 flits, 20 multicast), every flit vs golden XY path, 0 lost"},
        {"block": "nocsys", "checks": "-", "cycles": "-", "status": "exported", "seconds": 12.0},
        {"block": "simba.peak", "checks": 3, "cycles": "-", "status": "pass", "detail": "4 TOPS"}]


def write_fixture(build: Path, skip=()):
    b = build / "bench"
    (b / "t3").mkdir(parents=True)
    files = {"simba_repro": SIMBA, "t3_repro": T3, "monad_repro": MONAD, "pe_utilization": PE,
             "noc_throughput": NOC, "gpe_bandwidth": GPE, "t3_rtl": T3RTL, "synth": SYNTH}
    for stem, doc in files.items():
        if stem not in skip:
            (b / f"{stem}.json").write_text(json.dumps(doc))
    (b / "noc_latency_load.csv").write_text(CURVE)
    png = _png()
    (b / "simba_fig6.png").write_bytes(png)
    (b / "simba_resnet50_layers.png").write_bytes(png)
    (b / "t3" / "fig18_traffic.png").write_bytes(png)
    (build / "demo").mkdir()
    (build / "demo" / "summary.json").write_text(json.dumps(DEMO))


def rows_of(p: Page):
    return [t for _, t in p.cells]


def test_report_fixture(tmp_path):
    write_fixture(tmp_path)
    text, page = R.build_page(tmp_path)
    p, n = check_page(text, tmp_path)
    assert n > 60
    # the bench plots are embedded under their figure, plus the report's own plots
    titles = [t for _, t in page.figures]
    for t in ("Simba Fig 6 (simba_fig6.png)", "Simba resnet50 layers (simba_resnet50_layers.png)",
              "T3 Fig 18 (fig18_traffic.png)",
              "PE utilisation per ResNet-50 tile (RTL)", "NoC latency-load curves (RTL, uniform random)",
              "Synthesis: Fmax per block (ECP5 speed grade 6)"):
        assert t in titles, (t, titles)
    # model / paper / difference rows, values as in the JSON
    assert "fig6 res3a latency decrease at 25 Gb/s" in text and "0.4321" in text and "+60.0%" in text
    assert "12.5" in text and "-2.5" in text          # T3 nested vs_paper entry
    assert "&lt; 1 (qualitative)" in text             # a paper value given as text
    assert "123457" in text                           # large numbers without exponent
    # a computed difference (no diff key) equals model - paper
    comp = [a for a, _ in p.cells if a.get("data-computed") == "model-paper"]
    assert not comp                                   # every fixture pair with numbers has a diff
    # the demo's 'what' phrase and the synthesis row are in the block sections
    assert "every flit vs golden XY path, 0 lost" in text
    assert "101.3" in text and "buf 512 b -&gt; lutram" in text
    assert p.missing and all("optional" in m or "mutation" in m or "layer" in m for m in p.missing), p.missing


def test_report_computed_diff_and_other_files(tmp_path):
    write_fixture(tmp_path)
    (tmp_path / "bench" / "chiplet_layer.json").write_text(json.dumps(
        {"entries": [{"name": "layer latency", "model": 3.0, "paper": 2.0}], "cycles": 17}))
    (tmp_path / "bench" / "new_thing.json").write_text(json.dumps({"speed": {"model": 1.5, "paper": 1.0}}))
    text, _ = R.build_page(tmp_path)
    p, _ = check_page(text, tmp_path)
    comp = [(a, t) for a, t in p.cells if a.get("data-computed") == "model-paper"]
    assert sorted(json.loads(a["data-value"]) for a, _ in comp) == [0.5, 1.0]
    assert 'id="other-chiplet_layer"' in text and 'id="other-new_thing"' in text
    assert "python bench/chiplet_layer.py" in text


def test_report_missing_inputs_listed(tmp_path):
    text, page = R.build_page(tmp_path)           # nothing at all
    p, n = check_page(text, tmp_path)
    assert n == 0
    listed = " ".join(p.missing)
    for stem in R.KNOWN:
        assert f"{stem}.json" in listed, stem
    assert "summary.json" in listed and "make demo" in listed
    # an unreadable file is listed, not fatal
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "t3_rtl.json").write_text("{not json")
    text, _ = R.build_page(tmp_path)
    assert "t3_rtl.json: unreadable" in text


def test_report_schema_drift(tmp_path):
    write_fixture(tmp_path, skip=("pe_utilization", "noc_throughput"))
    # renamed keys: the specific renderers fall back to the generic view
    (tmp_path / "bench" / "pe_utilization.json").write_text(json.dumps(
        {"rows": [{"tile": "a", "util": 0.5}], "min_util": 0.5}))
    (tmp_path / "bench" / "noc_throughput.json").write_text(json.dumps(
        {"entries": [{"mesh": "4x4", "saturation_flits_per_node_cycle": 0.8}]}))
    # a new comparison somewhere deep in a model's JSON is a row of the paper table
    simba = dict(SIMBA, fig99={"deep": {"new": {"model": 7.0, "paper": 8.0, "diff": -1.0}}})
    (tmp_path / "bench" / "simba_repro.json").write_text(json.dumps(simba))
    text, _ = R.build_page(tmp_path)
    check_page(text, tmp_path)
    assert "layout of pe_utilization.json changed" in text
    assert "fig99" in text and "deep / new" in text


def test_report_mutation_detected(tmp_path, monkeypatch):
    """The equality check can fail: a renderer that rounds a value into data-value is caught."""
    write_fixture(tmp_path)
    real = R.cell
    monkeypatch.setattr(R, "cell", lambda v, src=None, cls="": real(
        round(v, 2) if isinstance(v, float) else v, src, cls))
    text, _ = R.build_page(tmp_path)
    with pytest.raises(AssertionError):
        check_page(text, tmp_path)


def test_report_real_build():
    """The page built from this checkout's build/ (benches run here), if any results exist."""
    build = REPO / "build"
    if not list((build / "bench").glob("*.json")):
        pytest.skip("no build/bench/*.json in this checkout (run the benches)")
    text, page = R.build_page(build)
    p, n = check_page(text, build)
    assert n > 0 and page.figures
    for stem in ("simba_repro", "t3_repro", "monad_repro"):
        if (build / "bench" / f"{stem}.json").exists():
            d = json.loads((build / "bench" / f"{stem}.json").read_text())
            # every model/paper pair of the JSON is a row on the page
            for path, e in R.comparisons(d):
                assert f'data-src="{stem}.json#{R.ptr(*path)}/model"' in text or not R.is_num(e["model"]) \
                    and R.esc(R.fmt(e["model"])) in text, (stem, path)


def test_cli_report(tmp_path, capsys):
    from tessera.cli import main
    write_fixture(tmp_path)
    out = tmp_path / "r" / "x.html"
    assert main(["report", "--build", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    assert out.exists()
    assert capsys.readouterr().out.strip() == str(out.resolve())


# ------------------------------------------------------------------ make demo plumbing
def test_demo_progress_quiet_and_non_tty():
    from tessera.flows import _Progress

    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self._tty = tty

        def isatty(self):
            return self._tty

    for tty, quiet in ((False, False), (True, True), (True, False)):
        s = Stream(tty)
        p = _Progress(quiet, 0.0, s)
        p.stage("mesh", "verilating", 1.0)
        p.stage("mesh", "compiling C++", 2.0)
        p.stage("pe", "simulating", 2.0)
        p.done("mesh", "mesh: pass (3 s)")
        p.stage("mesh", "simulating", 3.0)                 # late event of a finished step: ignored
        p.done("pe", "pe: pass (4 s)")
        p.finish()
        out = s.getvalue()
        if quiet:
            assert out == ""
        elif not tty:                                       # CI log: one line per step, no \r
            assert "\r" not in out and "\033" not in out
            assert out.count("\n") == 2 and "mesh: pass" in out and "pe: pass" in out
        else:
            assert "running: " in out and "mesh: started" in out


def test_demo_what_from_records():
    from tessera.flows import _what
    assert _what([{"checks": 3, "cycles": 9, "what": "3x3 mesh: 9 packets"}], "mesh") == "3x3 mesh: 9 packets"
    assert _what([{"checks": 3, "cycles": 9}, {"checks": 4, "cycles": 1}], "pe") == "pe: 7 checks vs golden model"


def test_prepare_cached(tmp_path, monkeypatch):
    """A second prepare() of the same block and parameters does not re-elaborate; a source change does."""
    from tessera.tb import runner
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    params = {"req_width": 16, "occ_width": 5, "wait_width": 8, "learn_log2": 4}
    d1, v1, _ = runner.prepare("mca", params)
    text = v1.read_text()
    calls = []
    real = runner.generate
    monkeypatch.setattr(runner, "generate", lambda *a: calls.append(a) or real(*a))
    d2, v2, p2 = runner.prepare("mca", params)
    assert (d2, v2) == (d1, v1) and not calls and v2.read_text() == text
    assert p2["req_width"] == 16
    monkeypatch.setattr(runner, "source_key", lambda: "changed")
    runner.prepare("mca", params)
    assert len(calls) == 1
