//! Links libpq, with which pg_idgen's workers reach other servers (as postgres_fdw and dblink do).
//! Its directory comes from the pg_config that pgrx builds against.

fn main() {
    println!("cargo:rerun-if-env-changed=PGRX_PG_CONFIG_PATH");
    let pg_config = std::env::var("PGRX_PG_CONFIG_PATH").unwrap_or_else(|_| "pg_config".into());
    if let Ok(output) = std::process::Command::new(&pg_config).arg("--libdir").output() {
        if output.status.success() {
            println!("cargo:rustc-link-search=native={}", String::from_utf8_lossy(&output.stdout).trim());
        }
    }
    println!("cargo:rustc-link-lib=dylib=pq");
}
