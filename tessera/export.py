"""Synthesis-ready export: Verilog, JSON port manifest and filelist for a block.

``export(spec, params, out_dir)`` writes ``BLOCK.v``, ``BLOCK.manifest.json``
and ``BLOCK.f``.  The manifest is derived from the component's
``wiring.Signature``: every port (Verilog name, width, direction, signedness),
the ``lib.stream`` groupings (valid/ready/payload names, payload field layout,
source or sink), clock/reset and the parameters.  Nothing is written unless the
parameters validate and the design elaborates.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data, stream, wiring

from .params import ParamError
from tessera.hdl.sram import srams_of
from .registry import BlockSpec


def _layout_fields(shape) -> list | None:
    """Flatten a lib.data layout into [{name, offset, width, signed}] (dotted names)."""
    if not isinstance(shape, data.Layout):
        return None
    out = []

    def walk(layout, prefix, base):
        for name, fld in layout:
            full = f"{prefix}{name}"
            if isinstance(fld.shape, data.Layout):
                walk(fld.shape, full + ".", base + fld.offset)
            else:
                s = Shape.cast(fld.shape)
                out.append({"name": full, "offset": base + fld.offset, "width": s.width,
                            "signed": s.signed})
    walk(shape, "", 0)
    return out


def _unflip(sig):
    if isinstance(sig, wiring.FlippedSignature):
        return sig.flip(), True
    return sig, False


def _streams(signature, prefix=(), flipped=False):
    groups = []
    for name, member in signature.members.items():
        if member.is_port:
            continue
        sig, f = _unflip(member.signature)
        now_flipped = flipped ^ f        # In(sig) members report a flipped signature
        dims = member.dimensions
        indices = [()]
        for d in dims:
            indices = [i + (k,) for i in indices for k in range(d)]
        for idx in indices:
            path = prefix + (name,) + idx
            if isinstance(sig, stream.Signature):
                base = "__".join(str(p) for p in path)
                groups.append({
                    "name": base,
                    "role": "sink" if now_flipped else "source",
                    "valid": f"{base}__valid",
                    "ready": f"{base}__ready",
                    "payload": f"{base}__payload",
                    "payload_width": Shape.cast(sig.members["payload"].shape).width,
                    "payload_fields": _layout_fields(sig.members["payload"].shape),
                })
            else:
                groups.extend(_streams(sig, path, now_flipped))
    return groups


def manifest(spec: BlockSpec, params: dict, component, top: str | None = None) -> dict:
    top = top or spec.name
    ports = [{"name": "clk", "direction": "input", "width": 1, "signed": False, "role": "clock"},
             {"name": "rst", "direction": "input", "width": 1, "signed": False,
              "role": "reset (synchronous, active high)"}]
    for path, member, _value in component.signature.flatten(component):
        shape = Shape.cast(member.shape)
        ports.append({
            "name": "__".join(str(p) for p in path),
            "direction": "input" if member.flow is wiring.In else "output",
            "width": shape.width,
            "signed": shape.signed,
            "fields": _layout_fields(member.shape),
        })
    doc = {
        "block": spec.name,
        "top": top,
        "generator": "tessera",
        "parameters": params,
        "clock": {"name": "clk", "edge": "rising"},
        "reset": {"name": "rst", "polarity": "active_high", "kind": "synchronous"},
        "ports": ports,
        "streams": _streams(component.signature),
        # Every SRAM wrapper (hdl/sram) below the top: the modules an ASIC flow
        # swaps for compiled macros (interface in hdl/sram/sram.py).
        "memories": srams_of(component, top),
    }
    if spec.extra_manifest is not None:
        doc.update(spec.extra_manifest(params))
    return doc


def generate(spec: BlockSpec, params: dict):
    """Validate, elaborate and convert. Returns (verilog_text, component)."""
    params = spec.resolve(**params)
    if spec.verilog is not None:
        text, component = spec.verilog(params)
    else:
        component = spec.elaborate_checked(params)
        text = verilog.convert(component, name=spec.name, emit_src=False)
    return text, component, params


def export(spec: BlockSpec, params: dict, out_dir: str | os.PathLike) -> dict:
    """Write BLOCK.v, BLOCK.manifest.json and BLOCK.f into out_dir; returns the paths."""
    text, component, params = generate(spec, params)      # raises before writing
    doc = manifest(spec, params, component)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    v = out / f"{spec.name}.v"
    m = out / f"{spec.name}.manifest.json"
    f = out / f"{spec.name}.f"
    v.write_text(text)
    m.write_text(json.dumps(doc, indent=2) + "\n")
    f.write_text(f"{v.resolve()}\n")
    return {"verilog": v, "manifest": m, "filelist": f}


def param_hash(name: str, params: dict) -> str:
    key = json.dumps({"block": name, **params}, sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:10]


__all__ = ["export", "generate", "manifest", "param_hash", "ParamError"]
