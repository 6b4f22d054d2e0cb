import datetime
import os
import shutil
from pathlib import Path

import pytest

from tests.doctor.apiserver import ApiServer
from tests.doctor.cluster import FIXTURES, Recorded
from tests.pki import Authority


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


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch) -> Path:
    """tmp_path/bin, first on PATH, holding ssh as fake_ssh.bash: moscow answers with its
    recorded outputs, every call is logged to tmp_path/ssh.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(Path(__file__).parent / "fake_ssh.bash", bin_dir / "ssh")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SSH_LOG", str(tmp_path / "ssh.log"))
    monkeypatch.setenv("HOSTS", str(FIXTURES / "hosts" / "moscow"))
    return bin_dir
