"""Names the program writes and the tools read. Standard library only (the policy pack's
virtualenv has nothing else)."""

# --- stack outputs (__main__.py exports them; contract/outputs.py and contract/stack.py
# read them) ---------------------------------------------------------------------------------
ADMIN_KUBECONFIG_OUTPUT = "kubeconfig"
API_ENDPOINT_OUTPUT = "apiEndpoint"
USER_KUBECONFIGS_OUTPUT = "userKubeconfigs"
USER_KUBECONFIG_PARAMETERS_OUTPUT = "userKubeconfigParameters"
# Hybrid stacks whose OpenVPN server runs on EC2 (vpn.mode server-on-ec2) export these;
# other layouts have no VPN the program issues profiles for.
USER_VPN_PROFILES_OUTPUT = "userVpnProfiles"
ADMIN_VPN_PROFILE_OUTPUT = "vpnAdminProfile"
# Lists of objects: nodes {name, address, role, gpus, gpuModel}; pools {name, instanceType,
# count (the size at creation), min, max, capacity (on-demand, spot or mixed),
# capacityReservation (an id or null), gpus, gpuModel}.
NODES_OUTPUT = "nodes"
POOLS_OUTPUT = "pools"
DEFAULT_STORAGE_CLASS_OUTPUT = "defaultStorageClass"
GATEWAYS_OUTPUT = "gateways"
# The key of `gateways` a hybrid stack exports for its VPN's on-premises end: nodes on the
# other side are reached through the tunnel.
ON_PREM_GATEWAY = "onPrem"

# --- nodes -----------------------------------------------------------------------------------
# Every node of a cloud pool carries it (value: the pool's name); the pool's instances carry
# the same key as a tag.
POOL_LABEL = "gpu-cluster/pool"
# Where a node's capacity comes from, for Kueue's flavors and cluster-autoscaler's node
# templates: on-prem (hosts[]), on-demand, spot, or reserved (a capacity reservation or block).
CAPACITY_LABEL = "gpu-cluster/capacity"
CAPACITY_KINDS = ("on-prem", "on-demand", "spot", "reserved")
# The node labels only the program sets (hosts[].labels and pools[].labels may not): Kueue's
# flavors and cluster-autoscaler's node templates select by them.
PROGRAM_NODE_LABELS = (POOL_LABEL, CAPACITY_LABEL)
# Roles whose host runs the Kubernetes control plane / a kubelet (config: hosts[].role).
CONTROL_PLANE_ROLES = ("controller", "controller+worker")
WORKER_ROLES = ("worker", "controller+worker")

# --- markers ---------------------------------------------------------------------------------
# How `pulumi stack output` shows a secret without --show-secrets; the offline preview
# writes it for every secret (outputs.json, plan.json, the hosts' envelopes).
REDACTED = "[secret]"
# An input the preview cannot know: another resource's output the mocks do not make up.
UNKNOWN = "[known after pulumi up]"
# A case of a step's envelope (components/common/step_text.py render_envelope): the action
# named by the envelope's first argument runs its function. The doctor sends only envelopes
# that have the `check` case.
ENVELOPE_BRANCH = "  {action}) gpu_cluster_{action} </dev/null ;;"
CHECK_BRANCH = ENVELOPE_BRANCH.format(action="check")
