import pytest

from tests.doctor.pki import Authority


@pytest.fixture(scope="session")
def authority() -> Authority:
    return Authority.create()
