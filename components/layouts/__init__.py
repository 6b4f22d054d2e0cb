"""The three layouts, each a strategy that makes the machines a cluster runs on and says
how they reach each other (components/layouts/contract.py: what a layout hands the
cluster); components/cluster.py then builds the same cluster on any of them. A fourth
layout is a module here and an entry in layout_class.

- bare-metal (`bare_metal.py`): every host on-prem, prepared over SSH (`over_ssh.py`).
- hybrid (`hybrid.py`): the control plane (and the VPN server) on EC2, prepared over SSH at
  its public address; on-prem GPU hosts join through OpenVPN.
- cloud (`cloud.py`): the control plane on EC2 and GPU workers in EC2 pools, all installing
  themselves at boot; the program runs no command on any machine.

The AWS side both AWS layouts share is `aws.py`."""

from components.layouts.contract import Layout


def layout_class(name: str) -> type[Layout]:
    """The layout named by the stack's `layout`. The AWS layouts import the AWS SDK (about a
    third of a preview's import time), so a bare-metal stack never loads it."""
    if name == "bare-metal":
        from components.layouts.bare_metal import BareMetal
        return BareMetal
    if name == "hybrid":
        from components.layouts.hybrid import Hybrid
        return Hybrid
    from components.layouts.cloud import Cloud
    return {"cloud": Cloud}[name]
