"""Checks shared by the Global PE testbenches (cocotb and amaranth.sim); no cocotb import."""
from __future__ import annotations


def interleaving(got, lanes):
    """None if ``got`` is an interleaving of ``lanes`` (each kept in order), else the index
    of the first arrival no interleaving explains.  Depth-first over (arrival, heads) with
    memo: a tile may head several lanes when one SEND reaches a consumer twice."""
    n = len(got)
    start = (0, tuple(0 for _ in lanes))
    stack, seen, best = [start], {start}, 0
    while stack:
        i, heads = stack.pop()
        if i == n:
            return None if all(h == len(lane) for h, lane in zip(heads, lanes)) else n
        best = max(best, i)
        for k, lane in enumerate(lanes):
            if heads[k] < len(lane) and lane[heads[k]] == got[i]:
                nxt = (i + 1, heads[:k] + (heads[k] + 1,) + heads[k + 1:])
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return best


def nest(dotted):
    """{"a.b": v} -> {"a": {"b": v}}: a command's dotted field dict as ``StructLayout.const``
    takes it (shared by the amaranth.sim Global PE tests)."""
    out = {}
    for name, v in dotted.items():
        *path, last = name.split(".")
        d = out
        for p in path:
            d = d.setdefault(p, {})
        d[last] = v
    return out
