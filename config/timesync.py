"""`gpu-cluster:time`: the NTP servers every machine's clock follows (the configure-time
step). Ubuntu's own default is ntp.ubuntu.com, which a site without internet access cannot
reach; etcd, certificates and join tokens fail when clocks drift apart."""

from typing import Optional

from pydantic import Field, model_validator

from config.model_base import Section
from config.types import HostOrIp

# The Amazon Time Sync Service: link-local on every EC2 instance, no internet route needed
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/set-time.html).
AMAZON_TIME_SYNC = "169.254.169.123"


class TimeSettings(Section):
    ntp_servers: list[HostOrIp] = Field(
        default=[], max_length=8)
    """NTP servers (names or addresses) every machine's clock follows instead of its image's
    (Ubuntu: ntp.ubuntu.com); empty leaves time as the image has it."""
    nts: bool = False
    """Authenticate the servers with Network Time Security (chrony, installed if missing); false:
    plain NTP, which anyone on the path can answer."""
    amazon_time_sync: bool = True
    """On EC2 machines, follow the Amazon Time Sync Service (169.254.169.123) instead of ntpServers;
    false: EC2 machines follow ntpServers too."""

    @model_validator(mode="after")
    def _servers_once(self) -> "TimeSettings":
        repeated = sorted({s for s in self.ntp_servers if self.ntp_servers.count(s) > 1})
        if repeated:
            raise ValueError(f"ntpServers names {', '.join(repeated)} more than once")
        if self.nts and not self.ntp_servers:
            raise ValueError("nts needs ntpServers: it authenticates those servers")
        return self

    def servers(self, on_ec2: bool) -> tuple[str, ...]:
        """The servers a machine follows; none: configure-time does not run."""
        if not self.ntp_servers:
            return ()
        if on_ec2 and self.amazon_time_sync:
            return (AMAZON_TIME_SYNC,)
        return tuple(self.ntp_servers)

    def uses_nts(self, on_ec2: bool) -> bool:
        """The Amazon Time Sync Service answers plain NTP only, from the instance's host."""
        return self.nts and not (on_ec2 and self.amazon_time_sync)


def time_warning(time: TimeSettings, apt_mirror: Optional[str]) -> Optional[str]:
    """A stack that reads packages from the site's mirror looks air-gapped: its hosts then
    keep their image's time servers, which they cannot reach."""
    if time.ntp_servers or not apt_mirror:
        return None
    return ("gpu-cluster:packages.aptMirror is set but gpu-cluster:time.ntpServers is empty: "
            "hosts keep their image's time servers (Ubuntu: ntp.ubuntu.com), which a site "
            "without internet access cannot reach, and etcd, certificates and join tokens "
            "fail once clocks drift; set gpu-cluster:time.ntpServers to the site's NTP servers")
