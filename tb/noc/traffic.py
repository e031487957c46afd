"""Test-only Amaranth traffic generators / checkers around a :class:`~tessera.hdl.noc.mesh.Mesh`
(not exported; used by the saturation benchmark and the soak test at Verilator speed).

Per node: an xorshift generator makes a packet with probability ``rate/65536`` per
cycle into an unbounded source queue (a counter); the source sends packets of
``plen`` flits (input; 0 = random length 1..max) to a
uniform random destination (self included), or, with probability
``mcast/256``, a multicast to a random node mask.  The sink is ready with
probability ``sink_ready/256``.  Payload = (source index, per-(src,dst) sequence
number); the checker at every destination flags a sequence number that is not
the expected next one (``seq_err``: loss, duplicate or reordering of unicast)
and, for multicasts, one that is not increasing per source (``mseq_err``).
Totals (generated/injected/received packets and flits, multicast copies due and
received) and the Little's-law integral of packets in the system are ports.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.noc.mesh import Mesh


def _xorshift(m, state, name):
    """32-bit xorshift step (combinational next value)."""
    a = Signal(32, name=f"{name}_a")
    b = Signal(32, name=f"{name}_b")
    c = Signal(32, name=f"{name}_c")
    m.d.comb += [a.eq(state ^ (state << 13)[:32]), b.eq(a ^ (a >> 17)), c.eq(b ^ (b << 5)[:32])]
    return c


def _place(layout, values: dict):
    """Bit vector of ``layout`` width with the dotted fields set to values (others 0)."""
    from amaranth.lib import data
    total = Const(0, layout.size)
    out = []
    for path, val in values.items():
        shape, off = layout, 0
        for part in path.split("."):
            fld = shape[part]
            off += fld.offset
            shape = fld.shape
        width = shape.size if isinstance(shape, data.Layout) else Shape.cast(shape).width
        out.append((Value.cast(val)[:width].as_unsigned() if len(Value.cast(val)) >= width
                    else Value.cast(val).as_unsigned()) << off)
    for v in out:
        total = total | v
    return total[:layout.size]


class TrafficTop(wiring.Component):
    def __init__(self, kx=4, ky=4, vcs=1, buffer_flits=4, link_latency=1, packet_flits=4,
                 max_packet_flits=4, check=True, seed=1, sim=False, sa_stages=1,
                 full_rate_check=True, alloc_stages=1):
        self.kx, self.ky, self.n = kx, ky, kx * ky
        self.packet_flits, self.check, self.seed = packet_flits, check, seed
        self.maxlen = max(max_packet_flits, packet_flits)
        self.seqw = 16
        self.idxw = max(1, (self.n - 1).bit_length())
        pw = self.idxw + self.seqw + 1
        self.mesh = Mesh(kx=kx, ky=ky, vcs=vcs, buffer_flits=buffer_flits,
                         max_packet_flits=self.maxlen, payload_width=pw, classes=1,
                         link_latency=link_latency, max_node=max(kx, ky), name="bench", sim=sim,
                         sa_stages=sa_stages, full_rate_check=full_rate_check,
                         alloc_stages=alloc_stages)
        super().__init__({
            "rate": In(17), "mcast": In(9), "sink_ready": In(9), "enable": In(1), "plen": In(8),
            "gen_pkts": Out(40), "inj_pkts": Out(40), "inj_flits": Out(40),
            "rcv_flits": Out(40), "rcv_pkts": Out(40), "inflight_sum": Out(56),
            "mcast_due": Out(40), "mcast_rcv": Out(40), "mc_inj": Out(40),
            "seq_err": Out(32), "mseq_err": Out(32), "errors": Out(32),
            "lat_sum": Out(48).array(kx + ky - 1), "lat_cnt": Out(40).array(kx + ky - 1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mesh = mesh = self.mesh
        cfg = mesh.cfg
        n, kx = self.n, self.kx
        now = Signal(self.seqw)
        m.d.sync += now.eq(now + 1)
        H = self.kx + self.ky - 1
        lat_terms = [[] for _ in range(H)]
        cnt_terms = [[] for _ in range(H)]
        gen_v, inj_v, injf_v, rcvf_v, rcvp_v, mdue_v, mrcv_v, serr_v, mserr_v, mcinj_v = (
            [] for _ in range(10))
        for i in range(n):
            st = Signal(32, init=(0x9E3779B9 * (i + 1) + self.seed * 7919) & 0xFFFFFFFF or 1,
                        name=f"rng{i}")
            nx = _xorshift(m, st, f"x{i}")
            m.d.sync += st.eq(nx)
            st2 = Signal(32, init=(0x85EBCA6B * (i + 3) + self.seed * 104729) & 0xFFFFFFFF or 1,
                         name=f"rngb{i}")
            nx2 = _xorshift(m, st2, f"y{i}")
            m.d.sync += st2.eq(nx2)
            gen = Signal(name=f"gen{i}")
            m.d.comb += gen.eq(self.enable & (nx2[:16] < self.rate))
            pending = Signal(24, name=f"pend{i}")
            li, lo = mesh.local_in[i], mesh.local_out[i]
            f = li.payload
            busy = Signal(name=f"busy{i}")
            left = Signal(8, name=f"left{i}")
            cur = Signal(cfg.flit, name=f"cur{i}")
            start = Signal(name=f"start{i}")
            take = Signal(name=f"take{i}")
            # a new packet is loaded when idle or while the previous tail is taken, so a source
            # can offer 1 flit/cycle back to back
            m.d.comb += start.eq((~busy | (take & (left == 1))) & (pending != 0))
            # new packet header from random bits
            dst = Signal(self.idxw, name=f"dst{i}")
            m.d.comb += dst.eq(nx[16:32] % n)
            is_mc = Signal(name=f"ismc{i}")
            m.d.comb += is_mc.eq(nx[8:16] < self.mcast)
            length = Signal(8, name=f"len{i}")
            m.d.comb += length.eq(Mux(self.plen != 0, self.plen, nx[4:8] % self.maxlen + 1))
            mask = Signal(n, name=f"mask{i}")
            rawm = Cat(st, nx)[:n]
            m.d.comb += mask.eq(Mux(rawm == 0, 1, rawm))
            # per-destination sequence numbers (unicast) and one multicast sequence
            seqs = [Signal(self.seqw, name=f"seq{i}_{j}") for j in range(n)] if self.check else []
            mseq = Signal(self.seqw, name=f"mseq{i}")
            seq_now = Signal(self.seqw, name=f"seqnow{i}")
            if self.check:
                with m.Switch(dst):
                    for j in range(n):
                        with m.Case(j):
                            m.d.comb += seq_now.eq(seqs[j])
            hdr = Signal(cfg.flit, name=f"hdr{i}")
            # built as ONE expression from the layout offsets: assigning View fields in
            # different If branches makes Amaranth emit several always blocks for one reg,
            # which Verilator (MULTIDRIVEN waived in simulation) evaluates wrongly
            L = cfg.flit
            pay = Cat(Const(i, self.idxw), Mux(is_mc, mseq, seq_now) if self.check else now, is_mc)
            ucast = _place(L, {"dest.ucast.node.x": (dst % kx), "dest.ucast.node.y": (dst // kx)})
            mcast = _place(L, {"dest.mcast.nodes": mask})
            common = _place(L, {"head": Const(1, 1), "tail": length == 1, "mcast": is_mc,
                                "src.node.x": Const(i % kx, 8), "src.node.y": Const(i // kx, 8),
                                "payload": pay})
            m.d.comb += hdr.eq(common | Mux(is_mc, mcast, ucast))
            m.d.comb += [li.valid.eq(busy), f.eq(cur)]
            m.d.comb += take.eq(li.valid & li.ready)
            inj = Signal(name=f"inj{i}")
            m.d.comb += inj.eq(start)
            with m.If(start):
                m.d.sync += [busy.eq(1), cur.eq(hdr), left.eq(length)]
                if self.check:
                    with m.If(is_mc):
                        m.d.sync += mseq.eq(mseq + 1)
                    with m.Else():
                        with m.Switch(dst):
                            for j in range(n):
                                with m.Case(j):
                                    m.d.sync += seqs[j].eq(seqs[j] + 1)
            with m.Elif(take):
                m.d.sync += [left.eq(left - 1),
                             cur.eq(Cat(Const(0, 1), left == 2, cur.as_value()[2:]))]
                with m.If(left == 1):
                    m.d.sync += busy.eq(0)
            m.d.sync += pending.eq(pending + gen - start)
            mdue = Signal(8, name=f"mdue{i}")
            m.d.comb += mdue.eq(Mux(start & is_mc, sum(mask[j] for j in range(n)), 0))
            gen_v.append(gen)
            inj_v.append(start)
            mcinj_v.append(start & is_mc)
            injf_v.append(take)
            mdue_v.append(mdue)
            # sink + checker
            rdy = Signal(name=f"rdy{i}")
            m.d.comb += rdy.eq(nx2[16:24] < self.sink_ready)
            m.d.comb += lo.ready.eq(rdy)
            got = lo.valid & lo.ready
            rf = lo.payload
            src = rf.payload[:self.idxw]
            sq = rf.payload[self.idxw:self.idxw + self.seqw]
            mc = rf.payload[self.idxw + self.seqw]
            serr = Signal(name=f"serr{i}")
            mserr = Signal(name=f"mserr{i}")
            if self.check:
                exp = [Signal(self.seqw, name=f"exp{i}_{j}") for j in range(n)]
                mlast = [Signal(self.seqw + 1, name=f"mlast{i}_{j}") for j in range(n)]
                with m.If(got & rf.head):
                    with m.Switch(src):
                        for j in range(n):
                            with m.Case(j):
                                with m.If(mc):
                                    # multicast: strictly increasing (mod 2^w) per source
                                    diff = Signal(self.seqw, name=f"mdiff{i}_{j}")
                                    m.d.comb += diff.eq(sq - mlast[j][:self.seqw])
                                    with m.If(mlast[j][self.seqw] &
                                              ((diff == 0) | diff[self.seqw - 1])):
                                        m.d.comb += mserr.eq(1)
                                    m.d.sync += mlast[j].eq(Cat(sq, Const(1, 1)))
                                with m.Else():
                                    with m.If(sq != exp[j]):
                                        m.d.comb += serr.eq(1)
                                    m.d.sync += exp[j].eq(sq + 1)
            if not self.check:
                # unicast latency (head offered at the source -> tail delivered) per hop count
                done = Signal(name=f"done{i}")
                m.d.comb += done.eq(got & rf.tail & ~mc)
                lat = Signal(self.seqw, name=f"lat{i}")
                m.d.comb += lat.eq(now - sq)
                x, y = i % kx, i // kx
                sx, sy = rf.src.node.x, rf.src.node.y
                hx = Mux(sx > x, sx - x, x - sx)
                hy = Mux(sy > y, sy - y, y - sy)
                hop = Signal(4, name=f"hop{i}")
                m.d.comb += hop.eq(hx + hy)
                for h in range(H):
                    hit = Signal(name=f"hit{i}_{h}")
                    m.d.comb += hit.eq(done & (hop == h))
                    lat_terms[h].append(Mux(hit, lat, 0))
                    cnt_terms[h].append(hit)
            rcvf_v.append(got)
            rcvp_v.append(got & rf.tail & ~mc)
            mrcv_v.append(got & rf.tail & mc)
            serr_v.append(serr)
            mserr_v.append(mserr)

        def acc(sig, terms):
            m.d.sync += sig.eq(sig + sum(terms))

        acc(self.gen_pkts, gen_v)
        acc(self.inj_pkts, inj_v)
        acc(self.inj_flits, injf_v)
        acc(self.rcv_flits, rcvf_v)
        acc(self.rcv_pkts, rcvp_v)
        acc(self.mcast_due, mdue_v)
        acc(self.mcast_rcv, mrcv_v)
        acc(self.mc_inj, mcinj_v)
        acc(self.seq_err, serr_v)
        acc(self.mseq_err, mserr_v)
        # packets in the system (unicast accounting; Little's law latency = sum / delivered)
        m.d.sync += self.inflight_sum.eq(self.inflight_sum + self.gen_pkts - self.rcv_pkts)
        m.d.comb += self.errors.eq(sum(mesh.errors[i] for i in range(n)))
        if not self.check:
            for h in range(H):
                acc(self.lat_sum[h], lat_terms[h])
                acc(self.lat_cnt[h], cnt_terms[h])
        return m

    def verilog(self, name="traffic"):
        from amaranth.back import verilog
        from tessera.hdl.noc.router import Router
        rv = verilog.convert(Router(self.mesh.cfg), name=self.mesh.router_module, emit_src=False)
        return rv + "\n" + verilog.convert(self, name=name, emit_src=False)


def run_traffic(k, vcs, buf, points, check=False, link_latency=1, opt="-O0", sa_stages=1,
                alloc_stages=1):
    """Build (cached) the TrafficTop for this configuration and run the points
    (see tessera.tb.noc.bench_cocotb); returns the list of per-point records."""
    import json
    import tempfile
    from pathlib import Path

    from tessera.tb.noc.vrun import run_text
    top = TrafficTop(kx=k, ky=k, vcs=vcs, buffer_flits=buf, link_latency=link_latency,
                     max_packet_flits=4, check=check, sa_stages=sa_stages,
                     full_rate_check=False,    # (benches measure below-full-rate buffers too)
                     alloc_stages=alloc_stages)
    text = top.verilog("traffic")
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "res.json"
        sa = ("" if sa_stages == 1 else f"_sa{sa_stages}") + \
            ("" if alloc_stages == 1 else f"_al{alloc_stages}")
        run_text(f"noc_traffic_{k}x{k}_v{vcs}_b{buf}_l{link_latency}_c{int(check)}{sa}", text,
                 "traffic", "tessera.tb.noc.bench_cocotb",
                 env={"NOC_POINTS": json.dumps(points), "NOC_OUT": str(out)}, opt=opt)
        return json.loads(out.read_text())
