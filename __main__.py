"""gpu-cluster: a GPU Kubernetes cluster from the stack's config."""

import pulumi

from components.cluster import Cluster, ClusterArgs
from components.common import gc_settings
from config import load_from_pulumi

gc_settings.apply()
settings = load_from_pulumi()
cluster = Cluster(settings.cluster_name, ClusterArgs(settings=settings))

for name, value in cluster.outputs.items():
    pulumi.export(name, value)
