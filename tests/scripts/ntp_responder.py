"""A minimal NTP server (RFC 5905, mode 4 answers, stratum 1) on loopback for the tests of
configure-time: the real chronyd and systemd-timesyncd query it. It logs each client request
as a line "request from ADDRESS" on stdout, so a test sees which daemon asked.
Usage: ntp_responder.py ADDRESS PORT"""

import socket
import struct
import sys
import time

NTP_EPOCH = 2208988800  # 1900-01-01 to 1970-01-01, in seconds (RFC 5905, section 6)


def timestamp(now: float) -> bytes:
    seconds = int(now) + NTP_EPOCH
    return struct.pack("!II", seconds, int((now % 1) * 2**32))


def answer(request: bytes) -> bytes:
    version = (request[0] >> 3) & 0x7
    now = time.time()
    # LI 0, the client's version, mode 4 (server); stratum 1, the client's poll, precision
    # 2^-20; root delay 0, root dispersion 1/65536 s, reference ID "LOCL".
    header = struct.pack("!BBbbII4s", (version << 3) | 4, 1, request[2], -20, 0, 1, b"LOCL")
    # Reference, origin (the client's transmit timestamp), receive and transmit timestamps.
    return header + timestamp(now - 1) + request[40:48] + timestamp(now) + timestamp(time.time())


def main() -> None:
    address, port = sys.argv[1], int(sys.argv[2])
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((address, port))
    print("listening", flush=True)
    while True:
        request, client = server.recvfrom(1024)
        if len(request) >= 48 and request[0] & 0x7 == 3:  # mode 3: a client
            print(f"request from {client[0]}", flush=True)
            server.sendto(answer(request), client)


if __name__ == "__main__":
    main()
