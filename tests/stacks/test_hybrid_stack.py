"""The hybrid layout through the offline preview: VPC routes through the VPN gateway,
security groups exactly as needed, joins after the tunnel, EFS encrypted and protected,
IMDSv2, and no secret in user data."""

import pytest
from pulumi.runtime import rpc

from components.common.step_text import step_inputs, whole_text
from policy.user_data import decode_user_data
from tests.builders import example_plan, hybrid_config, preview
from tests.stacks.steps import boot_steps, waits_for

INSTANCE = "aws:ec2/instance:Instance"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


@pytest.fixture(scope="module")
def prod():
    return example_plan("prod")


def deps(plan, name: str) -> set[str]:
    return waits_for(plan, name)


def transitive(plan, name: str) -> set[str]:
    return plan.all_dependencies(plan.named(name))


def security_group_rules(plan, group_name: str) -> set[tuple]:
    """(description, protocol, port, source) of the inbound rules of one group."""
    return {(r.inputs["description"], r.inputs["ipProtocol"], int(r.inputs["fromPort"]),
             r.inputs["cidrIpv4"])
            for r in plan.of_type(INGRESS) if group_name in deps(plan, r.name)}


def test_the_vpc_routes_the_on_prem_lan_through_the_gateway_instance(prod):
    [instance] = prod.of_type(INSTANCE)
    assert instance.inputs["sourceDestCheck"] is False
    routes = prod.of_type("aws:ec2/route:Route")
    assert sorted(r.inputs["destinationCidrBlock"] for r in routes) == [
        "10.8.0.0/24", "192.168.10.0/24"]  # the tunnel too: the gateway sends from it
    tables = {r.inputs["routeTableId"] for r in routes}
    assert len(tables) == len(prod.of_type("aws:ec2/routeTable:RouteTable")) == 1
    assert all(r.inputs["networkInterfaceId"].startswith("eni-") for r in routes)
    assert len(prod.of_type("aws:ec2/subnet:Subnet")) == 2


def test_security_group_opens_exactly_what_the_cluster_needs(prod):
    rules = security_group_rules(prod, "prod-control-plane-host-sg")
    vpc, lan, tunnel = "10.20.0.0/16", "192.168.10.0/24", "10.8.0.0/24"
    admins, office = "198.51.100.0/24", "198.51.100.7/32"
    expected = {("ssh", "tcp", 22, admins), ("kubernetes-api", "tcp", 6443, admins),
                ("openvpn", "udp", 1194, office)}
    expected |= {("kubernetes-api", "tcp", 6443, cidr) for cidr in (vpc, lan, tunnel)}
    # What only nodes reach: from each on-prem node's address (config/cloud.py node_cidrs).
    nodes = ("192.168.10.2/32", "192.168.10.11/32", "192.168.10.12/32")
    # k0s's joins and tunnels; the controller is a node too: its kubelet, Calico's VXLAN.
    for name, protocol, port in (("k0s-join-api", "tcp", 9443), ("konnectivity", "tcp", 8132),
                                 ("kubelet", "tcp", 10250), ("calico-vxlan", "udp", 4789)):
        expected |= {(name, protocol, port, cidr) for cidr in nodes}
    assert rules == expected
    assert not any(cidr == "0.0.0.0/0" for *_, cidr in rules)


def test_every_worker_joins_only_after_the_tunnel_is_up(prod):
    client = "vpn-gw-install-openvpn-client"
    assert "control-plane-install-openvpn-server" in transitive(prod, client)
    for worker in ("vpn-gw", "gpu01", "gpu02"):
        assert client in transitive(prod, f"{worker}-join-worker"), worker
    for worker in ("vpn-gw", "gpu01", "gpu02"):
        # Its token is made only once it can use it.
        assert client in transitive(prod, f"{worker}-create-join-token"), worker
    for worker in ("gpu01", "gpu02"):
        assert f"{worker}-route-to-vpc" in deps(prod, f"{worker}-join-worker")
        assert f"{worker}-route-to-vpc" in deps(prod, f"{worker}-create-join-token")
        # A worker waits for its own route, not for the other hosts'.
        other = "gpu02" if worker == "gpu01" else "gpu01"
        assert f"{other}-route-to-vpc" not in transitive(prod, f"{worker}-join-worker")


def test_efs_is_encrypted_protected_and_mounted_once_per_subnet(prod):
    [file_system] = prod.of_type("aws:efs/fileSystem:FileSystem")
    assert file_system.inputs["encrypted"] is True
    assert file_system.protect and file_system.retain_on_delete
    targets = prod.of_type("aws:efs/mountTarget:MountTarget")
    subnets = prod.of_type("aws:ec2/subnet:Subnet")
    assert len(targets) == len(subnets) == 2
    assert sorted(t.inputs["ipAddress"] for t in targets) == ["10.20.0.20", "10.20.1.20"]
    # The node addresses only: the controller, each on-prem host and the gateway's fixed
    # tunnel address (its own packets leave the tunnel from it), never the VPC, the LAN or
    # the VPN's range.
    assert security_group_rules(prod, "prod-efs-nfs") == {
        ("nfs from a node", "tcp", 2049, f"{address}/32")
        for address in ("10.20.0.10", "192.168.10.2", "192.168.10.11", "192.168.10.12",
                        "10.8.0.2")}
    # storage.efs.anonymousNfs (the kernel's NFS client mounts it): said at every preview.
    assert any("storage.efs.anonymousNfs" in warning for warning in prod.warnings)
    # On-prem nodes mount it by address through the tunnel.
    deployment = next(r for r in prod.of_type("kubernetes:apps/v1:Deployment")
                      if r.inputs["metadata"]["name"] == "efs-subdir-provisioner")
    env = {e["name"]: e["value"] for e in
           deployment.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NFS_SERVER"] == "10.20.0.20"


def test_instance_requires_imdsv2_encrypts_its_disk_and_has_no_secret_in_user_data(prod):
    [instance] = prod.of_type(INSTANCE)
    assert instance.inputs["metadataOptions"]["httpTokens"] == "required"
    assert instance.inputs["rootBlockDevice"]["encrypted"] is True
    parts = decode_user_data(instance.inputs["userDataBase64"])
    assert "#cloud-config\nhostname: control-plane\npreserve_hostname: false\n" in parts
    # At boot it only installs the SSH host key the program pins (read from SSM).
    assert [step_inputs(s)["GPU_CLUSTER_STEP"] for s in boot_steps(
        prod, instance)] == ["install-ssh-host-key"]
    assert not any(secret in part for part in parts for secret in prod.secrets)
    assert instance.inputs["privateIp"] == "10.20.0.10"


def test_control_plane_is_bootstrapped_over_ssh_at_its_public_address(prod):
    [eip] = prod.of_type("aws:ec2/eip:Eip")
    steps = ("preflight", "prepare-host", "install-controller", "install-openvpn-server")
    for step in steps:
        connection = prod.redact(prod.named(f"control-plane-{step}").inputs["connection"])
        assert connection["user"] == "ubuntu" and int(connection["port"]) == 22
        assert connection["host"].startswith("203.0.113.")
        assert "proxy" not in connection
    stdin = prod.redact(prod.named("control-plane-install-controller").inputs["stdin"])
    assert "address: 10.20.0.10" in stdin
    assert "ipAutodetectionMethod: kubernetes-internal-ip" in stdin
    assert "mtu: 1350" in stdin  # the tunnel's 1400 minus VXLAN


def test_outputs_name_the_gateways_and_keep_the_vpn_profile_secret(prod):
    gateways, secret = prod.outputs["gateways"]
    assert not secret and gateways["onPrem"] == "192.168.10.2"
    assert gateways["aws"].startswith("203.0.113.")
    profile, secret = prod.outputs["vpnAdminProfile"]
    assert secret and "<cert>" in profile and "remote " in profile
    kubeconfig, secret = prod.outputs["kubeconfig"]
    assert secret and f"server: https://{gateways['aws']}:6443" in kubeconfig


def test_on_prem_preflight_does_not_probe_the_control_plane_before_the_tunnel(prod):
    stdin = prod.named("gpu01-preflight").inputs["stdin"]
    assert "export CONTROL_PLANE_ADDRESS=''" in stdin


def test_an_adopted_vpc_is_used_as_is():
    values = hybrid_config()
    values["aws"]["vpc"] = {"id": "vpc-0123456789abcdef0",
                            "subnetIds": ["subnet-0a", "subnet-0b"],
                            "routeTableIds": ["rtb-0a"], "cidr": "10.20.0.0/16"}
    values["aws"]["controlPlane"] = {"privateIp": "10.20.0.10"}
    values["storage"] = {"efs": {"mountTargetAddress": "10.20.0.20", "anonymousNfs": True}}
    plan = preview(values)
    assert not plan.of_type("aws:ec2/vpc:Vpc") and not plan.of_type("aws:ec2/subnet:Subnet")
    routes = plan.of_type("aws:ec2/route:Route")
    assert len(routes) == 2 and {r.inputs["routeTableId"] for r in routes} == {"rtb-0a"}
    targets = sorted(plan.of_type("aws:efs/mountTarget:MountTarget"), key=lambda t: t.name)
    assert [t.inputs.get("ipAddress") for t in targets] == ["10.20.0.20", None]


def test_no_cloud_resource_holds_a_secret_in_plain_text(prod):
    for resource in prod.resources:
        if resource.type.startswith("aws:"):
            for key, value in resource.inputs.items():
                if isinstance(value, str) and not rpc.is_rpc_secret(value):
                    assert not any(s in value for s in prod.secrets), (resource.name, key)


def test_preview_writes_the_vpn_configs(tmp_path, prod):
    from preview.report import write_artifacts

    write_artifacts(prod, tmp_path / "prod")
    server = (tmp_path / "prod" / "vpn" / "control-plane-install-openvpn-server.conf").read_text()
    client = (tmp_path / "prod" / "vpn" / "vpn-gw-install-openvpn-client.conf").read_text()
    assert "server 10.8.0.0 255.255.255.0" in server and "route 192.168.10.0 255.255.255.0" in server
    assert "tun-mtu 1400" in server and "tun-mtu 1400" in client
    assert "remote 203.0.113." in client


EXISTING_PROFILE = ("client\ndev tun\nproto udp\nremote 198.51.100.7 1194\n"
                    "<key>\nexisting-server-issued-key-material\n</key>\n")


@pytest.fixture(scope="module")
def existing_server():
    values = hybrid_config(workers=2)
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1"}
    values["vpnClientProfile"] = EXISTING_PROFILE
    return preview(values)


def test_with_an_existing_server_the_instance_is_its_client(existing_server):
    plan = existing_server
    names = {r.name for r in plan.of_type("command:remote:Command")}
    assert "control-plane-install-openvpn-client" in names
    assert not any("openvpn-server" in n for n in names)
    assert not [key for key in plan.of_type("tls:index/privateKey:PrivateKey")
                if "-vpn-" in key.urn]
    client = plan.named("control-plane-install-openvpn-client").inputs
    assert rpc.is_rpc_secret(client["stdin"])
    stdin = plan.redact(client["stdin"])
    assert "existing-server-issued-key-material" not in stdin
    assert "export REMOTE_CIDR='192.168.2.0/24'" in stdin
    assert "export TUNNEL_CHECK_ADDRESS='192.168.2.1'" in stdin
    assert "vpnAdminProfile" not in plan.outputs
    assert plan.outputs["gateways"][0]["onPrem"] == "192.168.2.1"


def test_with_an_existing_server_every_host_routes_the_vpc_through_it(existing_server):
    plan = existing_server
    for worker in ("gpu000", "gpu001"):
        route = plan.redact(plan.named(f"{worker}-route-to-vpc").inputs["stdin"])
        assert "export GATEWAY_ADDRESS='192.168.2.1'" in route
        assert "export TUNNEL_CIDR=''" in route
        assert "control-plane-install-openvpn-client" in transitive(plan, f"{worker}-join-worker")
    rules = security_group_rules(plan, "test-control-plane-host-sg")
    assert not any(name == "openvpn" for name, *_ in rules)  # it dials out
    routes = plan.of_type("aws:ec2/route:Route")
    assert [r.inputs["destinationCidrBlock"] for r in routes] == ["192.168.2.0/24"]


def test_the_hgx_servers_get_fabric_manager_at_the_drivers_version(prod):
    """gpu01/gpu02 are 8x A100-SXM4 (HGX, six NVSwitches): CUDA runs there only with NVIDIA
    Fabric Manager of the driver's version, which their install-nvidia step installs."""
    for host in ("gpu01", "gpu02"):
        stdin = whole_text(prod.named(f"{host}-install-nvidia").inputs["stdin"])
        inputs = step_inputs(stdin)
        assert inputs["NVSWITCH"] == "true"
        assert inputs["INSTALL_DRIVER"] == "true"
        assert inputs["NVIDIA_DRIVER_BRANCH"] == "580"
        # The step's script installs nvidia-fabricmanager-580 and libnvidia-nscq-580 pinned
        # to the driver's version (tests/scripts/install-nvidia.bats runs it).
        assert ('echo "nvidia-fabricmanager-$NVIDIA_DRIVER_BRANCH" '
                '"libnvidia-nscq-$NVIDIA_DRIVER_BRANCH"') in stdin
        assert 'echo "$1=$2-*"' in stdin  # ubuntu_fabric_manager_spec: apt's PACKAGE=VERSION-*
        assert "configure_fabric_manager\n" in stdin
    # The VPN gateway has no GPUs, so no NVIDIA step at all.
    assert not [r for r in prod.resources if r.name == "vpn-gw-install-nvidia"]
