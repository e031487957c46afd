"""The package model's controller terms (issue 14 lead 1) against the project's RTL chiplet
program: the words the compiler emits to configure a layer and to send its tiles."""
from dataclasses import replace

import pytest

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.chiplet_cycles import RTL_CONTROLLER
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.model import Mapping, controller_setup_words, evaluate

ARCH = load_arch(**RTL_CONTROLLER)     # the RTL chiplet's controller (the system model's default is the
                                       # Simba runtime's RISC-V, rtcontrol.py; tests/test_simba_runtime_control.py)
NET = {l.name: l for l in load_network("resnet50")}


def _program_words(ps):
    """(setup words without the host's input RECV and readback SEND, tile SEND commands)."""
    from tessera.hdl.chiplet.asm import assemble_ops
    from tessera.hdl.chiplet.compiler import TAG_SEND
    from tessera.hdl.chiplet.config import ChipletConfig
    cfg = ChipletConfig()
    setup, sends, recvs, others = 0, 0, 0, 0
    for op in ps.ops:
        k = op[0]
        prog = assemble_ops([op], cfg)          # each op alone: every CMD with all its chunks
        if k == "send" and op[1].tag == TAG_SEND:
            sends += 1
            continue
        setup += len(prog.words)
        recvs += k == "recv"
        others += k == "send"
    assert recvs == 2 and others == 1                  # host input RECV, output RECV, readback SEND
    return setup - 2 * ARCH.gpe_cmd_words, sends


def test_controller_instruction_cycles_match_chiplet_cycle_model():
    """The package model and the RTL-calibrated chiplet cycle model use one instruction cost."""
    from tessera.sim_models.simba.chiplet_cycles import ChipletCycles
    assert ARCH.ctrl_instr_cycles == ChipletCycles().instr_cycles


@pytest.mark.parametrize("mp", [Mapping(1, 1, 1, 1, 4, 4, 1, 1, 1, 2), Mapping(1, 1, 1, 1, 16, 1, 1, 1, 1, 2),
                                Mapping(1, 1, 1, 1, 2, 2, 1, 1, 1, 2), Mapping(1, 1, 1, 1, 4, 2, 1, 2, 1, 1)])
def test_setup_and_send_words_match_compiled_program(mp):
    """A res4b_branch2a slice (one pass) on one 16-PE RTL chiplet: the model's setup words equal the
    compiled program's (without host I/O) and one SEND per multicast set per tile step (P, Q
    split evenly over the PEs here; with ragged splits the model charges every set the largest
    PE's steps)."""
    from tessera.hdl.chiplet.compiler import compile_layer
    from tessera.hdl.chiplet.config import ChipletConfig
    L = replace(NET["res4b_branch2a"], C=256, K=64, H=7, W=14)
    ps = compile_layer(L, mp, ChipletConfig())
    assert len(ps) == 1
    words, sends = _program_words(ps[0])
    assert controller_setup_words(ARCH, mp.kp, mp.cp, mp.pp, mp.qp) == words
    steps = -(-(-(-L.P // mp.pp)) // mp.p1) * -(-(-(-L.Q // mp.qp)) // mp.q1)
    assert sends == mp.cp * mp.pp * mp.qp * steps


def test_setup_is_charged_once_per_layer():
    """Latency grows by exactly the controller setup when the CFG writes are counted."""
    l, mp = NET["res3b_branch2b"], Mapping(2, 1, 2, 4, 4, 4, 1, 1, 2, 2)
    a0 = ARCH.with_(pe_config_regs=0, gpe_cmd_words=0, ctrl_fixed_instr=0)
    d = evaluate(l, ARCH, mp).latency_cycles - evaluate(l, a0, mp).latency_cycles
    assert d == pytest.approx(ARCH.ctrl_pe_cycles * (10 * 16 + 14 * 5 + 6))
