"""Plans more than one stack test module reads."""

import pytest

from tests.builders import ISSUER_BUCKET, hybrid_config, shared_preview
from tests.stacks.test_access import RBAC_ACCESS


@pytest.fixture(scope="session")
def efs_issuer_plan():
    """The hybrid stack with storage.efs.issuerBucket and the RBAC users, previewed once."""
    values = hybrid_config()
    # The web identity replaces anonymousNfs: the file system policy requires IAM and TLS.
    values["storage"]["efs"] = {"issuerBucket": ISSUER_BUCKET}
    values["access"] = RBAC_ACCESS
    return shared_preview(values)
