"""EC2 Spot notices on the pool instances: a boot step that installs
gpu-cluster-spot-notices (scripts/aws/spot-notices.sh), which polls the instance metadata
and, once per notice, cordons the instance's node on a rebalance recommendation and cordons
and drains it within the two minutes of an interruption notice
(scripts/aws/spot-notice-handler.sh).

It runs on every pool instance, on-demand ones too: there the two metadata items answer 404
and it does nothing, and a pool that buys Spot capacity later needs no other boot.

Who can do what: the service uses the kubelet's own credential (the distribution's
`node_kubectl`), which the Node authorizer and NodeRestriction already let cordon its own
Node and evict the pods bound to it (spot-notices.sh cites where), so no credential and no
RBAC rule is added and a compromised pool node gains nothing it did not have."""

from components.common.step_text import DataFile, Script
from components.distributions.base import Distribution
from components.hosts.steps import HostStep

SPOT_NOTICES = Script("aws/spot-notices.sh")
SPOT_NOTICE_HANDLER = DataFile("aws/spot-notice-handler.sh")
STEP = "spot-notices"


def spot_notices_step(distribution: Distribution) -> HostStep:
    """The boot step, after the join: the kubelet's credential exists by then."""
    return HostStep(STEP, SPOT_NOTICES, {
        "SPOT_NOTICE_HANDLER": SPOT_NOTICE_HANDLER.text(),
        "NODE_KUBECTL": distribution.node_kubectl,
    })
