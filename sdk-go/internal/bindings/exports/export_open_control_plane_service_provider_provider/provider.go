// Package export_open_control_plane_service_provider_provider is where the
// generated glue (package wit_exports) calls the plugin: it holds the
// functions serviceprovider.Export installs. Written by hand (the generator
// writes this package only as stubs); its name is the generator's.
package export_open_control_plane_service_provider_provider

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	types "open-control-plane.io/service-provider-host/sdk-go/internal/bindings/imports/open_control_plane_service_provider_types"
)

// Implementation is the plugin, in the bindings' types.
type Implementation interface {
	Describe() types.Descriptor
	Plan(types.Input) witTypes.Result[types.ReconcilePlan, types.PlanError]
	Cleanup(types.Input) witTypes.Result[types.CleanupPlan, types.PlanError]
}

var installed Implementation

// Install makes impl the one the component calls.
func Install(impl Implementation) { installed = impl }

func plugin() Implementation {
	if installed == nil {
		panic("no plugin: call serviceprovider.Export from an init function of package main")
	}
	return installed
}

// Describe is the export `describe`.
func Describe() types.Descriptor { return plugin().Describe() }

// Plan is the export `plan`.
func Plan(input types.Input) witTypes.Result[types.ReconcilePlan, types.PlanError] {
	return plugin().Plan(input)
}

// Cleanup is the export `cleanup`.
func Cleanup(input types.Input) witTypes.Result[types.CleanupPlan, types.PlanError] {
	return plugin().Cleanup(input)
}
