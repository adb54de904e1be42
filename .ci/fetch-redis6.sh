#!/usr/bin/env bash
# Fetch Debian bullseye's redis-server 6.0.16 (and the libraries it links to that this system may
# not have) with apt-get, unpack them with dpkg-deb -x into a cache directory, never into the
# repository, and print the path of a wrapper that runs that redis-server with LD_LIBRARY_PATH.
# The tests (tests/integration/test_redis_versions.py) read REDIS6_SERVER or the default cache.
#
#   .ci/fetch-redis6.sh            # -> ~/.cache/webhook-pipeline/redis-6.0/redis-server
#   REDIS6_CACHE=/tmp/r6 .ci/fetch-redis6.sh
#
# apt-get runs with its own sources list, lists and archive directories under the cache, so the
# system's apt state is untouched; the bullseye archive key is Debian's own keyring. Exit 1 (with
# the reason) when the packages cannot be fetched: the tests then skip and say why.
set -euo pipefail

CACHE="${REDIS6_CACHE:-${HOME}/.cache/webhook-pipeline/redis-6.0}"
WRAPPER="${CACHE}/redis-server"
if [ -x "${WRAPPER}" ] && "${WRAPPER}" --version 2>/dev/null | grep -q 'v=6\.0\.'; then
  echo "${WRAPPER}"
  exit 0
fi

APT="${CACHE}/apt"
mkdir -p "${APT}/lists/partial" "${APT}/cache/archives/partial" "${CACHE}/debs" "${CACHE}/root"
: > "${APT}/status"  # an empty dpkg status: candidates come from bullseye, not what is installed
cat > "${APT}/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
EOF
opts=(
  -o "Dir::Etc::SourceList=${APT}/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=${APT}/lists"
  -o "Dir::Cache=${APT}/cache"
  -o "Dir::State::status=${APT}/status"
  -o "Debug::NoLocking=1"
  -o "APT::Architecture=amd64"
)
apt-get "${opts[@]}" -qq update >&2
cd "${CACHE}/debs"
# redis-tools ships the binary (Debian 11's redis-server package only adds a symlink to it).
chown _apt "${CACHE}/debs" 2>/dev/null || true  # apt's sandbox user writes the downloads
apt-get "${opts[@]}" -qq download \
  'redis-tools=5:6.0.16*' libssl1.1 liblua5.1-0 libjemalloc2 liblzf1 lua-cjson lua-bitop >&2
for deb in ./*.deb; do dpkg-deb -x "${deb}" "${CACHE}/root"; done

libs="${CACHE}/root/usr/lib/x86_64-linux-gnu:${CACHE}/root/lib/x86_64-linux-gnu"
# Redis runs as a server unless argv[0] names redis-check-rdb: a symlink named redis-server.
ln -sf redis-check-rdb "${CACHE}/root/usr/bin/redis-server"
cat > "${WRAPPER}" <<EOF
#!/bin/sh
# redis-server 6.0.16 from Debian bullseye, unpacked by .ci/fetch-redis6.sh
LD_LIBRARY_PATH="${libs}\${LD_LIBRARY_PATH:+:\${LD_LIBRARY_PATH}}"
export LD_LIBRARY_PATH
exec "${CACHE}/root/usr/bin/redis-server" "\$@"
EOF
chmod +x "${WRAPPER}"
if ! "${WRAPPER}" --version | grep -q 'v=6\.0\.'; then
  echo "the unpacked redis-server does not run: $("${WRAPPER}" --version 2>&1 | head -3)" >&2
  exit 1
fi
echo "${WRAPPER}"
