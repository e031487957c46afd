"""Simba package model (Shao et al., MICRO'19 / CACM'21): mapper and binder over the Listing 1
loop nest (Sec. 3.3), NoC/NoP latency, bandwidth and energy model (Sec. 3.1-3.2, Sec. 4), the
non-uniform optimisations of Sec. 5 (work partitioning, data placement, cross-layer pipelining)
and the ResNet-50 reproduction (bench/simba_repro.py).

Modules: arch (parameters, RTL-bench overrides), layers (workloads), topology (meshes, XY
routing, binder orders), model (performance/energy), mapper (random search), optim (Sec. 5),
network (whole-network runs), cli (``tessera simba``).
"""
from .arch import Arch, ArchError, load_arch
from .layers import Layer, LayerError, load_network
from .model import Mapping, MappingError, evaluate

__all__ = ["Arch", "ArchError", "load_arch", "Layer", "LayerError", "load_network", "Mapping",
           "MappingError", "evaluate"]
