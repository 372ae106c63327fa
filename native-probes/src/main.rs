//! `nowcast`: the native companion of the Nowcast page. A thin binary over the `nowcast`
//! library: [`cli`] parses the flags into plain configuration and wires the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
