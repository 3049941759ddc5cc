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

func TestAGreetingBecomesAConfigMap(t *testing.T) {
	plan, err := hello{}.Plan(input(`{"spec":{"greeting":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Objects) != 1 || !strings.Contains(plan.Objects[0].Manifest, `"greeting":"hi"`) {
		t.Errorf("objects: %+v", plan.Objects)
	}
	if !strings.Contains(plan.Objects[0].Manifest, `"namespace":"mcp--tenant"`) {
		t.Errorf("not in the tenant namespace: %s", plan.Objects[0].Manifest)
	}
}

func TestAnEmptyGreetingIsTheTenantsToFix(t *testing.T) {
	_, err := hello{}.Plan(input(`{"spec":{}}`))
	var invalid *sp.InvalidInputError
	if !errors.As(err, &invalid) || invalid.Message != "spec.greeting is empty" {
		t.Errorf("got %v", err)
	}
}

// The shared cases: ports of go-hello (examples/ts-hello) answer them too,
// and `service-provider-host plugin test` runs them through each component.
func TestSharedCases(t *testing.T) { sptest.Run(t, hello{}, "testdata/cases.json") }
