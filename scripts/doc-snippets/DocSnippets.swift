// The DocSnippets target: scripts/doc-snippets.sh writes every Swift code block of the documentation into
// Generated/ next to this file, builds this target (compile only, nothing runs) and removes them again. Alone,
// this file is all the target holds, so `swift build` compiles nothing else here.
