//! Writes the shared cases with this plugin's answers as JSON (by default to
//! `examples/go-kro/testdata/cases.json`), for the Go port's `go test`.
//! `task generate` runs it; CI fails when the output differs from what is
//! committed.

use guest_kro::KroProvider;
use guest_kro::cases;
use service_provider_sdk::testing::Fixture;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "examples/go-kro/testdata/cases.json".into());
    let cases = cases::all();
    let fixtures: Vec<Fixture> = cases.iter().map(Fixture::answered_by::<KroProvider>).collect();
    let mut json = serde_json::to_string_pretty(&fixtures)?;
    json.push('\n');
    std::fs::write(&path, json)?;
    println!("wrote {} cases to {path}", fixtures.len());
    Ok(())
}
