"""IMDSv2 on loopback for the tests of aws/spot-notice-handler.sh: the fake of
tests/components/fake_imds.py (a GET needs a token from PUT /latest/api/token), whose other
items are the files under FOLDER/items at each request, by path: a test announces a Spot
notice by writing FOLDER/items/latest/meta-data/spot/instance-action while the handler runs.
Writes its port to FOLDER/port once it serves; each request is a line of FOLDER/requests.log
("METHOD PATH STATUS"). While FOLDER/refuse-tokens exists, the tokens it hands out are
not valid (every GET answers 401), as the fake's honour_tokens=False. Serves until killed.

Usage: python -m tests.scripts.spot_imds FOLDER
"""

import http.server
import sys
from pathlib import Path

from tests.components.fake_imds import FakeImds, ImdsState


class FolderImds(FakeImds):
    def do_PUT(self):
        self.server.state.honour_tokens = not (self.server.folder / "refuse-tokens").exists()
        super().do_PUT()

    def do_GET(self):
        items = self.server.folder / "items"
        self.server.state.items = {
            "/" + str(path.relative_to(items)): path.read_text()
            for path in items.rglob("*") if path.is_file()}
        super().do_GET()

    def _answer(self, status: int, body: str = ""):
        with (self.server.folder / "requests.log").open("a") as log:
            log.write(f"{self.command} {self.path} {status}\n")
        super()._answer(status, body)


def main(folder: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FolderImds)
    server.folder, server.state = folder, ImdsState()
    (folder / "items").mkdir(parents=True, exist_ok=True)
    (folder / "port.tmp").write_text(f"{server.server_address[1]}\n")
    (folder / "port.tmp").rename(folder / "port")
    server.serve_forever()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
