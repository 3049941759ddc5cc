// Package serviceprovider is the Go SDK for service-provider plugins: the
// plugin contract (wit/v0.2.0, world `plugin`) as plain Go types, and
// [Export], which makes a [Provider] the component's implementation.
//
// A plugin is a `main` package that calls Export from an init function:
//
//	func init() { sp.Export(hello{}) }
//	func main() {}
//
// and is built with `task build-go-plugin DIR=…` (GOOS=wasip1,
// -buildmode=c-shared, then made a component by tools/plugin-build). The
// host starts the Go runtime on every call (a fresh instance per call):
// nothing survives from one call to the next, so a plugin keeps no state.
//
// Plugin logic is ordinary Go: test it natively with `go test`, and share
// named cases with the host through package sptest.
package serviceprovider

// ContractVersion is the contract version these types and the bindings
// implement.
const ContractVersion = "0.2.0"
