#!/bin/sh
# The base image the Dockerfiles start FROM where no container registry is reachable (this
# project's CI machines): a Debian bookworm root file system made from Debian's packages with
# debootstrap, Python 3.11 with a virtual environment at /opt/python first on PATH (so `pip install`
# behaves as in the python:3.11-slim image), and this host's CA certificates (so pip in a build
# reaches the package index as the host does). Imported into the local Docker engine as
#   ldpsynth-base:bookworm   (or the tag given as the first argument)
# then:  docker build --network host --build-arg BASE=ldpsynth-base:bookworm -f docker/Dockerfile.aggregator .
# Needs root, debootstrap and a running Docker engine. Where a registry is reachable, skip this:
# the Dockerfiles' default BASE is the python:3.11-slim-bookworm image.
set -eu
tag=${1:-ldpsynth-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$mirror"
chroot "$root" python3 -m venv /opt/python
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' - "$tag"
