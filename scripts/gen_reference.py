"""Regenerate the YAML reference in README.md from the config schema (tests check it is current)."""

from pathlib import Path

from raytrain.config.docs import markdown_reference

START, END = "<!-- reference:start -->", "<!-- reference:end -->"


def render(readme: str) -> str:
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{markdown_reference()}\n{END}{tail}"


if __name__ == "__main__":
    path = Path(__file__).resolve().parent.parent / "README.md"
    path.write_text(render(path.read_text()))
    print(f"updated {path}")
