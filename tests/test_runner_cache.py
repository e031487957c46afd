"""The simulation build caches of tessera.tb.runner: the shared object cache of the Verilator
runtime (tessera.tb.objcache) compiles a runtime file once per flag set and copies it after,
never caches anything else, and keys on the flags and the source; unchanged Verilog keeps its
mtime (so Verilator's --skip-identical and make skip a cached rebuild); the suite schedule
(tests/conftest.py) groups tests that share a build."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OBJCACHE = Path(__file__).resolve().parent.parent / "tb" / "objcache.py"
CXX = shutil.which("c++") or shutil.which("g++")


def _compile(tmp, root, cache, src, flags=("-O0",), out="rt.o"):
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp.parent / "hits.log"
    env = {**os.environ, "VERILATOR_ROOT": str(root), "TESSERA_OBJCACHE_LOG": str(log)}
    cmd = [sys.executable, "-S", "-E", str(OBJCACHE), str(cache), CXX, *flags, "-MMD",
           "-c", "-o", out, str(src)]
    subprocess.run(cmd, cwd=tmp, env=env, check=True)
    hits = log.read_text().splitlines() if log.exists() else []
    return (tmp / out), hits


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_objcache_compiles_runtime_once_per_flag_set(tmp_path):
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    src = root / "include" / "verilated_fake.cpp"
    (root / "include" / "verilated_fake.h").write_text("int fake();\n")
    src.write_text('#include "verilated_fake.h"\nint fake() { return 42; }\n')
    cache = tmp_path / "cache"
    o1, hits = _compile(tmp_path / "b1", root, cache, src)
    assert o1.exists() and hits == [] and len(list(cache.glob("*.o"))) == 1
    o2, hits = _compile(tmp_path / "b2", root, cache, src)             # second model: a copy
    assert len(hits) == 1 and o2.read_bytes() == o1.read_bytes()
    assert (tmp_path / "b2" / "rt.d").exists()                      # make's dependency file too
    _, hits = _compile(tmp_path / "b3", root, cache, src, flags=("-O1",))   # other flags: compiled
    assert len(hits) == 1 and len(list(cache.glob("*.o"))) == 2
    src.write_text('#include "verilated_fake.h"\nint fake() { return 43; }\n')
    _, hits = _compile(tmp_path / "b4", root, cache, src)            # edited source: compiled
    assert len(hits) == 1 and len(list(cache.glob("*.o"))) == 3


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_objcache_passes_model_sources_through(tmp_path):
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    model = tmp_path / "Vtop__ALL.cpp"                               # not in the runtime's include dir
    model.write_text("int top() { return 1; }\n")
    cache = tmp_path / "cache"
    o, hits = _compile(tmp_path / "b1", root, cache, model)
    o, hits = _compile(tmp_path / "b2", root, cache, model)
    assert o.exists() and hits == [] and not list(cache.glob("*.o"))


def test_unchanged_verilog_keeps_its_mtime(tmp_path):
    from tessera.tb.runner import _write_if_changed
    p = tmp_path / "top.v"
    _write_if_changed(p, "module top; endmodule\n")
    os.utime(p, (1_000_000, 1_000_000))
    _write_if_changed(p, "module top; endmodule\n")
    assert p.stat().st_mtime == 1_000_000
    _write_if_changed(p, "module top(); endmodule\n")
    assert p.stat().st_mtime != 1_000_000 and "()" in p.read_text()
    assert [f.name for f in tmp_path.iterdir()] == ["top.v"]        # no temporary file left


def test_schedule_groups_tests_of_one_build_longest_first(monkeypatch, tmp_path):
    import conftest
    rec = tmp_path / "durations.json"
    rec.write_text('{"tests": {"a": {"cpu_s": 1, "build": "pe-1/obj"}, "b": {"cpu_s": 9},'
                   ' "c": {"cpu_s": 5, "build": "pe-1/obj_O0"}, "d": {"cpu_s": 7},'
                   ' "f": {"cpu_s": 8, "build": "pe-2/obj_O0"}, "g": {"cpu_s": 0.5}}}')
    monkeypatch.setattr(conftest, "DURATIONS", rec)
    monkeypatch.setattr(conftest, "_RECORD", None)

    class Item:
        def __init__(self, nodeid, marks=()):
            self.nodeid, self.marks = nodeid, list(marks)

        def add_marker(self, m):
            self.marks.append(m)

        def get_closest_marker(self, name):
            return next((m for m in reversed(self.marks) if m.name == name), None)
    own = pytest.mark.xdist_group("pe-cases").mark   # a file's own group (one shared simulator)
    items = [Item(n) for n in "abcde"] + [Item("f", [own]), Item("g", [own])]
    for it in items:
        conftest.pytest_itemcollected(it)
    conftest.pytest_collection_modifyitems(None, items)
    # units: pe-1 (a+c) 6 s, the file's group pe-cases (f+g) 8.5 s
    assert [i.nodeid for i in items] == ["b", "f", "g", "d", "a", "c", "e"]
    assert [m.args for m in items[4].marks] == [("pe-1",)] == [m.args for m in items[5].marks]
    assert items[0].marks == [] and items[6].marks == []            # unknown test: no group
    assert items[1].marks == [own] and items[2].marks == [own]      # its own group, kept alone
