//! The shared cases (`testdata/cases.json`), natively: the same file
//! `service-provider-host plugin test` runs through the built component.

#[test]
fn the_shared_cases_get_their_answers() {
    let cases = include_str!("../testdata/cases.json");
    let checked = service_provider_sdk::testing::check_shared::<__CRATE__::Plugin>(cases).unwrap_or_else(|e| panic!("{e}"));
    assert!(checked > 0);
}
