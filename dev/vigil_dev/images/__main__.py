"""`python -m vigil_dev.images [NAME ...]` builds the images (all by default) and prints one line per image;
`--lock` regenerates the lock files instead."""

import argparse
import sys
import time

from vigil_dev.images import build, relock, spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vigil_dev.images", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"images to build ({', '.join(spec.BY_NAME)})")
    parser.add_argument("--lock", action="store_true", help="regenerate images/*.lock instead of building")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    try:
        if args.lock:
            relock.relock(say)
            return 0
        built = build.ensure_images(say, args.names or None)
    except build.ImageBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    for image in built.values():
        print(
            f"{image.ref}\t{image.digest}\t{image.compressed_bytes}\t{image.uncompressed_bytes}\t{image.docker_archive}"
        )
    say(f"images: {len(built)} image(s) ready in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
