fn main() -> std::process::ExitCode {
    ovn_bgp_agent::cli::main()
}
