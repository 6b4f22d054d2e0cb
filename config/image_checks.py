"""Rules of the image mirror (config/images.py) across keys: its login's password secret, and
the deprecated kubeflow.imageMirror, which is now images.mirror for the whole cluster.
The password is never quoted."""

import re

from config.partial import PartialConfig
from config.problems import Problem

# Printable ASCII without space, '"' and '\': it is written inside a TOML basic string
# (containerd) or a YAML double-quoted one (RKE2) by text replacement on the host
# (components/distributions/registry_mirror.py PASSWORD_MARK), and needs no escape there.
_PASSWORD = re.compile(r"[!#-\[\]-~]{1,1024}")
SECRET_HINT = "pulumi config set --secret gpu-cluster:imageMirrorPassword"

KUBEFLOW_ALIAS_WARNING = (
    "kubeflow.imageMirror is deprecated: it is read as images.mirror, which now serves every "
    "image of the cluster through each node's containerd (not only Kubeflow's, and without "
    "renaming them); move the same keys to gpu-cluster:images.mirror")


LOGIN_WARNING = (
    "images.mirror.username: every node pulls with this login, so every pod the cluster runs "
    "can pull whatever it may read on the mirror; give it read access to the mirror's proxy "
    "projects only")


def image_checks(cfg: PartialConfig) -> list[Problem]:
    problems = []
    mirror = cfg.images.mirror if cfg.images is not None else None
    old = cfg.kubeflow.image_mirror if cfg.kubeflow is not None else None
    if mirror is not None and old is not None:
        problems.append(Problem("kubeflow.imageMirror", "moved to images.mirror, which is set "
                                "too: images.mirror serves Kubeflow's images as well; remove "
                                "kubeflow.imageMirror"))
    username = mirror.username if mirror is not None else None
    password = cfg.image_mirror_password
    if username and not password:
        problems.append(Problem("imageMirrorPassword", "is required with images.mirror.username"
                                f": set it with `{SECRET_HINT}`"))
    elif password and not username:
        problems.append(Problem("imageMirrorPassword", "is set but images.mirror.username is "
                                "not: give the login's user name, or remove the secret"))
    elif password and not _PASSWORD.fullmatch(password):
        problems.append(Problem("imageMirrorPassword", "must be 1 to 1024 printable ASCII "
                                "characters without spaces, '\"' or '\\' (a registry token or "
                                "robot account secret); the value is not shown"))
    return problems
