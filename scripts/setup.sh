#!/usr/bin/env bash
# Installs what Nowcast needs to build and test, only what is missing, so a second run is
# quick. Everything comes from the package registries: npm packages, the wasm32 Rust target,
# wasm-bindgen-cli pinned to the wasm-bindgen crate's version, and Debian packages for the
# browser and network tests (only when running as root; otherwise those suites say what is
# missing and skip).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# npm workspaces: reinstall when the lock file is newer than the installed tree.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm install"
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
fi

# Rust toolchain pieces for the WebAssembly build.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
wb_version=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
if [ -z "$wb_version" ]; then
  echo "setup: cannot find the wasm-bindgen version in Cargo.lock" >&2
  exit 1
fi
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $wb_version"; then
  log "cargo install wasm-bindgen-cli $wb_version"
  cargo install wasm-bindgen-cli --version "$wb_version"
fi

# Debian packages for the browser and emulated-link tests.
# libpcap-dev: `nowcast pcap --live` links libpcap; tshark and tcptrace: the passive analysis'
# peers (tshark's wireshark-common asks whether non-root users may capture: preseeded "no");
# ngtcp2-client and ngtcp2-server: QUIC, FOBS's peer in its bench; nginx: the proxy bench's peer.
debs=(chromium chromium-driver iperf3 sockperf irtt iproute2 nftables ethtool tcpdump time curl hyperfine jq libpcap-dev tshark tcptrace bc clickhouse-server iputils-ping mtr-tiny sqlite3 ngtcp2-client ngtcp2-server nginx)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    log "not root: Debian packages missing (${missing[*]}); browser and link tests will skip"
  fi
fi
