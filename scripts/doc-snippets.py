#!/usr/bin/env python3
"""Compiles every Swift code block of the documentation. See scripts/doc-snippets.sh for the rules."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TARGET = "DocSnippets"
TARGET_DIR = os.path.join(ROOT, "scripts", "doc-snippets")
GENERATED = os.path.join(TARGET_DIR, "Generated")
# Warnings a snippet may have: it shows how to get a value, and often does nothing more with it. Every other
# warning (a deprecation, a concurrency diagnostic, an unused result) fails the block.
ALLOWED_WARNINGS = re.compile(r"was never used|never read")
# The script's own artefact: two documentation files named README.md in one module give one `#fileID`.
TOOL_WARNINGS = re.compile(r"'#sourceLocation' directive produces '#fileID' string")
# Availability of the gRPC transports (issue 27 item 11); harmless on Linux, needed to build on Apple platforms.
AVAILABILITY = "@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)"

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
IMPORT = re.compile(r"^\s*(@[\w()]+\s+)*((public|package|internal|fileprivate|private)\s+)?import\s+(\w+\s+)?[\w.]+\s*(//.*)?$")
DIRECTIVE_START = re.compile(r"^\s*<!--\s*snippet\b(?P<rest>.*)$")


class DocError(Exception):
    """A documentation block the script cannot accept (a malformed directive, a skip without a reason)."""


class Block:
    def __init__(self, path, line, code, code_lines, module):
        self.path = path  # repository-relative
        self.line = line  # the opening fence's line (1-based)
        self.code = code  # the block's lines, fence indentation removed
        self.code_lines = code_lines  # the source line of each code line
        self.module = module  # the module a doc comment or DocC catalog documents, imported implicitly
        self.hidden = []  # the directive's Swift lines
        self.hidden_lines = []
        self.options = {}
        self.directive_line = None
        self.previous = None  # the block a `continues` block continues
        self.status = None
        self.messages = []

    @property
    def name(self):
        return f"{self.path}:{self.line}"

    @property
    def ident(self):
        return "snippet_" + re.sub(r"\W", "_", self.path) + f"_{self.line}"

    @property
    def is_manifest(self):
        first = next((line for line in self.code if line.strip()), "")
        return first.startswith("// swift-tools-version")

    def span(self):
        """The source lines the block and its directive occupy (the closing fence included)."""
        start = self.directive_line or self.line
        end = (self.code_lines[-1] if self.code_lines else self.line) + 1
        return start, end


def tracked(pattern):
    out = subprocess.run(["git", "ls-files", "-z", "--", pattern], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return sorted(p for p in out.split("\0") if p)


def module_of(path):
    """The target a file under Sources/<Target>/ belongs to, if any."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "Sources":
        return parts[1]
    return None


def parse_directive(text):
    """`<!-- snippet: continues given(a: A, b: B) top-level skip(reason)` → options; raises DocError."""
    options = {}
    rest = text.strip()
    if rest.startswith(":"):
        rest = rest[1:].strip()
    i = 0
    while i < len(rest):
        if rest[i].isspace():
            i += 1
            continue
        m = re.match(r"[\w-]+", rest[i:])
        if not m:
            raise DocError(f"cannot read the snippet directive at '{rest[i:]}'")
        word = m.group(0)
        i += len(word)
        argument = None
        if i < len(rest) and rest[i] == "(":
            depth, j = 0, i
            while j < len(rest):
                if rest[j] == "(":
                    depth += 1
                elif rest[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if depth != 0:
                raise DocError(f"unbalanced parentheses in the snippet directive option '{word}'")
            argument = rest[i + 1 : j].strip()
            i = j + 1
        if word not in ("continues", "top-level", "given", "skip"):
            raise DocError(f"unknown snippet directive option '{word}' (known: continues, top-level, given(…), skip(…))")
        if word in ("given", "skip") and not argument:
            raise DocError(f"snippet directive option '{word}' needs its text in parentheses")
        if word in ("continues", "top-level") and argument is not None:
            raise DocError(f"snippet directive option '{word}' takes no argument")
        options[word] = argument if argument is not None else True
    if "top-level" in options and ("given" in options or "continues" in options):
        raise DocError("a top-level snippet cannot be 'given' values or continue another block")
    return options


def blocks_in(lines, numbers, path, module):
    """The Swift blocks of Markdown text `lines` (each from source line numbers[i]); stray directives are errors."""
    blocks = []
    errors = []
    pending = None  # (options, hidden, hidden_lines, directive_line, end_index)
    i = 0
    while i < len(lines):
        line = lines[i]
        start = DIRECTIVE_START.match(line)
        if start:
            if pending:
                errors.append(f"{path}:{pending[3]}: snippet directive not followed by a ```swift block")
            directive_line = numbers[i]
            rest = start.group("rest")
            body, body_lines = [], []
            closed = "-->" in rest
            head = rest.split("-->", 1)[0]
            j = i
            while not closed:
                j += 1
                if j >= len(lines):
                    errors.append(f"{path}:{directive_line}: snippet directive never closed with -->")
                    return blocks, errors
                if lines[j].strip().endswith("-->") and lines[j].strip() == "-->":
                    closed = True
                    break
                if "-->" in lines[j]:
                    errors.append(f"{path}:{numbers[j]}: put a snippet directive's --> on a line of its own")
                    closed = True
                    break
                body.append(lines[j])
                body_lines.append(numbers[j])
            try:
                options = parse_directive(head)
            except DocError as error:
                errors.append(f"{path}:{directive_line}: {error}")
                options = {"skip": "malformed directive"}
            # Hidden lines keep their relative indentation.
            indents = [len(b) - len(b.lstrip()) for b in body if b.strip()]
            cut = min(indents) if indents else 0
            pending = (options, [b[cut:] for b in body], body_lines, directive_line, j)
            i = j + 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent = len(fence.group("indent"))
            marker = fence.group("fence")
            info = fence.group("info").lower()
            code, code_lines = [], []
            j = i + 1
            while j < len(lines):
                close = lines[j].strip()
                if close.startswith(marker[0] * len(marker)) and set(close) == {marker[0]}:
                    break
                text = lines[j]
                # Remove the fence's indentation (CommonMark: up to that many spaces).
                k = 0
                while k < indent and k < len(text) and text[k] == " ":
                    k += 1
                code.append(text[k:])
                code_lines.append(numbers[j])
                j += 1
            if info == "swift":
                block = Block(path, numbers[i], code, code_lines, module)
                if pending and pending[4] == i - 1:
                    block.options, block.hidden, block.hidden_lines, block.directive_line = pending[0], pending[1], pending[2], pending[3]
                    pending = None
                blocks.append(block)
            if pending:
                errors.append(f"{path}:{pending[3]}: snippet directive not immediately followed by a ```swift block")
                pending = None
            i = j + 1
            continue
        if pending and line.strip():
            errors.append(f"{path}:{pending[3]}: snippet directive not immediately followed by a ```swift block")
            pending = None
        i += 1
    if pending:
        errors.append(f"{path}:{pending[3]}: snippet directive not followed by a ```swift block")
    return blocks, errors


SELF_TEST = "scripts/doc-snippets/self-test.md"
# Doc comments for the self-test; not a .swift file, so that the DocSnippets target never compiles it as one.
SELF_TEST_DOC_COMMENTS = "scripts/doc-snippets/self-test-doc-comments.swift.txt"


def collect(markdown, swift):
    blocks, errors = [], []
    for path in markdown:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        module = module_of(path) if ".docc/" in path or path.startswith("Sources/") else None
        found, problems = blocks_in(lines, list(range(1, len(lines) + 1)), path, module)
        blocks += found
        errors += problems
    doc = re.compile(r"^\s*/// ?(.*)$")
    for path in swift:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        run, numbers = [], []
        for number, line in enumerate(lines + [""], start=1):
            m = doc.match(line)
            if m:
                run.append(m.group(1))
                numbers.append(number)
                continue
            if run:
                found, problems = blocks_in(run, numbers, path, module_of(path))
                blocks += found
                errors += problems
                run, numbers = [], []
    # `continues` links each block to the previous Swift block of the same file.
    last = {}
    for block in blocks:
        if "continues" in block.options:
            previous = last.get(block.path)
            if previous is None or previous.is_manifest or "top-level" in previous.options or "skip" in previous.options:
                errors.append(f"{block.name}: 'continues' needs a previous compiled, non-top-level ```swift block in the same file")
                block.options = {"skip": "continues nothing"}
            else:
                block.previous = previous
        last[block.path] = block
    return blocks, errors


def source_location(path, line):
    return f'#sourceLocation(file: "{path}", line: {line})'


def chain_of(block):
    chain = []
    b = block
    while b is not None:
        chain.append(b)
        b = b.previous
    return list(reversed(chain))


def generate(block):
    """The Swift file that compiles `block`: imports hoisted, the rest inside an async throwing function whose
    parameters are the block's `given` values, every line mapped back to its documentation line."""
    imports, body, params = [], [], []
    seen_imports = set()
    modules = set()

    def add(lines, numbers, path):
        pieces = []
        for text, number in zip(lines, numbers):
            if IMPORT.match(text):
                key = text.split("//")[0].strip()
                modules.add(key.split()[-1].split(".")[0])
                if key not in seen_imports:
                    seen_imports.add(key)
                    imports.append(source_location(path, number))
                    imports.append(key)
                continue
            pieces.append((text, number))
        # One #sourceLocation per run of consecutive lines.
        expected = None
        for text, number in pieces:
            if number != expected:
                body.append(source_location(path, number))
            body.append(text)
            expected = number + 1

    for b in chain_of(block):
        add(b.hidden, b.hidden_lines, b.path)
        add(b.code, b.code_lines, b.path)
        if "given" in b.options:
            params.append(b.options["given"])
    header = [
        f"// Generated by scripts/doc-snippets.sh from {block.name}; rewritten on every run, never committed.",
    ]
    implicit = []
    if block.module and block.module not in modules:
        implicit.append(f"import {block.module}")
    reset = ["#sourceLocation()"] if imports else []
    if "top-level" in block.options:
        return "\n".join(header + implicit + imports + reset + body + ["#sourceLocation()", ""])
    return "\n".join(
        header
        + implicit
        + imports
        + reset
        + [AVAILABILITY, f"func {block.ident}({', '.join(params)}) async throws {{"]
        + body
        + ["#sourceLocation()", "}", ""]
    )


DIAGNOSTIC = re.compile(r"^(?P<path>[^:\s][^:]*):(?P<line>\d+):(?P<column>\d+): (?P<kind>error|warning): (?P<message>.*)$")


BUILD_LOG = os.path.join(ROOT, ".build", "doc-snippets-build.log")
# A compiler crash names the function it was compiling: "… for 'snippet_README_md_216()' (at …/snippet_README_md_216.swift:10:1)".
CRASH = re.compile(r"\(at (?P<path>\S+/Generated/snippet_\w+\.swift):\d+:\d+\)")


def build(attempt):
    # A clean build of this one target each time, so that every file's warnings are printed again.
    flags = os.environ.get("DOC_SNIPPETS_BUILD_FLAGS", "").split()
    for configuration in ("debug", "release"):
        shutil.rmtree(os.path.join(ROOT, ".build", configuration, f"{TARGET}.build"), ignore_errors=True)
    command = ["swift", "build", "--target", TARGET] + flags
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    output = result.stdout + result.stderr
    os.makedirs(os.path.dirname(BUILD_LOG), exist_ok=True)
    with open(BUILD_LOG, "w" if attempt == 1 else "a", encoding="utf-8") as f:
        f.write(f"=== build {attempt}: {' '.join(command)} (exit {result.returncode})\n{output}\n")
    return result.returncode, output


def attribute(diagnostics, blocks, files):
    """Maps each diagnostic to the block whose lines (or generated file) it names."""
    found = {}
    for path, line, kind, message, raw in diagnostics:
        rel = os.path.relpath(path, ROOT) if os.path.isabs(path) else path
        owner = None
        if rel in files:
            owner = files[rel]
        else:
            for block in blocks:
                start, end = block.span()
                if block.path == rel and start <= line <= end:
                    owner = block
                    break
        if owner is not None:
            found.setdefault(owner, []).append((kind, message, raw, rel, line))
    return found


def check_swift(blocks):
    if not blocks:
        return
    remaining = list(blocks)
    warnings = {}
    for attempt in range(1, 6):
        shutil.rmtree(GENERATED, ignore_errors=True)
        os.makedirs(GENERATED)
        files = {}
        for block in remaining:
            name = f"{block.ident}.swift"
            with open(os.path.join(GENERATED, name), "w", encoding="utf-8") as f:
                f.write(generate(block))
            files[os.path.relpath(os.path.join(GENERATED, name), ROOT)] = block
        status, output = build(attempt)
        diagnostics = []
        for raw in output.splitlines():
            m = DIAGNOSTIC.match(raw.strip())
            if m:
                diagnostics.append((m.group("path"), int(m.group("line")), m.group("kind"), m.group("message"), raw.strip()))
        owned = attribute(diagnostics, remaining, files)
        failed = [b for b in remaining if any(kind == "error" for kind, *_ in owned.get(b, []))]
        if status != 0:
            # A compiler crash stops the whole batch: blame the block whose function it names.
            for m in CRASH.finditer(output):
                block = files.get(os.path.relpath(m.group("path"), ROOT))
                if block is not None and block not in failed:
                    failed.append(block)
                    block.messages.append("the compiler crashed on this block (a toolchain bug a reader would hit too; "
                                          f"{os.path.relpath(BUILD_LOG, ROOT)} has the crash):")
                    block.messages += ["  " + line.strip() for line in output.splitlines()
                                       if re.search(r"Found .*\?!|^\s*\d+\.\s+While ", line)][:6]
        for block, entries in owned.items():
            for kind, message, raw, rel, line in entries:
                if kind == "warning" and not ALLOWED_WARNINGS.search(message) and not TOOL_WARNINGS.search(message):
                    warnings.setdefault(block, set()).add(f"{rel}:{line}: warning: {message}")
        for block in failed:
            block.status = "FAILED"
            block.messages += sorted({f"{rel}:{line}: {kind}: {message}" for kind, message, raw, rel, line in owned.get(block, []) if kind == "error"})
        if status == 0:
            for block in remaining:
                if block in warnings:
                    block.status = "FAILED"
                    block.messages += sorted(warnings[block])
                else:
                    block.status = "OK"
            return
        if not failed:
            # The build failed and no error names a block: say so for every block still unjudged.
            tail = [line for line in output.splitlines() if "error" in line][-20:] or output.splitlines()[-20:]
            for block in remaining:
                block.status = "FAILED"
                block.messages.append(f"the snippets target did not build, and no error names this block ({os.path.relpath(BUILD_LOG, ROOT)}):")
                block.messages += ["  " + line for line in tail]
            return
        # Build the blocks that had no error again without the failed ones: an error can stop the compiler
        # before it looked at every file. A block that continues a failed one fails with it.
        remaining = [b for b in remaining if b not in failed]
        for block in list(remaining):
            broken = [b for b in chain_of(block)[:-1] if b.status == "FAILED"]
            if broken:
                block.status = "FAILED"
                block.messages.append(f"continues {broken[-1].name}, which does not compile")
                remaining.remove(block)
        if not remaining:
            return
    for block in remaining:
        block.status = "FAILED"
        block.messages.append("not judged after 5 builds")


def dump_package(directory):
    result = subprocess.run(["swift", "package", "--package-path", directory, "dump-package"], capture_output=True, text=True)
    if result.returncode != 0:
        raise DocError((result.stderr or result.stdout).strip())
    return json.loads(result.stdout)


def identity(url):
    return url.rstrip("/").split("/")[-1].removesuffix(".git").lower()


def check_manifest(block, ours, checkouts):
    """A whole Package.swift: it must load (`swift package dump-package`), every product it names must exist
    in the package it names, and a package we also depend on must not be required below our own minimum."""
    with tempfile.TemporaryDirectory(prefix="doc-snippets-manifest-") as directory:
        with open(os.path.join(directory, "Package.swift"), "w", encoding="utf-8") as f:
            f.write("\n".join(block.code) + "\n")
        try:
            manifest = dump_package(directory)
        except DocError as error:
            block.status = "FAILED"
            block.messages.append(f"{block.name}: the manifest does not load:")
            # SwiftPM's first line repeats the whole manifest compile command; the compiler's own lines follow.
            lines = [line for line in str(error).splitlines() if "Invalid manifest (compiled with" not in line]
            block.messages += ["  " + line for line in lines[-15:]]
            return
    problems = []
    ours_by_identity = {}
    for dependency in ours["dependencies"]:
        for kind, values in dependency.items():
            for value in values:
                location = value.get("location", {})
                url = (location.get("remote") or [{}])[0].get("urlString") if "remote" in location else None
                if url:
                    ours_by_identity[identity(url)] = value
    declared = {}
    for dependency in manifest["dependencies"]:
        for kind, values in dependency.items():
            for value in values:
                location = value.get("location", {})
                url = (location.get("remote") or [{}])[0].get("urlString") if "remote" in location else None
                if not url:
                    continue
                name = identity(url)
                declared[name] = value
                if name == "swift-pinning":
                    continue
                if name not in ours_by_identity:
                    problems.append(f"depends on {url}, which swift-pinning does not use")
                    continue
                theirs = value.get("requirement", {}).get("range")
                mine = ours_by_identity[name].get("requirement", {}).get("range")
                if theirs and mine and version_key(theirs[0]["lowerBound"]) < version_key(mine[0]["lowerBound"]):
                    problems.append(f"{name} from {theirs[0]['lowerBound']} is below swift-pinning's own minimum {mine[0]['lowerBound']}")
    for target in manifest["targets"]:
        for dependency in target.get("dependencies", []):
            product = dependency.get("product")
            if not product:
                continue
            name, package = product[0], product[1]
            if package not in declared and package not in [identity(k) for k in declared]:
                problems.append(f"target {target['name']} uses {name} from {package}, which the manifest does not depend on")
                continue
            products = products_of(package, ours, checkouts)
            if products is None:
                problems.append(f"cannot check product {name}: {package} is not checked out in .build (run swift build first)")
            elif name not in products:
                problems.append(f"{package} has no product {name} (it has {', '.join(sorted(products))})")
    if problems:
        block.status = "FAILED"
        block.messages += [f"{block.name}: {p}" for p in problems]
    else:
        block.status = "OK"


def version_key(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


_products_cache = {}


def products_of(package, ours, checkouts):
    if package == "swift-pinning":
        return {p["name"] for p in ours["products"]}
    if package not in _products_cache:
        directory = checkouts.get(package)
        if directory is None:
            _products_cache[package] = None
        else:
            _products_cache[package] = {p["name"] for p in dump_package(directory)["products"]}
    return _products_cache[package]


def expectations(blocks):
    """The self-test's `<!-- expect: STATUS text -->` line above each block (above its directive, if any)."""
    found = {}
    for block in blocks:
        with open(os.path.join(ROOT, block.path), encoding="utf-8") as f:
            lines = [re.sub(r"^\s*/// ?", "", line) for line in f.read().split("\n")]
        start, _ = block.span()
        m = re.match(r"^<!-- expect: (?P<status>OK|FAILED|SKIPPED)(?P<text>.*?)\s*-->$", lines[start - 2] if start >= 2 else "")
        if m:
            found[block] = (m.group("status"), m.group("text").strip())
    return found


def main(argv):
    keep = "--keep" in argv
    self_test = "--self-test" in argv
    unknown = [a for a in argv if a not in ("--keep", "--self-test")]
    if unknown:
        print(f"doc-snippets: unknown option {unknown[0]} (known: --keep, --self-test)", file=sys.stderr)
        return 2
    if self_test:
        blocks, errors = collect([SELF_TEST], [SELF_TEST_DOC_COMMENTS])
    else:
        markdown = [p for p in tracked("*.md") if not p.startswith("scripts/doc-snippets/")]
        blocks, errors = collect(markdown, tracked("Sources/*.swift"))
    swift = [b for b in blocks if not b.is_manifest and "skip" not in b.options]
    manifests = [b for b in blocks if b.is_manifest and "skip" not in b.options]
    for block in blocks:
        if "skip" in block.options:
            block.status = "SKIPPED"
    try:
        check_swift(swift)
    finally:
        if not keep:
            shutil.rmtree(GENERATED, ignore_errors=True)
    if manifests:
        ours = dump_package(ROOT)
        checkouts = {}
        checkout_root = os.path.join(ROOT, ".build", "checkouts")
        if os.path.isdir(checkout_root):
            for name in os.listdir(checkout_root):
                checkouts[name.lower()] = os.path.join(checkout_root, name)
        for block in manifests:
            check_manifest(block, ours, checkouts)
    failed = 0
    for block in blocks:
        suffix = ""
        if block.status == "SKIPPED":
            suffix = f" ({block.options['skip']})"
        elif block.is_manifest:
            suffix = " (Package.swift)"
        print(f"{block.name} {block.status}{suffix}")
        for message in block.messages:
            print(f"    {message}")
        if block.status != "OK" and block.status != "SKIPPED":
            failed += 1
    for error in errors:
        print(f"error: {error}")
    counts = {s: sum(1 for b in blocks if b.status == s) for s in ("OK", "FAILED", "SKIPPED")}
    print(f"doc snippets: {counts['OK']} OK, {counts['FAILED']} FAILED, {counts['SKIPPED']} skipped, {len(errors)} directive errors")
    if self_test:
        # Each fixture block says what the check must make of it; the check itself is what is tested.
        expected = expectations(blocks)
        wrong = []
        for block in blocks:
            if block not in expected:
                wrong.append(f"{block.name}: no <!-- expect: … --> line above the block")
                continue
            status, text = expected[block]
            if block.status != status or (text and not any(text in m for m in block.messages)):
                wrong.append(f"{block.name}: expected {status}{' with ' + repr(text) if text else ''}, got {block.status}")
        with open(os.path.join(ROOT, SELF_TEST), encoding="utf-8") as f:
            wanted_errors = [line for line in f.read().split("\n") if line.startswith("<!-- expect directive error: ")]
        for line in wanted_errors:
            text = line.removeprefix("<!-- expect directive error: ").removesuffix("-->").strip()
            if not any(text in e for e in errors):
                wrong.append(f"expected a directive error containing {text!r}")
        for problem in wrong:
            print(f"self-test: {problem}")
        print(f"self-test: {'PASSED' if not wrong else 'FAILED'} ({len(blocks)} fixture blocks, {len(wanted_errors)} directive errors expected)")
        return 1 if wrong else 0
    return 1 if failed or errors else 0


if __name__ == "__main__":
    # Interrupted: still remove the generated files (the finally above), then exit as interrupted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main(sys.argv[1:]))
