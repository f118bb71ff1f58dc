#!/usr/bin/env python3
"""SB BGP driver benchmark against a running lab (scripts/lab/up.sh); standard library only.

Driven by scripts/bench/sb_bgp_bench.sh, which brings the lab up and down. For each N (increasing;
the bulk grows between sizes) it loads bulk ports into the Southbound until it holds N
Port_Binding rows, bound to a fake remote chassis, then measures the agent (release build) on the
ports of this chassis:

- cold start: agent exec to all K local addresses on bgp-nic (kernel state of the agent removed
  first: bgp-nic, bgp-vrf, its rules and tables);
- bind latency: `Port_Binding.chassis`/`up` written in one transaction, to RTM_NEWADDR of the
  port's IP in the chassis netns (one event at a time, agent idle in between);
- unbind latency: chassis cleared + up=false, to RTM_DELADDR;
- bursts of 50 bindings: 50 transactions pipelined back to back, and 50 bindings in one
  transaction: first send to the last address;
- agent RSS: VmRSS and VmHWM from /proc/<pid>/status; agent CPU per bind event;
- full reconcile: the agent restarted with `reconcile_interval` = 1 s, the duration of its
  periodic reconciles (nothing to change) from its metrics.

--busy B1,B2,... (the busy gateway, issue 17): the bulk is loaded once (the last of --sizes),
then for each B (increasing) routers are added whose gateway port is bound to this chassis, each
with 500 centralized FIPs and a tenant subnet of 500 VMs (written into the SB like the bulk), so
this chassis exposes B more addresses; the same measurements run at each B.

--fips-per-router F (with --busy, default 500): each busy router's centralized FIPs; with F =
30000, --busy 30000 is one router of 30k FIPs and its 500 tenant VMs. Then a FIP is added to
router 0 and taken out again, event after event (its patch port's `nat_addresses` entry, which
lists them all, written whole, as northd does), timed to the FIP's address on bgp-nic and to its
removal: what a router with thousands of FIPs costs per FIP change.

--evpn (with --busy): the same busy gateway for the EVPN driver (ovn_evpn_driver, its own `vrf`
realisation, stand-in VRFs where the kernel has none): each busy router's gateway and tenant
subnet carry `neutron_bgpvpn:vni` (1000 + k) and `:as`, so each router is a VRF `vrf-<vni>` whose
500 tenant VMs are addresses on `lo-<vni>` (without their local routes) and whose gateway and
subnet are routes in table <vni>; FIPs are not exposed (as upstream's EVPN driver). The measured
ports are tenant VMs of router 0's subnet, unbound until the measurements bind them (to
`lo-1000`).

Timestamps: time.time() taken in this process; netlink events are stamped when this process
reads them from a NETLINK_ROUTE socket opened inside the chassis netns (RTMGRP_IPV4_IFADDR),
in the same select() loop that reads the OVSDB replies.

How the ports are made (see docs/sb-bgp-benchmark.md):
- measured ports: NB Logical_Switch_Ports on a provider switch `bench-provider` (localnet on
  physnet `public`), so northd creates real Port_Binding rows; ovn-controller is stopped (SIGTERM,
  which leaves its Chassis row and bindings in place) before they are bound by writing
  chassis/up directly, because it would release a binding to its chassis without an OVS interface;
- bulk ports: written straight into the SB (Datapath_Binding + localnet + VIF Port_Bindings bound
  to chassis `bench-remote-chassis`) while northd is paused (`ovn-appctl pause`), which avoids
  millions of logical flows and northd recomputes that would load the 2-core machine; northd
  would delete them when resumed, so it stays paused until the lab goes down.
"""

import argparse
import contextlib
import ctypes
import datetime
import json
import os
import re
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request

PROVIDER_LS = "bench-provider"
REMOTE_CHASSIS = "bench-remote-chassis"
BULK_PER_DATAPATH = 1000
BULK_TUNNEL_KEY_BASE = 100000
# Busy gateway (--busy): routers whose gateway port is bound to this chassis, each with
# BUSY_FIPS_PER_ROUTER centralized FIPs and one tenant subnet of BUSY_VMS_PER_ROUTER VMs (bound to
# the remote chassis, exposed here through the gateway with expose_tenant_networks). Tenant
# subnets are 10.200.(4k).0/22 (the bulk is in 10.0-1.x.y; the lab uses 100.64.0.0/16).
BUSY_FIPS_PER_ROUTER = 500
BUSY_VMS_PER_ROUTER = 500
BUSY_MAX_ROUTERS = 64
BUSY_TUNNEL_KEY_BASE = 200000
BUSY_PROVIDER = "bench-busy-provider"
# --evpn: router k's VNI, and the AS of every router's VPN.
EVPN_VNI_BASE = 1000
EVPN_AS = 64999


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read_env(lab_dir):
    env = {}
    with open(os.path.join(lab_dir, "lab.env")) as f:
        for line in f:
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v
    return env


# --------------------------------------------------------------------------------------------
# OVSDB JSON-RPC over a unix socket (pipelined, replies matched by id)


class Ovsdb:
    def __init__(self, path, db):
        self.db = db
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.buf = ""
        self.next_id = 0
        self.replies = {}  # id -> (time received, message)
        self.dec = json.JSONDecoder()
        self.on_notify = None  # called with (time received, message) for a notification

    def send(self, method, params):
        self.next_id += 1
        msg = json.dumps({"method": method, "params": params, "id": self.next_id}).encode()
        self.sock.setblocking(True)
        self.sock.sendall(msg)
        self.sock.setblocking(False)
        return self.next_id

    def transact_async(self, ops):
        return self.send("transact", [self.db] + ops)

    def on_readable(self, now):
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                break
            if not data:
                raise RuntimeError(f"{self.db}: connection closed by ovsdb-server")
            self.buf += data.decode()
        while True:
            s = self.buf.lstrip()
            if not s:
                self.buf = ""
                return
            try:
                msg, end = self.dec.raw_decode(s)
            except json.JSONDecodeError:
                self.buf = s
                return
            self.buf = s[end:]
            if msg.get("method") == "echo":
                self.sock.setblocking(True)
                self.sock.sendall(json.dumps({"result": msg["params"], "id": msg["id"]}).encode())
                self.sock.setblocking(False)
            elif "id" in msg and msg.get("method") is None:
                self.replies[msg["id"]] = (now, msg)
            elif msg.get("method") and self.on_notify:
                self.on_notify(now, msg)


def transact_once(path, database, ops, what, timeout=120):
    """One transaction on a connection of its own (set-up only, not timed)."""
    db = Ovsdb(path, database)
    try:
        rid = db.transact_async(ops)
        deadline = time.time() + timeout
        while rid not in db.replies:
            if time.time() > deadline:
                raise TimeoutError(f"{database} {what}")
            select.select([db.sock], [], [], 1)
            db.on_readable(time.time())
        return check_result(db.replies[rid][1], what)
    finally:
        db.sock.close()


def check_result(msg, what):
    if msg.get("error"):
        raise RuntimeError(f"{what}: {msg['error']}")
    for r in msg["result"]:
        if r and "error" in r:
            raise RuntimeError(f"{what}: {r}")
    return msg["result"]


# --------------------------------------------------------------------------------------------
# Netlink address events inside a network namespace

CLONE_NEWNET = 0x40000000
RTMGRP_IPV4_IFADDR = 0x10
RTMGRP_IPV6_IFADDR = 0x100
RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 20, 21, 22
NLM_F_REQUEST, NLM_F_DUMP = 1, 0x300
NLMSG_DONE, NLMSG_ERROR = 3, 2
IFA_ADDRESS, IFA_LOCAL = 1, 2
SO_RCVBUFFORCE = 33


def netlink_socket_in(netns):
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
            s.bind((0, RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR))
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(target)
    s.setblocking(False)
    return s


def parse_addr_msgs(data):
    """Yield (msg type, ifindex, address text) of RTM_NEWADDR/RTM_DELADDR in a datagram."""
    off = 0
    while off + 16 <= len(data):
        length, mtype, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
        if length < 16:
            break
        if mtype in (RTM_NEWADDR, RTM_DELADDR):
            family, _plen, _fl, _scope, index = struct.unpack_from("=BBBBI", data, off + 16)
            a = off + 24
            addr = None
            while a + 4 <= off + length:
                alen, atype = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                payload = data[a + 4 : a + alen]
                if atype in (IFA_LOCAL, IFA_ADDRESS) and (addr is None or atype == IFA_LOCAL):
                    addr = socket.inet_ntop(family, payload)
                a += (alen + 3) & ~3
            if addr:
                yield mtype, index, addr
        off += (length + 3) & ~3


class Watcher:
    """One select() loop over the SB connection and the netlink socket."""

    def __init__(self, sb, nl):
        self.sb = sb
        self.nl = nl
        self.present = set()  # addresses currently on any device of the netns (from events)
        self.added = {}  # ip -> time of the last RTM_NEWADDR
        self.removed = {}  # ip -> time of the last RTM_DELADDR
        self.overruns = 0
        self.extra = []  # more OVSDB connections read in the same loop (Ovsdb)

    def dump_addresses(self):
        req = struct.pack("=IHHIIBBBBI", 24, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, 1, 0,
                          0, 0, 0, 0, 0)
        self.nl.setblocking(True)
        self.nl.send(req)
        found = set()
        done = False
        while not done:
            data = self.nl.recv(1 << 20)
            off = 0
            while off + 16 <= len(data):
                length, mtype = struct.unpack_from("=IH", data, off)
                if mtype == NLMSG_DONE:
                    done = True
                elif mtype == NLMSG_ERROR:
                    (errno,) = struct.unpack_from("=i", data, off + 16)
                    raise OSError(-errno, "RTM_GETADDR dump")
                off += (length + 3) & ~3
            for mtype, _idx, addr in parse_addr_msgs(data):
                if mtype == RTM_NEWADDR:
                    found.add(addr)
        self.nl.setblocking(False)
        self.present = found
        return found

    def pump(self, timeout):
        extra = {c.sock: c for c in self.extra}
        r, _, _ = select.select([self.sb.sock, self.nl, *extra], [], [], max(0.0, timeout))
        now = time.time()
        if self.sb.sock in r:
            self.sb.on_readable(now)
        for sock in r:
            if sock in extra:
                extra[sock].on_readable(now)
        if self.nl in r:
            while True:
                try:
                    data = self.nl.recv(1 << 20)
                except BlockingIOError:
                    break
                except OSError as e:  # ENOBUFS: events lost; re-read the truth
                    self.overruns += 1
                    log(f"netlink overrun ({e}); re-dumping addresses")
                    self.dump_addresses()
                    break
                for mtype, _idx, addr in parse_addr_msgs(data):
                    if mtype == RTM_NEWADDR:
                        self.present.add(addr)
                        self.added[addr] = now
                    else:
                        self.present.discard(addr)
                        self.removed[addr] = now

    def wait_ip(self, ip, present, since, timeout, what, of=None):
        """Until `ip` was added (present) or removed since `since`, as `of` (this watcher's
        addresses, or another tracker of `present`/`added`/`removed`) saw it; returns when."""
        of = of or self
        if present:
            self.wait(lambda: ip in of.present and of.added.get(ip, 0) >= since, timeout, what)
            return of.added[ip]
        self.wait(lambda: ip not in of.present and of.removed.get(ip, 0) >= since, timeout, what)
        return of.removed[ip]

    def wait(self, pred, timeout, what):
        deadline = time.time() + timeout
        while not pred():
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
            self.pump(min(left, 0.5))

    def reply(self, req_id, timeout=60, what="transact"):
        self.wait(lambda: req_id in self.sb.replies, timeout, f"{what} reply")
        t, msg = self.sb.replies.pop(req_id)
        check_result(msg, what)
        return t, msg

    def transact(self, ops, timeout=300, what="transact"):
        return self.reply(self.sb.transact_async(ops), timeout, what)[1]["result"]


# --------------------------------------------------------------------------------------------
# The agent process


class Agent:
    def __init__(self, binary, conf, lab_dir, log_path):
        self.binary, self.conf, self.lab_dir, self.log_path = binary, conf, lab_dir, log_path
        self.proc = None
        self.log_pos = 0
        self.starts = 0

    def start(self):
        # Each start logs afresh; the previous agent's log is kept as <log>.<n> (an outlier of
        # one phase must still be explainable after the next phase restarted the agent).
        if os.path.exists(self.log_path) and os.path.getsize(self.log_path):
            self.starts += 1
            os.replace(self.log_path, f"{self.log_path}.{self.starts}")
        open(self.log_path, "w").close()
        self.log_pos = 0
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "ovn_bgp_agent=debug,info")
        t0 = time.time()
        self.proc = subprocess.Popen(
            [self.binary, "--config-file", self.conf, "--log-file", self.log_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log_path + ".stderr", "w"),
            env=env,
        )
        # down.sh stops it with the lab if this script dies (its command line names LAB_DIR).
        with open(os.path.join(self.lab_dir, "agent.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        return t0

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def cpu_seconds(self):
        """utime+stime of the agent and of its waited-for children (ovs-vsctl, vtysh, ...), and
        the agent's utime alone (its own work; its stime is mostly the kernel applying its
        netlink requests)."""
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        own = (int(fields[11]) + int(fields[12])) / tick
        children = (int(fields[13]) + int(fields[14])) / tick
        return own, children, int(fields[11]) / tick

    def memory(self):
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) / 1024.0  # MiB
        return out

    def new_log_lines(self):
        with open(self.log_path) as f:
            f.seek(self.log_pos)
            data = f.read()
            # keep a partial last line for the next read
            cut = data.rfind("\n") + 1
            self.log_pos += len(data[:cut].encode())
        return data[:cut].splitlines()


LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+(\w+)\s+(\S+): (.*)$")


def parse_log_line(line):
    m = LOG_TS.match(line)
    if not m:
        return None
    ts = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
    return ts.timestamp(), m.group(2), m.group(3), m.group(4)


# --------------------------------------------------------------------------------------------
# Topology


def uuid_ref(u):
    return ["uuid", u]


def set_of(values):
    return ["set", values]


def omap(d):
    return ["map", [[k, v] for k, v in d.items()]]


def measured_ip(i):
    # 198.18.0.0/15: benchmarking range (RFC 2544); never routed anywhere else.
    return f"198.18.{i // 250}.{i % 250 + 1}"


def busy_fip(i):
    # 198.19.0.0/16, the other half of the benchmarking range; 198.19.255.x are the gateways.
    return f"198.19.{i // 250}.{i % 250 + 1}"


def fip_event_ip(i):
    # The FIPs added by the FIP events: 198.18.128.0/17 (the measured ports are at its start).
    return f"198.18.{128 + i // 250}.{i % 250 + 1}"


def bulk_ip(i):
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def mac_of(prefix, i):
    return f"fa:16:{prefix:02x}:{(i >> 16) & 255:02x}:{(i >> 8) & 255:02x}:{i & 255:02x}"


class Lab:
    def __init__(self, env, nb_path, sb_watch, evpn=False, measured=0):
        self.env = env
        self.evpn = evpn
        # --evpn: the measured ports are tenant VMs made with busy router 0.
        self.measured = measured
        self.env_dir = os.path.dirname(env["AGENT_CONF"])
        self.nb_path = nb_path
        self.w = sb_watch
        self.chassis_uuid = None
        self.remote_uuid = None
        self.ports = []  # measured ports: (name, ip, SB uuid)
        self.bulk = 0
        self.busy_routers = 0
        self.busy_ips = []  # every address the busy routers expose here (FIPs, tenant VMs)
        self.busy_provider = None  # the JSON reference to the busy provider datapath
        self.fips_per_router = BUSY_FIPS_PER_ROUTER
        # Router 0's provider patch port: its SB uuid, and the parts of its `nat_addresses`
        # entry (MAC and gateway IP, FIPs, residence clause), for the FIP events.
        self.fip_router = None

    def nb_transact(self, ops, what):
        return transact_once(self.nb_path, "OVN_Northbound", ops, what)

    def select(self, table, where, columns):
        return self.w.transact(
            [{"op": "select", "table": table, "where": where, "columns": columns}],
            what=f"select {table}",
        )[0]["rows"]

    def create_measured_ports(self, count):
        """NB: provider switch with a localnet port + `count` VM ports; northd makes the PBs."""
        existing = self.select("Port_Binding", [], ["logical_port"])
        names = [f"bench-local-{i}" for i in range(count)]
        have = {r["logical_port"] for r in existing}
        if not all(n in have for n in names):
            ops = []
            refs = []
            for i, name in enumerate(names):
                nid = f"p{i}"
                refs.append(["named-uuid", nid])
                ops.append({
                    "op": "insert", "table": "Logical_Switch_Port", "uuid-name": nid,
                    "row": {
                        "name": name,
                        "addresses": f"{mac_of(0xb0, i)} {measured_ip(i)}",
                        "external_ids": omap({
                            "neutron:cidrs": f"{measured_ip(i)}/15",
                            "neutron:device_owner": "compute:nova",
                            "neutron:host_id": self.env["CHASSIS_HOSTNAME"],
                        }),
                    },
                })
            ops.append({
                "op": "insert", "table": "Logical_Switch_Port", "uuid-name": "ln",
                "row": {"name": "provnet-bench", "type": "localnet", "addresses": "unknown",
                        "options": omap({"network_name": "public"})},
            })
            refs.append(["named-uuid", "ln"])
            ops.append({
                "op": "insert", "table": "Logical_Switch",
                "row": {"name": PROVIDER_LS, "ports": set_of(refs),
                        "external_ids": omap({"neutron:network_name": "bench"})},
            })
            self.nb_transact(ops, "create measured ports")
        log(f"waiting for northd to create {count} Port_Binding rows")
        deadline = time.time() + 120
        while True:
            rows = self.select("Port_Binding", [], ["logical_port", "_uuid"])
            by_name = {r["logical_port"]: r["_uuid"][1] for r in rows}
            if all(n in by_name for n in names):
                break
            if time.time() > deadline:
                raise TimeoutError("northd did not create the measured Port_Bindings")
            time.sleep(0.2)
        self.ports = [(n, measured_ip(i), by_name[n]) for i, n in enumerate(names)]

    def find_chassis(self):
        rows = self.select("Chassis", [["name", "==", self.env["CHASSIS_NAME"]]], ["_uuid"])
        if len(rows) != 1:
            raise RuntimeError(f"Chassis {self.env['CHASSIS_NAME']} not found in SB")
        self.chassis_uuid = rows[0]["_uuid"][1]

    def ensure_remote_chassis(self):
        rows = self.select("Chassis", [["name", "==", REMOTE_CHASSIS]], ["_uuid"])
        if rows:
            self.remote_uuid = rows[0]["_uuid"][1]
            return
        res = self.w.transact([
            {"op": "insert", "table": "Encap", "uuid-name": "e",
             "row": {"type": "geneve", "ip": "192.0.2.99", "chassis_name": REMOTE_CHASSIS,
                     "options": omap({"csum": "true"})}},
            {"op": "insert", "table": "Chassis",
             "row": {"name": REMOTE_CHASSIS, "hostname": "bench-remote.example",
                     "encaps": ["named-uuid", "e"]}},
        ], what="insert remote chassis")
        self.remote_uuid = res[1]["uuid"][1]

    def add_bulk(self, target):
        """Bulk VIF ports bound to the remote chassis, 1000 per provider datapath."""
        chunk = 5000
        t0 = time.time()
        while self.bulk < target:
            ops = []
            n = min(chunk, target - self.bulk)
            dp = None  # the JSON reference to the current bulk datapath
            for j in range(n):
                i = self.bulk + j
                dpi, key = divmod(i, BULK_PER_DATAPATH)
                if key == 0:
                    dp_name = f"bench-bulk-{dpi}"
                    dp = ["named-uuid", f"dp{dpi}"]
                    ops.append({"op": "insert", "table": "Datapath_Binding", "uuid-name": dp[1],
                                "row": {"tunnel_key": BULK_TUNNEL_KEY_BASE + dpi,
                                        "external_ids": omap({"name": dp_name})}})
                    ops.append({"op": "insert", "table": "Port_Binding",
                                "row": {"logical_port": f"provnet-{dp_name}", "type": "localnet",
                                        "mac": set_of(["unknown"]), "tunnel_key": 1,
                                        "datapath": dp,
                                        "options": omap({"network_name": "public"})}})
                elif dp is None:  # this chunk continues a datapath of the previous one
                    rows = self.select("Datapath_Binding",
                                       [["tunnel_key", "==", BULK_TUNNEL_KEY_BASE + dpi]],
                                       ["_uuid"])
                    dp = uuid_ref(rows[0]["_uuid"][1])
                ops.append({"op": "insert", "table": "Port_Binding", "row": {
                    "logical_port": f"bench-bulk-port-{i:06d}",
                    "type": "",
                    "mac": set_of([f"{mac_of(0xb1, i)} {bulk_ip(i)}"]),
                    "tunnel_key": key + 2,
                    "datapath": dp,
                    "chassis": uuid_ref(self.remote_uuid),
                    "up": True,
                    "external_ids": omap({
                        "neutron:cidrs": f"{bulk_ip(i)}/8",
                        "neutron:device_id": f"bench-vm-{i:06d}",
                        "neutron:device_owner": "compute:nova",
                        "neutron:host_id": "bench-remote.example",
                        "neutron:network_name": f"neutron-bench-bulk-{dpi}",
                        "neutron:port_name": "",
                        "neutron:project_id": "0123456789abcdef0123456789abcdef",
                        "neutron:revision_number": "2",
                    }),
                    "options": omap({"requested-chassis": "bench-remote.example"}),
                }})
            self.w.transact(ops, what=f"insert bulk ports {self.bulk}..{self.bulk + n}")
            self.bulk += n
        log(f"bulk ports now {self.bulk} (+{time.time() - t0:.1f} s)")

    def add_busy(self, target):
        """Routers with a gateway bound here until this chassis exposes `target` more addresses.

        Shapes as northd writes them for a Neutron router (see the gateway_tenant_fips replay
        fixture): provider patch port `<id>` whose `nat_addresses` lists the gateway's centralized
        FIPs resident on `cr-lrp-<id>`, router-side `lrp-<id>` and the chassisredirect
        `cr-lrp-<id>` (bound to this chassis) on the router's datapath, and a tenant subnet
        datapath joined to the router by a patch pair, holding the VMs.
        """
        t0 = time.time()
        if self.busy_provider is None:
            key = BUSY_TUNNEL_KEY_BASE
            rows = self.select("Datapath_Binding", [["tunnel_key", "==", key]], ["_uuid"])
            if rows:
                raise RuntimeError("the SB already holds busy routers (re-run on a fresh lab)")
            res = self.w.transact([
                {"op": "insert", "table": "Datapath_Binding", "uuid-name": "pdp",
                 "row": {"tunnel_key": key, "external_ids": omap({"name": BUSY_PROVIDER})}},
                {"op": "insert", "table": "Port_Binding",
                 "row": {"logical_port": f"provnet-{BUSY_PROVIDER}", "type": "localnet",
                         "mac": set_of(["unknown"]), "tunnel_key": 1,
                         "datapath": ["named-uuid", "pdp"],
                         "options": omap({"network_name": "public"})}},
            ], what="insert the busy provider network")
            self.busy_provider = uuid_ref(res[0]["uuid"][1])
        # EVPN exposes a router's tenant VMs, not its FIPs.
        per_router = BUSY_VMS_PER_ROUTER if self.evpn else \
            self.fips_per_router + BUSY_VMS_PER_ROUTER
        while self.busy_routers * per_router < target:
            k = self.busy_routers
            if k >= BUSY_MAX_ROUTERS:
                raise ValueError(f"--busy: at most {BUSY_MAX_ROUTERS * per_router}")
            ops, measured = self.busy_router_ops(k)
            res = self.w.transact(ops, what=f"insert busy router {k}")
            self.ports += [(name, ip, res[i]["uuid"][1]) for i, name, ip in measured]
            if self.fip_router is not None and self.fip_router["uuid"] is None:
                self.fip_router["uuid"] = res[self.fip_router["op"]]["uuid"][1]
            self.busy_routers += 1
        log(f"busy exposures now {len(self.busy_ips)} on {self.busy_routers} routers "
            f"(+{time.time() - t0:.1f} s)")

    def busy_router_ops(self, k):
        gw = f"bench-gw-{k:03d}"
        sub = f"bench-subnet-{k:03d}"
        gw_mac, sub_mac = mac_of(0xb2, k), mac_of(0xb3, k)
        gw_ip = f"198.19.255.{k + 1}"
        per = self.fips_per_router
        fips = [busy_fip(k * per + j) for j in range(per)]
        vms = [f"10.200.{4 * k + j // 250}.{j % 250 + 1}" for j in range(BUSY_VMS_PER_ROUTER)]
        router_dp, subnet_dp = ["named-uuid", "rdp"], ["named-uuid", "sdp"]
        base = BUSY_TUNNEL_KEY_BASE + 1 + 2 * k

        def pb(name, dp, key, row):
            return {"op": "insert", "table": "Port_Binding",
                    "row": {"logical_port": name, "datapath": dp, "tunnel_key": key, **row}}

        # --evpn: networking-bgpvpn's keys on the gateway's and the subnet's patch ports.
        vpn = {"external_ids": omap({"neutron_bgpvpn:vni": str(EVPN_VNI_BASE + k),
                                     "neutron_bgpvpn:as": str(EVPN_AS)})} if self.evpn else {}

        head, tail = f"{gw_mac} {gw_ip}", f"is_chassis_resident(\"cr-lrp-{gw}\")"
        if k == 0 and not self.evpn:
            self.fip_router = {"uuid": None, "op": 2, "head": head, "fips": fips, "tail": tail}
        ops = [
            {"op": "insert", "table": "Datapath_Binding", "uuid-name": "rdp",
             "row": {"tunnel_key": base, "external_ids": omap({"name": f"router-{gw}"})}},
            {"op": "insert", "table": "Datapath_Binding", "uuid-name": "sdp",
             "row": {"tunnel_key": base + 1, "external_ids": omap({"name": sub})}},
            pb(gw, self.busy_provider, 2 + k, {
                **vpn,
                "type": "patch", "mac": set_of(["router"]),
                "options": omap({"peer": f"lrp-{gw}"}),
                "nat_addresses": set_of([f"{head} {' '.join(fips)} {tail}"]),
            }),
            pb(f"lrp-{gw}", router_dp, 1, {
                "type": "patch", "mac": set_of([f"{gw_mac} {gw_ip}/16"]),
                "options": omap({"peer": gw, "chassis-redirect-port": f"cr-lrp-{gw}"}),
            }),
            pb(f"cr-lrp-{gw}", router_dp, 2, {
                "type": "chassisredirect", "mac": set_of([f"{gw_mac} {gw_ip}/16"]),
                "chassis": uuid_ref(self.chassis_uuid), "up": True,
                "options": omap({"distributed-port": f"lrp-{gw}"}),
            }),
            pb(f"lrp-{sub}", router_dp, 3, {
                "type": "patch", "mac": set_of([f"{sub_mac} 10.200.{4 * k + 3}.254/22"]),
                "options": omap({"peer": sub}),
            }),
            pb(sub, subnet_dp, 1, {
                **vpn,
                "type": "patch", "mac": set_of(["router"]),
                "options": omap({"peer": f"lrp-{sub}"}),
            }),
        ]
        for j, ip in enumerate(vms):
            ops.append(pb(f"{sub}-vm-{j:03d}", subnet_dp, 2 + j, {
                "type": "", "mac": set_of([f"{mac_of(0xb4, k * 1000 + j)} {ip}"]),
                "chassis": uuid_ref(self.remote_uuid), "up": True,
                "external_ids": omap({"neutron:cidrs": f"{ip}/22",
                                      "neutron:device_owner": "compute:nova",
                                      "neutron:host_id": "bench-remote.example"}),
            }))
        measured = []
        if self.evpn and k == 0:
            # The measured tenant VMs, unbound: 10.200.2.1 onwards, in router 0's /22.
            for j in range(self.measured):
                name, ip = f"{sub}-measured-{j:03d}", f"10.200.{2 + j // 250}.{j % 250 + 1}"
                measured.append((len(ops), name, ip))
                ops.append(pb(name, subnet_dp, 2 + BUSY_VMS_PER_ROUTER + j, {
                    "type": "", "mac": set_of([f"{mac_of(0xb5, j)} {ip}"]),
                    "external_ids": omap({"neutron:cidrs": f"{ip}/22",
                                          "neutron:device_owner": "compute:nova"}),
                }))
        self.busy_ips += vms if self.evpn else fips + vms
        return ops, measured

    def fip_router_op(self, extra=None):
        """Router 0's `nat_addresses` entry written whole, with `extra` put in the middle of
        its FIPs."""
        r = self.fip_router
        fips = list(r["fips"])
        if extra:
            fips.insert(len(fips) // 2, extra)
        return {"op": "update", "table": "Port_Binding",
                "where": [["_uuid", "==", uuid_ref(r["uuid"])]],
                "row": {"nat_addresses": set_of([f"{r['head']} {' '.join(fips)} {r['tail']}"])}}

    def bind_op(self, uuid, bound):
        row = ({"chassis": uuid_ref(self.chassis_uuid), "up": True} if bound
               else {"chassis": set_of([]), "up": False})
        return {"op": "update", "table": "Port_Binding", "where": [["_uuid", "==", uuid_ref(uuid)]],
                "row": row}


# --------------------------------------------------------------------------------------------
# Measurements


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values_s):
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p90_ms": round(pct(ms, 90), 2),
        "p99_ms": round(pct(ms, 99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def clean_agent_kernel_state(netns):
    """Remove what the agent created in the chassis netns, so a start is a cold start."""
    def ip(*args, check=False):
        return subprocess.run(["ip", "-n", netns, *args], capture_output=True, text=True,
                              check=check)
    for dev in ("bgp-nic", "bgp-vrf"):
        ip("link", "del", dev)
    tables = set()
    for fam in ("-4", "-6"):
        rules = json.loads(ip("-j", fam, "rule", "show", check=True).stdout or "[]")
        for r in rules:
            table = r.get("table")
            if table in ("local", "main", "default") or r.get("priority") in (0, 32766, 32767):
                continue
            tables.add(str(table))
            spec = ["priority", str(r["priority"])]
            if "dst" in r:
                dst = r["dst"] + (f"/{r['dstlen']}" if "dstlen" in r else "")
                spec += ["to", dst]
            ip(fam, "rule", "del", *spec, "table", str(table))
        for t in tables:
            ip(fam, "route", "flush", "table", t)
    return tables


EVPN_DEVICE = re.compile(r"^((vrf|br|vxlan|lo)-\d+|veth-(vrf|ovs)-\d+)$")


def clean_evpn_kernel_state(netns):
    """--evpn: remove the EVPN devices and VNI tables the agent made (its tenant addresses go with
    `lo-<vni>`), so a start is a cold start."""
    links = json.loads(subprocess.run(["ip", "-n", netns, "-j", "link", "show"], check=True,
                                      capture_output=True, text=True).stdout or "[]")
    gone = []
    for link in links:
        if EVPN_DEVICE.match(link["ifname"]):
            subprocess.run(["ip", "-n", netns, "link", "del", link["ifname"]],
                           capture_output=True)
            gone.append(link["ifname"])
    for t in range(EVPN_VNI_BASE, EVPN_VNI_BASE + BUSY_MAX_ROUTERS):
        for fam in ("-4", "-6"):
            subprocess.run(["ip", "-n", netns, fam, "route", "flush", "table", str(t)],
                           capture_output=True)
    return gone


def wait_idle(agent, w, quiet=0.3, timeout=30):
    """Until the agent logged nothing for `quiet` s (its reconcile and side work finished)."""
    deadline = time.time() + timeout
    last = time.time()
    while time.time() < deadline:
        if agent.new_log_lines():
            last = time.time()
        elif time.time() - last >= quiet:
            return
        w.pump(0.05)


def lab_cpu(lab_dir):
    """utime+stime (s) of the lab's daemons (those whose command line names `lab_dir`), by
    program, the FRR ones by instance (`zebra (chassis)`, `bgpd (tor)`): what an event costs
    the rest of the machine (ovs-vswitchd follows the chassis' addresses and routes, zebra and
    bgpd announce them, the ToR learns them)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline").read().split("\0")
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        if not any(lab_dir in a for a in cmdline):
            continue
        name = os.path.basename(cmdline[0]) or stat.split("(", 1)[1].split(")", 1)[0]
        if name in ("python3", "ovn-bgp-agent", "bash", "sh", "sleep"):
            continue
        for inst in ("chassis", "tor"):
            if any(f"/frr/{inst}" in a for a in cmdline):
                name = f"{name} ({inst})"
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def wait_lab_quiet(lab_dir, w, timeout, limit=0.05, window=2.0):
    """Until every lab daemon uses under `limit` of a CPU over `window` s (at most `timeout`
    s): after a cold start of thousands of addresses, ovs-vswitchd digests their notifications
    for minutes at 100 % of a core, and events measured meanwhile are measured on a machine
    with one core less. Returns the seconds waited and each daemon's CPU seconds meanwhile."""
    t0, start = time.time(), lab_cpu(lab_dir)
    while time.time() - t0 < timeout:
        a, ta = lab_cpu(lab_dir), time.time()
        while time.time() - ta < window:
            w.pump(0.05)
        b, dt = lab_cpu(lab_dir), time.time() - ta
        if max(((b.get(k, 0.0) - v) / dt for k, v in a.items()), default=0.0) < limit:
            break
    end = lab_cpu(lab_dir)
    spent = {k: round(end.get(k, 0.0) - v, 2) for k, v in start.items()
             if end.get(k, 0.0) - v >= 0.05}
    return round(time.time() - t0, 1), dict(sorted(spent.items(), key=lambda kv: -kv[1]))


@contextlib.contextmanager
def vswitchd_stopped(lab_dir, enabled):
    """With `enabled`, the lab's ovs-vswitchd stopped (SIGSTOP) inside, continued after: the single
    events measured as beside an OVS that does no work on the agent's addresses and routes. OVS 3.5
    with bgp-nic in a VRF does none (`vswitchd_address_cost.sh` in the VM tier); the lab's OVS 3.1,
    its stand-in bgp-nic in no VRF, re-reads every route and address of the namespace per change
    and fills a core at 30k exposures. The events need ovs-vswitchd only for the first VM of a
    provider network (its flows), and the bench's networks have theirs from the cold start."""
    if not enabled:
        yield
        return
    pid = int(open(os.path.join(lab_dir, "ovs", "ovs-vswitchd.pid")).read().strip())
    os.kill(pid, signal.SIGSTOP)
    log(f"ovs-vswitchd (pid {pid}) stopped for the single events")
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
        log("ovs-vswitchd continued")


def bind_and_unbind(res, args, lab, w, agent, events, one_by_one):
    """The single-event phases of the SB and NB benches: `events` bound one by one, then unbound
    (`one_by_one(events, bound)` measures each), into `res["bind"]` / `res["unbind"]`, with the
    agent's and the lab's CPU per bind event; ovs-vswitchd stopped meanwhile with
    `--stop-vswitchd`."""
    res["vswitchd_stopped_for_events"] = bool(args.stop_vswitchd)
    with vswitchd_stopped(args.lab_dir, args.stop_vswitchd):
        lab_window = LabCpuWindow(res, args.lab_dir, w)
        cpu0 = agent.cpu_seconds()
        t_cpu0 = time.time()
        rec0 = metric_reconciles(lab.env)
        bind = res["bind"] = one_by_one(events, True)
        cpu1 = agent.cpu_seconds()
        n = len(events)
        bind["lab_cpu_ms_per_event"] = lab_window.per_event(n)
        bind["reconciles_by_trigger"] = reconcile_delta(rec0, metric_reconciles(lab.env))
        bind["agent_cpu_ms_per_event"] = round((cpu1[0] - cpu0[0]) * 1000 / n, 2)
        bind["children_cpu_ms_per_event"] = round((cpu1[1] - cpu0[1]) * 1000 / n, 2)
        bind["agent_user_cpu_ms_per_event"] = round((cpu1[2] - cpu0[2]) * 1000 / n, 2)
        bind["wall_s"] = round(time.time() - t_cpu0, 1)
        log(f"bind: {bind['from_send']}")
        res["unbind"] = one_by_one(events, False)
        log(f"unbind: {res['unbind']['from_send']}")


def add_event_args(ap):
    """The SB and NB benches' options for the cold starts and the single events."""
    ap.add_argument("--cold-start-ports", type=int, default=100, help="K")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--cold-starts", type=int, default=3, help="cold starts per N")
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--lab-quiet-timeout", type=float, default=600.0,
                    help="after a cold start, wait (at most this long) until the lab's daemons "
                         "are quiet before measuring events; 0: measure at once")
    ap.add_argument("--stop-vswitchd", action="store_true",
                    help="stop the lab's ovs-vswitchd (SIGSTOP) for the single bind/unbind "
                         "events: the agent's figures beside an OVS that does no work on its "
                         "addresses (OVS 3.5, bgp-nic in a VRF), which this lab cannot have")


def record_lab_quiet(res, args, w):
    """After a cold start: `wait_lab_quiet` (unless --lab-quiet-timeout is 0), recorded in
    `res` and logged."""
    if args.lab_quiet_timeout > 0:
        waited, spent = wait_lab_quiet(args.lab_dir, w, args.lab_quiet_timeout)
        res["lab_quiet_after_cold_start_s"] = waited
        res["lab_cpu_until_quiet_s"] = spent
        log(f"lab daemons quiet {waited} s after the tools (CPU s meanwhile: {spent})")


class LabCpuWindow:
    """The lab daemons' CPU over a measured phase beyond their idle pace (measured first, and
    recorded in `res`): `per_event(n)` at the end of the phase."""

    def __init__(self, res, lab_dir, w):
        self.lab_dir = lab_dir
        self.idle_rate = lab_idle_rate(lab_dir, w)
        res["lab_idle_cpu_ms_per_s"] = {k: round(v * 1000, 1) for k, v in self.idle_rate.items()}
        self.start, self.t0 = lab_cpu(lab_dir), time.time()

    def per_event(self, events):
        return lab_cpu_per_event(self.start, lab_cpu(self.lab_dir), events, self.idle_rate,
                                 time.time() - self.t0)


def lab_idle_rate(lab_dir, w, seconds=3.0):
    """CPU seconds per second of each lab daemon with nothing happening (the agent idle, no
    event): ovs-vswitchd with the userspace datapath polls its ports, and the others have
    timers. Subtracted from their CPU in a measured window, so what is left is the events'."""
    before, t0 = lab_cpu(lab_dir), time.time()
    while time.time() - t0 < seconds:
        w.pump(0.05)
    after, took = lab_cpu(lab_dir), time.time() - t0
    return {k: (after.get(k, 0.0) - v) / took for k, v in before.items()}


def lab_cpu_per_event(before, after, events, idle_rate, seconds):
    """ms of CPU per event of each lab daemon between two `lab_cpu` readings `seconds` apart,
    beyond its idle pace, largest first."""
    per = {k: round((after.get(k, 0.0) - v - idle_rate.get(k, 0.0) * seconds) * 1000 / events, 2)
           for k, v in before.items()}
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def tool_runs(env):
    """How many tool runs (vtysh, ovs-vsctl, ovs-ofctl) the agent has finished, in all."""
    return sum(c for k, (c, _) in metric_reconciles(env).items() if k.startswith("tool:"))


TOOL_CHAINS_METRIC = re.compile(r'^\w*tool_chains_applying (\S+)$', re.M)


def tool_chains_applying(env):
    """The agent's tool chains (FRR, OVS) applying a state now (None: an agent without the
    gauge)."""
    text = urllib.request.urlopen(f"http://{env['AGENT_METRICS']}/metrics", timeout=5).read()
    m = TOOL_CHAINS_METRIC.search(text.decode())
    return float(m.group(1)) if m else None


def wait_tools_idle(w, env, quiet=2.0, timeout=180):
    """Until the tool chains the cold start left applying in the background (one vtysh per EVPN
    VRF, the flows) are done, and no tool run finished for `quiet` s: their processes must not
    be counted as the first events' cost. Returns when the last tool run was seen to finish
    (within the 0.25 s of a poll), or None on the timeout."""
    deadline = time.time() + timeout
    runs, last = tool_runs(env), time.time()
    while time.time() < deadline:
        w.pump(0.25)
        now = tool_runs(env)
        if now != runs:
            runs, last = now, time.time()
        elif time.time() - last >= quiet and not tool_chains_applying(env):
            log(f"tools idle ({int(runs)} runs since the agent started)")
            return last
    log(f"tools still running after {timeout} s; measuring anyway")
    return None


def settle(w):
    """BENCH_SETTLE more seconds after a cold start (to compare with an agent that does not
    report its tool chains, whose background work is otherwise taken for the events')."""
    end = time.time() + float(os.environ.get("BENCH_SETTLE", "0"))
    while time.time() < end:
        w.pump(0.25)


def wait_reconciled(agent, w, after, timeout=10):
    """Time (from the agent log) of the first `reconciled` line stamped after `after`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in agent.new_log_lines():
            p = parse_log_line(line)
            if p and p[2] == "ovn_bgp_agent::host" and p[3].startswith("reconciled") \
                    and p[0] >= after:
                return p[0]
        w.pump(0.02)
    return None


def measure(lab, w, agent, args, n_total):
    res = {"bulk_ports": lab.bulk, "sb_port_bindings": n_total,
           "busy_exposures": len(lab.busy_ips), "busy_routers": lab.busy_routers}
    k = args.cold_start_ports
    cold = lab.ports[:k]
    events = lab.ports[k:k + args.events]
    burst = lab.ports[k + args.events:k + args.events + args.burst]

    # ---- cold start (repeated; the first one is reported in the table) ------------------
    def cold_start():
        agent.stop()
        if lab.evpn:
            tables = clean_evpn_kernel_state(lab.env["NS_CHASSIS"])
        else:
            tables = clean_agent_kernel_state(lab.env["NS_CHASSIS"])
        w.dump_addresses()
        want = {ip for _, ip, _ in cold} | set(lab.busy_ips)
        if want & w.present:
            raise RuntimeError("cold-start addresses still present after removing bgp-nic: "
                               f"{sorted(want & w.present)[:5]}")
        t0 = agent.start()
        w.wait(lambda: want <= w.present or not agent.alive(), args.timeout, "cold start exposure")
        if not agent.alive():
            raise RuntimeError(f"agent exited; see {agent.log_path}")
        t_all = max(w.added[ip] for ip in want)
        t_first = min(w.added[ip] for ip in want)
        rec = wait_reconciled(agent, w, t0, timeout=args.timeout)
        # Phases from the agent log: when each OVSDB monitor was established, replica ready.
        phases = []
        replica_ports = None
        for line in open(agent.log_path):
            p = parse_log_line(line)
            if p and "replica ready" in p[3]:
                m = re.search(r"ports=(\d+)", p[3])
                replica_ports = int(m.group(1)) if m else None
            if p and ("monitor established" in p[3] or "replica ready" in p[3]
                      or "monitor condition" in p[3]):
                what = "replica ready" if "replica ready" in p[3] else (
                    "condition change" if "monitor condition" in p[3] else
                    "monitor established " + ("SB" if "ovnsb" in p[3] else "OVS"))
                phases.append((what, round((p[0] - t0) * 1000, 1)))
        ready = next((t for what, t in phases if what == "replica ready"), None)
        return {
            "t0": t0,
            "local_ports": k,
            "busy_exposures": len(lab.busy_ips),
            "exec_to_all_addresses_ms": round((t_all - t0) * 1000, 1),
            "exec_to_first_address_ms": round((t_first - t0) * 1000, 1),
            "exec_to_sb_replica_ready_ms": ready,
            "exec_to_first_reconcile_done_ms": round((rec - t0) * 1000, 1) if rec else None,
            "log_phases_ms": phases,
            "replica_port_bindings": replica_ports,
            "tables_cleaned": sorted(tables),
        }

    starts = [cold_start() for _ in range(max(1, args.cold_starts))]
    t0_last = starts[-1]["t0"]
    for c in starts:
        del c["t0"]
    res["cold_start"] = starts[0]
    res["cold_start_repeats_ms"] = [c["exec_to_all_addresses_ms"] for c in starts]
    log(f"cold start: {res['cold_start']}; repeats {res['cold_start_repeats_ms']}")
    t_idle = wait_tools_idle(w, lab.env)
    # The last cold start's background tool work (FRR, flows) done: for EVPN, FRR has every VRF.
    res["cold_start_exec_to_tools_idle_ms"] = (
        round((t_idle - t0_last) * 1000) if t_idle else None)
    # Tool runs since the agent started, and their total seconds (vtysh: FRR's share).
    res["cold_start_tools"] = {k[len("tool:"):]: [int(c), round(t, 3)]
                               for k, (c, t) in metric_reconciles(lab.env).items()
                               if k.startswith("tool:")}
    log(f"cold start: tools idle {res['cold_start_exec_to_tools_idle_ms']} ms after exec; "
        f"tool runs [count, s]: {res['cold_start_tools']}")
    settle(w)
    wait_idle(agent, w, quiet=1.0)
    res["quiet_between_events"] = bool(args.quiet_between)
    record_lab_quiet(res, args, w)
    res["rss_after_start"] = agent.memory()

    # ---- single bind / unbind events ------------------------------------------------------
    def one_by_one(ports, bound):
        lat, lat_reply, tail, rtt = [], [], [], []
        for _name, ip, uuid in ports:
            wait_idle(agent, w, quiet=args.gap)
            if args.quiet_between:
                # The lab's daemons done with the last event too (ovs-vswitchd spends tens of
                # ms of CPU on each address): the event is measured on an otherwise idle machine.
                wait_lab_quiet(args.lab_dir, w, 10.0, limit=0.05, window=0.5)
            t_send = time.time()
            rid = w.sb.transact_async([lab.bind_op(uuid, bound)])
            t_ev = w.wait_ip(ip, bound, t_send, args.timeout,
                             f"address {ip}" if bound else f"removal of {ip}")
            t_reply, _ = w.reply(rid)
            t_rec = wait_reconciled(agent, w, t_send)
            lat.append(t_ev - t_send)
            lat_reply.append(t_ev - t_reply)
            rtt.append(t_reply - t_send)
            if t_rec:
                tail.append(max(0.0, t_rec - t_ev))
        return {
            "from_send": summary(lat),
            "from_reply": summary(lat_reply),
            "transact_rtt": summary(rtt),
            "address_to_reconcile_logged": summary(tail) if tail else None,
        }

    bind_and_unbind(res, args, lab, w, agent, events, one_by_one)

    # ---- a FIP added to router 0 and taken out again -----------------------------------------
    if lab.fip_router and args.fip_events > 0:
        add, remove, rtt = [], [], []
        cpu0 = agent.cpu_seconds()
        rec0 = metric_reconciles(lab.env)
        for i in range(args.fip_events):
            ip = fip_event_ip(i)
            for extra, lat in ((ip, add), (None, remove)):
                wait_idle(agent, w, quiet=args.gap)
                t_send = time.time()
                rid = w.sb.transact_async([lab.fip_router_op(extra)])
                t_ev = w.wait_ip(ip, bool(extra), t_send, args.timeout,
                                 f"FIP {ip}" if extra else f"removal of FIP {ip}")
                lat.append(t_ev - t_send)
                rtt.append(w.reply(rid)[0] - t_send)
        cpu1 = agent.cpu_seconds()
        n = 2 * args.fip_events
        res["fip_event"] = {
            "fips_of_the_router": len(lab.fip_router["fips"]),
            "add": summary(add),
            "remove": summary(remove),
            "transact_rtt": summary(rtt),
            "reconciles_by_trigger": reconcile_delta(rec0, metric_reconciles(lab.env)),
            "agent_cpu_ms_per_event": round((cpu1[0] - cpu0[0]) * 1000 / n, 2),
            "agent_user_cpu_ms_per_event": round((cpu1[2] - cpu0[2]) * 1000 / n, 2),
        }
        log(f"FIP events: {res['fip_event']}")

    # ---- bursts -----------------------------------------------------------------------------
    def burst_run(ports, bound, single_txn):
        wait_idle(agent, w, quiet=0.5)
        ips = {ip for _, ip, _ in ports}
        t_send = time.time()
        if single_txn:
            rids = [w.sb.transact_async([lab.bind_op(u, bound) for _, _, u in ports])]
        else:
            rids = [w.sb.transact_async([lab.bind_op(u, bound)]) for _, _, u in ports]
        t_sent = time.time()
        if bound:
            w.wait(lambda: all(w.added.get(ip, 0) >= t_send for ip in ips), args.timeout, "burst")
            ts = [w.added[ip] for ip in ips]
        else:
            w.wait(lambda: all(w.removed.get(ip, 0) >= t_send for ip in ips), args.timeout,
                   "burst removal")
            ts = [w.removed[ip] for ip in ips]
        t_replies = [w.reply(r)[0] for r in rids]
        reconciles = 0
        time.sleep(0.3)
        for line in agent.new_log_lines():
            p = parse_log_line(line)
            if p and p[2] == "ovn_bgp_agent::host" and p[3].startswith("reconciled") \
                    and p[0] >= t_send:
                reconciles += 1
        return {
            "ports": len(ports),
            "send_to_last_address_ms": round((max(ts) - t_send) * 1000, 1),
            "first_to_last_address_ms": round((max(ts) - min(ts)) * 1000, 1),
            "send_to_first_address_ms": round((min(ts) - t_send) * 1000, 1),
            "sending_ms": round((t_sent - t_send) * 1000, 1),
            "last_reply_ms": round((max(t_replies) - t_send) * 1000, 1),
            "reconciles_logged": reconciles,
        }

    res["burst_pipelined"] = burst_run(burst, True, False)
    res["burst_pipelined_unbind"] = burst_run(burst, False, False)
    res["burst_one_txn"] = burst_run(burst, True, True)
    res["burst_one_txn_unbind"] = burst_run(burst, False, True)
    log(f"burst: {res['burst_pipelined']} / one txn: {res['burst_one_txn']}")
    wait_idle(agent, w, quiet=0.5)
    res["rss_end"] = agent.memory()
    log(f"RSS: {res['rss_end']}")
    if args.full_reconciles > 0:
        res["full_reconcile"] = full_reconciles(lab, w, agent, args, cold)
        log(f"full reconcile: {res['full_reconcile']}")
    res["netlink_overruns"] = w.overruns
    return res


RECONCILE_METRIC = re.compile(
    r'^\w*reconcile_duration_seconds_(sum|count)\{[^}]*trigger="([^"]*)"[^}]*\} (\S+)$', re.M)
STAGE_METRIC = re.compile(
    r'^\w*reconcile_stage_duration_seconds_(sum|count)\{[^}]*stage="([^"]*)"[^}]*\} (\S+)$', re.M)
STAGES = ("compute", "policy", "render", "apply")
KERNEL_PLAN_METRIC = re.compile(r'^\w*kernel_reconciles_total\{[^}]*plan="([^"]*)"[^}]*\} (\S+)$', re.M)
# The tools the agent ran (vtysh, ovs-vsctl, ovs-ofctl): a process per event would show here.
TOOL_METRIC = re.compile(
    r'^\w*subprocess_duration_seconds_(sum|count)\{[^}]*tool="([^"]*)"[^}]*\} (\S+)$', re.M)


def metric_reconciles(env):
    """{trigger: [count, total seconds]} of the agent's reconcile-duration histogram, and
    {"stage:<stage>": [count, total seconds]} of its per-stage histogram."""
    url = f"http://{env['AGENT_METRICS']}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for kind, trigger, value in RECONCILE_METRIC.findall(text):
        out.setdefault(trigger, [0, 0.0])[0 if kind == "count" else 1] = float(value)
    for kind, stage, value in STAGE_METRIC.findall(text):
        out.setdefault(f"stage:{stage}", [0, 0.0])[0 if kind == "count" else 1] = float(value)
    # How the kernel part was planned (a delta, every class from the mirror, dumps): counts only.
    for plan, value in KERNEL_PLAN_METRIC.findall(text):
        out[f"kernel:{plan}"] = [float(value), 0.0]
    for kind, tool, value in TOOL_METRIC.findall(text):
        out.setdefault(f"tool:{tool}", [0, 0.0])[0 if kind == "count" else 1] = float(value)
    return out


def stage_means(r, window="bind"):
    """compute / policy / render / apply mean ms over the bind events' (or another
    measurement's) window (report row)."""
    by = r[window].get("reconciles_by_trigger", {})
    return " / ".join(str(by.get(f"stage:{s}", {}).get("mean_ms", "–")) for s in STAGES)


def metrics_or_empty(env):
    """metric_reconciles(), or {} while the agent's listener is not up yet."""
    try:
        return metric_reconciles(env)
    except OSError:  # URLError is one: connection refused until the listener binds
        return {}


def reconcile_delta(before, after):
    """{trigger: {count, mean_ms}} of the reconciles between two metric_reconciles()."""
    out = {}
    for trigger, (count, total) in after.items():
        c0, t0 = before.get(trigger, (0, 0.0))
        if count > c0:
            out[trigger] = {"count": int(count - c0),
                            "mean_ms": round((total - t0) * 1000 / (count - c0), 2)}
    return out


def full_reconciles(lab, w, agent, args, cold):
    """Durations of the periodic full reconcile (`reconcile_interval`, nothing to change).

    The agent is restarted with reconcile_interval = --full-interval, so its timer fires during
    the measurement; each duration is the metric's sum delta over its count delta (polled often
    enough to see them one by one)."""
    conf = agent.conf
    periodic = os.path.join(lab.env_dir, "bgp-agent-periodic.conf")
    text = open(conf).read()
    new, n = re.subn(r"(?m)^\[DEFAULT\]$",
                     f"[DEFAULT]\nreconcile_interval = {args.full_interval}", text)
    if n != 1:
        raise RuntimeError(f"{conf}: no [DEFAULT] section")
    with open(periodic, "w") as f:
        f.write(new)
    agent.stop()
    agent.conf = periodic
    try:
        agent.start()
        want = {ip for _, ip, _ in cold} | set(lab.busy_ips)
        w.wait(lambda: want <= w.present or not agent.alive(), args.timeout, "restart exposure")
        # The metrics listener comes up with the agent's first reconcile ("start").
        w.wait(lambda: "start" in metrics_or_empty(lab.env) or not agent.alive(), args.timeout,
               "the agent's first reconcile in its metrics")
        if not agent.alive():
            raise RuntimeError(f"agent exited; see {agent.log_path}")
        last = metric_reconciles(lab.env).get("reconcile_interval", [0, 0.0])
        durations = []
        deadline = time.time() + args.timeout
        while len(durations) < args.full_reconciles and time.time() < deadline:
            w.pump(0.05)
            cur = metric_reconciles(lab.env).get("reconcile_interval", [0, 0.0])
            if cur[0] > last[0]:
                durations.append((cur[1] - last[1]) / (cur[0] - last[0]))
                last = cur
        rss = agent.memory()
    finally:
        agent.stop()
        agent.conf = conf
    return {"interval_s": args.full_interval, "durations": summary(durations) if durations else None,
            "durations_ms": [round(d * 1000, 1) for d in durations], "rss": rss}


def evpn_conf(env, lab_dir):
    """The lab's agent configuration with the EVPN driver and the chassis address as VTEP."""
    text = open(env["AGENT_CONF"]).read()
    text, n = re.subn(r"(?m)^driver = .*$", "driver = ovn_evpn_driver", text)
    if n != 1:
        raise RuntimeError(f"{env['AGENT_CONF']}: no driver line")
    text = re.sub(r"(?m)^\[DEFAULT\]$",
                  f"[DEFAULT]\nevpn_local_ip = {env['CHASSIS_IP4']}", text, count=1)
    path = os.path.join(lab_dir, "bgp-agent-evpn-bench.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def machine_info():
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpus"] = os.cpu_count()
    info["kernel"] = os.uname().release
    info["loadavg"] = open("/proc/loadavg").read().split()[:3]
    # The lab's settings that change what the machine does beside the agent (scripts/lab/lib.sh).
    info["lab"] = {k: os.environ[k] for k in ("LAB_OVN", "LAB_VSWITCHD_SYSTEM_ROUTES")
                   if k in os.environ}
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lab-dir")
    ap.add_argument("--agent", help="the ovn-bgp-agent binary (release build)")
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="N: Port_Binding rows in the SB, comma separated, increasing")
    add_event_args(ap)
    ap.add_argument("--quiet-between", action="store_true",
                    help="before each single bind/unbind event, wait until the lab's daemons "
                         "are quiet (the events' latency on an otherwise idle machine)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after loading bulk ports")
    ap.add_argument("--gap", type=float, default=0.05,
                    help="agent log quiet time before each single event (s)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--busy", default="",
                    help="busy gateway: exposures on this chassis (FIPs + tenant VMs), comma "
                         "separated, increasing; the bulk is loaded once, to the last of --sizes")
    ap.add_argument("--fips-per-router", type=int, default=BUSY_FIPS_PER_ROUTER,
                    help="with --busy: centralized FIPs of each busy router (see above)")
    ap.add_argument("--fip-events", type=int, default=50,
                    help="with --busy: FIPs added to router 0 and taken out again (0: none)")
    ap.add_argument("--evpn", action="store_true",
                    help="with --busy: the EVPN driver on busy routers with a VNI each (see above)")
    ap.add_argument("--full-reconciles", type=int, default=5,
                    help="periodic full reconciles timed per run (0: skip)")
    ap.add_argument("--full-interval", type=int, default=2,
                    help="reconcile_interval (s) of the agent while timing full reconciles")
    ap.add_argument("--out", help="JSON results file")
    ap.add_argument("--report", nargs="+",
                    help="print the markdown table of existing JSON results files (their runs "
                         "side by side)")
    args = ap.parse_args()
    if args.report:
        print(markdown({"runs": [r for path in args.report for r in json.load(open(path))["runs"]]}))
        return

    env = read_env(args.lab_dir)
    ovn_dir = env["OVN_RUNDIR"]
    sb = Ovsdb(env["SB_SOCK"], "OVN_Southbound")
    nl = netlink_socket_in(env["NS_CHASSIS"])
    w = Watcher(sb, nl)
    measured = args.cold_start_ports + args.events + args.burst
    if args.evpn and not args.busy:
        ap.error("--evpn measures a busy gateway: give --busy")
    if args.evpn and measured > 500:
        ap.error("--evpn: at most 500 measured ports (cold start + events + burst)")
    lab = Lab(env, env["NB_SOCK"], w, evpn=args.evpn, measured=measured)
    lab.fips_per_router = args.fips_per_router
    conf = env["AGENT_CONF"]
    if args.evpn:
        conf = evpn_conf(env, args.lab_dir)
    agent = Agent(args.agent, conf, args.lab_dir,
                  os.path.join(args.lab_dir, "agent-bench.log"))
    results = {"machine_start": machine_info(), "params": vars(args), "runs": []}
    try:
        lab.find_chassis()
        if not args.evpn:
            lab.create_measured_ports(measured)
        # ovn-controller would release bindings to its chassis that have no OVS interface.
        pidfile = os.path.join(ovn_dir, "ovn-controller.pid")
        pid = int(open(pidfile).read()) if os.path.exists(pidfile) else None
        if pid and os.path.exists(f"/proc/{pid}/cmdline"):
            if open(f"/proc/{pid}/cmdline").read().find(args.lab_dir) >= 0:
                log(f"stopping ovn-controller (pid {pid}); its Chassis row and bindings stay")
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    if not os.path.exists(f"/proc/{pid}") or \
                            open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z":
                        break
                    time.sleep(0.05)
        subprocess.run(["ovn-appctl", "-t", os.path.join(ovn_dir, "ovn-northd.ctl"), "pause"],
                       check=True)
        log("ovn-northd paused")
        lab.find_chassis()  # still there after ovn-controller stopped
        lab.ensure_remote_chassis()
        if args.evpn:
            # The measured ports come with the first busy router.
            lab.add_busy(int(args.busy.split(",")[0]))
        # K local ports bound for the cold starts
        w.transact([lab.bind_op(u, True) for _, _, u in lab.ports[:args.cold_start_ports]],
                   what="bind the cold-start ports")
        base = len(lab.select("Port_Binding", [], ["_uuid"]))
        sizes = [int(s) for s in args.sizes.split(",")]
        # Without --busy: one run per N. With it: the bulk loaded once, one run per busy size.
        steps = [(size, 0) for size in sizes] if not args.busy else \
            [(sizes[-1], int(b)) for b in args.busy.split(",")]
        for size, busy in steps:
            lab.add_bulk(max(0, size - base))
            if busy:
                lab.add_busy(busy)
            # ovsdb-server may compact its file after a big load: let it settle.
            time.sleep(args.settle)
            total = len(lab.select("Port_Binding", [], ["_uuid"]))
            log(f"=== N = {total} Port_Binding rows in the SB ({lab.bulk} bulk on "
                f"{REMOTE_CHASSIS}, {measured} measured, {len(lab.busy_ips)} busy exposures "
                f"on {lab.busy_routers} routers here) ===")
            run = measure(lab, w, agent, args, total)
            run["loadavg"] = open("/proc/loadavg").read().split()[:3]
            results["runs"].append(run)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        agent.stop()
    results["machine_end"] = machine_info()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    log(f"results in {args.out}")
    print(markdown(results))


def event_rows(db):
    """The report rows both benchmarks share, from the bind events to the load after the run;
    `db` names the database written to (SB, NB)."""
    return [
        ("bind → address p50 / p99 (ms)",
         lambda r: f"{r['bind']['from_send']['p50_ms']} / {r['bind']['from_send']['p99_ms']}"),
        ("bind → address max (ms)", lambda r: f"{r['bind']['from_send']['max_ms']}"),
        ("unbind → removal p50 / p99 (ms)",
         lambda r: f"{r['unbind']['from_send']['p50_ms']} / {r['unbind']['from_send']['p99_ms']}"),
        (f"{db} transact round trip p50 / p99 (ms)",
         lambda r: f"{r['bind']['transact_rtt']['p50_ms']} / {r['bind']['transact_rtt']['p99_ms']}"),
        ("address → `reconciled` logged p50 / p99 (ms)",
         lambda r: f"{r['bind']['address_to_reconcile_logged']['p50_ms']} / "
                   f"{r['bind']['address_to_reconcile_logged']['p99_ms']}"),
        ("burst 50 (50 txns): first send → last address (ms)",
         lambda r: f"{r['burst_pipelined']['send_to_last_address_ms']}"),
        ("burst 50 (50 txns): first → last address (ms)",
         lambda r: f"{r['burst_pipelined']['first_to_last_address_ms']}"),
        ("burst 50 (50 txns): reconciles",
         lambda r: f"{r['burst_pipelined']['reconciles_logged']}"),
        ("burst 50 (1 txn): send → last address (ms)",
         lambda r: f"{r['burst_one_txn']['send_to_last_address_ms']}"),
        ("unbind burst 50 (50 txns): send → last removal (ms)",
         lambda r: f"{r['burst_pipelined_unbind']['send_to_last_address_ms']}"),
        ("agent CPU per bind event: own / child processes (ms)",
         lambda r: f"{r['bind']['agent_cpu_ms_per_event']} / {r['bind']['children_cpu_ms_per_event']}"),
        ("of the agent's own: in user mode (its work; the rest is the kernel's for its requests) (ms)",
         lambda r: f"{r['bind']['agent_user_cpu_ms_per_event']}"),
        ("the lab's daemons' CPU per bind event beyond their idle pace, the largest (ms)",
         lambda r: ", ".join(f"{k} {v}" for k, v in
                             list(r["bind"].get("lab_cpu_ms_per_event", {}).items())[:4]) or "n/a"),
        ("after the cold start: the lab's daemons busy for (s); their CPU meanwhile, the largest (s)",
         lambda r: (f"{r['lab_quiet_after_cold_start_s']}; " + ", ".join(
             f"{k} {v}" for k, v in list(r.get("lab_cpu_until_quiet_s", {}).items())[:3]))
         if "lab_quiet_after_cold_start_s" in r else "not waited for"),
        ("their idle pace, the largest (ms of CPU per s)",
         lambda r: ", ".join(f"{k} {v}" for k, v in
                             sorted(r.get("lab_idle_cpu_ms_per_s", {}).items(),
                                    key=lambda kv: -kv[1])[:3]) or "n/a"),
        ("reconcile per bind event (`change` trigger, metrics), mean (ms)",
         lambda r: f"{r['bind']['reconciles_by_trigger']['change']['mean_ms']}"),
        ("reconciles in that window, per stage: compute / policy / render / apply, mean (ms)",
         stage_means),
        ("kernel part of those reconciles: as a delta / every class planned / by dumps",
         lambda r: " / ".join(str(r["bind"]["reconciles_by_trigger"].get(f"kernel:{p}", {}).get("count", 0))
                              for p in ("delta", "full", "dumps"))),
        ("full reconcile (`reconcile_interval`, no change) p50 / max (ms)",
         lambda r: f"{r['full_reconcile']['durations']['p50_ms']} / "
                   f"{r['full_reconcile']['durations']['max_ms']}"),
        ("VmRSS after start / at end (MiB)",
         lambda r: f"{r['rss_after_start']['VmRSS']:.1f} / {r['rss_end']['VmRSS']:.1f}"),
        ("VmHWM at end (MiB)", lambda r: f"{r['rss_end']['VmHWM']:.1f}"),
        ("VmRSS / VmHWM after the full reconciles (MiB)",
         lambda r: f"{r['full_reconcile']['rss']['VmRSS']:.1f} / "
                   f"{r['full_reconcile']['rss']['VmHWM']:.1f}"),
        ("load average (1/5/15 min) after the run", lambda r: " ".join(r["loadavg"])),
    ]


def markdown_table(runs, head, rows):
    """A row per (label, function of a run), a column per run; "n/a" where a run lacks it."""
    out = ["| | " + " | ".join(head) + " |",
           "|---|" + "---|" * len(runs)]
    for label, f in rows:
        cells = []
        for r in runs:
            try:
                cells.append(f(r))
            except (KeyError, TypeError):
                cells.append("n/a")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def markdown(results):
    """The figures as a markdown table (docs/sb-bgp-benchmark.md)."""
    rows = [
        ("SB Port_Binding rows (N)", lambda r: f"{r['sb_port_bindings']}"),
        ("exposures of the busy routers here (FIPs + tenant VMs)",
         lambda r: f"{r['busy_exposures']} ({r['busy_routers']} routers)"),
        ("cold start: exec to all K (+ busy) addresses (ms)",
         lambda r: f"{r['cold_start']['exec_to_all_addresses_ms']}"),
        ("cold start, repeated (ms)", lambda r: " / ".join(map(str, r["cold_start_repeats_ms"]))),
        ("cold start: exec to SB replica ready (ms)",
         lambda r: f"{r['cold_start']['exec_to_sb_replica_ready_ms']}"),
        ("Port_Binding rows in the agent's replica at start",
         lambda r: f"{r['cold_start']['replica_port_bindings']}"),
    ] + event_rows("SB") + [
        ("FIPs of router 0; one added to it / taken out: → address p50 / p99 (ms)",
         lambda r: f"{r['fip_event']['fips_of_the_router']}; "
                   f"{r['fip_event']['add']['p50_ms']} / {r['fip_event']['add']['p99_ms']}, "
                   f"{r['fip_event']['remove']['p50_ms']} / {r['fip_event']['remove']['p99_ms']}"),
        ("agent CPU per FIP event: all / user mode (ms); SB transact p50 (ms)",
         lambda r: f"{r['fip_event']['agent_cpu_ms_per_event']} / "
                   f"{r['fip_event']['agent_user_cpu_ms_per_event']}; "
                   f"{r['fip_event']['transact_rtt']['p50_ms']}"),
        ("reconcile per FIP event (`change` trigger), mean (ms); per stage: compute / policy / "
         "render / apply",
         lambda r: f"{r['fip_event']['reconciles_by_trigger']['change']['mean_ms']}; "
                   f"{stage_means(r, 'fip_event')}"),
    ]
    runs = results["runs"]
    busy = any(r.get("busy_exposures") for r in runs)
    if results.get("params", {}).get("evpn"):
        rows[1] = ("tenant VMs of the busy routers here, on lo-<vni> (VRFs)",
                   lambda r: f"{r['busy_exposures']} ({r['busy_routers']})")
    head = [f"{r['busy_exposures']} here, N = {r['sb_port_bindings']}" if busy
            else f"N = {r['sb_port_bindings']}" for r in runs]
    return markdown_table(runs, head, rows[1:] if busy else rows[2:])


if __name__ == "__main__":
    main()
