//! WebAssembly bindings.
