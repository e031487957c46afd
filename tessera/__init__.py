"""Tessera: open hardware and models for chiplet-based deep-learning accelerators.

Sub-packages: ``tessera.hdl`` (Amaranth generators), ``tessera.golden``
(bit-accurate reference models), ``tessera.tb`` (cocotb testbenches),
``tessera.sim_models`` (system models).  ``tessera.export`` writes
synthesis-ready Verilog with a port manifest; ``tessera.cli`` is the
``tessera`` command.
"""
__version__ = "0.1.0"
