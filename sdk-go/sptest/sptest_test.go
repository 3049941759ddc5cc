package sptest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

type fixed struct {
	plan sp.Plan
	err  error
}

func (f fixed) Describe() sp.Descriptor        { return sp.Descriptor{} }
func (f fixed) Plan(sp.Input) (sp.Plan, error) { return f.plan, f.err }
func (f fixed) Cleanup(sp.Input) (sp.CleanupPlan, error) {
	return sp.Block(sp.Blocked{Message: "wait"}), nil
}

func TestAnswersUseTheRustForms(t *testing.T) {
	c := Case{Name: "x", Call: "plan"}
	got, err := Answer(fixed{err: sp.InvalidInput(30, "fix %s", "it")}, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(json.RawMessage(`{"err":{"invalid-input":{"message":"fix it","requeueAfterSeconds":30}}}`), got); d != "" {
		t.Error(d)
	}
	got, _ = Answer(fixed{}, Case{Name: "y", Call: "cleanup"})
	if d := Diff(json.RawMessage(`{"ok":{"blocked":{"message":"wait","requeueAfterSeconds":0,"resources":null}}}`), got); d != "" {
		t.Error(d)
	}
}

func TestADifferentAnswerIsADiff(t *testing.T) {
	if Diff(json.RawMessage(`{"a":[]}`), json.RawMessage(`{"a":null}`)) == "" {
		t.Error("an empty list and none must differ")
	}
	if Diff(json.RawMessage(`{"a":1,"b":2}`), json.RawMessage(`{"b":2,"a":1}`)) != "" {
		t.Error("key order must not matter")
	}
	if Diff(json.RawMessage(`{"manifest":"{\"a\":1,\"b\":2}"}`), json.RawMessage(`{"manifest":"{\"b\":2,\"a\":1}"}`)) != "" {
		t.Error("key order inside a manifest must not matter")
	}
	if Diff(json.RawMessage(`{"manifest":"{\"a\":1}"}`), json.RawMessage(`{"manifest":"{\"a\":2}"}`)) == "" {
		t.Error("a different manifest must differ")
	}
}

func TestCasesRoundTripThroughTheFile(t *testing.T) {
	scope := sp.Named("x")
	input := sp.Input{Object: "{}", Context: sp.Context{TenantNamespace: "mcp--t"}}
	data, _ := json.Marshal([]any{map[string]any{"name": "n", "call": "plan", "input": input, "expected": map[string]any{"scope": scope}}})
	path := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := Load(path)
	if err != nil || len(cases) != 1 || cases[0].Input.Context.TenantNamespace != "mcp--t" {
		t.Fatalf("%v %+v", err, cases)
	}
	if d := Diff(json.RawMessage(`{"scope":{"named":"x"}}`), cases[0].Expected); d != "" {
		t.Error(d)
	}
}
