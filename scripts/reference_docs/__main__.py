"""Write the generated reference pages (`python -m scripts.reference_docs`, from the root).

`--check` writes nothing and exits 1, naming each page that differs from what it would write.
"""

from __future__ import annotations

import sys

from scripts.reference_docs import COMMAND, ROOT, renderers


def main(argv: list[str]) -> int:
    """Write (or with `--check`, compare) every page; the exit status."""
    check = argv == ["--check"]
    if argv and not check:
        sys.stderr.write(f"usage: {COMMAND} [--check]\n")
        return 2
    stale = []
    for path, render in renderers().items():
        text, target = render(), ROOT / path
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    for path in stale:
        sys.stdout.write(f"{'stale' if check else 'wrote'} {path}\n")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
