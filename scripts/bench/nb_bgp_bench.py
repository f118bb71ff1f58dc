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
- agent RSS: VmRSS and VmHWM from /proc/<pid>/status; agent CPU per bind event.

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
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sb_bgp_bench import (  # noqa: E402  (the SB bench is the library of this one)
    Agent,
    Ovsdb,
    Watcher,
    clean_agent_kernel_state,
    log,
    machine_info,
    mac_of,
    measured_ip,
    netlink_socket_in,
    omap,
    parse_log_line,
    read_env,
    set_of,
    summary,
    uuid_ref,
    wait_idle,
    wait_reconciled,
)

PROVIDER_LS = "bench-provider"
REMOTE_HOST = "bench-remote.example"  # where the measured ports are when not bound here
REMOTE_HOSTS = 500
PROJECTS_PER_PROVIDER = 1000
LSPS_PER_PROJECT = 10
PROJECTS_PER_TXN = 500
PROJECT_ID = "0123456789abcdef0123456789abcdef"


def rid(kind, i):
    """A Neutron-like id (uuid format) for object `kind` number `i`."""
    return f"{kind:08x}-{(i >> 32) & 0xffff:04x}-{(i >> 16) & 0xffff:04x}-0000-{i & 0xffff:012x}"


def ip4(base, i):
    n = base + i
    return f"{n >> 24 & 255}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


PROVIDER_VM_BASE = (172 << 24) | (16 << 16)  # 172.16.0.0/12: provider VMs and router gateways


class NbLab:
    def __init__(self, env, watcher):
        self.env = env
        self.w = watcher
        self.here = env["CHASSIS_HOSTNAME"]
        self.ports = []  # measured ports: (name, ip, NB uuid)
        self.projects = 0
        self.providers = {}  # provider index -> Logical_Switch uuid

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
            "neutron:network_name": PROVIDER_LS,
            "neutron:project_id": PROJECT_ID,
            "neutron:revision_number": "2",
        })

    def bind_op(self, i, uuid, bound):
        host = self.here if bound else REMOTE_HOST
        return {"op": "update", "table": "Logical_Switch_Port",
                "where": [["_uuid", "==", uuid_ref(uuid)]],
                "row": {"options": omap({"requested-chassis": host}), "up": bound,
                        "external_ids": self.measured_ext(i, host)}}

    def create_measured_ports(self, count, bound_here):
        """A provider switch with a localnet port on `public` and `count` VM ports."""
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
        ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": "ln",
                    "row": {"name": "provnet-bench", "type": "localnet", "addresses": "unknown",
                            "options": omap({"network_name": "public"})}})
        refs.append(["named-uuid", "ln"])
        ops.append({"op": "insert", "table": "Logical_Switch",
                    "row": {"name": PROVIDER_LS, "ports": set_of(refs),
                            "external_ids": omap({"neutron:network_name": "bench"})}})
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


# --------------------------------------------------------------------------------------------


def measure(lab, w, agent, args, counts):
    res = {"nb_rows": counts}
    k = args.cold_start_ports
    cold = lab.ports[:k]
    events = lab.ports[k:k + args.events]
    burst = lab.ports[k + args.events:k + args.events + args.burst]

    def cold_start():
        agent.stop()
        tables = clean_agent_kernel_state(lab.env["NS_CHASSIS"])
        w.dump_addresses()
        want = {ip for _, ip, _ in cold}
        if want & w.present:
            raise RuntimeError("cold-start addresses still present after removing bgp-nic")
        t0 = agent.start()
        w.wait(lambda: want <= w.present or not agent.alive(), args.timeout, "cold start exposure")
        if not agent.alive():
            raise RuntimeError(f"agent exited; see {agent.log_path}")
        t_all = max(w.added[ip] for ip in want)
        t_first = min(w.added[ip] for ip in want)
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
            "exec_to_all_addresses_ms": round((t_all - t0) * 1000, 1),
            "exec_to_first_address_ms": round((t_first - t0) * 1000, 1),
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
    log(f"cold start: {res['cold_start_repeats_ms']} ms; replica {res['cold_start']['replica_rows']}")
    wait_idle(agent, w, quiet=1.0)
    res["rss_after_start"] = memory(agent)

    def one_by_one(ports, bound):
        lat, tail, rtt = [], [], []
        for i, ip, uuid in ports:
            wait_idle(agent, w, quiet=args.gap)
            t_send = time.time()
            req = w.sb.transact_async([lab.bind_op(i, uuid, bound)])
            if bound:
                w.wait(lambda: ip in w.present and w.added.get(ip, 0) >= t_send, args.timeout,
                       f"address {ip}")
                t_ev = w.added[ip]
            else:
                w.wait(lambda: ip not in w.present and w.removed.get(ip, 0) >= t_send,
                       args.timeout, f"removal of {ip}")
                t_ev = w.removed[ip]
            t_reply, _ = w.reply(req)
            t_rec = wait_reconciled(agent, w, t_send)
            lat.append(t_ev - t_send)
            rtt.append(t_reply - t_send)
            if t_rec:
                tail.append(max(0.0, t_rec - t_ev))
        return {"from_send": summary(lat), "transact_rtt": summary(rtt),
                "address_to_reconcile_logged": summary(tail) if tail else None}

    cpu0 = agent.cpu_seconds()
    t_cpu0 = time.time()
    res["bind"] = one_by_one(events, True)
    cpu1 = agent.cpu_seconds()
    res["bind"]["agent_cpu_ms_per_event"] = round((cpu1[0] - cpu0[0]) * 1000 / len(events), 2)
    res["bind"]["children_cpu_ms_per_event"] = round((cpu1[1] - cpu0[1]) * 1000 / len(events), 2)
    res["bind"]["wall_s"] = round(time.time() - t_cpu0, 1)
    log(f"bind: {res['bind']['from_send']}")
    res["unbind"] = one_by_one(events, False)
    log(f"unbind: {res['unbind']['from_send']}")

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
                "reconciles_logged": reconciles}

    res["burst_pipelined"] = burst_run(burst, True, False)
    res["burst_pipelined_unbind"] = burst_run(burst, False, False)
    res["burst_one_txn"] = burst_run(burst, True, True)
    res["burst_one_txn_unbind"] = burst_run(burst, False, True)
    log(f"burst: {res['burst_pipelined']} / one txn: {res['burst_one_txn']}")
    wait_idle(agent, w, quiet=0.5)
    res["rss_end"] = memory(agent)
    log(f"RSS: {res['rss_end']}")
    res["netlink_overruns"] = w.overruns
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


def nb_agent_conf(lab_conf, out_path):
    """The lab's configuration with the NB driver (the lab writes `driver = ovn_bgp_driver`)."""
    text = open(lab_conf).read()
    new, n = re.subn(r"(?m)^driver = ovn_bgp_driver$", "driver = nb_ovn_bgp_driver", text)
    if n != 1:
        raise RuntimeError(f"{lab_conf}: no `driver = ovn_bgp_driver` line to replace")
    with open(out_path, "w") as f:
        f.write(new)
    return out_path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lab-dir")
    ap.add_argument("--agent", help="the ovn-bgp-agent binary (release build)")
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="N: Logical_Switch_Port rows in the NB, comma separated, increasing")
    ap.add_argument("--cold-start-ports", type=int, default=100, help="K")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--cold-starts", type=int, default=3, help="cold starts per N")
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after loading the bulk")
    ap.add_argument("--gap", type=float, default=0.05,
                    help="agent log quiet time before each single event (s)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out", help="JSON results file")
    ap.add_argument("--report", help="print the markdown table of an existing JSON results file")
    args = ap.parse_args()
    if args.report:
        print(markdown(json.load(open(args.report))))
        return

    env = read_env(args.lab_dir)
    # The OVSDB connection of the Watcher (named `sb` there) is the Northbound here.
    nb = Ovsdb(env["NB_SOCK"], "OVN_Northbound")
    w = Watcher(nb, netlink_socket_in(env["NS_CHASSIS"]))
    lab = NbLab(env, w)
    conf = nb_agent_conf(env["AGENT_CONF"], os.path.join(args.lab_dir, "bgp-agent-nb.conf"))
    agent = Agent(args.agent, conf, args.lab_dir, os.path.join(args.lab_dir, "agent-bench.log"))
    results = {"machine_start": machine_info(), "params": vars(args), "runs": [],
               # allocator settings passed to the agent (e.g. MIMALLOC_ALLOW_THP=0)
               "agent_env": {k: v for k, v in os.environ.items() if k.startswith("MIMALLOC_")}}
    measured = args.cold_start_ports + args.events + args.burst
    ovn_dir = env["OVN_RUNDIR"]
    try:
        # northd would overwrite `up` from the Southbound and compute flows for the whole bulk.
        subprocess.run(["ovn-appctl", "-t", os.path.join(ovn_dir, "ovn-northd.ctl"), "pause"],
                       check=True)
        log("ovn-northd paused")
        lab.set_fip_centralized()
        lab.create_measured_ports(measured, args.cold_start_ports)
        base = lab.count("Logical_Switch_Port")
        for size in [int(s) for s in args.sizes.split(",")]:
            want = max(0, size - base) // LSPS_PER_PROJECT
            t0 = time.time()
            lab.add_bulk(want)
            load_s = round(time.time() - t0, 1)
            time.sleep(args.settle)
            counts = {t: lab.count(t) for t in ("Logical_Switch_Port", "Logical_Switch",
                                                "Logical_Router", "Logical_Router_Port", "NAT")}
            counts["bulk_load_s"] = load_s
            log(f"=== N = {counts['Logical_Switch_Port']} LSPs in the NB: {counts} ===")
            run = measure(lab, w, agent, args, counts)
            run["lsps"] = counts["Logical_Switch_Port"]
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


def markdown(results):
    """The figures as a markdown table (docs/nb-bgp-benchmark.md)."""
    rows = [
        ("NB rows: LS / LR / LRP / NAT",
         lambda r: " / ".join(str(r["nb_rows"][t]) for t in
                              ("Logical_Switch", "Logical_Router", "Logical_Router_Port", "NAT"))),
        ("bulk load time, this size (s)", lambda r: f"{r['nb_rows']['bulk_load_s']}"),
        ("cold start: exec to all K addresses (ms)",
         lambda r: f"{r['cold_start']['exec_to_all_addresses_ms']}"),
        ("cold start, repeated (ms)", lambda r: " / ".join(map(str, r["cold_start_repeats_ms"]))),
        ("cold start: exec to NB replica ready (ms)",
         lambda r: " / ".join(map(str, r["cold_start_replica_ready_ms"]))),
        ("rows in the agent's replica at start", lambda r: f"{r['cold_start']['replica_rows']}"),
        ("bind → address p50 / p99 (ms)",
         lambda r: f"{r['bind']['from_send']['p50_ms']} / {r['bind']['from_send']['p99_ms']}"),
        ("bind → address max (ms)", lambda r: f"{r['bind']['from_send']['max_ms']}"),
        ("unbind → removal p50 / p99 (ms)",
         lambda r: f"{r['unbind']['from_send']['p50_ms']} / {r['unbind']['from_send']['p99_ms']}"),
        ("NB transact round trip p50 / p99 (ms)",
         lambda r: f"{r['bind']['transact_rtt']['p50_ms']} / {r['bind']['transact_rtt']['p99_ms']}"),
        ("address → `reconciled` logged p50 / p99 (ms)",
         lambda r: f"{r['bind']['address_to_reconcile_logged']['p50_ms']} / "
                   f"{r['bind']['address_to_reconcile_logged']['p99_ms']}"),
        ("burst 50 (50 txns): first send → last address (ms)",
         lambda r: f"{r['burst_pipelined']['send_to_last_address_ms']}"),
        ("burst 50 (50 txns): reconciles",
         lambda r: f"{r['burst_pipelined']['reconciles_logged']}"),
        ("burst 50 (1 txn): send → last address (ms)",
         lambda r: f"{r['burst_one_txn']['send_to_last_address_ms']}"),
        ("unbind burst 50 (50 txns): send → last removal (ms)",
         lambda r: f"{r['burst_pipelined_unbind']['send_to_last_address_ms']}"),
        ("agent CPU per bind event: own / child processes (ms)",
         lambda r: f"{r['bind']['agent_cpu_ms_per_event']} / {r['bind']['children_cpu_ms_per_event']}"),
        ("VmRSS after start / at end (MiB)",
         lambda r: f"{r['rss_after_start']['VmRSS']:.1f} / {r['rss_end']['VmRSS']:.1f}"),
        ("VmHWM at end (MiB)", lambda r: f"{r['rss_end']['VmHWM']:.1f}"),
        ("anonymous / of it in huge pages, at end (MiB)",
         lambda r: f"{r['rss_end']['Anonymous']:.1f} / {r['rss_end']['AnonHugePages']:.1f}"),
        ("load average (1/5/15 min) after the run", lambda r: " ".join(r["loadavg"])),
    ]
    runs = results["runs"]
    out = ["| | " + " | ".join(f"N = {r['lsps']} LSPs" for r in runs) + " |",
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


if __name__ == "__main__":
    main()
