import datetime

import pytest

from tests.doctor.apiserver import ApiServer
from tests.doctor.cluster import Recorded
from tests.doctor.pki import Authority


@pytest.fixture(scope="session")
def authority() -> Authority:
    return Authority.create()


@pytest.fixture
def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


@pytest.fixture
def cluster(now, authority) -> Recorded:
    """The healthy recorded cluster with a valid admin certificate."""
    recorded = Recorded(now)
    recorded.client_certificate = authority.client(days=300)[0]
    recorded.ca_certificate = authority.cert
    return recorded


@pytest.fixture
def served(cluster, authority):
    """The recorded cluster served by a loopback API that requires the admin's certificate."""
    with ApiServer(authority, cluster.lists, cluster.logs) as server:
        yield server
