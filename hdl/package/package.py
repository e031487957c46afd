"""Simba package: ``ckx x cky`` chiplets over the NoP mesh (block ``package``).

Simba §3.1 (Fig. 1(a): 36 chiplets joined by a mesh NoP of GRS links),
§4.4-4.5 (NoP latency, non-uniform chiplet distance) and §3.2 (the
controllers synchronise through memory-mapped interrupts).  Parameters and
the chiplet/NoP map: :class:`.config.PackageConfig`.

Structure
---------
* chiplet ``c = cy*ckx + cx`` is the ``chiplet`` block in hierarchical mode
  (``ChipletConfig.hier``): its routers are ``hier=True`` with the chiplet's
  coordinate (an input of the chiplet, ``chiplet_id``), a destination on
  another chiplet goes to the gateway node ``(2, ny)``, whose local port is
  the chiplet's NoP port (the chiplet's ``host_in`` / ``host_out`` ports);
* the NoP: a ``ckx x cky`` mesh of the NoC router (``level="nop"``, same flit
  layout), wired with :mod:`tessera.hdl.noc.mesh`'s link helper; each link =
  ``nop_link_latency`` register stages each way plus a serialiser that lets
  one flit onto the downstream router every ``nop_flit_cycles`` cycles
  (GRS link: latency + rate; ``nop_flit_cycles = 1`` adds nothing);
* the host's flit port is the local port of the host node
  ``PackageConfig.host_node`` (the chiplet's first router-only node: (2, 0) on
  a 2x2-PE chiplet, (3, 4) on the default 4x4) of chiplet (0, 0): address
  ``PackageConfig.host_addr``.  Every node of every chiplet is reachable from
  it by hierarchical address; packets to ``host_addr`` leave on ``host_out``;
* Verilog export: router, NoP router, pe_node and chiplet each emitted once
  (``package_router``, ``package_nop_router``, ``package_pe_node``,
  ``package_chiplet``) and instantiated with ``Instance``.

Ports (C = ckx*cky chiplets, arrays indexed by chiplet index c)
--------------------------------------------------------------------
====================  ====  ==================================================================
port                  dir   what
====================  ====  ==================================================================
host_in / host_out    in/o  flit streams (``PackageConfig.chiplet_cfg().flit_layout()``) of the
                            host node of chiplet (0, 0) (see above)
prog                  in    stream of 64-bit controller instruction words, to chiplet
                            ``prog_sel``'s controller (accepted while that one is not busy)
prog_sel              in    chiplet index the ``prog`` words go to (hold it while loading)
start                 in    pulse: start every chiplet's controller (and the cycle counters)
clear                 in    pulse: clear every controller (program + status) and sticky flags
bar_mask              in    C bits: chiplets taking part in barriers (0 = all)
busy done error       out   C bits each: chiplet c's controller status
timeout stray
err_code[c]           out   controller error code (``hdl/chiplet/isa.py`` ERR_*)
err_pc[c]             out   pc of the error
done_cycle[c]         out   32 bits: cycles from ``start`` to chiplet c's ``done`` (or error);
                            counts while chiplet c is busy, held after
gpe_status[c]         out   Global PE sticky flags (``status_layout``)
pe_error[c]           out   npes bits: PE node raised an ``err`` flag since ``clear``
pe_running[c]         out   npes bits: PE node running
noc_err[c]            out   mesh nodes bits: router dropped a flit / flit at an empty node
nop_err               out   C bits: NoP router c dropped a flit (sticky until ``clear``)
noc_flits[c]          out   32 bits: flits injected at chiplet c's local ports since ``start``
                            (the NoP port counts as a local port of the chiplet)
nop_flits             out   32 bits: flits sent on NoP links (one per flit per link hop) since
                            ``start``
bar_req               out   C bits: chiplet c's controller is in a ``BAR``
bar_err               out   1 bit, sticky until ``clear``: the master saw an ARRIVE whose id
                            differs from the open barrier's, or an agent a stray RELEASE
====================  ====  ==================================================================

Barrier (Simba's memory-mapped interrupts over the NoP)
-------------------------------------------------------
Each chiplet has a barrier agent sharing the controller's NoC port (node
``(1, ny)``; one-flit packets, so the two merge flit by flit; BARRIER packets
in to the agent, everything else to the controller).  ``BAR id`` in a program
raises the controller's ``barrier_req``; the agent sends one BARRIER ARRIVE
flit {id, its chiplet} to the master (the controller node of chiplet
``bar_master`` = (0, 0), its own agent included).  The master's agent collects
arrivals in a C-bit mask; when every chiplet of ``bar_mask`` has arrived it
clears the mask and sends ONE BARRIER RELEASE flit {id}, multicast to the
controller node of every chiplet in ``bar_mask``; an agent holding
``barrier_req`` with that id pulses ``barrier_ack`` and the BAR ends.  A
chiplet that is late holds only the barrier; a BAR that never completes ends
in the controller's ``TIMEOUT`` error (``TMO`` sets it).
Encoding (``hdl/chiplet/packets.py`` :func:`barrier_layout`, kind 0, ext 3,
control class): ``op`` [7:6] (1 ARRIVE, 2 RELEASE), ``id`` [15:8], chiplet x, y.

Layer flow: per chiplet a controller program (``prog_sel`` = c) and preload
packets into ``host_in`` (hierarchical destinations); ``start``; each program
ends with a ``BAR`` then, on the chiplets holding outputs, SEND to
``host_addr``; rtl_cycles = ``start`` -> last chiplet ``done``;
rtl_chiplet_cycles[c] = ``done_cycle[c]``.

Left out: per-chiplet clocks and reset, GRS clock recovery, link errors,
barrier masters other than chiplet (0, 0), more than one open barrier.
"""
