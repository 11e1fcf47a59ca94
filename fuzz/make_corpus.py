#!/usr/bin/env python3
"""Writes the checked-in seed corpus (fuzz/corpus/<target>/) for the libFuzzer targets.

The targets read their input through FuzzedDataProvider, which takes integers from the END
of the input (most significant byte first) and bulk bytes/strings from the front. Seed
builds a file the same way: `front` bytes, then every consumed integer in reverse.
Run: python3 fuzz/make_corpus.py   (rewrites the corpus; the seeds are small and stable)
"""
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


class Seed:
    def __init__(self):
        self.front = b""
        self.tail = []  # bytes in the order the provider reads them

    def int_in_range(self, lo, hi, v):
        assert lo <= v <= hi, (lo, hi, v)
        rng, off, nbytes = hi - lo, 0, 0
        while off < 64 and (rng >> off) > 0:
            off += 8
            nbytes += 1
        val = v - lo
        self.tail += list(val.to_bytes(nbytes, "big")) if nbytes else []
        return self

    def u8(self, v):
        return self.int_in_range(0, 255, v)

    def u16(self, v):
        return self.int_in_range(0, 0xFFFF, v)

    def u32(self, v):
        return self.int_in_range(0, 0xFFFFFFFF, v)

    def boolean(self, b):
        return self.u8(1 if b else 0)

    def prob(self, p):  # ConsumeProbability<float>: a u32 scaled to [0, 1]
        return self.u32(int(p * 0xFFFFFFFF))

    def data(self):
        return self.front + bytes(reversed(self.tail))


def write(target, name, blob):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob)


# --- tx_request_parser -------------------------------------------------------------------
MORE_DATA, EXTRA_INFO = 4, 8


def txreq(gref, offset, flags, rid, size):
    return struct.pack("<IHHHH", gref, offset, flags, rid, size)


def extra(etype, eflags, body):
    return struct.pack("<BB", etype, eflags) + body.ljust(6, b"\0") + b"\0" * 4


def tx_seed(entries, fatal_skb_slots=20):
    s = Seed().boolean(False).u8(0).int_in_range(0, 300, len(entries))
    s.int_in_range(0, 80, fatal_skb_slots)
    s.front = b"".join(entries)
    return s.data()


write("tx_request_parser", "single_slot", tx_seed([txreq(100, 0, 0, 1, 1514)]))
write("tx_request_parser", "three_slot_chain", tx_seed([
    txreq(100, 96, MORE_DATA, 1, 7096), txreq(101, 0, MORE_DATA, 2, 4096),
    txreq(102, 0, 0, 3, 1000)]))
write("tx_request_parser", "gso_extra", tx_seed([
    txreq(100, 0, EXTRA_INFO | MORE_DATA | 1, 1, 9000),
    extra(1, 0, struct.pack("<HBBH", 1448, 1, 0, 0)),
    txreq(101, 0, MORE_DATA, 2, 4096), txreq(102, 0, 0, 3, 3000)]))
write("tx_request_parser", "mcast_add", tx_seed([
    txreq(0, 0, EXTRA_INFO, 1, 0), extra(2, 0, bytes([0x01, 0, 0x5e, 0, 0, 1]))]))
write("tx_request_parser", "nineteen_slots", tx_seed(
    [txreq(100, 0, MORE_DATA, 0, 19 * 100)] +
    [txreq(101 + i, 0, MORE_DATA if i < 17 else 0, 1 + i, 100) for i in range(18)], 30))
write("tx_request_parser", "two_packets", tx_seed([
    txreq(100, 0, 0, 1, 60), txreq(101, 4000, 0, 2, 200)]))

# --- rx_slot_planner ---------------------------------------------------------------------
ADDR_LO, ADDR_HI = 0x10000, 0x7FFFFFFF0000


def planner_seed(legacy, frags):
    s = Seed().boolean(legacy).int_in_range(0, 40, len(frags))
    for f in frags:
        if f[0] == "granted":
            _, off, ln = f
            s.boolean(True).int_in_range(0, 4096, off).int_in_range(0, 4096 - off, ln)
        else:
            _, addr, ln = f
            s.boolean(False).int_in_range(ADDR_LO, ADDR_HI, addr).int_in_range(0, 70000, ln)
    return s.data()


write("rx_slot_planner", "tap_frame", planner_seed(False, [("local", 0x7F0000010064, 1514)]))
write("rx_slot_planner", "gso_64k", planner_seed(False, [("local", 0x7F0000020010, 65000)]))
write("rx_slot_planner", "vm_to_vm_legacy", planner_seed(True, [
    ("granted", 0, 54), ("granted", 100, 3000), ("granted", 2000, 2096),
    ("local", 0x7F0000030F00, 5000)]))

# --- rx_path -----------------------------------------------------------------------------


def rx_config(s, legacy=False, sg=True, queue_bytes=512 * 1024, per_call=16):
    s.boolean(legacy).prob(0.1 if sg else 0.9).int_in_range(0, 1 << 20, queue_bytes)
    s.int_in_range(1, 10000, 10000).int_in_range(1, 60000, 60000)
    s.int_in_range(1, 70, 64).int_in_range(1, 64, 64).int_in_range(1, 64, per_call)
    s.prob(0.1).prob(0.1).boolean(False)  # no call failures, no segment failures, start 0
    return s


def rx_post(s, n):
    s.int_in_range(0, 3, 0).int_in_range(0, 80, n)
    for i in range(n):
        s.prob(0.5).u16(i)
    return s


def rx_packet(s, length, frags, gso=None, flags=0):
    s.int_in_range(0, 3, 1).boolean(False).int_in_range(1, 66000, length)
    s.int_in_range(0, 4095, 10).u16(flags).boolean(gso is not None)
    if gso is not None:
        s.boolean(gso[0] == 4).u16(gso[1])
    s.int_in_range(1, 18, len(frags))
    at = 0
    for f in frags[:-1]:
        s.int_in_range(0, length - at, f)
        at += f
    return s


def rx_pass(s):
    return s.int_in_range(0, 3, 2)


s = rx_config(Seed())
rx_post(s, 8)
rx_packet(s, 1514, [1514])
rx_pass(s)
write("rx_path", "one_frame", s.data())

s = rx_config(Seed(), per_call=4)
rx_post(s, 20)
rx_packet(s, 65000, [100, 30000, 34900], gso=(4, 1448), flags=1)
rx_packet(s, 60, [60])
rx_pass(s)
write("rx_path", "gso_and_small", s.data())

s = rx_config(Seed(), legacy=True, sg=False)
rx_post(s, 2)
rx_packet(s, 9000, [9000])
rx_packet(s, 500, [200, 300])
rx_pass(s)
write("rx_path", "no_sg_legacy", s.data())

# --- xs_values ---------------------------------------------------------------------------
for i, text in enumerate([b"1514", b"65535", b"00:16:3e:12:34:56", b"10Mb/s@50ms",
                          b"12500,50000", b"vif5.0", b"1000Kb/s@20ms"]):
    s = Seed().int_in_range(0, 2, 0)
    s.front = text
    write("xs_values", "scalar_%d" % i, s.data())
# A well-formed single-queue frontend, then one with 2 queues allowed.
write("xs_values", "frontend_flat",
      Seed().int_in_range(0, 2, 1).boolean(True).int_in_range(0, 24, 0)
      .int_in_range(0, 8, 1).boolean(False).data())
write("xs_values", "backend_minimal",
      Seed().int_in_range(0, 2, 2).u16(5).int_in_range(0, 300, 0).boolean(True)
      .int_in_range(0, 10, 0).data())

# --- xs_wire -----------------------------------------------------------------------------
XS = {"directory": 1, "read": 2, "watch": 4, "transaction_start": 6, "transaction_end": 7,
      "get_domain_path": 10, "write": 11, "mkdir": 12, "rm": 13, "set_perms": 14}


def xs_msg(t, req_id, payload, tx=0):
    return struct.pack("<IIII", XS[t], req_id, tx, len(payload)) + payload


def wire_seed(msgs, cuts, dom0):
    s = Seed().int_in_range(0, 8, len(cuts))
    for c in cuts:
        s.int_in_range(0, 64, c)
    s.boolean(dom0)
    s.front = b"".join(msgs)
    return s.data()


write("xs_wire", "guest_connection", wire_seed([
    xs_msg("get_domain_path", 1, b"5\0"),
    xs_msg("write", 2, b"/local/domain/5/data/x\0hello"),
    xs_msg("read", 3, b"/local/domain/5/data/x\0"),
    xs_msg("directory", 4, b"/local/domain/5\0"),
    xs_msg("watch", 5, b"/local/domain/5/data\0tok\0"),
    xs_msg("rm", 6, b"/local/domain/5/data/x\0")], [5, 16, 3], False))
write("xs_wire", "dom0_transaction", wire_seed([
    xs_msg("transaction_start", 1, b"\0"),
    xs_msg("mkdir", 2, b"/local/domain/0/backend/vif/5/0\0", tx=1),
    xs_msg("set_perms", 3, b"/local/domain/0/backend/vif/5/0\0n0\0r5\0", tx=1),
    xs_msg("transaction_end", 4, b"T\0", tx=1)], [], True))


def ctrl(rtype, d0=0, d1=0, d2=0, rid=0):
    return struct.pack("<HHIII", rid, rtype, d0, d1, d2)


def ctrl_seed(queues, page, reqs, frame=b""):
    page = page.ljust(256, b"\0")
    return bytes([queues - 1]) + page + b"".join(reqs) + frame


# win-xenvif's RSS sequence: algorithm, mapping size, mapping (from ref 1), key, flags; then
# an IPv4/TCP frame of the first verification-suite flow.
MAPPING = struct.pack("<8I", 0, 1, 2, 3, 0, 1, 2, 3)
TCP4 = (b"\x00\x16\x3e\x00\x00\x02\x00\x16\x3e\x00\x00\x01\x08\x00"
        b"\x45\x00\x00\x28\x00\x00\x40\x00\x40\x06\x00\x00"
        + bytes([66, 9, 149, 187, 161, 142, 100, 80])
        + struct.pack(">HH", 2794, 1766) + b"\0" * 16)
write("ctrl_ring", "windows_sequence", ctrl_seed(4, MAPPING, [
    ctrl(7, 1), ctrl(4, rid=1), ctrl(5, 8, rid=2), ctrl(6, 1, 8, 0, rid=3),
    ctrl(3, 1, 40, rid=4), ctrl(1, rid=5), ctrl(2, 15, rid=6)], TCP4))
# Hostile values: mapping size 2^32-1, a key over 40 bytes, a wrapping offset, an ungranted
# ref, a staging-grant op.
write("ctrl_ring", "hostile_values", ctrl_seed(2, MAPPING, [
    ctrl(5, 0xFFFFFFFF), ctrl(3, 1, 41), ctrl(5, 8), ctrl(6, 1, 0xFFFFFFFF, 2),
    ctrl(6, 77, 8, 0), ctrl(9, 1, 1), ctrl(0)]))
print("corpus written to", ROOT, file=sys.stderr)
