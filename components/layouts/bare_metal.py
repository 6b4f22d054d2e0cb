"""bare-metal: every host on-prem, prepared over SSH; the controller is one of them."""

from typing import Optional

from components.kubernetes.backups import BackupTarget
from components.layouts.contract import (
    Controller,
    Layout,
    LayoutResult,
    Services,
    frozen_mapping,
)
from components.layouts.over_ssh import (
    bootstrap,
    node_outputs,
    prepared_workers,
    storage_servers,
)
from config.backup import BACKUP_FOLDER, backup_store
from config.model import StackConfig
from contract import names


class BareMetal(Layout):
    def result(self) -> LayoutResult:
        context, settings = self.context, self.context.settings
        controller, endpoint = settings.controller, settings.control_plane_endpoint
        first = bootstrap(context, controller, endpoint.node_address)
        bootstraps = {h.name: first if h.name == controller.name
                      else bootstrap(context, h, endpoint.node_address, controller=first)
                      for h in settings.hosts}
        backup = bare_metal_backup_target(settings)
        return LayoutResult(
            controller=Controller(host=controller, prepared=first.prepared), endpoint=endpoint,
            joining=tuple(Controller(host=host, prepared=bootstraps[host.name].prepared)
                          for host in settings.controllers[1:]),
            workers=prepared_workers(settings, settings.controllers, bootstraps),
            services=Services(storage_servers=storage_servers(bootstraps), backup=backup),
            outputs=frozen_mapping({
                names.NODES_OUTPUT: node_outputs(settings.hosts),
                "backupLocation": backup.location if backup else None}))


def bare_metal_backup_target(settings: StackConfig) -> Optional[BackupTarget]:
    """backup.path on the controller, or a folder of the NFS export another machine
    serves (config/backup.py backup_store)."""
    store = backup_store(settings.layout, settings.backup, settings.storage,
                         settings.controller.name)
    if store == "path":
        return BackupTarget("path", settings.backup.path, {"BACKUP_DIR": settings.backup.path})
    if store != "nfs":
        return None
    nfs = settings.storage.nfs
    server = nfs.server or next(h.address for h in settings.hosts if h.name == nfs.host)
    folder = f"{BACKUP_FOLDER}/{settings.cluster_name}"
    return BackupTarget("nfs", f"nfs://{server}{nfs.path.rstrip('/')}/{folder}", {
        "BACKUP_NFS_SOURCE": f"{server}:{nfs.path}",
        "BACKUP_NFS_OPTIONS": ",".join(nfs.mount_options),
        "BACKUP_DIR": folder,
    })
