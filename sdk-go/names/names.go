// Package names has openmcp's naming algorithms: the stable UUID of a set
// of names, tenant namespaces, and the shortening of long names. Other
// openmcp components compute the same names on their own, so these match
// controller-utils and openmcp-operator bit for bit (and the Rust SDK,
// whose test vectors names_test.go repeats).
package names

import (
	"crypto/sha3"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"strings"
)

// MaxLength is Kubernetes' limit for names and label values.
const MaxLength = 63

// TenantNamespacePrefix starts every tenant namespace on the platform.
const TenantNamespacePrefix = "mcp--"

// ErrEmpty is returned when every name given is empty.
var ErrEmpty = errors.New("at least one name must be non-empty to derive a stable name")

// base32Lower is RFC 4648 base32 with the lower-case alphabet, no padding.
var base32Lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func shake128(input string, size int) []byte {
	h := sha3.NewSHAKE128()
	_, _ = h.Write([]byte(input))
	out := make([]byte, size)
	_, _ = h.Read(out)
	return out
}

// K8sNameUUID is controller-utils' K8sNameUUID: a version-8 UUID from the
// SHAKE128 hash of the parts joined with "/".
func K8sNameUUID(parts ...string) (string, error) {
	if strings.Join(parts, "") == "" {
		return "", ErrEmpty
	}
	h := shake128(strings.Join(parts, "/"), 16)
	h[6] = (h[6] & 0x0f) | 0x80 // version 8
	h[8] = (h[8] & 0x3f) | 0x80 // RFC 4122 variant
	x := hex.EncodeToString(h)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32], nil
}

// TenantNamespace is openmcp's StableMCPNamespace: the tenant namespace of
// the ControlPlane (and so of the service object) namespace/name.
func TenantNamespace(name, namespace string) (string, error) {
	id, err := K8sNameUUID(namespace, name)
	if err != nil {
		return "", err
	}
	return TenantNamespacePrefix + id, nil
}

// Shorten is controller-utils' ShortenToXCharacters: a name longer than limit
// keeps a prefix and gets "--" and 8 characters of its hash, so it stays
// unique and valid.
func Shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	suffix := "--" + base32Lower.EncodeToString(shake128(name, 5))
	keep := max(0, limit-len(suffix))
	return strings.TrimRight(name[:min(keep, len(name))], "-.") + suffix
}

// AccessRequestName is openmcp's StableRequestName: the AccessRequest a
// provider creates for one service instance, e.g.
// "kro.services.open-control-plane.io--mcp-01--mcp".
func AccessRequestName(controller, instance, suffix string) string {
	base := strings.ToLower(controller) + "--" + strings.ToLower(instance)
	return Shorten(base, max(0, MaxLength-len(suffix)-2)) + "--" + suffix
}

// LabelValue shortens a label value the way openmcp does (63 characters).
func LabelValue(value string) string { return Shorten(value, MaxLength) }

// PrefixedCopyName is a provider's name for a copied object,
// "sp-<provider>-<source>", so copies of different providers in one
// namespace never collide.
func PrefixedCopyName(provider, source string) string {
	return Shorten("sp-"+provider+"-"+source, MaxLength)
}
