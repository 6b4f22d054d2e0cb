"""rwx-check.yaml: a volume of the default StorageClass and a two-pod Indexed Job. Each pod
writes its node name into the volume and waits for the other pod's file. With a shared
(nfs, efs) default and two or more nodes the pods are forced onto different nodes; with a
node-local default (localPath, ReadWriteOnce) or a single node they share one node, and the
Job's annotations say so."""

from acceptance.common import (
    ANNOTATION_CHECK,
    HOSTNAME_LABEL,
    NAMESPACE,
    component_labels,
    job_spec,
    restricted_container,
    tolerations,
    workload_node_count,
    workload_taints,
)
from config import versions
from config.model import StackConfig


RWX_FILE = "rwx-check.yaml"


# How long each RWX pod waits for the other pod's file.
RWX_PEER_WAIT_SECONDS = 600


RWX_VOLUME_SIZE = "1Gi"


ANNOTATION_RWX_MODE = "gpu-cluster/rwx-check-mode"


# Both pods of the RWX Job run this. Files go into a folder named after the Job's UID, so a
# volume left over from an earlier run cannot satisfy the check.
RWX_SCRIPT = """\
set -eu
dir="$DATA_DIR/$JOB_UID"
me="$JOB_COMPLETION_INDEX"
peer=$((1 - me))
mkdir -p "$dir"
echo "$NODE_NAME" > "$dir/.from-$me.tmp"
mv "$dir/.from-$me.tmp" "$dir/from-$me"
echo "pod $me on node $NODE_NAME wrote $dir/from-$me"
deadline=$(($(date +%s) + PEER_WAIT_SECONDS))
while [ ! -s "$dir/from-$peer" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: pod $peer's file $dir/from-$peer did not appear in ${PEER_WAIT_SECONDS}s" >&2
    exit 1
  fi
  sleep 2
done
written_on="$(cat "$dir/from-$peer")"
echo "pod $me on node $NODE_NAME read $dir/from-$peer, written on node $written_on"
if [ "$REQUIRE_OTHER_NODE" = "true" ] && [ "$written_on" = "$NODE_NAME" ]; then
  echo "FAIL: both pods ran on node $NODE_NAME; the check needs two nodes" >&2
  exit 1
fi
echo "PASS"
"""


def rwx_mode(settings: StackConfig) -> str:
    """cross-node: RWX volume, pods on two nodes; single-node: RWX volume but one node to run
    on; node-local: the default class is local-path (ReadWriteOnce), pods on one node."""
    if settings.storage.default_backend == "localPath":
        return "node-local"
    return "cross-node" if workload_node_count(settings) >= 2 else "single-node"


_RWX_NOTES = {
    "cross-node": "two pods on different nodes write and read one ReadWriteMany volume",
    "single-node": ("the cluster has one node that runs workloads, so both pods share it: "
                    "sharing the ReadWriteMany volume across nodes is not checked"),
    "node-local": ("the default StorageClass is node-local (local-path, ReadWriteOnce): "
                   "ReadWriteMany is impossible, so two pods on one node write and read one "
                   "ReadWriteOnce volume"),
}


def rwx_check(settings: StackConfig) -> list[dict]:
    """The volume and the two-pod Job that writes and reads it."""
    mode = rwx_mode(settings)
    labels = component_labels("rwx-check")
    annotations = {ANNOTATION_RWX_MODE: mode, ANNOTATION_CHECK: _RWX_NOTES[mode]}
    access_mode = "ReadWriteOnce" if mode == "node-local" else "ReadWriteMany"
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "rwx-check", "namespace": NAMESPACE, "labels": labels,
                     "annotations": annotations},
        "spec": {
            "storageClassName": settings.storage.default_class,
            "accessModes": [access_mode],
            "resources": {"requests": {"storage": RWX_VOLUME_SIZE}},
        },
    }
    same_node = mode != "cross-node"
    placement = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": HOSTNAME_LABEL}
    # Required terms hold while both pods run, which the script guarantees (each waits for
    # the other). Pod affinity also keeps the pods together before a node-local volume is
    # bound to a node.
    affinity_kind = "podAffinity" if same_node else "podAntiAffinity"
    pod_spec = {
        "affinity": {
            affinity_kind: {"requiredDuringSchedulingIgnoredDuringExecution": [placement]}},
        # Every backend's provisioner (nfs-subdir for nfs and efs, local-path) creates the
        # volume's folder world-writable.
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [{
            "name": "write-read",
            "image": versions.BUSYBOX_IMAGE,
            "command": ["sh", "-c", RWX_SCRIPT],
            "env": [
                {"name": "DATA_DIR", "value": "/data"},
                {"name": "PEER_WAIT_SECONDS", "value": str(RWX_PEER_WAIT_SECONDS)},
                {"name": "REQUIRE_OTHER_NODE", "value": "false" if same_node else "true"},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "JOB_UID", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
                # No GPUs for this pod even where nvidia is the default runtime.
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
            ],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                          "limits": {"memory": "64Mi"}},
            "securityContext": {**restricted_container(), "readOnlyRootFilesystem": True},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "rwx-check"}}],
    }
    taints = workload_taints(settings)
    if taints:
        pod_spec["tolerations"] = tolerations(taints)
    spec = job_spec(labels, pod_spec)
    spec.update({"completionMode": "Indexed", "completions": 2, "parallelism": 2})
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "rwx-check", "namespace": NAMESPACE, "labels": labels,
                     "annotations": annotations},
        "spec": spec,
    }
    return [claim, job]

