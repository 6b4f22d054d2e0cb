"""Where the preview's throwaway keys, tokens and certificates get their randomness and
their "now": the operating system's by default. Under `reproducible(seed)` a run's files
are a function of the program and the stack alone, so two runs, or two versions of the
program, can be compared byte for byte. Every draw is labelled with what it is for, so
the order resources register in (a thread pool) does not change what each one gets."""

import base64
import contextlib
import datetime
import hashlib
import itertools
import math
import secrets
from typing import Callable, Iterator, Optional

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

Draw = Callable[[int], bytes]

# A fixed moment for reproducible runs (certificates' validity starts then).
REPRODUCIBLE_NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

_seed: Optional[bytes] = None


@contextlib.contextmanager
def reproducible(seed: str) -> Iterator[None]:
    global _seed
    earlier, _seed = _seed, seed.encode()
    try:
        yield
    finally:
        _seed = earlier


def stream(label: str) -> Draw:
    """Random bytes for what `label` names: the OS's, or under a seed a stream of
    SHAKE-256 blocks of (seed, label, counter)."""
    seed = _seed
    if seed is None:
        return secrets.token_bytes
    counter = itertools.count()

    def draw(size: int) -> bytes:
        block = b"\0".join((seed, label.encode(), str(next(counter)).encode()))
        return hashlib.shake_256(block).digest(size)
    return draw


def now() -> datetime.datetime:
    if _seed is not None:
        return REPRODUCIBLE_NOW
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def ec_key(draw: Draw, curve: ec.EllipticCurve) -> ec.EllipticCurvePrivateKey:
    """A private scalar below 2^(bits-1), which is below the order of every NIST curve."""
    size = (curve.key_size + 7) // 8
    scalar = int.from_bytes(draw(size), "big") >> (8 * size - curve.key_size + 1)
    return ec.derive_private_key(scalar or 1, curve)


def ed25519_key(draw: Draw) -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.from_private_bytes(draw(32))


def rsa_key(draw: Draw, bits: int) -> rsa.RSAPrivateKey:
    """OpenSSL's, or under a seed two primes of bits/2 bits drawn from `draw` (top two bits
    set, so n has all `bits`), public exponent 65537 as OpenSSL and Go choose it. Only
    seeded runs search for primes in Python: ten times OpenSSL's 0.04 s."""
    exponent = 65537
    if _seed is None:
        return rsa.generate_private_key(public_exponent=exponent, key_size=bits)
    p = _prime(draw, bits // 2, exponent)
    q = p
    while q == p:
        q = _prime(draw, bits // 2, exponent)
    d = pow(exponent, -1, math.lcm(p - 1, q - 1))
    return rsa.RSAPrivateNumbers(p, q, d, d % (p - 1), d % (q - 1), rsa.rsa_crt_iqmp(p, q),
                                 rsa.RSAPublicNumbers(exponent, p * q)).private_key()


def serial_number(draw: Draw) -> int:
    """Positive and at most 159 bits, like x509.random_serial_number()."""
    return int.from_bytes(draw(20), "big") >> 1 or 1


def restamp_openssh(private_key_pem: str, draw: Draw) -> str:
    """An OpenSSH private key with its check integer (random on every serialisation:
    PROTOCOL.key, "uint32 checkint" twice) drawn from `draw` instead."""
    lines = private_key_pem.strip().splitlines()
    blob = bytearray(base64.b64decode("".join(lines[1:-1])))
    offset = len(b"openssh-key-v1\0")
    for _ in range(3):  # ciphername, kdfname, kdfoptions
        offset += 4 + int.from_bytes(blob[offset:offset + 4], "big")
    offset += 4  # number of keys (one)
    offset += 4 + int.from_bytes(blob[offset:offset + 4], "big")  # the public key
    offset += 4  # length of the private section, which starts with the check integers
    blob[offset:offset + 8] = draw(4) * 2
    encoded = base64.b64encode(bytes(blob)).decode()
    width = len(lines[1])
    body = [encoded[i:i + width] for i in range(0, len(encoded), width)]
    return "\n".join([lines[0], *body, lines[-1]]) + "\n"


# Primes below 2000 (trial division before the Miller-Rabin rounds).
_SMALL_PRIMES = [n for n in range(3, 2000, 2) if all(n % d for d in range(3, math.isqrt(n) + 1, 2))]


def _prime(draw: Draw, bits: int, exponent: int) -> int:
    while True:
        candidate = int.from_bytes(draw(bits // 8), "big") | (0b11 << (bits - 2)) | 1
        if math.gcd(exponent, candidate - 1) == 1 and _probably_prime(candidate):
            return candidate


def _probably_prime(n: int) -> bool:
    """Miller-Rabin with the first 24 odd primes as bases: the candidates are random, not
    chosen to fool fixed bases, and each round errs on at most a quarter of composites."""
    if any(n % p == 0 for p in _SMALL_PRIMES):
        return n in _SMALL_PRIMES
    d, rounds = n - 1, 0
    while d % 2 == 0:
        d, rounds = d // 2, rounds + 1
    for base in _SMALL_PRIMES[:24]:
        x = pow(base, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(rounds - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True
