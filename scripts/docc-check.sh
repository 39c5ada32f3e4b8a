#!/usr/bin/env bash
# Builds the DocC documentation of every library module a user can import and fails (exit 1) on any DocC warning:
# a ``Symbol`` link that does not resolve, a parameter documented that does not exist, a missing parameter.
#
#     scripts/docc-check.sh           # one line per module (its warnings), then every warning in full; exit 1 on any
#
# What a user sees: the symbol graphs are extracted at the `public` level without SPI (what
# `swift package generate-documentation` does for a library), so a link to a `package`, internal or `@_spi`
# declaration fails here as it fails for them.
#
# How: ONE `swift package dump-symbol-graph` (a null build after `swift build`, then the toolchain's
# swift-symbolgraph-extract for every module), then the toolchain's `docc convert` per module, in dependency order,
# each given the archives of the modules it depends on (`--dependency`), so that a link to another of our modules
# is written ``/Pinning/ServerTrust`` and resolves. That is what swift-docc-plugin does with
# `--enable-experimental-combined-documentation`, without its one build and extraction per module (about 15 s of
# SwiftPM planning each, nine times). Nothing is installed; the archives are written to .build/docc-check/.
# After `swift build` it took 23-30 s of wall time on the 2-core machine (median of three 25 s, load average 2-4);
# 66-88 s when our modules had to be compiled again first (doc comments edited, load average 10).
#
# The README's command for browsing the same documentation:
#     swift package generate-documentation --enable-experimental-combined-documentation \
#         --target Pinning --target PinningNIO ...
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
out="$root/.build/docc-check"

# MODULE:CATALOG:DEPENDENCIES (comma-separated, each built before). PinningExportCore is no product, but
# `import PinningExport` re-exports it and its types are documented on its own pages.
modules=(
    "Pinning:Sources/Pinning/Docs.docc:"
    "PinningNIO:Sources/PinningNIO/PinningNIO.docc:Pinning"
    "PinningPKI::Pinning,PinningNIO"
    "PinningExportCore::Pinning"
    "PinningExport::Pinning,PinningExportCore"
    "PinningProxy::Pinning,PinningNIO"
    "PinningAsyncHTTPClient::Pinning,PinningNIO"
    "PinningHummingbird::Pinning,PinningNIO"
    "PinningVapor:Sources/PinningVapor/PinningVapor.docc:Pinning,PinningNIO"
    "PinningGRPC:Sources/PinningGRPC/PinningGRPC.docc:Pinning,PinningNIO"
)

# The toolchain's docc (DOCC_EXEC chooses another, as for swift-docc-plugin): on PATH, else beside `swift`.
docc="${DOCC_EXEC:-$(command -v docc || true)}"
if [ -z "$docc" ]; then
    docc="$(dirname "$(readlink -f "$(command -v swift)")")/docc"
fi
if [ ! -x "$docc" ]; then
    echo "== docc-check: no docc in the toolchain (looked on PATH and beside swift); set DOCC_EXEC"
    exit 1
fi

rm -rf "$out"
mkdir -p "$out"
dump_log="$out/dump-symbol-graph.log"
if ! swift package dump-symbol-graph --minimum-access-level public --emit-extension-block-symbols > "$dump_log" 2>&1; then
    cat "$dump_log"
    echo "== docc-check: swift package dump-symbol-graph failed"
    exit 1
fi
graphs=$(sed -n 's/^Files written to //p' "$dump_log" | tail -1)
if [ ! -d "$graphs" ]; then
    cat "$dump_log"
    echo "== docc-check: no symbol graph folder in the output of swift package dump-symbol-graph"
    exit 1
fi

total=0
summary=""
for entry in "${modules[@]}"; do
    IFS=: read -r module catalog deps <<< "$entry"
    # The module's own graphs: MODULE.symbols.json and MODULE@EXTENDED.symbols.json (its extensions of others).
    mkdir -p "$out/graphs/$module"
    cp "$graphs/$module.symbols.json" "$out/graphs/$module/"
    for extension in "$graphs/$module"@*.symbols.json; do
        [ -e "$extension" ] && cp "$extension" "$out/graphs/$module/"
    done
    args=()
    [ -n "$catalog" ] && args+=("$catalog")
    args+=(
        --additional-symbol-graph-dir "$out/graphs/$module"
        --fallback-display-name "$module" --fallback-bundle-identifier "$module"
        --output-path "$out/$module.doccarchive"
        --enable-experimental-external-link-support
    )
    IFS=, read -r -a dependencies <<< "$deps"
    for dependency in "${dependencies[@]}"; do
        args+=(--dependency "$out/$dependency.doccarchive")
    done
    log="$out/$module.log"
    if ! "$docc" convert "${args[@]}" > "$log" 2>&1; then
        cat "$log"
        echo "== docc-check: docc convert failed for $module"
        exit 1
    fi
    count=$(grep -c "^warning: \|^error: " "$log" || true)
    total=$((total + count))
    summary+="$(printf '%5d  %s' "$count" "$module")"$'\n'
done

for entry in "${modules[@]}"; do
    module="${entry%%:*}"
    if grep -q "^warning: \|^error: " "$out/$module.log"; then
        # docc names a file relative to the module's catalog when it has one (../Client/X.swift).
        catalog_of="${entry#*:}"
        catalog_of="${catalog_of%%:*}"
        echo "== $module${catalog_of:+ (paths relative to $catalog_of)}"
        # docc prints each diagnostic with its source excerpt; the summary line at the end is not repeated.
        grep -v "^Finished\|^Generated\|^Compiling\|^Building" "$out/$module.log" || true
    fi
done
echo "== DocC warnings per module"
printf '%s' "$summary"
if [ "$total" -ne 0 ]; then
    echo "== docc-check: $total DocC warning(s); fix each (a link to a symbol users cannot see becomes plain code)"
    exit 1
fi
echo "== docc-check: no DocC warnings"
