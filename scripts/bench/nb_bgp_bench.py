#!/usr/bin/env python3
"""NB BGP driver benchmark against a running lab (scripts/lab/up.sh); standard library only.

Driven by scripts/bench/nb_bgp_bench.sh, which brings the lab up and down. The NB twin of
sb_bgp_bench.py (whose OVSDB client, netlink watcher, agent handling and statistics it reuses):
for each N (increasing; the bulk grows between sizes) it fills the Northbound with a cloud-like
topology until it holds N Logical_Switch_Port rows, almost all bound to other hosts, then measures
the agent (release build, `driver = nb_ovn_bgp_driver`) on the ports of this chassis:

- cold start: agent exec to all K local addresses on bgp-nic (kernel state of the agent removed
  first: bgp-nic, bgp-vrf, its rules and tables);
- bind latency: `options:requested-chassis` = this host and `up = true` written in one NB
  transaction, to RTM_NEWADDR of the port's IP in the chassis netns (one event at a time, agent
  idle in between);
- unbind latency: requested-chassis another host + up=false, to RTM_DELADDR;
- bursts of 50 bindings: 50 transactions pipelined back to back, and 50 bindings in one
  transaction: first send to the last address;
- agent RSS: VmRSS and VmHWM from /proc/<pid>/status; agent CPU per bind event;
- full reconcile: the agent restarted with `reconcile_interval` = 2 s, the duration of its
  periodic reconciles (nothing to change) from its metrics (sb_bgp_bench.full_reconciles).

--busy B1,B2,... (the busy gateway, issue 17; the SB bench's shapes): the bulk is loaded once
(the last of --sizes), then for each B (increasing) routers whose gateway is hosted here are
added, each with 500 centralized FIPs and a tenant subnet of 500 VMs, until this chassis exposes
B more addresses; the same measurements run at each B. A busy router is NB rows (router, gateway
LRP on the lab's provider switch, FIP NAT rows with gateway_port, tenant switch with its
router-interface port and VMs) plus the Southbound `cr-lrp-<gateway>` chassisredirect binding
bound to this chassis, which is how the NB driver learns on OVN 23.03 that the gateway is here.

--ovn (with nb_bgp_bench.sh --ovn, which gives the lab its node-local OVN cluster through
scripts/lab/local-ovn.sh): the agent runs with `exposing_method = ovn` (the lab's
[local_ovn_cluster] names: local NB socket, fabric NIC and peer) and `expose_tenant_networks =
False` (the method realises no tenant IP; an operator of it turns them off). Each exposure is an
address on bgp-nic and a Static_MAC_Binding row in the local NB: a monitor of that table times
the row too (bind: the row's insert; unbind: its delete), the cold start removes the agent's
rows first and waits for all of them, and the busy routers are counted by their FIPs only (the
tenant VMs behind them stay in the NB, not exposed), so B exposures here take 2× the routers.
The local cluster's ovn-northd is paused too: with it running, each binding makes it (and the
local ovn-controller after it) compute the local cluster again on the same two cores.

`up` is written by this script directly: in OVN, northd copies it from the Southbound
Port_Binding. northd is paused (`ovn-appctl pause`) for the whole run, so it neither overwrites
that column nor computes logical flows for the bulk (see docs/nb-bgp-benchmark.md).

The bulk, per "project" (10 Logical_Switch_Ports): a router (`neutron-<id>`) with a gateway
port on a provider switch and an interface on its own tenant switch, an SNAT and a FIP NAT
row; on the tenant switch the router-interface port, a metadata localport and 5 VM ports; on
the provider switch the router gateway port and 2 VM ports. VMs are bound to 500 other hosts
(`compute-NNNN`, requested-chassis and neutron:host_id) and up. 1000 projects share one provider
switch (localnet on physnet `public`, mapped to br-ex here). So 100k LSPs = 10k routers, 10k
tenant switches, 20k router ports, 20k NAT rows, 10 provider switches.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sb_bgp_bench import (  # noqa: E402  (the SB bench is the library of this one)
    BUSY_FIPS_PER_ROUTER,
    BUSY_MAX_ROUTERS,
    BUSY_VMS_PER_ROUTER,
    Agent,
    Ovsdb,
    Watcher,
    busy_fip,
    clean_agent_kernel_state,
    full_reconciles,
    log,
    machine_info,
    mac_of,
    measured_ip,
    netlink_socket_in,
    add_event_args,
    bind_and_unbind,
    omap,
    parse_log_line,
    read_env,
    event_rows,
    markdown_table,
    transact_once,
    set_of,
    summary,
    uuid_ref,
    wait_tools_idle,
    settle,
    wait_idle,
    record_lab_quiet,
    wait_reconciled,
)

REMOTE_HOST = "bench-remote.example"  # where the measured ports are when not bound here
REMOTE_HOSTS = 500
PROJECTS_PER_PROVIDER = 1000
LSPS_PER_PROJECT = 10
PROJECTS_PER_TXN = 500
PROJECT_ID = "0123456789abcdef0123456789abcdef"
# Busy gateway (--busy, issue 17): the SB bench's shapes (BUSY_* and busy_fip come from there:
# 500 centralized FIPs and one tenant subnet of 500 VMs per router), written as Neutron writes
# them in the NB, plus the Southbound `cr-lrp-<gateway>` binding northd would have bound here.
BUSY_DATAPATH_KEY_BASE = 200000  # SB Datapath_Binding tunnel keys of the busy routers


def rid(kind, i):
    """A Neutron-like id (uuid format) for object `kind` number `i`."""
    return f"{kind:08x}-{(i >> 32) & 0xffff:04x}-{(i >> 16) & 0xffff:04x}-0000-{i & 0xffff:012x}"


def ip4(base, i):
    n = base + i
    return f"{n >> 24 & 255}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


PROVIDER_VM_BASE = (172 << 24) | (16 << 16)  # 172.16.0.0/12: provider VMs and router gateways


class LocalNbBindings:
    """The Static_MAC_Binding rows of the node-local NB (exposing_method = ovn) from a monitor
    of that table, read in the Watcher's loop: the IPs with a row, and when each was last
    inserted or deleted."""

    TABLE = "Static_MAC_Binding"

    def __init__(self, path, watcher):
        self.path = path
        self.db = Ovsdb(path, "OVN_Northbound")
        self.db.on_notify = self.on_notify
        self.rows = {}  # uuid -> ip
        self.present = {}  # ip -> rows with it
        self.added, self.removed = {}, {}  # ip -> time of the last insert / delete
        watcher.extra.append(self.db)
        mid = self.db.send("monitor", ["OVN_Northbound", "bench-smb",
                                       {self.TABLE: {"columns": ["ip", "logical_port"]}}])
        watcher.wait(lambda: mid in self.db.replies, 60, "local NB monitor reply")
        _, msg = self.db.replies.pop(mid)
        if msg.get("error"):
            raise RuntimeError(f"local NB monitor: {msg['error']}")
        self.apply(time.time(), msg["result"])

    def on_notify(self, now, msg):
        if msg.get("method") == "update" and msg["params"][0] == "bench-smb":
            self.apply(now, msg["params"][1])

    def apply(self, now, updates):
        for uuid, change in updates.get(self.TABLE, {}).items():
            old_ip = self.rows.pop(uuid, None)
            if old_ip is not None:
                self.present[old_ip] -= 1
                if not self.present[old_ip]:
                    del self.present[old_ip]
                    self.removed[old_ip] = now
            new = change.get("new")
            if new is not None:
                ip = new["ip"] if "ip" in new else old_ip
                self.rows[uuid] = ip
                if ip not in self.present:
                    self.added[ip] = now
                self.present[ip] = self.present.get(ip, 0) + 1

    def delete_all(self):
        """The agent's rows removed (before a cold start: it must write them all again)."""
        transact_once(self.path, "OVN_Northbound",
                      [{"op": "delete", "table": self.TABLE, "where": []}],
                      "delete the local NB's Static_MAC_Binding rows")


class NbLab:
    def __init__(self, env, watcher, ovn=False):
        self.env = env
        self.ovn = ovn  # exposing_method = ovn: only the FIPs of the busy routers count
        self.w = watcher
        self.here = env["CHASSIS_HOSTNAME"]
        # The measured ports join the lab's provider network (`public`): the lab binds a VM of
        # it here, so ovn-controller has plugged its localnet patch port into br-ex, as in a real
        # cloud (upstream's wiring of a provider port looks that patch port up and fails for a
        # switch that has none; with northd paused, no new switch would get one).
        self.provider_ls = f"neutron-{env['NET_PUBLIC_ID']}"
        self.ports = []  # measured ports: (name, ip, NB uuid)
        self.projects = 0
        self.providers = {}  # provider index -> Logical_Switch uuid
        self.env_dir = os.path.dirname(env["AGENT_CONF"])  # full_reconciles() writes there
        self.busy_routers = 0
        self.busy_ips = []  # every address the busy routers expose here (FIPs, tenant VMs)
        self.busy_tenant_ips = []  # of them, the tenant VMs (not exposed with --ovn)
        self.busy_gateway_ips = []  # and their gateway addresses (one per router)
        self.sb_chassis = None  # this chassis' SB Chassis uuid and the HA group of its gateways
        self.sb_ha_group = None

    def select(self, table, where, columns):
        return self.w.transact(
            [{"op": "select", "table": table, "where": where, "columns": columns}],
            what=f"select {table}",
        )[0]["rows"]

    def count(self, table):
        return len(self.select(table, [], ["_uuid"]))

    def set_fip_centralized(self):
        # The lab's FIP has no external_mac: centralized, as the NB end-to-end test says.
        self.w.transact([{"op": "mutate", "table": "NB_Global", "where": [],
                          "mutations": [["external_ids", "insert",
                                         omap({"neutron:fip-distributed": "False"})]]}],
                        what="NB_Global fip-distributed")

    def measured_ext(self, i, host):
        return omap({
            "neutron:cidrs": f"{measured_ip(i)}/15",
            "neutron:device_id": rid(0xbe0c, i),
            "neutron:device_owner": "compute:nova",
            "neutron:host_id": host,
            "neutron:network_name": self.provider_ls,
            "neutron:project_id": PROJECT_ID,
            "neutron:revision_number": "2",
        })

    def bind_op(self, i, uuid, bound):
        host = self.here if bound else REMOTE_HOST
        return {"op": "update", "table": "Logical_Switch_Port",
                "where": [["_uuid", "==", uuid_ref(uuid)]],
                "row": {"options": omap({"requested-chassis": host}), "up": bound,
                        "external_ids": self.measured_ext(i, host)}}

    def provider_patch_port(self):
        """The OVS patch port ovn-controller plugged into br-ex for the localnet port of the
        lab's provider switch (it does so because the lab binds a VM of that switch here)."""
        ls = self.select("Logical_Switch", [["name", "==", self.provider_ls]], ["ports"])[0]
        uuids = [u for _, u in ls["ports"][1]] if ls["ports"][0] == "set" else [ls["ports"][1]]
        lsps = self.w.transact(
            [{"op": "select", "table": "Logical_Switch_Port",
              "where": [["_uuid", "==", uuid_ref(u)], ["type", "==", "localnet"]],
              "columns": ["name"]} for u in uuids], what="localnet of the provider switch")
        name = next(r["rows"][0]["name"] for r in lsps if r["rows"])
        return f"patch-{name}-to-br-int"

    def wait_patch_port(self, timeout=30):
        patch = self.provider_patch_port()
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = subprocess.run(["ovs-vsctl", f"--db=unix:{self.env['OVS_SOCK']}", "get",
                                "Interface", patch, "ofport"], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip() not in ("", "-1", "[]"):
                return patch
            time.sleep(0.1)
        raise TimeoutError(f"no {patch} in br-ex after {timeout} s")

    def create_measured_ports(self, count, bound_here):
        """`count` VM ports on the measured provider switch, the first `bound_here` bound here."""
        names = [f"bench-local-{i}" for i in range(count)]
        ops, refs = [], []
        for i, name in enumerate(names):
            host = self.here if i < bound_here else REMOTE_HOST
            refs.append(["named-uuid", f"p{i}"])
            ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": f"p{i}",
                        "row": {"name": name,
                                "addresses": f"{mac_of(0xb0, i)} {measured_ip(i)}",
                                "port_security": f"{mac_of(0xb0, i)} {measured_ip(i)}",
                                "options": omap({"requested-chassis": host}),
                                "up": i < bound_here,
                                "external_ids": self.measured_ext(i, host)}})
        ops.append({"op": "mutate", "table": "Logical_Switch",
                    "where": [["name", "==", self.provider_ls]],
                    "mutations": [["ports", "insert", set_of(refs)]]})
        res = self.w.transact(ops, what="create measured ports")
        self.ports = [(i, measured_ip(i), res[i]["uuid"][1]) for i in range(count)]

    def project_ops(self, i):
        """The rows of project `i` (see the module doc) and the refs to add to its provider."""
        router, net, gw_port, ri_port = rid(0xa0, i), rid(0xa1, i), rid(0xa2, i), rid(0xa3, i)
        mac = lambda k: mac_of(0x3e, i * 16 + k)  # noqa: E731
        gw_ip = ip4(PROVIDER_VM_BASE, i * 3)
        tenant = f"10.{i >> 8 & 255}.{i & 255}"
        ops, provider_refs, tenant_refs = [], [], []
        ext = lambda **kv: omap({k.replace("__", ":"): v for k, v in kv.items()})  # noqa: E731

        def lsp(tag, row, on_provider):
            name = f"n{i}{tag}"
            ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": name,
                        "row": row})
            (provider_refs if on_provider else tenant_refs).append(["named-uuid", name])

        def vm(tag, k, ip, cidr, net_name, on_provider):
            host = f"compute-{(i * 7 + k) % REMOTE_HOSTS:04d}"
            lsp(tag, {"name": rid(0xb0 + k, i), "addresses": f"{mac(k)} {ip}",
                      "port_security": f"{mac(k)} {ip}",
                      "options": omap({"requested-chassis": host}), "up": True,
                      "external_ids": ext(neutron__cidrs=cidr,
                                          neutron__device_id=rid(0xc0 + k, i),
                                          neutron__device_owner="compute:nova",
                                          neutron__host_id=host,
                                          neutron__network_name=net_name,
                                          neutron__project_id=PROJECT_ID,
                                          neutron__revision_number="4")}, on_provider)

        provider_name = f"neutron-{rid(0xf0, i // PROJECTS_PER_PROVIDER)}"
        # Router gateway (LSP type router on the provider switch, LRP with the gateway IP).
        lsp("g", {"name": gw_port, "type": "router", "addresses": "router",
                  "options": omap({"router-port": f"lrp-{gw_port}", "nat-addresses": "router"}),
                  "external_ids": ext(neutron__device_owner="network:router_gateway",
                                      neutron__device_id=router,
                                      neutron__cidrs=f"{gw_ip}/12",
                                      neutron__network_name=provider_name)}, True)
        # Router interface on the tenant switch.
        lsp("r", {"name": ri_port, "type": "router", "addresses": "router",
                  "options": omap({"router-port": f"lrp-{ri_port}"}),
                  "external_ids": ext(neutron__device_owner="network:router_interface",
                                      neutron__device_id=router,
                                      neutron__cidrs=f"{tenant}.1/24",
                                      neutron__network_name=f"neutron-{net}")}, False)
        # Metadata port (localport), one per network.
        lsp("m", {"name": rid(0xa4, i), "type": "localport", "addresses": f"{mac(7)} {tenant}.2",
                  "external_ids": ext(neutron__device_owner="network:distributed",
                                      neutron__device_id=f"ovnmeta-{net}",
                                      neutron__cidrs=f"{tenant}.2/24")}, False)
        for k in range(5):
            vm(f"t{k}", k, f"{tenant}.{10 + k}", f"{tenant}.{10 + k}/24", f"neutron-{net}", False)
        for k in range(2):
            ip = ip4(PROVIDER_VM_BASE, i * 3 + 1 + k)
            vm(f"p{k}", 5 + k, ip, f"{ip}/12", provider_name, True)
        ops.append({"op": "insert", "table": "Logical_Switch", "row": {
            "name": f"neutron-{net}", "ports": set_of(tenant_refs),
            "external_ids": ext(neutron__network_name=f"net-{i}")}})
        # The router, its ports and NAT rows (SNAT of the subnet, a FIP of the first VM).
        ops.append({"op": "insert", "table": "Logical_Router_Port", "uuid-name": f"n{i}G",
                    "row": {"name": f"lrp-{gw_port}", "mac": mac(8), "networks": f"{gw_ip}/12",
                            "external_ids": ext(neutron__network_name=provider_name,
                                                neutron__router_name=router,
                                                neutron__is_ext_gw="True")}})
        ops.append({"op": "insert", "table": "Logical_Router_Port", "uuid-name": f"n{i}R",
                    "row": {"name": f"lrp-{ri_port}", "mac": mac(9),
                            "networks": f"{tenant}.1/24",
                            "external_ids": ext(neutron__network_name=f"neutron-{net}",
                                                neutron__router_name=router)}})
        ops.append({"op": "insert", "table": "NAT", "uuid-name": f"n{i}S",
                    "row": {"type": "snat", "external_ip": gw_ip, "logical_ip": f"{tenant}.0/24",
                            "gateway_port": ["named-uuid", f"n{i}G"],
                            "external_ids": ext(neutron__router_name=f"neutron-{router}")}})
        fip = ip4(PROVIDER_VM_BASE, (1 << 19) + i)
        ops.append({"op": "insert", "table": "NAT", "uuid-name": f"n{i}F",
                    "row": {"type": "dnat_and_snat", "external_ip": fip,
                            "logical_ip": f"{tenant}.10", "logical_port": rid(0xb0, i),
                            "gateway_port": ["named-uuid", f"n{i}G"],
                            "external_ids": ext(neutron__fip_id=rid(0xd0, i),
                                                neutron__fip_port_id=rid(0xb0, i),
                                                neutron__fip_network_id=rid(0xf0, i // PROJECTS_PER_PROVIDER),
                                                neutron__router_name=f"neutron-{router}")}})
        ops.append({"op": "insert", "table": "Logical_Router", "row": {
            "name": f"neutron-{router}",
            "ports": set_of([["named-uuid", f"n{i}G"], ["named-uuid", f"n{i}R"]]),
            "nat": set_of([["named-uuid", f"n{i}S"], ["named-uuid", f"n{i}F"]]),
            "external_ids": ext(neutron__router_name=f"router-{i}",
                                neutron__gw_port_id=gw_port)}})
        return ops, provider_refs

    def add_bulk(self, target_projects):
        t0 = time.time()
        while self.projects < target_projects:
            p = self.projects // PROJECTS_PER_PROVIDER
            end = min(target_projects, self.projects + PROJECTS_PER_TXN,
                      (p + 1) * PROJECTS_PER_PROVIDER)
            ops, refs = [], []
            for i in range(self.projects, end):
                o, r = self.project_ops(i)
                ops += o
                refs += r
            if p in self.providers:
                ops.append({"op": "mutate", "table": "Logical_Switch",
                            "where": [["_uuid", "==", uuid_ref(self.providers[p])]],
                            "mutations": [["ports", "insert", set_of(refs)]]})
            else:
                ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "ln",
                            "row": {"name": f"provnet-{rid(0xf0, p)}", "type": "localnet",
                                    "addresses": "unknown",
                                    "options": omap({"network_name": "public"})}})
                ops.append({"op": "insert", "table": "Logical_Switch", "uuid-name": "ls",
                            "row": {"name": f"neutron-{rid(0xf0, p)}",
                                    "ports": set_of(refs + [["named-uuid", "ln"]]),
                                    "external_ids": omap({"neutron:network_name": f"provider-{p}"})}})
            res = self.w.transact(ops, what=f"insert projects {self.projects}..{end}")
            if p not in self.providers:
                self.providers[p] = res[-1]["uuid"][1]
            self.projects = end
        log(f"bulk projects now {self.projects} (+{time.time() - t0:.1f} s)")

    # ---- Busy gateway (--busy)

    def sb_transact(self, ops, what):
        """One Southbound transaction on a connection of its own (set-up only, not timed)."""
        return transact_once(self.env["SB_SOCK"], "OVN_Southbound", ops, what)

    def find_sb_gateway_chassis(self):
        """This chassis' Chassis uuid, and the HA_Chassis_Group of the lab's own gateway
        (`cr-lrp-<GW_PORT_ID>`, northd made it from the gateway's Gateway_Chassis before it was
        paused): the busy gateways' bindings get the same group, so ovn-controller, which
        releases a chassisredirect binding of its chassis that no active group names, keeps them."""
        res = self.sb_transact([
            {"op": "select", "table": "Chassis", "where": [["name", "==", self.env["CHASSIS_NAME"]]],
             "columns": ["_uuid"]},
            {"op": "select", "table": "Port_Binding",
             "where": [["logical_port", "==", f"cr-lrp-{self.env['GW_PORT_ID']}"]],
             "columns": ["chassis", "ha_chassis_group"]},
        ], "find this chassis and the lab gateway's HA group")
        if len(res[0]["rows"]) != 1 or len(res[1]["rows"]) != 1:
            raise RuntimeError(f"SB: Chassis {self.env['CHASSIS_NAME']} or the lab's "
                               f"cr-lrp-{self.env['GW_PORT_ID']} binding not found")
        self.sb_chassis = res[0]["rows"][0]["_uuid"][1]
        pb = res[1]["rows"][0]
        if pb["chassis"] != uuid_ref(self.sb_chassis) or pb["ha_chassis_group"][0] != "uuid":
            raise RuntimeError(f"SB: the lab's gateway binding is not bound here with an HA "
                               f"group: {pb}")
        self.sb_ha_group = pb["ha_chassis_group"][1]

    def add_busy(self, target):
        """Routers with a gateway hosted here until this chassis exposes `target` more addresses
        (centralized FIPs + tenant VMs): NB rows as Neutron writes them, then the Southbound
        chassisredirect binding northd would write and ovn-controller bind here."""
        t0 = time.time()
        if self.sb_chassis is None:
            self.find_sb_gateway_chassis()
            if self.select("Logical_Router", [["name", "==", f"neutron-{rid(0xe0, 0)}"]],
                           ["_uuid"]):
                raise RuntimeError("the NB already holds busy routers (re-run on a fresh lab)")
        # The SB bench's busy router: its FIPs and (not with the `ovn` method) its tenant VMs.
        per_router = BUSY_FIPS_PER_ROUTER if self.ovn else \
            BUSY_FIPS_PER_ROUTER + BUSY_VMS_PER_ROUTER
        while self.busy_routers * per_router < target:
            k = self.busy_routers
            if k >= BUSY_MAX_ROUTERS:
                raise ValueError(f"--busy: at most {BUSY_MAX_ROUTERS * per_router}")
            ops, gw_lrp, router, mac, gw_ip = self.busy_router_ops(k)
            res = self.w.transact(ops, what=f"insert busy router {k} (NB)")
            lr_uuid = res[len(ops) - 2]["uuid"][1]  # the Logical_Router insert
            self.sb_transact([
                {"op": "insert", "table": "Datapath_Binding", "uuid-name": "dp",
                 "row": {"tunnel_key": BUSY_DATAPATH_KEY_BASE + k,
                         "external_ids": omap({"logical-router": lr_uuid, "name": router})}},
                {"op": "insert", "table": "Port_Binding",
                 "row": {"logical_port": f"cr-{gw_lrp}", "type": "chassisredirect",
                         "datapath": ["named-uuid", "dp"], "tunnel_key": 2,
                         "mac": set_of([f"{mac} {gw_ip}/16"]),
                         "options": omap({"distributed-port": gw_lrp}),
                         "chassis": uuid_ref(self.sb_chassis), "up": True,
                         "ha_chassis_group": uuid_ref(self.sb_ha_group)}},
            ], f"insert cr-{gw_lrp} (SB)")
            self.busy_routers += 1
        log(f"busy exposures now {len(self.busy_ips)} on {self.busy_routers} routers "
            f"(+{time.time() - t0:.1f} s)")

    def busy_router_ops(self, k):
        """NB rows of busy router `k` (one transaction): gateway LRP on the lab's provider switch
        (`neutron:is_ext_gw`, a Gateway_Chassis naming this chassis) and its `router` LSP there;
        a tenant switch with its router-interface port (up, as northd sets it), a metadata
        localport and BUSY_VMS_PER_ROUTER VMs bound to other hosts; an SNAT of the subnet and
        BUSY_FIPS_PER_ROUTER centralized FIPs (dnat_and_snat, `gateway_port`, no external_mac),
        one per VM. Returns the ops (the Logical_Router insert second to last), the gateway LRP
        name, the router's NB name, the gateway MAC and IP."""
        router, net, gw, ri = rid(0xe0, k), rid(0xe1, k), rid(0xe2, k), rid(0xe3, k)
        router_name, tenant_ls = f"neutron-{router}", f"neutron-{net}"
        gw_mac, ri_mac = mac_of(0xb2, k), mac_of(0xb3, k)
        gw_ip = f"198.19.255.{k + 1}"  # as in the SB bench
        ri_cidr = f"10.200.{4 * k + 3}.254/22"
        fips = [busy_fip(k * BUSY_FIPS_PER_ROUTER + j) for j in range(BUSY_FIPS_PER_ROUTER)]
        vms = [f"10.200.{4 * k + j // 250}.{j % 250 + 1}" for j in range(BUSY_VMS_PER_ROUTER)]
        ext = lambda **kv: omap({k_.replace("__", ":"): v for k_, v in kv.items()})  # noqa: E731
        ops = []
        ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "gwp",
                    "row": {"name": gw, "type": "router", "addresses": "router", "up": True,
                            "options": omap({"router-port": f"lrp-{gw}",
                                             "nat-addresses": "router"}),
                            "external_ids": ext(neutron__cidrs=f"{gw_ip}/16",
                                                neutron__device_owner="network:router_gateway",
                                                neutron__device_id=router,
                                                neutron__network_name=self.provider_ls,
                                                neutron__project_id="")}})
        ops.append({"op": "mutate", "table": "Logical_Switch",
                    "where": [["name", "==", self.provider_ls]],
                    "mutations": [["ports", "insert", set_of([["named-uuid", "gwp"]])]]})
        tenant_refs = []

        def tenant_lsp(tag, row):
            ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": tag,
                        "row": row})
            tenant_refs.append(["named-uuid", tag])

        tenant_lsp("rif", {"name": ri, "type": "router", "addresses": "router", "up": True,
                           "options": omap({"router-port": f"lrp-{ri}"}),
                           "external_ids": ext(neutron__cidrs=ri_cidr,
                                               neutron__device_owner="network:router_interface",
                                               neutron__device_id=router,
                                               neutron__network_name=tenant_ls,
                                               neutron__project_id=PROJECT_ID)})
        tenant_lsp("meta", {"name": rid(0xe4, k), "type": "localport",
                            "addresses": f"{mac_of(0xb5, k)} 10.200.{4 * k + 3}.253",
                            "external_ids": ext(neutron__device_owner="network:distributed",
                                                neutron__device_id=f"ovnmeta-{net}",
                                                neutron__cidrs=f"10.200.{4 * k + 3}.253/22",
                                                neutron__network_name=tenant_ls)})
        vm_ports = []
        for j, ip in enumerate(vms):
            name, mac = rid(0xe5, k << 16 | j), mac_of(0xb4, k * 1000 + j)
            host = f"compute-{(k * 7 + j) % REMOTE_HOSTS:04d}"
            vm_ports.append(name)
            tenant_lsp(f"vm{j}", {
                "name": name, "addresses": f"{mac} {ip}", "port_security": f"{mac} {ip}",
                "options": omap({"requested-chassis": host}), "up": True,
                "external_ids": ext(neutron__cidrs=f"{ip}/22",
                                    neutron__device_id=rid(0xe6, k << 16 | j),
                                    neutron__device_owner="compute:nova",
                                    neutron__host_id=host,
                                    neutron__network_name=tenant_ls,
                                    neutron__project_id=PROJECT_ID,
                                    neutron__revision_number="4")})
        ops.append({"op": "insert", "table": "Logical_Switch", "row": {
            "name": tenant_ls, "ports": set_of(tenant_refs),
            "external_ids": ext(neutron__network_name=f"busy-net-{k}")}})
        ops.append({"op": "insert", "table": "Gateway_Chassis", "uuid-name": "gwc",
                    "row": {"name": f"lrp-{gw}_{self.env['CHASSIS_NAME']}",
                            "chassis_name": self.env["CHASSIS_NAME"], "priority": 1}})
        ops.append({"op": "insert", "table": "Logical_Router_Port", "uuid-name": "G",
                    "row": {"name": f"lrp-{gw}", "mac": gw_mac, "networks": f"{gw_ip}/16",
                            "gateway_chassis": ["named-uuid", "gwc"],
                            "external_ids": ext(neutron__network_name=self.provider_ls,
                                                neutron__router_name=router,
                                                neutron__is_ext_gw="True")}})
        ops.append({"op": "insert", "table": "Logical_Router_Port", "uuid-name": "R",
                    "row": {"name": f"lrp-{ri}", "mac": ri_mac, "networks": ri_cidr,
                            "external_ids": ext(neutron__network_name=tenant_ls,
                                                neutron__router_name=router)}})
        nats = ["S"]
        ops.append({"op": "insert", "table": "NAT", "uuid-name": "S",
                    "row": {"type": "snat", "external_ip": gw_ip,
                            "logical_ip": f"10.200.{4 * k}.0/22",
                            "gateway_port": ["named-uuid", "G"],
                            "external_ids": ext(neutron__router_name=router_name)}})
        for j, (fip, ip, port) in enumerate(zip(fips, vms, vm_ports)):
            nats.append(f"F{j}")
            ops.append({"op": "insert", "table": "NAT", "uuid-name": f"F{j}",
                        "row": {"type": "dnat_and_snat", "external_ip": fip, "logical_ip": ip,
                                "logical_port": port, "gateway_port": ["named-uuid", "G"],
                                "external_ids": ext(neutron__fip_id=rid(0xe7, k << 16 | j),
                                                    neutron__fip_port_id=port,
                                                    neutron__fip_network_id=self.env["NET_PUBLIC_ID"],
                                                    neutron__router_name=router_name,
                                                    neutron__revision_number="1")}})
        ops.append({"op": "insert", "table": "Logical_Router", "row": {
            "name": router_name,
            "ports": set_of([["named-uuid", "G"], ["named-uuid", "R"]]),
            "nat": set_of([["named-uuid", n] for n in nats]),
            "external_ids": ext(neutron__router_name=f"busy-router-{k}",
                                neutron__gw_port_id=gw)}})
        ops.append({"op": "comment", "comment": f"nb_bgp_bench: busy router {k}"})
        self.busy_ips += fips if self.ovn else fips + vms
        self.busy_tenant_ips += vms
        self.busy_gateway_ips.append(gw_ip)
        return ops, f"lrp-{gw}", router_name, gw_mac, gw_ip


# --------------------------------------------------------------------------------------------


def measure(lab, w, agent, args, counts, smb=None):
    """`smb`: the local NB's LocalNbBindings with --ovn (each exposure also timed to its row)."""
    res = {"nb_rows": counts, "busy_exposures": len(lab.busy_ips),
           "busy_routers": lab.busy_routers}
    k = args.cold_start_ports
    cold = lab.ports[:k]
    events = lab.ports[k:k + args.events]
    burst = lab.ports[k + args.events:k + args.events + args.burst]

    def cold_start():
        agent.stop()
        tables = clean_agent_kernel_state(lab.env["NS_CHASSIS"])
        w.dump_addresses()
        # With --busy: every busy address too (FIPs, tenant VMs, the routers' gateways).
        want = {ip for _, ip, _ in cold} | set(lab.busy_ips) | set(lab.busy_gateway_ips)
        if want & w.present:
            raise RuntimeError("cold-start addresses still present after removing bgp-nic: "
                               f"{sorted(want & w.present)[:5]}")
        if smb:
            smb.delete_all()
            w.wait(lambda: not smb.present, 30, "the local NB's bindings deleted")
        t0 = agent.start()
        w.wait(lambda: want <= w.present or not agent.alive(), args.timeout, "cold start exposure")
        if smb:
            w.wait(lambda: want <= smb.present.keys() or not agent.alive(), args.timeout,
                   "cold start: every Static_MAC_Binding in the local NB")
            stray = set(lab.busy_tenant_ips) & w.present
            if stray:
                raise RuntimeError(f"--ovn: tenant VMs exposed: {sorted(stray)[:5]}")
        if not agent.alive():
            raise RuntimeError(f"agent exited; see {agent.log_path}")
        t_all = max(w.added[ip] for ip in want)
        t_first = min(w.added[ip] for ip in want)
        t_all_smb = max(smb.added[ip] for ip in want) if smb else None
        rec = wait_reconciled(agent, w, t0, timeout=args.timeout)
        phases, replica_rows, ready = [], None, None
        for line in open(agent.log_path):
            p = parse_log_line(line)
            if not p:
                continue
            if "Northbound replica ready" in p[3]:
                ready = round((p[0] - t0) * 1000, 1)
                m = re.search(r"rows=\[(.*?)\]", p[3])
                replica_rows = (re.sub(r'[("]', "", m.group(1)).replace(")", "")
                                if m else p[3])
            if any(s in p[3] for s in ("monitor established", "replica ready",
                                       "condition", "connected")):
                phases.append((p[3][:160], round((p[0] - t0) * 1000, 1)))
        return {
            "local_ports": k,
            "busy_addresses": len(lab.busy_ips) + len(lab.busy_gateway_ips),
            "exec_to_all_addresses_ms": round((t_all - t0) * 1000, 1),
            "exec_to_first_address_ms": round((t_first - t0) * 1000, 1),
            "exec_to_all_bindings_ms": round((t_all_smb - t0) * 1000, 1) if smb else None,
            "exec_to_nb_replica_ready_ms": ready,
            "exec_to_first_reconcile_done_ms": round((rec - t0) * 1000, 1) if rec else None,
            "replica_rows": replica_rows,
            "log_phases_ms": phases[:30],
            "tables_cleaned": sorted(tables),
        }

    starts = [cold_start() for _ in range(max(1, args.cold_starts))]
    res["cold_start"] = starts[0]
    res["cold_start_repeats_ms"] = [c["exec_to_all_addresses_ms"] for c in starts]
    res["cold_start_replica_ready_ms"] = [c["exec_to_nb_replica_ready_ms"] for c in starts]
    if smb:
        res["cold_start_bindings_ms"] = [c["exec_to_all_bindings_ms"] for c in starts]
    log(f"cold start: {res['cold_start_repeats_ms']} ms; replica {res['cold_start']['replica_rows']}")
    wait_tools_idle(w, lab.env)
    settle(w)
    wait_idle(agent, w, quiet=1.0)
    record_lab_quiet(res, args, w)
    res["rss_after_start"] = memory(agent)

    def one_by_one(ports, bound):
        lat, tail, rtt, lat_smb = [], [], [], []
        for i, ip, uuid in ports:
            wait_idle(agent, w, quiet=args.gap)
            t_send = time.time()
            req = w.sb.transact_async([lab.bind_op(i, uuid, bound)])
            t_ev = w.wait_ip(ip, bound, t_send, args.timeout,
                             f"address {ip}" if bound else f"removal of {ip}")
            if smb:
                t_smb = w.wait_ip(ip, bound, t_send, args.timeout,
                                  f"Static_MAC_Binding of {ip}" if bound
                                  else f"deletion of the Static_MAC_Binding of {ip}", of=smb)
                lat_smb.append(t_smb - t_send)
            t_reply, _ = w.reply(req)
            t_rec = wait_reconciled(agent, w, t_send)
            lat.append(t_ev - t_send)
            rtt.append(t_reply - t_send)
            if t_rec:
                tail.append(max(0.0, t_rec - t_ev))
        out = {"from_send": summary(lat), "transact_rtt": summary(rtt),
               "address_to_reconcile_logged": summary(tail) if tail else None}
        if smb:
            # Both the address and the row: the later of the two is when the exposure is whole.
            out["binding_from_send"] = summary(lat_smb)
            out["both_from_send"] = summary([max(a, b) for a, b in zip(lat, lat_smb)])
        return out

    bind_and_unbind(res, args, lab, w, agent, events, one_by_one)

    def burst_run(ports, bound, single_txn):
        wait_idle(agent, w, quiet=0.5)
        ips = {ip for _, ip, _ in ports}
        t_send = time.time()
        if single_txn:
            reqs = [w.sb.transact_async([lab.bind_op(i, u, bound) for i, _, u in ports])]
        else:
            reqs = [w.sb.transact_async([lab.bind_op(i, u, bound)]) for i, _, u in ports]
        if bound:
            w.wait(lambda: all(w.added.get(ip, 0) >= t_send for ip in ips), args.timeout, "burst")
            ts = [w.added[ip] for ip in ips]
        else:
            w.wait(lambda: all(w.removed.get(ip, 0) >= t_send for ip in ips), args.timeout,
                   "burst removal")
            ts = [w.removed[ip] for ip in ips]
        ts_smb = []
        if smb and bound:
            w.wait(lambda: all(smb.added.get(ip, 0) >= t_send for ip in ips), args.timeout,
                   "burst: the Static_MAC_Binding rows")
            ts_smb = [smb.added[ip] for ip in ips]
        elif smb:
            w.wait(lambda: all(smb.removed.get(ip, 0) >= t_send for ip in ips), args.timeout,
                   "burst: the Static_MAC_Binding rows deleted")
            ts_smb = [smb.removed[ip] for ip in ips]
        t_replies = [w.reply(r)[0] for r in reqs]
        time.sleep(0.3)
        reconciles = 0
        for line in agent.new_log_lines():
            p = parse_log_line(line)
            if p and p[2] == "ovn_bgp_agent::host" and p[3].startswith("reconciled") \
                    and p[0] >= t_send:
                reconciles += 1
        return {"ports": len(ports),
                "send_to_last_address_ms": round((max(ts) - t_send) * 1000, 1),
                "send_to_first_address_ms": round((min(ts) - t_send) * 1000, 1),
                "first_to_last_address_ms": round((max(ts) - min(ts)) * 1000, 1),
                "last_reply_ms": round((max(t_replies) - t_send) * 1000, 1),
                "send_to_last_binding_ms": (round((max(ts_smb) - t_send) * 1000, 1)
                                            if ts_smb else None),
                "reconciles_logged": reconciles}

    res["burst_pipelined"] = burst_run(burst, True, False)
    res["burst_pipelined_unbind"] = burst_run(burst, False, False)
    res["burst_one_txn"] = burst_run(burst, True, True)
    res["burst_one_txn_unbind"] = burst_run(burst, False, True)
    log(f"burst: {res['burst_pipelined']} / one txn: {res['burst_one_txn']}")
    wait_idle(agent, w, quiet=0.5)
    res["rss_end"] = memory(agent)
    log(f"RSS: {res['rss_end']}")
    if args.full_reconciles > 0:
        # The SB bench's: the agent restarted with reconcile_interval = --full-interval, the
        # duration of its next periodic reconciles (nothing to change) from its metrics.
        res["full_reconcile"] = full_reconciles(lab, w, agent, args, cold)
        log(f"full reconcile: {res['full_reconcile']}")
    res["netlink_overruns"] = w.overruns
    return res


# --------------------------------------------------------------------------------------------
# The upstream NB driver (ovn-bgp-agent 7.0.0 from PyPI) on the same Northbound, for comparison


UPSTREAM_ARP_PREFIX = "169.254."  # upstream constants.ARP_IPV4_PREFIX / NDP_IPV6_PREFIX:
UPSTREAM_NDP_PREFIX = "fd53:d91e:400:7f17:"  # addresses it puts on each provider bridge
OVS_FLOW_COOKIES = ("999", "998")  # OVS_RULE_COOKIE / OVS_VRF_RULE_COOKIE (ours uses 999 too)


class UpstreamAgent(Agent):
    """Upstream `ovn-bgp-agent` (7.0.0, installed in a venv by nb_bgp_bench.sh) with
    `driver = nb_ovn_bgp_driver`, `exposing_method = underlay`, run inside the chassis netns.

    The config-only workarounds of issue 13 that let it run in the lab:
    - `bgp-vrf`/`bgp-nic` created beforehand as the lab's stand-ins (a bridge and an ifb enslaved
      to it: this kernel has neither the vrf nor the dummy module); upstream's `ensure_vrf` and
      `ensure_dummy_device` only set an existing device up;
    - a private mount namespace (`unshare -m`) in which the lab's chassis FRR vty socket dir is
      bound onto `/run/frr` (upstream's vtysh calls hard-code `--vty_socket /run/frr/`) and a fresh
      copy of `/etc/iproute2` onto `/etc/iproute2` (upstream appends `<n> br-ex` to
      `/etc/iproute2/rt_tables`: the host's file stays untouched);
    - `[agent] root_helper = env PATH=<venv>/bin:...`: oslo.privsep starts its daemons as
      `<root_helper> privsep-helper ...`; we are root already, so the helper only has to find the
      venv's `privsep-helper` (the default `sudo` would search the secure_path, not the venv);
    - `OVS_RUNDIR` in its environment, so its `ovs-vsctl`/`ovs-ofctl` calls reach the lab's OVS.
    """

    def __init__(self, venv, env, lab_conf, lab_dir, debug=False):
        super().__init__(os.path.join(venv, "bin", "ovn-bgp-agent"),
                         os.path.join(lab_dir, "upstream-bgp-agent.conf"), lab_dir,
                         os.path.join(lab_dir, "upstream-agent.log"))
        self.venv, self.env = venv, env
        self.iproute2 = os.path.join(lab_dir, "upstream-iproute2")
        text = open(lab_conf).read()
        table = re.search(r"(?m)^bgp_vrf_table_id = (\d+)$", text)
        self.vrf_table = table.group(1) if table else "10"
        with open(self.conf, "w") as f:
            f.write(f"""# upstream ovn-bgp-agent 7.0.0 for the lab in {lab_dir} (written by nb_bgp_bench.py)
[DEFAULT]
debug = {debug}
driver = nb_ovn_bgp_driver
exposing_method = underlay
expose_tenant_networks = True
ovsdb_connection = unix:{env["OVS_SOCK"]}
bgp_AS = {env["CHASSIS_AS"]}
bgp_router_id = {env["CHASSIS_IP4"]}
bgp_nic = bgp-nic
bgp_vrf = bgp-vrf
bgp_vrf_table_id = {self.vrf_table}

[agent]
root_helper = env PATH={venv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

[ovn]
ovn_nb_connection = unix:{env["NB_SOCK"]}
""")

    def command(self):
        ns = self.env["NS_CHASSIS"]
        return ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "--",
                "sh", "-c",
                'mount --bind "$1" /run/frr && mount --bind "$2" /etc/iproute2 && shift 2 && '
                'exec "$@"', "sh", self.env["VTY_CHASSIS"], self.iproute2,
                "env", f"OVS_RUNDIR={self.env['OVS_RUNDIR']}",
                self.binary, "--config-file", self.conf, "--log-file", self.log_path]

    def start(self):
        ns = self.env["NS_CHASSIS"]
        shutil.rmtree(self.iproute2, ignore_errors=True)
        shutil.copytree("/etc/iproute2", self.iproute2, symlinks=True)
        for args in (["link", "add", "bgp-vrf", "type", "bridge"],
                     ["link", "add", "bgp-nic", "type", "ifb"],
                     ["link", "set", "bgp-nic", "master", "bgp-vrf"],
                     ["link", "set", "bgp-vrf", "up"], ["link", "set", "bgp-nic", "up"]):
            subprocess.run(["ip", "-n", ns, *args], check=True)
        open(self.log_path, "w").close()
        self.log_pos = 0
        t0 = time.time()
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path + ".stderr", "w"))
        # `ip netns exec`, `unshare`, `sh -c exec` and `env` all exec: the pid is the agent's.
        with open(os.path.join(self.lab_dir, "upstream-agent.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        return t0

    def privsep_pids(self):
        """The privsep daemons it started (their command line names this agent's config)."""
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == getattr(self.proc, "pid", None):
                continue
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if any(b"privsep-helper" in a for a in cmd) and self.conf.encode() in cmd:
                pids.append(int(d))
        return sorted(pids)

    def stop(self):
        helpers = self.privsep_pids() if self.proc else []
        super().stop()
        for pid in helpers:  # they exit with their channel; make sure
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def all_cpu_seconds(self):
        total = 0.0
        for pid in [self.proc.pid] + self.privsep_pids():
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def memory(self):
        """VmRSS/VmHWM/Pss (MiB) of the agent process, of each privsep daemon, and summed
        (RSS summed counts the shared pages of the Python binary in each process; Pss does not)."""
        def one(pid):
            out = {}
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in ("VmRSS", "VmHWM"):
                        out[k] = int(v.split()[0]) / 1024.0
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k == "Pss":
                        out[k] = int(v.split()[0]) / 1024.0
            return out
        agent = one(self.proc.pid)
        helpers = {}
        for pid in self.privsep_pids():
            try:
                helpers[str(pid)] = one(pid)
            except OSError:
                pass
        total = {k: agent[k] + sum(h.get(k, 0.0) for h in helpers.values())
                 for k in ("VmRSS", "VmHWM", "Pss")}
        return {"agent": agent, "privsep": helpers, "sum": total}


def clean_chassis_state(env, extra_tables=()):
    """Remove what either agent left in the chassis netns and on br-ex, so each starts cold:
    what clean_agent_kernel_state removes (bgp-nic, bgp-vrf, non-default rules and their
    tables), plus the tables upstream recorded in its rt_tables copy, the permanent neighbours
    and the upstream ARP/NDP addresses on the provider bridges, and the cookie-999/998 flows."""
    ns = env["NS_CHASSIS"]
    tables = clean_agent_kernel_state(ns)
    bridges = ["br-ex"]
    for t in extra_tables:
        for fam in ("-4", "-6"):
            subprocess.run(["ip", "-n", ns, fam, "route", "flush", "table", str(t)],
                           capture_output=True)
    for br in bridges:
        subprocess.run(["ip", "-n", ns, "neigh", "flush", "dev", br, "nud", "permanent"],
                       capture_output=True)
        addrs = json.loads(subprocess.run(["ip", "-n", ns, "-j", "addr", "show", "dev", br],
                                          capture_output=True, text=True).stdout or "[]")
        for link in addrs:
            for a in link.get("addr_info", []):
                if a["local"].startswith((UPSTREAM_ARP_PREFIX, UPSTREAM_NDP_PREFIX)):
                    subprocess.run(["ip", "-n", ns, "addr", "del",
                                    f"{a['local']}/{a['prefixlen']}", "dev", br],
                                   capture_output=True)
        ovs_env = dict(os.environ, OVS_RUNDIR=env["OVS_RUNDIR"])
        for cookie in OVS_FLOW_COOKIES:
            subprocess.run(["ovs-ofctl", "del-flows", br, f"cookie={cookie}/-1"],
                           env=ovs_env, capture_output=True)
    return sorted(tables | {str(t) for t in extra_tables})


def upstream_tables(up):
    """Routing tables upstream created for the provider bridges (in its rt_tables copy)."""
    out = []
    try:
        for line in open(os.path.join(up.iproute2, "rt_tables")):
            m = re.match(r"^\s*(\d+)\s+(br-\S+)\s*$", line)
            if m:
                out.append(m.group(1))
    except OSError:
        pass
    return out


def wait_cpu_idle(up, w, quiet=2.0, timeout=600):
    """Until the agent and its privsep daemons used no CPU for `quiet` s (first sync done)."""
    t0 = time.time()
    last_cpu, last_change = up.all_cpu_seconds(), time.time()
    while time.time() - t0 < timeout:
        w.pump(0.25)
        cpu = up.all_cpu_seconds()
        if cpu != last_cpu:
            last_cpu, last_change = cpu, time.time()
        elif time.time() - last_change >= quiet:
            return round(last_change - t0, 1)
        if not up.alive():
            return None
    return None


def log_tail(path, lines=40):
    try:
        return open(path, errors="replace").read().splitlines()[-lines:]
    except OSError:
        return []


def measure_upstream(lab, w, up, args):
    """Cold start to all K local addresses, memory after the first sync, and bind/unbind
    latency for `args.upstream_events` ports, of the upstream agent on the NB as it is now."""
    res = {}
    k = args.cold_start_ports
    cold = lab.ports[:k]
    events = lab.ports[k:k + args.upstream_events]
    want = {ip for _, ip, _ in cold}
    res["tables_cleaned_before"] = clean_chassis_state(lab.env)
    w.dump_addresses()
    if want & w.present:
        raise RuntimeError("cold-start addresses still present before the upstream start")
    try:
        t0 = up.start()
        try:
            w.wait(lambda: want <= w.present or not up.alive(), args.upstream_timeout,
                   "upstream cold start exposure")
        except TimeoutError:
            got = len(want & w.present)
            res["cold_start"] = {"did_not_finish_s": args.upstream_timeout,
                                 "addresses_present": got, "local_ports": k}
            log(f"upstream: cold start did not finish in {args.upstream_timeout} s "
                f"({got}/{k} addresses)")
            if up.alive():
                res["rss_at_timeout"] = up.memory()
            res["log_tail"] = log_tail(up.log_path)
            return res
        if not up.alive():
            res["exited"] = up.proc.returncode
            res["log_tail"] = log_tail(up.log_path) + log_tail(up.log_path + ".stderr")
            log(f"upstream: exited with {up.proc.returncode}; see {up.log_path}")
            return res
        t_all = max(w.added[ip] for ip in want)
        res["cold_start"] = {"local_ports": k,
                             "exec_to_all_addresses_ms": round((t_all - t0) * 1000, 1),
                             "exec_to_first_address_ms":
                                 round((min(w.added[ip] for ip in want) - t0) * 1000, 1)}
        log(f"upstream: cold start {res['cold_start']}")
        idle = wait_cpu_idle(up, w, timeout=args.upstream_timeout)
        res["first_sync_cpu_idle_after_s"] = idle
        res["rss_after_first_sync"] = up.memory()
        log(f"upstream: memory after the first sync {res['rss_after_first_sync']['sum']} "
            f"(agent {res['rss_after_first_sync']['agent']})")

        def one_by_one(ports, bound):
            lat = []
            for i, ip, uuid in ports:
                wait_idle(up, w, quiet=args.gap)
                t_send = time.time()
                req = w.sb.transact_async([lab.bind_op(i, uuid, bound)])
                try:
                    t_ev = w.wait_ip(ip, bound, t_send, args.upstream_event_timeout,
                                     f"upstream address {ip}" if bound
                                     else f"upstream removal of {ip}")
                except TimeoutError:
                    w.reply(req)
                    return {"from_send": summary(lat) if lat else None, "done": len(lat),
                            "did_not_finish": f"event {len(lat) + 1} of {len(ports)}: no "
                            f"{'address' if bound else 'removal'} within "
                            f"{args.upstream_event_timeout} s"}
                w.reply(req)
                lat.append(t_ev - t_send)
            return {"from_send": summary(lat), "done": len(lat)}

        if events:
            cpu0 = up.all_cpu_seconds()
            res["bind"] = one_by_one(events, True)
            res["bind"]["cpu_ms_per_event_incl_privsep"] = round(
                (up.all_cpu_seconds() - cpu0) * 1000 / max(1, res["bind"]["done"]), 2)
            log(f"upstream: bind {res['bind']}")
            res["unbind"] = one_by_one(events, False)
            log(f"upstream: unbind {res['unbind']}")
            # Leave the measured ports as our agent found them, whatever upstream did.
            w.transact([lab.bind_op(i, u, False) for i, _, u in events], what="unbind events")
        wait_idle(up, w, quiet=0.5)
        res["rss_end"] = up.memory()
        res["log_errors"] = [line for line in open(up.log_path, errors="replace")
                             if " ERROR " in line or "Traceback" in line][:20]
    finally:
        tables = upstream_tables(up)
        up.stop()
        res["tables_cleaned_after"] = clean_chassis_state(lab.env, tables)
    return res


def memory(agent):
    """VmRSS/VmHWM, and from smaps_rollup the anonymous memory and the part of it in
    transparent huge pages (MiB): a huge page partly used counts whole in RSS."""
    out = agent.memory()
    try:
        with open(f"/proc/{agent.proc.pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Anonymous", "AnonHugePages"):
                    out[k] = int(v.split()[0]) / 1024.0
    except OSError:
        pass
    return out


def nb_agent_conf(lab_conf, out_path, env=None):
    """The lab's configuration with the NB driver (the lab writes `driver = ovn_bgp_driver`);
    with the lab's `env` (--ovn), `exposing_method = ovn` on its node-local OVN cluster as
    scripts/demo.sh --driver nb-ovn configures it, and no tenant networks."""
    text = open(lab_conf).read()
    new, n = re.subn(r"(?m)^driver = ovn_bgp_driver$", "driver = nb_ovn_bgp_driver", text)
    if n != 1:
        raise RuntimeError(f"{lab_conf}: no `driver = ovn_bgp_driver` line to replace")
    if env is not None:
        for key, value in (("exposing_method", "ovn"), ("expose_tenant_networks", "False")):
            new, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", new)
            if n != 1:
                raise RuntimeError(f"{lab_conf}: no `{key}` line to replace")
        if "LOCAL_NB_SOCK" not in env:
            raise RuntimeError("--ovn: the lab has no node-local OVN cluster "
                               "(scripts/lab/local-ovn.sh; nb_bgp_bench.sh --ovn runs it)")
        new += (f"\n[local_ovn_cluster]\novn_nb_connection = unix:{env['LOCAL_NB_SOCK']}\n"
                f"peer_ips = {env['FABRIC_PEER_IP4']}\n"
                f"provider_networks_pool_prefixes = {env['PUBLIC_CIDR4']}\n"
                f"external_nics = {env['FABRIC_NIC']}\n"
                f"bgp_chassis_id = {env['LOCAL_OVN_CHASSIS']}\n")
    with open(out_path, "w") as f:
        f.write(new)
    return out_path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lab-dir")
    ap.add_argument("--agent", help="the ovn-bgp-agent binary (release build)")
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="N: Logical_Switch_Port rows in the NB, comma separated, increasing")
    add_event_args(ap)
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after loading the bulk")
    ap.add_argument("--gap", type=float, default=0.05,
                    help="agent log quiet time before each single event (s)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--busy", default="",
                    help="busy gateway: exposures on this chassis (centralized FIPs + tenant "
                         "VMs), comma separated, increasing; the bulk is loaded once, to the "
                         "last of --sizes")
    ap.add_argument("--ovn", action="store_true",
                    help="exposing_method = ovn on the lab's node-local OVN cluster "
                         "(scripts/lab/local-ovn.sh): each exposure is also timed to its "
                         "Static_MAC_Binding row in the local NB")
    ap.add_argument("--full-reconciles", type=int, default=5,
                    help="periodic full reconciles timed per run (0: skip)")
    ap.add_argument("--full-interval", type=int, default=2,
                    help="reconcile_interval (s) of the agent while timing full reconciles")
    ap.add_argument("--out", help="JSON results file")
    ap.add_argument("--upstream-venv",
                    help="also run upstream ovn-bgp-agent (NB driver) from this venv at each N, "
                         "after ours, on the same NB (nb_bgp_bench.sh BENCH_UPSTREAM=1 makes it)")
    ap.add_argument("--upstream-events", type=int, default=50,
                    help="bind/unbind events measured on upstream (a subset of ours)")
    ap.add_argument("--upstream-timeout", type=float, default=600,
                    help="s upstream may take for its cold start (and its first sync to end)")
    ap.add_argument("--upstream-event-timeout", type=float, default=30,
                    help="s upstream may take for one bind/unbind before that phase is given up")
    ap.add_argument("--upstream-debug", action="store_true", help="upstream `debug = True`")
    ap.add_argument("--skip-ours", action="store_true",
                    help="measure upstream only (to debug its set-up)")
    ap.add_argument("--report", help="print the markdown table of an existing JSON results file")
    args = ap.parse_args()
    if args.report:
        print(markdown(json.load(open(args.report))))
        return
    if args.stop_vswitchd and args.ovn:
        ap.error("--stop-vswitchd stops the ovs-vswitchd that takes --ovn's FDB entries")

    env = read_env(args.lab_dir)
    # The OVSDB connection of the Watcher (named `sb` there) is the Northbound here.
    nb = Ovsdb(env["NB_SOCK"], "OVN_Northbound")
    w = Watcher(nb, netlink_socket_in(env["NS_CHASSIS"]))
    lab = NbLab(env, w, ovn=args.ovn)
    conf = nb_agent_conf(env["AGENT_CONF"], os.path.join(args.lab_dir, "bgp-agent-nb.conf"),
                         env if args.ovn else None)
    smb = LocalNbBindings(env["LOCAL_NB_SOCK"], w) if args.ovn else None
    agent = Agent(args.agent, conf, args.lab_dir, os.path.join(args.lab_dir, "agent-bench.log"))
    upstream = (UpstreamAgent(args.upstream_venv, env, env["AGENT_CONF"], args.lab_dir,
                              debug=args.upstream_debug) if args.upstream_venv else None)
    results = {"machine_start": machine_info(), "params": vars(args), "runs": [],
               "lab_ovn": env.get("LAB_OVN", "system"),
               "exposing_method": "ovn" if args.ovn else "underlay",
               # allocator settings passed to the agent (e.g. MIMALLOC_ALLOW_THP=0)
               "agent_env": {k: v for k, v in os.environ.items() if k.startswith("MIMALLOC_")}}
    measured = args.cold_start_ports + args.events + args.burst
    ovn_dir = env["OVN_RUNDIR"]
    try:
        # northd would overwrite `up` from the Southbound and compute flows for the whole bulk.
        subprocess.run(["ovn-appctl", "-t", os.path.join(ovn_dir, "ovn-northd.ctl"), "pause"],
                       check=True)
        if args.ovn:
            # The local cluster's northd would compute it again per binding (module docstring).
            subprocess.run(["ovn-appctl", "-t", os.path.join(env["LOCAL_OVN_DIR"], "northd.ctl"),
                            "pause"], check=True)
            log("the local cluster's ovn-northd paused")
        log(f"ovn-northd paused; provider patch port {lab.wait_patch_port()} in br-ex")
        lab.set_fip_centralized()
        lab.create_measured_ports(measured, args.cold_start_ports)
        base = lab.count("Logical_Switch_Port")
        sizes = [int(s) for s in args.sizes.split(",")]
        # Without --busy: one run per N. With it: the bulk loaded once, one run per busy size.
        steps = [(size, 0) for size in sizes] if not args.busy else \
            [(sizes[-1], int(b)) for b in args.busy.split(",")]
        if (args.busy or args.ovn) and (upstream or args.skip_ours):
            raise SystemExit("--busy and --ovn measure our agent only (no BENCH_UPSTREAM)")
        for size, busy in steps:
            want = max(0, size - base) // LSPS_PER_PROJECT
            t0 = time.time()
            lab.add_bulk(want)
            load_s = round(time.time() - t0, 1)
            if busy:
                t0 = time.time()
                lab.add_busy(busy)
                busy_s = round(time.time() - t0, 1)
            time.sleep(args.settle)
            counts = {t: lab.count(t) for t in ("Logical_Switch_Port", "Logical_Switch",
                                                "Logical_Router", "Logical_Router_Port", "NAT")}
            counts["bulk_load_s"] = load_s
            if busy:
                counts["busy_load_s"] = busy_s
            log(f"=== N = {counts['Logical_Switch_Port']} LSPs in the NB: {counts}; "
                f"{len(lab.busy_ips)} busy exposures on {lab.busy_routers} routers here ===")
            run = {"nb_rows": counts} if args.skip_ours else measure(lab, w, agent, args, counts, smb)
            run["lsps"] = counts["Logical_Switch_Port"]
            if upstream:
                # One after the other, never together: both would write bgp-nic.
                agent.stop()
                log("=== upstream ovn-bgp-agent 7.0.0 (NB driver) on the same NB ===")
                run["upstream"] = measure_upstream(lab, w, upstream, args)
            run["loadavg"] = open("/proc/loadavg").read().split()[:3]
            results["runs"].append(run)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        agent.stop()
        if upstream:
            upstream.stop()
    results["machine_end"] = machine_info()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    log(f"results in {args.out}")
    print(markdown(results))


def markdown(results):
    """The figures as a markdown table (docs/nb-bgp-benchmark.md)."""
    rows = [
        ("exposures of the busy routers here (FIPs + tenant VMs)",
         lambda r: f"{r['busy_exposures']} ({r['busy_routers']} routers)"),
        ("NB rows: LS / LR / LRP / NAT",
         lambda r: " / ".join(str(r["nb_rows"][t]) for t in
                              ("Logical_Switch", "Logical_Router", "Logical_Router_Port", "NAT"))),
        ("bulk load time, this size (s)", lambda r: f"{r['nb_rows']['bulk_load_s']}"),
        ("cold start: exec to all K (+ busy) addresses (ms)",
         lambda r: f"{r['cold_start']['exec_to_all_addresses_ms']}"),
        ("cold start, repeated (ms)", lambda r: " / ".join(map(str, r["cold_start_repeats_ms"]))),
        ("cold start: exec to NB replica ready (ms)",
         lambda r: " / ".join(map(str, r["cold_start_replica_ready_ms"]))),
        ("rows in the agent's replica at start", lambda r: f"{r['cold_start']['replica_rows']}"),
    ] + event_rows("NB") + [
        ("anonymous / of it in huge pages, at end (MiB)",
         lambda r: f"{r['rss_end']['Anonymous']:.1f} / {r['rss_end']['AnonHugePages']:.1f}"),
    ]
    runs = results["runs"]
    if results.get("exposing_method") == "ovn":
        pq = lambda d: f"{d['p50_ms']} / {d['p99_ms']}"  # noqa: E731
        rows[0] = ("FIPs of the busy routers here (their tenant VMs not exposed)", rows[0][1])
        rows[5:5] = [
            ("cold start: exec to every Static_MAC_Binding in the local NB (ms)",
             lambda r: " / ".join(map(str, r["cold_start_bindings_ms"]))),
            ("bind → Static_MAC_Binding in the local NB p50 / p99 (ms)",
             lambda r: pq(r["bind"]["binding_from_send"])),
            ("bind → address and row, the later, p50 / p99 (ms)",
             lambda r: pq(r["bind"]["both_from_send"])),
            ("unbind → row deleted p50 / p99 (ms)",
             lambda r: pq(r["unbind"]["binding_from_send"])),
            ("burst 50 (50 txns): first send → last row (ms)",
             lambda r: f"{r['burst_pipelined']['send_to_last_binding_ms']}"),
        ]
    busy = any(r.get("busy_exposures") for r in runs)
    head = [f"{r.get('busy_exposures', 0)} here, N = {r['lsps']} LSPs" if busy
            else f"N = {r['lsps']} LSPs" for r in runs]
    out = [markdown_table(runs, head, rows if busy else rows[1:])]
    if any("upstream" in r for r in runs):
        out += ["", upstream_markdown(results)]
    return "\n".join(out)


def upstream_markdown(results):
    """Ours against upstream 7.0.0 on the same NB, one column per N (docs/nb-bgp-benchmark.md)."""
    runs = [r for r in results["runs"] if "upstream" in r]

    def up_cold(r):
        c = r["upstream"].get("cold_start") or {}
        if "did_not_finish_s" in c:
            return f"did not finish in {c['did_not_finish_s']:.0f} s ({c['addresses_present']}/{c['local_ports']})"
        if "exec_to_all_addresses_ms" in c:
            return f"{c['exec_to_all_addresses_ms']}"
        return f"exited ({r['upstream'].get('exited')})"

    def ours_hwm(r):
        return r["rss_end"]["VmHWM"]

    def up_mem(r, key, what):
        return r["upstream"]["rss_after_first_sync"][what][key]

    def lat(d):
        if not d or not d.get("from_send"):
            return "n/a"
        text = f"{d['from_send']['p50_ms']} / {d['from_send']['p99_ms']}"
        if d.get("did_not_finish"):
            text += f" ({d['did_not_finish']})"
        return text

    rows = [
        ("ours: cold start to all K addresses (ms, first of the runs)",
         lambda r: f"{r['cold_start']['exec_to_all_addresses_ms']}"),
        ("upstream: cold start to all K addresses (ms)", up_cold),
        ("ours: VmHWM at end (MiB)", lambda r: f"{ours_hwm(r):.1f}"),
        ("upstream agent process: VmRSS / VmHWM after its first sync (MiB)",
         lambda r: f"{up_mem(r, 'VmRSS', 'agent'):.1f} / {up_mem(r, 'VmHWM', 'agent'):.1f}"),
        ("upstream agent + privsep daemons: VmRSS sum / Pss sum (MiB)",
         lambda r: f"{up_mem(r, 'VmRSS', 'sum'):.1f} / {up_mem(r, 'Pss', 'sum'):.1f} "
                   f"({len(r['upstream']['rss_after_first_sync']['privsep'])} daemons)"),
        ("upstream agent process VmRSS ÷ ours VmHWM",
         lambda r: f"{up_mem(r, 'VmRSS', 'agent') / ours_hwm(r):.1f}×"),
        ("upstream agent + privsep VmRSS ÷ ours VmHWM",
         lambda r: f"{up_mem(r, 'VmRSS', 'sum') / ours_hwm(r):.1f}×"),
        ("ours: bind → address p50 / p99 (ms)", lambda r: lat(r["bind"])),
        ("upstream: bind → address p50 / p99 (ms)", lambda r: lat(r["upstream"].get("bind"))),
        ("upstream: unbind → removal p50 / p99 (ms)",
         lambda r: lat(r["upstream"].get("unbind"))),
        ("upstream: CPU per bind event, agent + privsep (ms)",
         lambda r: f"{r['upstream']['bind']['cpu_ms_per_event_incl_privsep']}"),
        ("upstream: VmRSS sum at end (MiB)",
         lambda r: f"{r['upstream']['rss_end']['sum']['VmRSS']:.1f}"),
    ]
    out = ["| ours vs upstream 7.0.0 | " + " | ".join(f"N = {r['lsps']} LSPs" for r in runs) + " |",
           "|---|" + "---|" * len(runs)]
    for label, f in rows:
        cells = []
        for r in runs:
            try:
                cells.append(f(r))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("n/a")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
