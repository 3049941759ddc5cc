package main

import (
	"testing"

	"open-control-plane.io/service-provider-host/sdk-go/sptest"
)

// The shared cases, with the answers guest-kro gives (written by
// `cargo run -p guest-kro --features test-cases --bin casegen`).
func TestTheSharedCasesGetGuestKrosAnswers(t *testing.T) {
	sptest.Run(t, kro{}, "testdata/cases.json")
}

// The same vectors as guest-kro's config tests.
func TestDurationsParseAsGuestKroParsesThem(t *testing.T) {
	for text, seconds := range map[string]uint32{
		"1h30m": 5400, "90s": 90, "1.5h": 5400, "300ms": 1, "0s": 0, "0": 0, "5m": 300, "1µs": 1,
		"99999999h": 4294967295,
	} {
		if got, ok := parseDurationSeconds(text); !ok || got != seconds {
			t.Errorf("%q: got %d, %v; want %d", text, got, ok, seconds)
		}
	}
	for _, bad := range []string{"", "5", "5 minutes", "m", "1d", "-", "1..5s", ".s", "1e3s"} {
		if got, ok := parseDurationSeconds(bad); ok {
			t.Errorf("%q: got %d, want no duration", bad, got)
		}
	}
}

// The same vectors as guest-kro's read tests.
func TestMalformedInputsAreNamedByTheirPath(t *testing.T) {
	for text, want := range map[string]string{
		`{"spec":{"version":3}}`:      "spec.version must be a string, not a number",
		`{"spec":{}}`:                 "spec.version is missing",
		`{"spec":{"version":null}}`:   "spec.version is missing",
		`{"spec":["v1"]}`:             "spec must be an object, not a list",
		`{}`:                          "spec is missing",
		`[]`:                          "the object must be an object, not a list",
		`{`:                           "the object is not a JSON document",
		`{"spec":{"version":"v1"}} x`: "the object is not a JSON document",
	} {
		if _, err := kroSpec(text); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", text, err, want)
		}
	}
	for text, want := range map[string]string{
		`{"spec":{}}`:                "spec.versions is missing",
		`{"spec":{"versions":"v1"}}`: "spec.versions must be a list, not a string",
		`{"spec":{"versions":[7]}}`:  "spec.versions[0] must be an object, not a number",
		`{"spec":{"versions":[{"version":"v1","chartVersion":"1"},{"version":"v2"}]}}`:       "spec.versions[1].chartVersion is missing",
		`{"spec":{"versions":[{"version":"v1","chartVersion":"1","chartPullSecret":true}]}}`: "spec.versions[0].chartPullSecret must be a string, not a boolean",
		`{"spec":{"versions":[],"pollInterval":5}}`:                                          "spec.pollInterval must be a string, not a number",
	} {
		if _, err := readProviderConfig(text); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", text, err, want)
		}
	}
}

func TestTenantWordsAreQuotedAsRustQuotesThem(t *testing.T) {
	for s, want := range map[string]string{
		`v1`: `"v1"`, "a\"b\\c": `"a\"b\\c"`, "t\tn\nr\r": `"t\tn\nr\r"`, "\x00\x1b\x7f\u0085": `"\0\u{1b}\u{7f}\u{85}"`,
		"ümlaut ✓ \ufffd": "\"ümlaut ✓ \ufffd\"",
	} {
		if got := quote(s); got != want {
			t.Errorf("quote(%q) = %s, want %s", s, got, want)
		}
	}
}
