"""Regenerate the YAML reference in README.md from the config schema (tests check it is current)."""

import argparse
from pathlib import Path

from raytrain.config.docs import markdown_reference, sweep_reference

BLOCKS = {
    ("<!-- reference:start -->", "<!-- reference:end -->"): markdown_reference,
    ("<!-- sweep-reference:start -->", "<!-- sweep-reference:end -->"): sweep_reference,
}


def render(readme: str) -> str:
    for (start, end), make in BLOCKS.items():
        head, found, rest = readme.partition(start)
        if not found:
            raise SystemExit(f"README.md has no {start} marker")
        _, _, tail = rest.partition(end)
        readme = f"{head}{start}\n{make()}\n{end}{tail}"
    return readme


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__ + " Rewrites README.md in place; `make reference` runs it.").parse_args()
    path = Path(__file__).resolve().parent.parent / "README.md"
    path.write_text(render(path.read_text()))
    print(f"updated {path}")
