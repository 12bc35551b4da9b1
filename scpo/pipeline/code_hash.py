"""The code a pipeline stage runs, hashed without docstrings and comments, so that DVC re-runs a stage when its code
changes and not when its documentation does.

    python -m scpo.pipeline.code_hash --notebooks notebooks --out reports/code_hash

For every notebook, the `scpo` modules its code cells import are followed transitively (imports anywhere in a module,
also inside functions, and "scpo.x.y" / "scpo.x.y:NAME" strings, the registries' lazy imports, and "scpo.x.*", a
package every module of which a registry imports; importing a module also runs its parent packages). Each module is
parsed, its docstrings dropped and its AST dumped (`ast.dump` has no comments, no line numbers, no formatting);
`<out>/<notebook>.txt` lists one `module sha256` line per module. A stage depends on its notebook's file instead of on
`scpo/`: a docstring edit changes no file, a code edit changes the lines of the modules it touched (and so re-runs the
stages that import them).

Written by hand (Python's `ast` only): the closure is static, so nothing is imported or executed.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
from pathlib import Path

__all__ = [
    "normalized_source",
    "module_file",
    "imported_modules",
    "import_closure",
    "notebook_code",
    "code_hash_lines",
    "write_code_hashes",
]

PACKAGE = "scpo"
_MODULE_STRING = re.compile(rf"^{PACKAGE}(\.\w+)+(:\w+)?$")
_PACKAGE_STRING = re.compile(rf"^{PACKAGE}(\.\w+)*\.\*$")  # "scpo.credit.*": every module of scpo/credit/


def normalized_source(source: str) -> str:
    """`ast.dump` of `source` without its docstrings (module, class and function ones) and without comments."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def module_file(module: str, root: Path) -> Path | None:
    """The source file of `module` under `root` (the folder holding the package), or None."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def imported_modules(source: str, module: str, root: Path) -> set[str]:
    """The `scpo` modules `source` (the code of `module`) imports, with their parent packages."""
    found: set[str] = set()
    package = (
        module
        if module_file(module, root) and module_file(module, root).name == "__init__.py"
        else module.rpartition(".")[0]
    )
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            names = [node.value.partition(":")[0]]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _PACKAGE_STRING.match(node.value):
            package_dir = root.joinpath(*node.value.removesuffix(".*").split("."))
            names = [
                f"{node.value.removesuffix('.*')}.{p.stem}"
                for p in sorted(package_dir.glob("*.py"))
                if p.stem != "__init__"
            ]
        for name in names:
            if name.split(".")[0] == PACKAGE and module_file(name, root):
                found.update(m for m in _parents(name) if module_file(m, root))
    return found


def import_closure(sources: list[str], root: Path) -> set[str]:
    """Every `scpo` module reached from the code in `sources` (module `__main__`)."""
    todo = set().union(*(imported_modules(s, "__main__", root) for s in sources))
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo |= imported_modules(module_file(module, root).read_text(), module, root) - seen
    return seen


def notebook_code(path: Path) -> list[str]:
    """The source of each code cell of a notebook (IPython magics and shell lines left out)."""
    cells = json.loads(path.read_text())["cells"]
    out = []
    for cell in cells:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            out.append("\n".join(line for line in lines if not line.lstrip().startswith(("%", "!"))))
    return out


def code_hash_lines(notebook: Path, root: Path) -> list[str]:
    """`module sha256` of every module the notebook's code reaches, sorted by module name."""
    lines = []
    for module in sorted(import_closure(notebook_code(notebook), root)):
        digest = hashlib.sha256(normalized_source(module_file(module, root).read_text()).encode()).hexdigest()
        lines.append(f"{module} {digest}")
    return lines


def write_code_hashes(notebooks: Path, out: Path, root: Path) -> list[Path]:
    """`<out>/<notebook stem>.txt` for every notebook in `notebooks`; a file is rewritten only when its text changes."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for notebook in sorted(Path(notebooks).glob("*.ipynb")):
        path = out / f"{notebook.stem}.txt"
        text = "\n".join(code_hash_lines(notebook, root)) + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    ap.add_argument("--out", type=Path, default=Path("reports/code_hash"))
    ap.add_argument("--root", type=Path, default=Path("."), help="the folder holding the scpo package")
    args = ap.parse_args(argv)
    for path in write_code_hashes(args.notebooks, args.out, args.root):
        print(f"{path}: {len(path.read_text().splitlines())} modules")


if __name__ == "__main__":
    main()
