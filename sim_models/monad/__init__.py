"""Monad (Hao et al.): chiplet-based spatial accelerator modelling and co-optimisation.

``perf`` per-workload hierarchical dataflow model (§III-B/C), ``network``
contention-aware in-package network (§III-C), ``system`` pipelined system
evaluation with I/O area and Eq. 1 cost (§III-C, §IV-B), ``space`` the uniform
encoding (§IV-B), ``optimizer`` Bayesian + annealing engine (§IV-C),
``executor`` local pool / Dask, ``cli`` the ``tessera monad`` command.
"""
