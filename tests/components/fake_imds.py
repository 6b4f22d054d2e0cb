"""IMDSv2 on loopback for the tests of the instances' standard-library AWS clients."""

import http.server
import json
import secrets
from dataclasses import dataclass, field

INSTANCE_ID = "i-0123456789abcdef0"
ZONE = "us-west-2b"


@dataclass
class ImdsState:
    credentials: dict = field(default_factory=dict)
    tokens: set = field(default_factory=set)
    honour_tokens: bool = True
    # Tokens of the first this many PUTs are refused, as in an instance's first seconds.
    refused_puts: int = 0
    requests: list = field(default_factory=list)
    # Other items by path, e.g. EC2's Spot notices (tests/scripts/spot_imds.py).
    items: dict = field(default_factory=dict)


class FakeImds(http.server.BaseHTTPRequestHandler):
    """IMDSv2 as on an instance that requires it: PUT /latest/api/token (with a TTL) gives
    a session token, and every GET without a valid one is answered 401."""

    ROLE = "gpu-cluster-node"

    def log_message(self, *args):
        pass

    def _headers(self) -> dict:
        return {name.lower(): value for name, value in self.headers.items()}

    def _answer(self, status: int, body: str = ""):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        state = self.server.state
        state.requests.append(("PUT", self.path, self._headers()))
        if self.path != "/latest/api/token":
            return self._answer(404)
        if not self.headers["X-aws-ec2-metadata-token-ttl-seconds"]:
            return self._answer(400)
        token = secrets.token_urlsafe(16)
        puts = sum(method == "PUT" for method, _, _ in list(state.requests))
        if state.honour_tokens and puts > state.refused_puts:
            state.tokens.add(token)
        return self._answer(200, token)

    def do_GET(self):
        state = self.server.state
        state.requests.append(("GET", self.path, self._headers()))
        if self.headers["X-aws-ec2-metadata-token"] not in state.tokens:
            return self._answer(401)
        base = "/latest/meta-data/iam/security-credentials/"
        answers = {
            "/latest/meta-data/instance-id": INSTANCE_ID,
            "/latest/meta-data/placement/availability-zone": ZONE,
            base: self.ROLE,
            base + self.ROLE: json.dumps({"Code": "Success", "Type": "AWS-HMAC",
                                          **state.credentials}),
        }
        answers.update(state.items)
        if self.path not in answers:
            return self._answer(404)
        return self._answer(200, answers[self.path])
