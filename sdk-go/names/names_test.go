package names

import (
	"strings"
	"testing"
)

// The vectors are upstream's (controller-utils) and the Rust SDK's
// (sdk/src/names.rs pins the same shortened names).
func TestUUIDMatchesUpstream(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"example"}, "23cc2129-a257-8644-95e0-289d55c69704"},
		{[]string{"default", "example"}, "2bcf790e-815e-8ea9-857b-15be429583a5"},
	} {
		if got, err := K8sNameUUID(c.parts...); err != nil || got != c.want {
			t.Errorf("K8sNameUUID(%q) = %q, %v; want %q", c.parts, got, err, c.want)
		}
	}
	if _, err := K8sNameUUID("", ""); err != ErrEmpty {
		t.Errorf("empty names: %v, want ErrEmpty", err)
	}
}

func TestTenantNamespaceMatchesUpstream(t *testing.T) {
	got, err := TenantNamespace("test-mcp", "default")
	if want := "mcp--eaedbc8f-bfe8-889c-bc87-4958803d9f94"; err != nil || got != want {
		t.Errorf("TenantNamespace = %q, %v; want %q", got, err, want)
	}
}

func TestShortenMatchesTheRustSDK(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"abc", "abc"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		{strings.Repeat("x", 50) + "-" + strings.Repeat("y", 50), strings.Repeat("x", 50) + "-yy--emohweya"},
		// Trailing '-' and '.' go before the hash.
		{strings.Repeat("a", 51) + "-." + strings.Repeat("b", 40), strings.Repeat("a", 51) + "--jyhdkwyj"},
	} {
		if got := Shorten(c.name, MaxLength); got != c.want {
			t.Errorf("Shorten(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAccessRequestNamesFollowOpenmcp(t *testing.T) {
	controller := "kro.services.open-control-plane.io"
	if got := AccessRequestName(controller, "test-mcp", "mcp"); got != controller+"--test-mcp--mcp" {
		t.Errorf("got %q", got)
	}
	if got, want := AccessRequestName(controller, strings.Repeat("n", 63), "mcp"), controller+"--nnnnnnnnnnnn--rallaaej--mcp"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := AccessRequestName("Flux", "My", "mcp"); got != "flux--my--mcp" {
		t.Errorf("got %q", got)
	}
	if got := PrefixedCopyName("kro", "registry"); got != "sp-kro-registry" {
		t.Errorf("got %q", got)
	}
}
