"""Every ``walship`` command the README and docs/ show is one the CLI takes (each subcommand
and each flag) and one a test runs (its subcommand path, given to the CLI by some test)."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

from walship.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def shown_commands() -> Iterator[tuple[str, str]]:
    """(page, command) for each ``walship ...`` in an inline code span or a fenced block."""
    for page in PAGES:
        text = page.read_text()
        fenced = re.findall(r"```[\w-]*\n(.*?)```", text, flags=re.S)
        for block in fenced:
            joined = re.sub(r"\\\n\s*", " ", block)  # continued lines
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ").removeprefix(".venv/bin/")
                if line.startswith("walship "):
                    yield page.name, line
        inline = re.sub(r"```.*?```", "", text, flags=re.S)
        for span in re.findall(r"`(walship [^`]+)`", inline):
            yield page.name, span.replace("\\|", "|")  # a table's escaped bar


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def check(command: str, root: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """The subcommand path a documented command names, and what in it the CLI does not take."""
    tokens = [t for t in re.split(r"[\s\[\]()]+", command.removeprefix("walship ")) if t]
    global_flags = options(root)
    parser, path, wrong = root, [], []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        flag = token.split("=", 1)[0]
        if flag.startswith("--"):
            for alternative in flag.split("|"):
                alternative = alternative.strip(".,")
                action = options(parser).get(alternative) or global_flags.get(alternative)
                if alternative and action is None:
                    wrong.append(alternative)
                elif action is not None and action.nargs != 0 and "=" not in token and not path:
                    i += 1  # a global flag's value
            continue
        choices = subparsers(parser)
        names = token.split("|")
        if choices and all(name in choices for name in names):
            path.append(token)
            parser = choices[names[0]]
        elif choices and not path:
            wrong.append(token)  # the first word must be a command
    return path, wrong


def test_every_command_shown_is_one_the_cli_takes() -> None:
    root = build_parser()
    shown = list(shown_commands())
    assert len(shown) > 40
    bad = []
    for page, command in shown:
        path, wrong = check(command, root)
        if not path or wrong:
            bad.append(f"{page}: `{command}`: {', '.join(wrong) or 'no command'}")
    assert bad == []


def sequences_in_tests() -> list[list[str]]:
    """Each call's and each list's string constants, in order, across the tests."""
    out = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            items = (
                node.args if isinstance(node, ast.Call) else node.elts if isinstance(node, ast.List | ast.Tuple) else []
            )
            words = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "walship " in node.value:
                words = node.value.split()
            if len(words) >= 1:
                out.append(words)
    return out


def test_every_command_shown_is_run_by_a_test() -> None:
    root = build_parser()
    sequences = sequences_in_tests()
    untested = set()
    for page, command in shown_commands():
        path, _ = check(command, root)
        for leaf in path[-1].split("|") if path else []:
            want = [*path[:-1], leaf]
            if not any(want == seq[i : i + len(want)] for seq in sequences for i in range(len(seq))):
                untested.add(f"{page}: walship {' '.join(want)}")
    assert sorted(untested) == []
