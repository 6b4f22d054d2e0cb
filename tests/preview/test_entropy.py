"""The preview's throwaway keys, drawn from the OS or from a seed (preview/entropy.py),
as the tools that read them judge them: OpenSSL checks the keys, ssh-keygen reads the
OpenSSH key whose check integers the preview stamps."""

import contextlib
import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from preview import credentials, entropy

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")


def pkcs8(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def openssl_check(key, tmp_path) -> str:
    path = tmp_path / "key.pem"
    path.write_bytes(pkcs8(key))
    done = subprocess.run(["openssl", "pkey", "-in", str(path), "-check", "-noout"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_openssl
@pytest.mark.parametrize("seed", [None, "gpu-cluster"])
def test_rsa_keys_pass_openssls_check(seed, tmp_path):
    with entropy.reproducible(seed) if seed else contextlib.nullcontext():
        key = entropy.rsa_key(entropy.stream("rsa"), 2048)
    assert key.key_size == 2048 and key.public_key().public_numbers().e == 65537
    assert "valid" in openssl_check(key, tmp_path).lower()


@needs_openssl
@pytest.mark.parametrize("curve", [ec.SECP224R1(), ec.SECP256R1(), ec.SECP384R1(),
                                   ec.SECP521R1()], ids=lambda c: c.name)
def test_ec_keys_pass_openssls_check(curve, tmp_path):
    key = entropy.ec_key(entropy.stream("ec"), curve)
    assert "valid" in openssl_check(key, tmp_path).lower()


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")
@pytest.mark.parametrize("seed", [None, "gpu-cluster"])
def test_ssh_keygen_reads_the_openssh_key(seed, tmp_path):
    """ssh-keygen refuses a key whose two check integers differ (OpenSSH sshkey.c,
    sshkey_private_deserialize_maybe_decrypt: "check1 != check2")."""
    with entropy.reproducible(seed) if seed else contextlib.nullcontext():
        pem = credentials.ssh_private_key()
    path = tmp_path / "id_ed25519"
    path.write_text(pem)
    path.chmod(0o600)
    done = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    key = serialization.load_ssh_private_key(pem.encode(), password=None)
    assert done.stdout.split()[:2] == key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode().split()


def test_the_same_seed_and_label_draw_the_same_bytes():
    with entropy.reproducible("s"):
        first, second = entropy.stream("a"), entropy.stream("a")
        assert [first(16), first(16)] == [second(16), second(16)]
        assert first(16) != entropy.stream("b")(16)
    assert entropy.stream("a")(16) != entropy.stream("a")(16)

