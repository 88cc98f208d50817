#!/usr/bin/env bash
# Builds the Dendrite that `npm run test:interop` federates with, into .dendrite/bin (git-ignored),
# once: a run that finds this version already built does nothing. Dendrite publishes no binaries
# for every platform, so it is built from source with `go install` from the Go module proxy; the
# module and build caches live in .dendrite too, so a rebuild after a version change is quick and
# nothing lands in the user's own Go folders. Pinned at v0.13.8, its last release (2024), on SQLite,
# so no PostgreSQL is needed. Building takes about six minutes on two cores the first time.
set -euo pipefail

# Go's official tarball installs to /usr/local/go, which only interactive shells (.bashrc) put on PATH.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then PATH="$PATH:/usr/local/go/bin"; fi

DENDRITE_VERSION=v0.13.8
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HOME_DIR="$ROOT/.dendrite"
BIN="$HOME_DIR/bin"
COMMANDS=(dendrite generate-config generate-keys)

fail() {
  echo "install-dendrite: $1" >&2
  exit 1
}

# The version a built command says it is, from the module information Go writes into it.
built_version() {
  go version -m "$BIN/$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/matrix-org/dendrite" { print $3 }' || true
}

all_built() {
  for command in "${COMMANDS[@]}"; do
    [ -x "$BIN/$command" ] && [ "$(built_version "$command")" = "$DENDRITE_VERSION" ] || return 1
  done
}

command -v go >/dev/null || fail "building Dendrite $DENDRITE_VERSION needs Go 1.21 or newer (its go.mod says so), and there is no go on PATH."
go_minor="$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
[ -n "$go_minor" ] && [ "$go_minor" -ge 21 ] ||
  fail "building Dendrite $DENDRITE_VERSION needs Go 1.21 or newer (its go.mod says so), and go on PATH is $(go env GOVERSION) (Debian 12's golang-go is 1.19: take Go from go.dev/dl or bookworm-backports)."
# Dendrite's SQLite driver is cgo: without a C compiler the build fails deep in the output, so say it first.
command -v "${CC:-gcc}" >/dev/null || fail "building Dendrite's SQLite driver needs a C compiler, and there is no ${CC:-gcc} on PATH (on Debian, install gcc)."

if all_built; then
  echo "Dendrite $DENDRITE_VERSION is built in .dendrite/bin"
  exit 0
fi

echo "Building Dendrite $DENDRITE_VERSION into .dendrite/bin (about six minutes on two cores the first time)"
mkdir -p "$BIN"
export GOPATH="$HOME_DIR/go" GOCACHE="$HOME_DIR/cache" GOBIN="$BIN" CGO_ENABLED=1
# Module files are written read-only by default, which would make `rm -rf .dendrite` fail.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
packages=()
for command in "${COMMANDS[@]}"; do packages+=("github.com/matrix-org/dendrite/cmd/$command@$DENDRITE_VERSION"); done
go install "${packages[@]}" ||
  fail "go install of Dendrite $DENDRITE_VERSION failed (see Go's output above); the interop tests need it."
all_built || fail "go install finished, but .dendrite/bin does not hold Dendrite $DENDRITE_VERSION's ${COMMANDS[*]}."
echo "Dendrite $DENDRITE_VERSION is built in .dendrite/bin"
