# Sourced by scripts/sanitizers.sh and scripts/fuzz.sh: the one hardening build that the AddressSanitizer pass of
# the test suite and the libFuzzer targets share (issue 28). `$root` must be set by the caller.
#
# PINNING_HARDENING_BUILD=1 makes Package.swift instrument OUR targets with AddressSanitizer and libFuzzer's
# coverage, add the fuzz targets and leave out the framework adapters (the end of Package.swift says what that
# gives up). Dependencies are compiled as in the plain build, so the hardening build can share a scratch path with
# it: PINNING_HARDENING_SCRATCH=.build (what CI does, right after its plain build and tests) compiles only our
# modules again. The default is a scratch path of its own, .build-hardening, so that a local run does not make
# the next plain `swift build` compile our modules again. Every swift command on that scratch path must see the
# variable (run it as `env "${hardening_env[@]}" swift …`), or it would plan the plain graph.
hardening_env=(PINNING_HARDENING_BUILD=1)
case "${PINNING_HARDENING_SCRATCH:-.build-hardening}" in
    /*) hardening_scratch="$PINNING_HARDENING_SCRATCH" ;;
    *) hardening_scratch="$root/${PINNING_HARDENING_SCRATCH:-.build-hardening}" ;;
esac
# No command-line sanitizer flags: they would reach the dependencies too (see Package.swift). Kept as an array
# so that callers can still splice it in.
hardening_flags=()
