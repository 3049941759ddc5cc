// Package sptest runs shared cases against a plugin natively, in `go
// test`. A case is a named input and the answer it must get; the cases of
// this repository's plugins are written by their Rust originals (`task
// generate`), so a port is checked against the original case by case, and
// the host's tests run the same cases through both components.
package sptest

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

// Case is one named input and the answer it must get.
type Case struct {
	Name string `json:"name"`
	// Call is "plan" or "cleanup".
	Call  string   `json:"call"`
	Input sp.Input `json:"input"`
	// Expected is {"ok": <plan>} or {"err": <plan error>} in the Rust SDK's
	// JSON form.
	Expected json.RawMessage `json:"expected"`
}

// Load reads a JSON array of cases.
func Load(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cases []Case
	if err := json.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// Answer is what p answers to c, in the form of Case.Expected.
func Answer(p sp.Provider, c Case) (json.RawMessage, error) {
	var answer any
	var err error
	switch c.Call {
	case "plan":
		answer, err = p.Plan(c.Input)
	case "cleanup":
		answer, err = p.Cleanup(c.Input)
	default:
		return nil, fmt.Errorf("case %q: unknown call %q", c.Name, c.Call)
	}
	if err != nil {
		planError, jsonErr := sp.ErrorJSON(err)
		if jsonErr != nil {
			return nil, jsonErr
		}
		return json.Marshal(map[string]json.RawMessage{"err": planError})
	}
	return json.Marshal(map[string]any{"ok": answer})
}

// Run checks every case of the file at path against p, one subtest each.
// Answers are compared as JSON values, object manifests included (the
// contract promises JSON documents, not their key order); everything else
// counts, a nil list is not an empty one.
func Run(t *testing.T, p sp.Provider, path string) {
	t.Helper()
	cases, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s has no cases", path)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := Answer(p, c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := Diff(c.Expected, got); diff != "" {
				t.Errorf("%s", diff)
			}
		})
	}
}

// Diff is empty when want and got are the same JSON value, and else says
// how they differ.
func Diff(want, got json.RawMessage) string {
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Sprintf("the expected answer is not JSON: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Sprintf("the answer is not JSON: %v", err)
	}
	if reflect.DeepEqual(parseManifests(w), parseManifests(g)) {
		return ""
	}
	return fmt.Sprintf("answers differ\nwant: %s\n got: %s", want, got)
}

// parseManifests replaces every "manifest" string that holds JSON with the
// value it holds.
func parseManifests(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for key, field := range v {
			if text, ok := field.(string); ok && key == "manifest" {
				var parsed any
				if json.Unmarshal([]byte(text), &parsed) == nil {
					v[key] = parsed
				}
				continue
			}
			v[key] = parseManifests(field)
		}
	case []any:
		for i, item := range v {
			v[i] = parseManifests(item)
		}
	}
	return v
}
