# Sourced by scripts/sanitizers.sh and scripts/fuzz.sh: the one hardening build that the AddressSanitizer pass of
# the test suite and the libFuzzer targets share (issue 28). `$root` must be set by the caller.
#
# PINNING_HARDENING_BUILD=1 makes Package.swift add the fuzz targets and leave out the framework adapters (see
# the end of Package.swift). Every module is built with AddressSanitizer, every Swift module also with the
# coverage instrumentation libFuzzer needs; -sanitize=fuzzer's own choice minus stack-depth, whose counter only
# libFuzzer defines (the test binary would not link). In the test binary the coverage hooks are the sanitizer
# runtime's empty definitions. All of it lives in its own scratch path: the plain .build is never touched.
# Every swift command on that scratch path must see the variable (run it as `env "${hardening_env[@]}" swift …`),
# or it would plan another graph.
hardening_env=(PINNING_HARDENING_BUILD=1)
hardening_scratch="$root/.build-hardening"
hardening_flags=(--sanitize=address -Xswiftc -sanitize-coverage=edge,indirect-calls,trace-cmp,inline-8bit-counters,pc-table)
