package main

import (
	"errors"
	"strings"
	"testing"

	sp "open-control-plane.io/service-provider-host/sdk-go"
	"open-control-plane.io/service-provider-host/sdk-go/sptest"
)

func input(object string) sp.Input {
	return sp.Input{Object: object, Context: sp.Context{TenantNamespace: "mcp--tenant"}}
}

func TestAGreetingBecomesAConfigMapInTheTenantNamespace(t *testing.T) {
	plan, err := plugin{}.Plan(input(`{"spec":{"greeting":"hello"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Objects) != 1 || !strings.Contains(plan.Objects[0].Manifest, `"namespace":"mcp--tenant"`) {
		t.Errorf("objects: %+v", plan.Objects)
	}
}

func TestAnEmptyGreetingIsTheTenantsToFix(t *testing.T) {
	_, err := plugin{}.Plan(input(`{"spec":{"greeting":" "}}`))
	var invalid *sp.InvalidInputError
	if !errors.As(err, &invalid) {
		t.Errorf("got %v", err)
	}
}

// The shared cases: the same file `service-provider-host plugin test` runs
// through the built component.
func TestSharedCases(t *testing.T) { sptest.Run(t, plugin{}, "testdata/cases.json") }
