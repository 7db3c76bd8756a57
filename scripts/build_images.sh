#!/usr/bin/env bash
# Build the rollout and gateway images from what a registry-less Debian machine reaches (Debian's apt
# mirror, PyPI, the CLIs setup installed from npm): no `FROM`, no pull. deploy/images/Containerfile.* say
# the same contents the usual way for a machine with a registry.
#
#   root      mmdebstrap --variant=minbase bookworm + ca-certificates python3 bash coreutils git procps
#             libstdc++6 (node's only library beyond libc)
#   venv      /opt/openforgerl/venv: Debian's python3.11 + openforgerl with its base dependencies pinned by
#             locks/project.txt (zero, the Claw services / tool CLI / MCP server, the verifiers)
#   rollout   gateway + /usr/local/bin/node (the host's: the pinned CLIs need Node >= 20, bookworm ships 18)
#             + /opt/openforgerl/tools/npm/<cli> copied from the installed .tools tree
#   gateway   root + venv
#
# Tags: openforgerl/{rollout,gateway}:<version> and :<version>-<first 12 hex of sha256(locks/project.txt)>.
# Cached: an image whose hashed tag exists is skipped (a second run takes about a second).
# Usage: scripts/build_images.sh [cli ...]   (default: codex claude-code; `none` for zero only)
# Needs root, podman and mmdebstrap (apt-get install podman mmdebstrap).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
for bin in podman mmdebstrap /usr/bin/python3.11; do
  command -v "$bin" >/dev/null || { echo "build_images: $bin missing: apt-get install podman mmdebstrap python3.11-venv" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "build_images: run as root (mmdebstrap builds the root as root, podman is rootful here)" >&2; exit 2; }

version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
lockhash="$(sha256sum locks/project.txt | cut -c1-12)"
tools="${OPENFORGERL_TOOLS:-$repo/.tools}"
clis=("$@")
[ ${#clis[@]} -gt 0 ] || clis=(codex claude-code)
[ "${clis[*]}" = none ] && clis=()
for cli in "${clis[@]}"; do
  [ -d "$tools/npm/$cli" ] || { echo "build_images: $tools/npm/$cli missing: run scripts/install_harnesses.sh first" >&2; exit 2; }
done
node_bin="$(command -v node || true)"
if [ ${#clis[@]} -gt 0 ]; then
  [ -n "$node_bin" ] || { echo "build_images: node missing on this machine (the CLIs need Node >= 20)" >&2; exit 2; }
  major="$("$node_bin" -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 20 ] || { echo "build_images: node $major found, the pinned CLIs need >= 20" >&2; exit 2; }
fi

rollout="localhost/openforgerl/rollout:$version-$lockhash"
gateway="localhost/openforgerl/gateway:$version-$lockhash"
if podman image exists "$rollout" && podman image exists "$gateway"; then
  echo "build_images: cached $rollout and $gateway"
  exit 0
fi

t0=$(date +%s)
stage="$(mktemp -d /var/tmp/openforgerl-images.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"

# The venv is made beside the root while mmdebstrap runs (the two are mostly download and unpack: measured
# on 2 cores, 390 s one after the other), with Debian's /usr/bin/python3.11, the interpreter the root has
# at the same path (never a python3.11 first on PATH, e.g. pyenv's, whose path the venv would record), so
# pip uses this machine's index configuration and wheel cache.
build_venv() {
  local venv="$stage/venv"
  /usr/bin/python3.11 -m venv "$venv"
  grep -E '^[A-Za-z0-9_.-]+==' locks/project.txt > "$stage/constraints.txt"
  "$venv/bin/pip" install -q -c "$stage/constraints.txt" "$repo"
  "$venv/bin/pip" uninstall -q -y pip setuptools >/dev/null 2>&1 || true
  # scripts and pyvenv.cfg name the staging path; inside it lives at /opt/openforgerl/venv
  grep -rlI "$venv" "$venv/bin" "$venv/pyvenv.cfg" | xargs -r sed -i "s|$venv|/opt/openforgerl/venv|g"
  find "$venv" -name __pycache__ -prune -exec rm -rf {} +
}
build_venv > "$stage/venv.log" 2>&1 & venv_pid=$!

# Docs, man pages and locales are a third of a minbase root and nothing inside reads them.
mmdebstrap --quiet --variant=minbase --include=ca-certificates,python3,bash,coreutils,git,procps,libstdc++6 \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
  bookworm "$root" http://deb.debian.org/debian
echo "build_images: debian root $(du -sh "$root" | cut -f1) after $(( $(date +%s) - t0 )) s"
wait "$venv_pid" || { echo "build_images: the venv failed:" >&2; grep -v '^WARNING' "$stage/venv.log" | tail -20 >&2; exit 1; }
mkdir -p "$root/opt/openforgerl" "$root/workdir"
mv "$stage/venv" "$root/opt/openforgerl/venv"
chroot "$root" /opt/openforgerl/venv/bin/python -I -c 'import openforgerl.harness.zero, openforgerl.envs.claw.services, openforgerl.envs.claw.mcp_server, openforgerl.envs.claw.verify'
echo "build_images: venv $(du -sh "$root/opt/openforgerl/venv" | cut -f1) after $(( $(date +%s) - t0 )) s"

# The gateway image is the root as one layer; the rollout image adds node and the CLIs as a second layer
# on top of it (`podman build` FROM the local gateway image: nothing pulled, the root stored once).
tar -C "$root" --numeric-owner -cf - . | podman import --quiet \
  --change 'ENV PATH=/opt/openforgerl/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'ENV LANG=C.UTF-8' --change 'WORKDIR /workdir' --change 'CMD ["/bin/bash"]' - "$gateway" >/dev/null
podman tag "$gateway" "localhost/openforgerl/gateway:$version"

extra="$stage/extra"
mkdir -p "$extra/tools/npm" "$extra/bin"
[ ${#clis[@]} -eq 0 ] || install -m 0755 "$node_bin" "$extra/bin/node"
for cli in "${clis[@]}"; do
  cp -a "$tools/npm/$cli" "$extra/tools/npm/$cli"
done
cat > "$extra/Containerfile" <<EOF2
FROM $gateway
COPY bin/ /usr/local/bin/
COPY tools/ /opt/openforgerl/tools/
EOF2
podman build --quiet --pull=never --network=none -t "$rollout" -f "$extra/Containerfile" "$extra" >/dev/null
podman tag "$rollout" "localhost/openforgerl/rollout:$version"

echo "build_images: built in $(( $(date +%s) - t0 )) s (CLIs: ${clis[*]:-none})"
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "openforgerl/\(rollout\|gateway\):$version"
