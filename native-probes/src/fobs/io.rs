//! The FOBS edge: sockets, files, hash, clock. Filled in below.
