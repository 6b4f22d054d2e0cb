"""Host checks over recorded command outputs (doctor/hosts.py): the configured address on an
interface that is up, routes to the other nodes (the VPN's among them), the pod network's
MTU through the path it takes, inotify limits, the kubelet's resolv.conf, the GPUs the
driver sees."""

import csv
import io
import ipaddress
import json
from typing import Optional

from contract.stack import ExpectedNode
from doctor.checks import Context
from doctor.findings import Finding, ok, problem, unchecked, warning
from doctor.hosts import UNREACHABLE

# Kubeflow's requirement (kubeflow/manifests README, "sysctl fs.inotify.max_user_instances=2280"
# and "fs.inotify.max_user_watches=1255360"), also the program's defaults
# (config/model.py HostTuning), written by prepare-host to /etc/sysctl.d/90-gpu-cluster.conf.
INOTIFY_MINIMUMS = (("fs.inotify.max_user_instances", 2280),
                    ("fs.inotify.max_user_watches", 1255360))
# The pod network's devices and the bytes their encapsulation adds to each packet: VXLAN
# (flannel.1 of RKE2's Canal, vxlan.calico) 50, IP-in-IP (tunl0; kube-router's kube-bridge
# when it tunnels) 20 (https://docs.tigera.io/calico/latest/networking/configuring/mtu).
OVERLAYS = {"flannel.1": 50, "vxlan.calico": 50, "tunl0": 20, "kube-bridge": 20}
# systemd-resolved's stub listener (resolved.conf(5)): pods given it loop DNS through
# CoreDNS's `forward . /etc/resolv.conf`.
STUB_TARGET = "/run/systemd/resolve/stub-resolv.conf"
UP_STATES = ("UP", "UNKNOWN")  # tun devices report UNKNOWN while up


def _json(outputs: dict, file: str) -> Optional[list]:
    text = outputs.get(file)
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, list) else None


def _per_host(context: Context, check: str, files: tuple[str, ...], gpus_only: bool = False):
    """(expected node, outputs) of each collected host, and could-not-check findings."""
    found, findings = [], []
    for name, outputs in sorted(context.hosts.items()):
        expected = context.stack.node(name)
        if expected is None or (gpus_only and not expected.gpus):
            continue
        if UNREACHABLE in outputs:
            findings.append(unchecked(check, f"host {name}", outputs[UNREACHABLE],
                                      "check SSH access as `pulumi up` uses it."))
            continue
        absent = [file for file in files if outputs.get(file) is None]
        if absent:
            findings.append(unchecked(check, f"host {name}", f"not collected: {', '.join(absent)}"))
            continue
        found.append((expected, outputs))
    return found, findings


def _interfaces(addr: list) -> dict[str, dict]:
    return {link["ifname"]: link for link in addr if "ifname" in link}


def _holder(addr: list, address: str) -> Optional[dict]:
    return next((link for link in addr for info in link.get("addr_info") or []
                 if info.get("local") == address), None)


def address_on_interface(context: Context) -> list[Finding]:
    check = "host-address"
    found, findings = _per_host(context, check, ("ip-addr.json",))
    for expected, outputs in found:
        addr = _json(outputs, "ip-addr.json") or []
        link, subject = _holder(addr, expected.address), f"host {expected.name}"
        if link is None:
            have = ", ".join(f"{i['local']} ({l['ifname']})" for l in addr
                             for i in l.get("addr_info") or [] if i.get("family") == "inet"
                             and not i["local"].startswith("127.")) or "none"
            findings.append(problem(
                check, subject, f"configured address {expected.address} is on no interface "
                f"(IPv4 addresses: {have})",
                f"configure {expected.address} on the cluster LAN interface of {expected.name} "
                "(netplan), or correct hosts[].address in the stack."))
        elif link.get("operstate") not in UP_STATES:
            findings.append(problem(
                check, subject, f"{expected.address} is on {link['ifname']}, which is "
                f"{link.get('operstate')}",
                f"bring {link['ifname']} up (cable, switch port, `ip link set "
                f"{link['ifname']} up`)."))
        else:
            findings.append(ok(check, subject, f"{expected.address} on {link['ifname']}"))
    return findings


def route_to(routes: list, address: str) -> Optional[dict]:
    """The main table's route to an address: the longest matching prefix, lowest metric."""
    target, best = ipaddress.ip_address(address), None
    for route in routes:
        if route.get("type", "unicast") != "unicast" or "dev" not in route:
            continue
        dst = route.get("dst", "")
        network = ipaddress.ip_network("0.0.0.0/0" if dst == "default" else dst, strict=False)
        if target not in network:
            continue
        key = (network.prefixlen, -route.get("metric", 0))
        if best is None or key > best[0]:
            best = (key, route)
    return best[1] if best else None


def _links_and_routes(context: Context, check: str):
    """(host, its interfaces by name, its routing table) of each host that answered, and
    the findings of those that did not."""
    found, findings = _per_host(context, check, ("ip-addr.json", "ip-route.json"))
    return [(expected, _interfaces(_json(outputs, "ip-addr.json") or []),
             _json(outputs, "ip-route.json") or []) for expected, outputs in found], findings


def _peers(context: Context, expected: ExpectedNode) -> list[ExpectedNode]:
    return [node for node in context.stack.nodes if node.name != expected.name]


def routes(context: Context) -> list[Finding]:
    check = "host-routes"
    found, findings = _links_and_routes(context, check)
    for expected, links, table in found:
        bad = []
        for peer in _peers(context, expected):
            route = route_to(table, peer.address)
            if route is None:
                bad.append(("problem", f"no route to {peer.name} ({peer.address})"))
            elif route["dev"] not in links or links[route["dev"]].get("operstate") not in UP_STATES:
                state = links.get(route["dev"], {}).get("operstate", "missing")
                bad.append(("problem", f"{peer.name} ({peer.address}) is routed through "
                                       f"{route['dev']}, which is {state}"))
            elif route.get("dst") == "default":
                bad.append(("problem" if context.stack.vpn else "warning", f"{peer.name} ({peer.address}) is reached only through "
                                       f"the default route (via {route.get('gateway', '?')})"))
        subject = f"host {expected.name}"
        if not bad:
            findings.append(ok(check, subject, "a route to every other node"))
            continue
        worst = problem if any(kind == "problem" for kind, _ in bad) else warning
        findings.append(worst(
            check, subject, "; ".join(text for _, text in bad),
            "on hybrid stacks the VPN tunnel (the openvpn service on the gateway) or the route "
            "to the VPC it adds is down: restart it and rerun `pulumi up`; on one LAN, check "
            "the interface and netmask."))
    return findings


def _ipip_tunnels(links: dict[str, dict]) -> bool:
    """kube-router encapsulates only towards nodes in other subnets, through its own
    tun-<hash> IP-in-IP devices; without them kube-bridge's packets go out as they are."""
    return any(name.startswith("tun-") and link.get("link_type") == "ipip"
               for name, link in links.items())


def mtu(context: Context) -> list[Finding]:
    check = "host-mtu"
    found, findings = _links_and_routes(context, check)
    for expected, links, table in found:
        overlays = [(name, links[name]["mtu"], extra) for name, extra in OVERLAYS.items()
                    if name in links and (name != "kube-bridge" or _ipip_tunnels(links))]
        subject = f"host {expected.name}"
        if not overlays:
            findings.append(ok(check, subject, "no pod network overlay device (yet)"))
            continue
        too_big = []
        for peer in _peers(context, expected):
            route = route_to(table, peer.address)
            if route is None or route["dev"] not in links:
                continue  # said by host-routes
            path = min([links[route["dev"]]["mtu"]]
                       + [m["mtu"] for m in route.get("metrics") or [] if "mtu" in m])
            for name, size, extra in overlays:
                if size + extra > path:
                    too_big.append((name, size, extra, peer, route["dev"], path))
        if not too_big:
            names = ", ".join(f"{name} {size}" for name, size, _ in overlays)
            findings.append(ok(check, subject, f"pod network MTU fits every path ({names})"))
            continue
        name, size, extra, peer, dev, path = min(too_big, key=lambda item: item[5])
        findings.append(problem(
            check, subject, f"{name} MTU {size} + {extra} bytes of encapsulation exceeds "
            f"{dev}'s MTU {path} on the path to {peer.name} ({peer.address})",
            f"large packets between pods are dropped (logs, exec and pulls hang): set "
            f"network.mtu to {path - extra} and rerun `pulumi up`."))
    return findings


def inotify(context: Context) -> list[Finding]:
    check = "host-inotify"
    found, findings = _per_host(context, check, ("inotify.txt",))
    for expected, outputs in found:
        values = [int(word) for word in outputs["inotify.txt"].split()]
        low = [f"{key} is {value}, Kubeflow needs {minimum}"
               for (key, minimum), value in zip(INOTIFY_MINIMUMS, values) if value < minimum]
        subject = f"host {expected.name}"
        if len(values) != len(INOTIFY_MINIMUMS):
            findings.append(unchecked(check, subject, "inotify.txt does not hold two numbers"))
        elif low:
            findings.append(problem(
                check, subject, "; ".join(low),
                "pods fail with \"too many open files\": something overrides "
                "/etc/sysctl.d/90-gpu-cluster.conf (a later file in /etc/sysctl.d); "
                "remove it and run `sysctl --system`, or rerun `pulumi up`."))
        else:
            findings.append(ok(check, subject, "inotify limits at Kubeflow's or above"))
    return findings


def _nameservers(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines()
            if line.strip().startswith("nameserver") and len(line.split()) > 1]


def resolv_conf(context: Context) -> list[Finding]:
    check = "host-resolv-conf"
    found, findings = _per_host(context, check, ("resolv-target.txt", "resolv-conf.txt"))
    for expected, outputs in found:
        target = outputs["resolv-target.txt"].strip()
        servers = _nameservers(outputs["resolv-conf.txt"])
        loopback = [s for s in servers if ipaddress.ip_address(s).is_loopback]
        subject = f"host {expected.name}"
        fix = ("point the kubelet at the real resolvers: tuning.kubeletResolvConf "
               f"{STUB_TARGET.replace('stub-', '')} (systemd-resolved running), rerun `pulumi up`.")
        if target == STUB_TARGET or (servers and len(loopback) == len(servers)):
            findings.append(problem(
                check, subject, f"the kubelet's resolv.conf is {target} with nameservers "
                f"{', '.join(servers) or 'none'}: the systemd-resolved stub, so pod DNS loops",
                fix))
        elif not servers:
            findings.append(problem(check, subject, f"the kubelet's resolv.conf ({target}) "
                                                    "names no nameserver", fix))
        else:
            findings.append(ok(check, subject, f"nameservers {', '.join(servers)}"))
    return findings


def gpus_seen(context: Context) -> list[Finding]:
    check = "host-gpus"
    found, findings = _per_host(context, check, ("nvidia-smi.csv",), gpus_only=True)
    for expected, outputs in found:
        text, subject = outputs["nvidia-smi.csv"], f"host {expected.name}"
        rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
        if not rows or rows[0][:1] != ["index"]:
            findings.append(problem(
                check, subject, f"nvidia-smi failed: {text.strip()[:200] or 'no output'}",
                "the driver is not loaded or does not match its library: reboot after a driver "
                "upgrade; otherwise rerun `pulumi up` (install-nvidia)."))
            continue
        gpus = [row for row in rows[1:] if row]
        drivers = sorted({row[3] for row in gpus if len(row) > 3})
        if len(gpus) < expected.gpus:
            findings.append(problem(
                check, subject, f"nvidia-smi sees {len(gpus)} GPUs, hosts[{expected.name}].gpus "
                f"is {expected.gpus}",
                "a GPU is off the bus or failed (dmesg: Xid, \"fallen off the bus\"): reseat or "
                "replace it, or lower the configured count."))
        else:
            findings.append(ok(check, subject, f"{len(gpus)} GPUs, driver {', '.join(drivers)}"))
    return findings


CHECKS = [address_on_interface, routes, mtu, inotify, resolv_conf, gpus_seen]
