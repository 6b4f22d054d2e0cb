"""python -m pins [--check] [--ca-file FILE]: see the package's docstring."""

import argparse
import datetime
import sys
from pathlib import Path
from typing import TextIO

from pins import table
from pins.registry import Client, RegistryError, parse

VERSIONS = Path(__file__).resolve().parents[1] / "config" / "versions.py"


def images() -> dict[str, str]:
    """Every image the program applies or `validate` runs, by its config/versions.py name."""
    from config import versions
    return {**versions.DEPLOYED_IMAGES, **versions.VALIDATE_IMAGES}


def run(named: dict[str, str], path: Path, client: Client, check: bool, out: TextIO) -> int:
    """Pin the tag-only images of `named` in `path`'s table (or, with `check`, read every
    tag and write nothing). 1 when an image could not be read or a pinned tag has moved."""
    failed, found = False, {}
    for name, image in sorted(named.items()):
        try:
            reference = parse(image)
            if reference.digest and not check:
                continue
            digest = client.digest(reference)
        except RegistryError as error:
            print(f"could not read {name} ({image}): {error}", file=out)
            failed = True
            continue
        if reference.digest is None:
            found[reference.tagged] = digest
            print(f"{'tag only' if check else 'pinned'} {name}: {reference.tagged}@{digest}",
                  file=out)
        elif digest == reference.digest:
            print(f"unchanged {name}: {image}", file=out)
        else:
            print(f"moved {name}: {reference.tagged} names {digest} now, pinned "
                  f"{reference.digest} (delete its line in IMAGE_DIGESTS and run "
                  "`python -m pins` to take the new content)", file=out)
            failed = True
    if found and not check:
        table.write(path, found, f"Read from the registries by `python -m pins` on "
                                 f"{datetime.date.today().isoformat()}.")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pins", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="read every tag again, report moved ones, write nothing")
    parser.add_argument("--ca-file", help="CA bundle for a registry with a private CA")
    args = parser.parse_args(argv)
    client = Client(verify=args.ca_file or True)
    return run(images(), VERSIONS, client, args.check, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
