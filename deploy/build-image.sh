#!/bin/bash
# Build deploy/Dockerfile with podman where no container registry can be reached.
#
#   deploy/build-image.sh [TAG]          # default dcfa:0.1.0, from any directory
#
# Needs root, the Debian packages podman, runc and mmdebstrap, a Debian mirror, and PyPI (or
# pip's usual index) on the host. Nothing is pulled from a registry:
#   1. base: mmdebstrap makes a Debian bookworm rootfs with Python 3.11 (python3, python3-venv)
#      and a venv in /opt/venv first on PATH, which stands in for python:3.11-slim (`python`,
#      `pip` on PATH, groupadd/useradd). `podman import` makes it an image, tagged as the
#      Dockerfile's FROM. The tarball is cached in $DCFA_IMAGE_CACHE and reused.
#   2. wheels: the host's pip (Python 3.11, like the image) builds a wheelhouse of dcfa's
#      dependencies with the Dockerfile's extras and the build backend of pyproject.toml.
#   3. podman build of deploy/Dockerfile, unchanged, with --network none: its `pip install`
#      reads only the wheelhouse (mounted with a pip.conf for the build only), then
#      `podman run TAG --version`.
# Measured on 2 shared cores with an empty cache: 2.5-3 min (base 35-85 s, import 8 s, wheels
# 15-25 s, build 60-80 s); with the base tarball cached, the rest takes about 1.7 min.
# Image: 926 MB, base 202 MB.
# The Debian stand-in is tagged as the Dockerfile's FROM (localhost/python:3.11-slim) in the
# store used: give a separate store with DCFA_PODMAN_OPTS to keep it apart from a real one.
#
# Environment:
#   DCFA_IMAGE_CACHE   where the base tarball and the wheelhouse go
#                      (default ${XDG_CACHE_HOME:-~/.cache}/dcfa-image)
#   DCFA_PODMAN_OPTS   global podman options, e.g. "--root /tmp/s --runroot /tmp/r"
#   DCFA_OCI_RUNTIME   runc (default; crun refuses a cgroup v1/v2 hybrid host) or crun
#   DEBIAN_MIRROR      a Debian mirror URI (default: mmdebstrap's, with bookworm-updates and
#                      the security archive)
#   PYTHON             the host's Python 3.11 that builds the wheelhouse (default python3)
set -euo pipefail

DEPLOY_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$DEPLOY_DIR")
TAG=${1:-dcfa:0.1.0}
CACHE=${DCFA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dcfa-image}
MIRROR=()
[ -n "${DEBIAN_MIRROR:-}" ] && MIRROR=("$DEBIAN_MIRROR")
PYTHON=${PYTHON:-python3}
read -r -a PODMAN_OPTS <<<"${DCFA_PODMAN_OPTS:-}"
PODMAN=(podman "${PODMAN_OPTS[@]}" --runtime "${DCFA_OCI_RUNTIME:-runc}")
# No raised rlimits: podman asks for nofile=1048576 and nproc=4194304 by default, which a
# root without CAP_SYS_RESOURCE (a container, a sandbox) may not set ("setrlimit ...
# Operation not permitted").
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=65536
LIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=16384:16384")

DOCKERFILE=$DEPLOY_DIR/Dockerfile
FROM=$(awk 'toupper($1) == "FROM" {print $2; exit}' "$DOCKERFILE")
EXTRAS=$(grep -o 'dcfa-src\[[a-z,]*\]' "$DOCKERFILE" | head -1 | sed 's/^dcfa-src//')
BASE_TAR=$CACHE/bookworm-python3.tar
WHEELS=$CACHE/wheels

log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "build-image.sh: PYTHON=$PYTHON is not Python 3.11 (the image's); set PYTHON" >&2
    exit 2
}
mkdir -p "$CACHE"

# 1. the base image
if [ ! -s "$BASE_TAR" ]; then
    log "mmdebstrap: Debian bookworm + python3 -> $BASE_TAR"
    # shellcheck disable=SC2016 # "$1" is the rootfs, expanded by mmdebstrap's hook
    mmdebstrap --mode=root --variant=minbase --format=tar \
        --include=python3,python3-venv,ca-certificates \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='chroot "$1" python3 -m venv /opt/venv' \
        bookworm "$BASE_TAR.part" "${MIRROR[@]}"
    mv "$BASE_TAR.part" "$BASE_TAR"
fi
log "podman import $BASE_TAR as $FROM"
"${PODMAN[@]}" import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$BASE_TAR" localhost/dcfa-base:bookworm >/dev/null
"${PODMAN[@]}" tag localhost/dcfa-base:bookworm "$FROM"

# 2. the wheelhouse, from the files the Dockerfile copies
log "pip wheel: dcfa$EXTRAS dependencies -> $WHEELS"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/dcfa" "$src/"
find "$src" -name __pycache__ -prune -exec rm -rf {} +
mapfile -t backend < <(cd "$src" && "$PYTHON" -c \
    'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")')
rm -rf "$WHEELS"
"$PYTHON" -m pip wheel --quiet --wheel-dir "$WHEELS" "$src$EXTRAS" "${backend[@]}"
rm -f "$WHEELS"/dcfa-*.whl # the build installs dcfa from its source, as the Dockerfile says
printf '[global]\nno-index = true\nfind-links = /wheels\n' >"$src/pip.conf"

# 3. the image
log "podman build -f deploy/Dockerfile -t $TAG (no network)"
"${PODMAN[@]}" build --pull=never --network=none "${LIMITS[@]}" \
    --volume "$WHEELS:/wheels:ro" --volume "$src/pip.conf:/etc/pip.conf:ro" \
    -f "$DOCKERFILE" --ignorefile "$DEPLOY_DIR/Dockerfile.dockerignore" -t "$TAG" "$ROOT"
log "podman run --rm $TAG --version"
"${PODMAN[@]}" run --rm --network=none "${LIMITS[@]}" "$TAG" --version
