import datetime

import pytest

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
