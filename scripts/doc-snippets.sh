#!/usr/bin/env bash
# Compiles every Swift code block of the documentation, so that no example a reader copies can rot (issue 27,
# item 7). Compile only: nothing is ever run.
#
#     scripts/doc-snippets.sh              # one line per block (path:line OK / FAILED / SKIPPED), exit 1 on any failure
#     scripts/doc-snippets.sh --keep       # and leave the generated files in scripts/doc-snippets/Generated/ to look at
#     scripts/doc-snippets.sh --self-test  # checks the checker on scripts/doc-snippets/self-test.md (and the doc
#                                          # comments of self-test-doc-comments.swift.txt), whose every block says
#                                          # what the check must make of it: the two errors issue 27 found, a missing
#                                          # import, a warning, hidden lines, continues, top-level, skip, bad directives,
#                                          # manifests. A normal run never compiles those fixtures.
#
# The compiler's whole output of the last run is in .build/doc-snippets-build.log.
#
# What is compiled
#   - Every ```swift block of every Markdown file git tracks (README.md, the DocC articles in Sources/*/*.docc,
#     Docs/, Notes/, Sources/PinningAsyncHTTPClient/README.md, ...).
#   - Every ```swift block inside a `///` doc comment of a file under Sources/. A fence marked `swift` is the
#     mark that an example is meant to be copied; a plain ``` fence (output, grammar, a log line) is not compiled.
#   - A ```swift block whose first line is `// swift-tools-version…` is a whole Package.swift: it must load
#     (`swift package dump-package` in a temporary directory: compiled and evaluated, nothing resolved), each
#     product it names must exist in the package it names (ours, or the checkout in .build/checkouts), and a
#     package we also depend on must not be required below our own minimum.
#
# How a block is compiled
#   Each block becomes one file of the DocSnippets target (Package.swift; a library target that is no product,
#   so no user ever builds it): its `import` lines are moved to the top of the file, everything else becomes the
#   body of an `async throws` function. Every line carries a `#sourceLocation` of the documentation line it came
#   from, so an error reads `README.md:186:60: error: cannot find 'settings' in scope`. The target has the
#   package's own Swift settings (Swift 6 language mode, ExistentialAny, MemberImportVisibility), the strictest a
#   user may have, and no `package` access (packageAccess: false): a block that compiles here compiles for them.
#   A block imports what it uses; the one implicit
#   import is the module a doc comment or a DocC catalog (Sources/<Module>/…) documents, as a Rust doc test sees
#   its own crate. Warnings fail a block too, except "… was never used" and "… never read": a snippet shows how to
#   get a value and often does nothing more with it.
#
# Partial blocks: hidden lines (as Rust's `# ` lines in doc tests)
#   Markdown shows every line of a code block, so the completion lives in an HTML comment directly above the
#   fence (no blank line between), which GitHub and DocC do not render:
#
#       <!-- snippet: given(app: Application, req: Request) continues
#       import Vapor
#       let deviceCA = try TestPKI.root("Device CA").certificate
#       -->
#       ```swift
#
#   The first line holds options; every following line up to `-->` is hidden Swift, put before the block.
#     given(NAME: Type, …)  values the reader has from elsewhere (an `app`, a `req`, a chain from a handshake):
#                           parameters of the function the block is compiled in, so nothing is faked.
#     continues             the previous ```swift block of the same file comes first, in the same scope (the
#                           reader reads on); it fails when that block fails.
#     top-level             the block is declarations (a type, an extension): compiled at file scope.
#     skip(REASON)          not compiled, and printed as SKIPPED with its reason. Rare: every skip needs one.
#   In a doc comment the directive is written in `///` lines like the block. A directive that is not directly
#   above a ```swift block, or that cannot be read, is an error: a completion can never silently detach.
#
# Why a target in this package rather than a throw-away package that depends on it by path: a separate package
# would build every dependency again (Vapor, gRPC, NIO, BoringSSL: 15-25 minutes here); the target reuses the
# `.build` of `swift build`, so only the snippets compile. The generated files (scripts/doc-snippets/Generated/)
# are ignored by git and removed when the script ends, so a plain `swift build` compiles only the placeholder.
#
# In CI: after `swift build` (debug), run `scripts/doc-snippets.sh`. It runs `swift build --target DocSnippets`
# (DOC_SNIPPETS_BUILD_FLAGS adds flags, e.g. `-c release` to reuse a release build instead), which finds every
# dependency already built, so it costs one compile of the snippets: 1.5-2 minutes on the 2-core CI machine under
# load, most of it SwiftPM planning the graph (a null `swift build --target DocSnippets` takes 70 s there). A block
# that fails costs one more build of the target (the rest are built again without it). Needs python3 and git.
#
# A compiler crash on a block (the toolchain's bug, which a reader copying the block would hit too) fails that
# block with the crash's first lines: Swift 6.3's `catch where` on a typed-throws `do` crashed SILGen cleanup in
# the README's first draft of the SwiftNIO quick start.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/doc-snippets.py "$@"
