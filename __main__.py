"""gpu-cluster: a GPU Kubernetes cluster from the stack's config."""

import pulumi

from components.cluster import Cluster, ClusterArgs
from components.common import gc_settings
from config import load_from_pulumi
from contract import names

gc_settings.apply()
settings = load_from_pulumi()
cluster = Cluster(settings.cluster_name, ClusterArgs(settings))

pulumi.export("apiEndpoint", cluster.api_endpoint)
pulumi.export(names.ADMIN_KUBECONFIG_OUTPUT, cluster.kubeconfig)
pulumi.export(names.NODES_OUTPUT, cluster.nodes)
pulumi.export(names.DEFAULT_STORAGE_CLASS_OUTPUT, cluster.storage.default_class)
if settings.access.users:
    pulumi.export(names.USER_KUBECONFIGS_OUTPUT, cluster.access.user_kubeconfigs)
if cluster.access.user_vpn_profiles is not None:
    pulumi.export(names.USER_VPN_PROFILES_OUTPUT, cluster.access.user_vpn_profiles)
if cluster.access.user_kubeconfig_parameters:
    pulumi.export(names.USER_KUBECONFIG_PARAMETERS_OUTPUT,
                  cluster.access.user_kubeconfig_parameters)
if cluster.kubeflow_url is not None:
    pulumi.export("kubeflowUrl", cluster.kubeflow_url)
if cluster.kubeflow_tls_certificate is not None:
    pulumi.export("kubeflowTlsCertificate", cluster.kubeflow_tls_certificate)
if cluster.images:
    pulumi.export("images", cluster.images)
if cluster.control_plane_ssh_host_key is not None:
    pulumi.export("controlPlaneSshHostKey", cluster.control_plane_ssh_host_key)
if cluster.pools:
    pulumi.export(names.POOLS_OUTPUT, cluster.pools)
if cluster.gateways:
    pulumi.export(names.GATEWAYS_OUTPUT, cluster.gateways)
if cluster.vpn_admin_profile is not None:
    pulumi.export(names.ADMIN_VPN_PROFILE_OUTPUT, cluster.vpn_admin_profile)
if cluster.backup_location is not None:
    pulumi.export("backupLocation", cluster.backup_location)
if cluster.grafana_url is not None:
    pulumi.export("grafanaUrl", cluster.grafana_url)
if cluster.grafana_admin_password is not None:
    pulumi.export("grafanaAdminPassword", cluster.grafana_admin_password)
