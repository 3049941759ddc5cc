package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Reading the ProviderConfig: version resolution, chart URL, poll interval
// and the parts of the Helm values the provider acts on (as
// guest-kro/src/config.rs).

// defaultPollSeconds is the poll interval when none is set (`1m`).
const defaultPollSeconds = 60

// defaultChartURL is where the chart is when a version does not say.
const defaultChartURL = "oci://registry.k8s.io/kro/charts/kro"

// notAvailable starts every version-resolution error; it is the Go
// provider's ErrVersionNotAvailable text, so tenants see the same message.
const notAvailable = "invalid user input: requested version is not available"

// resolveVersion finds the offered version a tenant asked for: the first
// entry whose version equals the request exactly.
func resolveVersion(config *providerConfigSpec, requested string) (*kroVersion, error) {
	if config == nil {
		return nil, invalid(fmt.Sprintf("%s: %s, no provider config is configured", notAvailable, quote(requested)))
	}
	if len(config.Versions) == 0 {
		return nil, invalid(fmt.Sprintf("%s: %s, the provider config offers no versions", notAvailable, quote(requested)))
	}
	offered := make([]string, 0, len(config.Versions))
	for i := range config.Versions {
		if config.Versions[i].Version == requested {
			return &config.Versions[i], nil
		}
		offered = append(offered, config.Versions[i].Version)
	}
	return nil, invalid(fmt.Sprintf("%s: %s, available versions are: %s",
		notAvailable, quote(requested), strings.Join(offered, ", ")))
}

// chartURL is the chart URL of a version: the default when unset or
// empty, and `oci://` prepended when the scheme is missing.
func chartURL(v *kroVersion) string {
	switch {
	case v.ChartURL == nil || *v.ChartURL == "":
		return defaultChartURL
	case strings.HasPrefix(*v.ChartURL, "oci://"):
		return *v.ChartURL
	default:
		return "oci://" + *v.ChartURL
	}
}

// chartPullSecret is the version's chart pull secret, "" when unset.
func chartPullSecret(v *kroVersion) string {
	if v.ChartPullSecret == nil {
		return ""
	}
	return *v.ChartPullSecret
}

// pollIntervalSeconds is the poll interval in whole seconds (rounded up),
// `1m` when unset.
func pollIntervalSeconds(config *providerConfigSpec) (uint32, error) {
	if config == nil || config.PollInterval == nil {
		return defaultPollSeconds, nil
	}
	text := *config.PollInterval
	seconds, ok := parseDurationSeconds(text)
	if !ok {
		return 0, invalid(fmt.Sprintf("spec.pollInterval %s is not a duration such as 30s, 5m or 1h30m", quote(text)))
	}
	return seconds, nil
}

// parseDurationSeconds reads a Go duration (`300ms`, `1.5h`, `2h45m`) as
// whole seconds, rounding up and saturating at the uint32 maximum. It is
// guest-kro's parser, not time.ParseDuration, so that both plugins accept
// and round alike (time.ParseDuration stops at 2562047h, for one).
func parseDurationSeconds(text string) (uint32, bool) {
	rest := strings.TrimSpace(text)
	if rest == "0" {
		return 0, true
	}
	if rest == "" {
		return 0, false
	}
	total := 0.0
	for rest != "" {
		numberLen := strings.IndexFunc(rest, func(c rune) bool { return !(c >= '0' && c <= '9' || c == '.') })
		if numberLen < 0 {
			numberLen = len(rest)
		}
		number, err := strconv.ParseFloat(rest[:numberLen], 64)
		if err != nil || !isDecimal(rest[:numberLen]) {
			return 0, false
		}
		rest = rest[numberLen:]
		unitLen := strings.IndexFunc(rest, func(c rune) bool { return c >= '0' && c <= '9' || c == '.' })
		if unitLen < 0 {
			unitLen = len(rest)
		}
		var scale float64
		switch rest[:unitLen] {
		case "ns":
			scale = 1e-9
		case "us", "µs", "μs":
			scale = 1e-6
		case "ms":
			scale = 1e-3
		case "s":
			scale = 1
		case "m":
			scale = 60
		case "h":
			scale = 3600
		default:
			return 0, false
		}
		rest = rest[unitLen:]
		total += number * scale
	}
	return uint32(math.Min(math.Ceil(total), math.MaxUint32)), true
}

// isDecimal: digits with at most one dot and at least one digit, the only
// numbers Rust's float parser and strconv.ParseFloat agree on here
// (ParseFloat also takes underscores and hex, which cannot occur between
// the delimiters above, and both reject "" and ".").
func isDecimal(text string) bool {
	return strings.Count(text, ".") <= 1 && strings.Trim(text, ".") != ""
}

// imagePullSecrets are the names under helmValues.imagePullSecrets, in
// order, without duplicates. Unknown keys are ignored; a malformed list is
// invalid input.
func imagePullSecrets(values any) ([]string, error) {
	if values == nil {
		return nil, nil
	}
	read, err := imagePullSecretNames(values)
	if err != nil {
		return nil, invalid("failed to parse helm values: " + err.Error())
	}
	names := []string{}
	for index, name := range read {
		if name == "" {
			return nil, invalid(fmt.Sprintf(
				"failed to parse helm values: helmValues.imagePullSecrets[%d].name must not be empty", index))
		}
		if !contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}

// quote is Rust's `{:?}` of a string, the form guest-kro's messages quote
// the tenant's words in: backslash escapes for \t \r \n \\ \" \0 and
// `\u{…}` for the other C0 and C1 control characters and DEL. Rust also
// escapes a few non-printable code points beyond those (format characters
// such as U+200B); quote leaves them as they are.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '"':
			b.WriteString(`\"`)
		case r == 0:
			b.WriteString(`\0`)
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
