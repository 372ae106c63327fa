#!/usr/bin/env bash
# `npm test`: every suite of the project, from a fresh clone. Set-up first (only what is
# missing), then formatting and lints, then Rust, TypeScript and browser tests (the page is
# built first: the e2e tests load web/dist from a real echo-node).
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
# Each step's header says how long the suite has run so far (to see which steps the 20-minute
# budget goes to).
step() { printf '\n\033[1m== %s\033[0m (at %ss)\n' "$*" "$(( $(date +%s) - start ))"; }

step "setup"
bash scripts/setup.sh

step "architecture (ARCHITECTURE.md's rooms and rules)"
node scripts/check-architecture.mjs

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
cargo clippy --quiet -p nowcast-core --lib --target wasm32-unknown-unknown --features wasm-page,wasm-reader -- -D warnings

step "build wasm"
# Built for the tests as for the page, but without the size-only work (fat LTO, one codegen
# unit, wasm-opt until nothing changes: 20 s of the 2-core machine); no test weighs or times
# the modules (web/bench/bank-bench.ts does, in `npm run bench`, on the shipping build).
NOWCAST_WASM_QUICK=1 CARGO_PROFILE_WASM_RELEASE_LTO=off CARGO_PROFILE_WASM_RELEASE_CODEGEN_UNITS=16 \
  bash scripts/build-wasm.sh

step "cargo test"
# Tests are built without the release profile's LTO and single codegen unit (Cargo.toml), which
# are for what ships and is benchmarked (`npm run bench`): opt-level 3 is kept, so the timing
# and accuracy tests run optimised code, and the build takes a fraction of the time.
# SQLite's C source (rusqlite's bundled build) is compiled at -O1 here: at -O3 it is the
# longest single step on the way to the first test binary (~30 s of the 2-core machine), and
# no test times the archive (benches/archive.rs does, on the release profile). A package's
# profile cannot be set from the environment, hence `--config` on every `cargo test`.
export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
ctest() { cargo test --quiet --release --config 'profile.release.package.libsqlite3-sys.opt-level=1' "$@"; }
# Eight test threads, not one per core: most integration tests wait on real processes and
# sockets (the `it` binary's 154 tests: 219 s of test time, 13 s of user CPU), so eight at a
# time take 31 s where two took 110; none of them times CPU-bound work.
RUST_TEST_THREADS=8 ctest --workspace -- --skip on_emulated_links
step "cargo test: accuracy on emulated links"
# The accuracy comparison on emulated links (root only; it says why when it skips) runs on
# its own so that its figures are printed, not captured.
ctest -p native-probes --test emulated_links -- --nocapture
step "cargo test: pcap, Wren and the proxy on emulated links"
# nowcast pcap against tshark and pping's rule, Wren against ground truth, and the live
# capture at 1 Gbit/s (root only; each says why when it skips), one at a time.
for t in pcap_peers pcap_wren pcap_live; do
  ctest -p native-probes --test "$t" -- --nocapture
done
# nowcast proxy on emulated links against the comparison rules and an oracle (root only; it
# says why when it skips), alone for the same reason.
ctest -p native-probes --test proxy_links -- --nocapture
# Wren on the proxy's own uploads against the available bandwidth (root only; it says why
# when it skips); the test's loopback part ran above.
ctest -p native-probes --test proxy_wren -- --nocapture on_emulated_links
step "FOBS on an emulated link, beside iperf3"
# FOBS on a link slower than its sender (100 Mbit/s, 30 ms), cold, against iperf3 cubic on
# the same link, then sharing that link with one iperf3 cubic flow (Jain's index at least 0.8,
# the better of two runs): the short version of the FOBS bench's slower and shared links (root
# only; it says why when it skips). Before 2026-12-05 FOBS overflowed such a link's queue and
# reached half of iperf3's goodput; until stop 33, sharing it, it got 13–19 Mbit/s of 100
# (Jain 0.65–0.75), counting every lost packet and holding back while the queue built.
python3 native-probes/bench/fobs_link.py bench --quick --only rates,share --check 0.85
step "nowcast tcp on a long emulated path (40 Mbit/s behind 150 ms)"
# The bandwidth probe with no flags on a path with real delay (root only; it says why when it
# skips): each median within 0.60–1.08 of the link's ceiling. Until 2026-12-06 a new
# connection's slow start was timed with the probe, and this link read 2.3 Mbit/s (0.06).
# Not tighter: on this link BBR's probing phase overflows the 20 ms queue, and a loss at a
# timed transfer's end is repaired a round trip or two late; such probes read 23–33 Mbit/s,
# about one in four. Until 2026-12-07 a warm-up could also end inside BBR's startup and the
# timed transfer ran into its overshoot (15–21 Mbit/s; medians of 0.556–0.603 in four runs);
# the warm-ups now go on until the sender says its start is over, and both ends pace (README,
# "nowcast probes"; `tcp_link.py bench --cc cubic` runs the same link with CUBIC). Since then
# the lowest median in 22 runs was 0.809, and the lowest probe 23.5 Mbit/s (0.61).
python3 native-probes/bench/tcp_link.py bench --quick --check 0.60:1.08

step "prettier --check"
npx prettier --check .

step "tsc (strict)"
npx tsc -b

step "build the page"
npm -w web run --silent build

step "vitest (web, echo-node, e2e in Chromium)"
npx vitest run --exclude "**/emulated-links.test.ts"

# The page's accuracy on emulated links (root only; it says why when it skips) runs alone, so
# that no other test file competes with the browser and the reference tools for the cores.
step "vitest: the page's accuracy on emulated links"
npx vitest run --project e2e emulated-links

printf '\nall suites passed in %ss\n' "$(( $(date +%s) - start ))"
