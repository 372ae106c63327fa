//! The integration tests that need no emulated link and are not run on their own: one test
//! binary, so that the helpers in `common` are built and linked once rather than once for
//! each of these files (about two minutes of `npm test` on two cores). Binaries of their own:
//! the root-only tests on emulated links, run one at a time; the fuzzing and the hostile
//! clients, which `npm run bench` runs long; and the two that weigh a child's peak memory
//! (`forecast_cli`, `pcap_hostile`): a child's peak counts its parent's resident memory when
//! it was spawned, and beside every other test in one process that is not the child's.

#[path = "../common/mod.rs"]
mod common;

mod archive;
mod archive_errors;
mod archive_files;
mod archive_report_cli;
mod bad_files;
mod campaign;
mod campaign_archive;
mod campaign_output;
mod classify_cli;
mod fobs_link;
mod fobs_recv;
mod fobs_send;
mod interrupt_and_output;
mod pcap_cli;
mod pcap_formats;
mod pcap_fuzz;
mod pcap_side;
mod pipes;
mod proxy;
mod proxy_hostile;
mod proxy_limits;
mod report;
mod tcp_probe;
mod tcp_wrong_server;
mod udp_probe;
mod usage;
